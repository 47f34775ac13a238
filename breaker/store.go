package breaker

import "time"

// Store shares breaker state across processes, so that when one pod trips a
// breaker the others stop calling the dead model too. The default (a nil
// Store) keeps all state local.
//
// The contract is local-first: a breaker always decides from its own state,
// and the store only feeds that state. Member methods are called on the
// request path and must return within a small bound without waiting on the
// network; a store that cannot reach its backend must fail open, that is
// behave as if it were absent, so that no request waits on or fails because
// of the store.
type Store interface {
	// Join connects the breaker named name to the store. The store calls
	// local.ApplyShared when another process changes the shared state.
	Join(name string, local Local) (Member, error)
}

// Local is the side of a breaker a Store drives. *Breaker implements it.
type Local interface {
	// ApplyShared adopts a state decided by another process.
	ApplyShared(s Shared)
}

// Shared is a breaker state as another process published it.
type Shared struct {
	// State is the shared state.
	State State
	// OpenUntil is when an open breaker lets probes through.
	OpenUntil time.Time
}

// Member is the store's side of one breaker.
type Member interface {
	// Record is told of every counted outcome while closed, so the store
	// can keep fleet-wide windowed counts. It must not block.
	Record(o Outcome)
	// Transitioned is told of every local state change, to publish it.
	// It must not block.
	Transitioned(t Transition)
	// TryProbe asks for one of the fleet-wide half-open probe permits. It
	// must answer within a small bound and answer true when the store
	// cannot tell (fail open to the local limit).
	TryProbe() bool
	// ReleaseProbe returns a permit obtained from TryProbe.
	ReleaseProbe()
}

// ApplyShared adopts a state another process published. A forced breaker
// ignores it. The change is announced to observers with reason "shared"
// but not published back to the store.
func (b *Breaker) ApplyShared(s Shared) {
	b.mu.Lock()
	cur := b.cur.Load()
	if cur.forced || cur.state == s.State && (s.State != Open || !s.OpenUntil.After(cur.until)) {
		b.mu.Unlock()
		return
	}
	var tr Transition
	switch s.State {
	case Open:
		if !s.OpenUntil.After(time.Now()) {
			b.mu.Unlock()
			return
		}
		tr = b.switchLocked(Open, "shared", false, s.OpenUntil)
	case HalfOpen:
		if cur.state != Open {
			// Only an open breaker moves to half-open; a closed one has
			// seen nothing wrong locally and probing fleet-wide would not
			// help it.
			b.mu.Unlock()
			return
		}
		tr = b.switchLocked(HalfOpen, "shared", false, time.Time{})
	case Closed:
		tr = b.switchLocked(Closed, "shared", false, time.Time{})
	default:
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	b.announce(tr, false)
}
