package breaker

import (
	"time"
	"weak"
)

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
	// Join connects the breaker named name to the store, from New. The
	// store calls local.ApplyShared when another process changes the
	// shared state.
	Join(name string, local Local) (Member, error)
}

// Local is the side of a breaker a Store drives. It holds the breaker
// weakly, so a store that keeps it does not keep the breaker alive; once
// the breaker is garbage collected its methods do nothing, State reports
// Closed and Generation 0, and the Member is told to Leave.
type Local interface {
	// Config returns the breaker's configuration with defaults filled in.
	Config() Config
	// State returns the breaker's current state.
	State() State
	// Generation returns the current state's generation number: it grows
	// with every transition, so a store can tell whether the state it saw
	// is still the current one.
	Generation() uint64
	// ApplyShared adopts a state another process published. A forced
	// breaker ignores it. The change is announced to observers with reason
	// "shared" but not passed to Member.Transitioned.
	ApplyShared(s Shared)
	// Observe calls fn after every transition, those ApplyShared makes
	// included, until remove is called; see Breaker.Observe.
	Observe(fn func(Transition)) (remove func())
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
	// Leave is called once, after the breaker was garbage collected, so
	// the store can forget it. It must not block.
	Leave()
}

// local is the Local a breaker hands its Store.
type local struct{ b weak.Pointer[Breaker] }

func (l local) Config() Config {
	if b := l.b.Value(); b != nil {
		return b.Config()
	}
	return Config{}
}

func (l local) State() State {
	if b := l.b.Value(); b != nil {
		return b.State()
	}
	return Closed
}

func (l local) Generation() uint64 {
	if b := l.b.Value(); b != nil {
		return b.generation()
	}
	return 0
}

func (l local) ApplyShared(s Shared) {
	if b := l.b.Value(); b != nil {
		b.applyShared(s)
	}
}

func (l local) Observe(fn func(Transition)) (remove func()) {
	if b := l.b.Value(); b != nil {
		return b.Observe(fn)
	}
	return func() {}
}

// applyShared adopts a state another process published (Local.ApplyShared).
func (b *Breaker) applyShared(s Shared) {
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
