package bulkhead

import (
	"context"
	"math"
)

// Priority says how much a call matters when a bulkhead is short of
// slots. The zero value is Interactive, so a request that names none is
// served as a user's would be. A service maps its own classes onto these
// (a paying tenant's chat to Interactive, a free tenant's to Sheddable, a
// nightly job to Batch) where the request enters it.
//
// Priorities act only on a bulkhead with a Config.Reserve: there each
// priority leaves a share of the limit to those above it, and waiters
// (Config.MaxWait) are served highest priority first, each no longer than
// its own wait and its context allow.
type Priority int8

const (
	// Critical may use every slot; nothing else can take the last share.
	Critical Priority = -1
	// Interactive is someone waiting for the answer: the default.
	Interactive Priority = 0
	// Batch is work nobody watches as it runs.
	Batch Priority = 1
	// Sheddable is the first to go: free tiers, prefetches.
	Sheddable Priority = 2
)

// String names the priority, as otelx labels refusals with it.
func (p Priority) String() string {
	switch p {
	case Critical:
		return "critical"
	case Interactive:
		return "interactive"
	case Batch:
		return "batch"
	case Sheddable:
		return "sheddable"
	}
	return "invalid"
}

// Priorities lists the priorities, highest first.
var Priorities = [...]Priority{Critical, Interactive, Batch, Sheddable}

// PriorityKey is the context key under which a context holds its
// Priority. A context type of your own may answer Value(PriorityKey{})
// with one, as fallback.WithRequest's does from Request.Priority, instead
// of being wrapped by WithPriority.
type PriorityKey struct{}

// WithPriority returns a context carrying p. Use fallback.WithRequest
// instead where a fallback.Request is set: it carries the priority with
// the rest of who is asking.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, PriorityKey{}, p)
}

// PriorityFrom returns the priority ctx carries, or Interactive. A value
// outside the four priorities counts as Sheddable: an unknown class is
// not allowed to outrank a known one.
func PriorityFrom(ctx context.Context) Priority {
	p, ok := ctx.Value(PriorityKey{}).(Priority)
	if !ok {
		return Interactive
	}
	if p < Critical || p > Sheddable {
		return Sheddable
	}
	return p
}

// maxReserve bounds Config.Reserve: three shares of it must leave
// Sheddable a tenth of the limit.
const maxReserve = 0.3

// bound is the slots a call of priority p may fill, flags f read: the
// limit, or on a bulkhead with a Reserve its share for p (see share).
// Inlined, it costs a bulkhead without a Reserve one test of f.
func (b *Bulkhead) bound(f int64, p Priority) uint64 {
	if f&priorityFlag == 0 || p <= Critical {
		return b.max.Load()
	}
	return b.share(p)
}

// share is the limit less one share of Config.Reserve for each priority
// above p. It never falls below 1, so every priority can run when the
// tier is idle. Kept out of line: inlined, it would widen the frame of
// every refusal.
//
//go:noinline
func (b *Bulkhead) share(p Priority) uint64 {
	limit := b.max.Load()
	p = min(p, Sheddable)
	one := uint64(math.Ceil(b.cfg.Reserve * float64(limit)))
	cut := one * uint64(p-Critical)
	if cut >= limit {
		return 1
	}
	return limit - cut
}

// enqueue puts w in q behind every waiter of its priority or above, so
// that the queue's head is always the highest priority's longest waiter.
func enqueue(q []*waiter, w *waiter) []*waiter {
	i := len(q)
	for i > 0 && q[i-1].priority > w.priority {
		i--
	}
	q = append(q, nil)
	copy(q[i+1:], q[i:])
	q[i] = w
	return q
}

// countPriority counts a refusal of priority p on a bulkhead with a
// Reserve; out of line, so that refusing costs the others nothing more.
func (b *Bulkhead) countPriority(p Priority) {
	b.tuned().rejectedAt[min(max(p, Critical), Sheddable)-Critical].Add(1)
}

// acquirePriority is Acquire past its fast path on a bulkhead with a
// Reserve (flags f), apart so that the others' refusals stay as short as
// they were: it takes a slot within the share of the context's priority,
// or waits for one, or refuses.
func (b *Bulkhead) acquirePriority(ctx context.Context, f int64) error {
	p := PriorityFrom(ctx)
	if bound := b.bound(f, p); !b.full(f, bound) && b.added(b.state.Add(grant), bound) {
		b.permitted()
		return nil
	}
	if b.cfg.MaxWait == 0 {
		b.refusedAs(p)
		return &b.ext().full
	}
	return b.wait(ctx, p)
}

// tryAcquirePriority is TryAcquire's, at Interactive: TryAcquire has no
// context to read a priority from.
func (b *Bulkhead) tryAcquirePriority(f int64) bool {
	if bound := b.bound(f, Interactive); !b.full(f, bound) && b.added(b.state.Add(grant), bound) {
		b.permitted()
		return true
	}
	b.refusedAs(Interactive)
	return false
}

// refusedAs is refused, counting the priority too where there are
// priorities (a wait can end on any bulkhead).
func (b *Bulkhead) refusedAs(p Priority) {
	if b.flags.Load()&priorityFlag != 0 {
		b.countPriority(p)
	}
	b.refused()
}
