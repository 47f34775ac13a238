package budget

import (
	"sync/atomic"
	"time"
)

// Need estimates how long a tier needs to answer: a running high quantile
// of its latency, which earlier tiers keep in reserve for it. It starts at
// the tier's MinAttempt (its cold-start floor) and never leaves [floor,
// ceiling], the ceiling being the tier's TryTimeout when it has one.
//
// Two kinds of observation move it. The first answer sets it; after that a
// successful call's latency moves it
// as a quantile tracker does — up fast (by at least a sixteenth, or half
// the gap), down slowly (a 144th) — so it settles near the 90th
// percentile and keeps a reserve through a burst of slow answers. A call
// cut short by the deadline says only that the tier needed more than it
// got, so it raises the estimate to one and a half times the cut when the
// cut came at or past it: a fallback starved by too small a reserve gets
// what it needs within a few requests. Lock-free: one compare-and-swap per observation.
type Need struct {
	known       atomic.Bool
	ns          atomic.Int64
	floor, ceil int64
}

// Init sets the floor and the ceiling (0: none) and starts at the floor.
func (n *Need) Init(floor, ceiling time.Duration) {
	n.floor, n.ceil = int64(floor), int64(ceiling)
	if n.ceil <= 0 {
		n.ceil = int64(^uint64(0) >> 2)
	}
	n.ceil = max(n.ceil, n.floor)
	n.ns.Store(n.floor)
}

// Get returns the current estimate.
func (n *Need) Get() time.Duration { return time.Duration(n.ns.Load()) }

// Answered records a successful call's latency.
func (n *Need) Answered(d time.Duration) { n.update(int64(d), false) }

// Cut records a call the deadline ended after it ran for d.
func (n *Need) Cut(d time.Duration) { n.update(int64(d), true) }

// Known reports whether the tier was observed at all: until then what it
// needs is unknown, and the floor is only a floor.
func (n *Need) Known() bool { return n.known.Load() }

func (n *Need) update(x int64, censored bool) {
	if !n.known.Load() && n.known.CompareAndSwap(false, true) && !censored {
		// The first answer is the best estimate there is.
		n.ns.Store(min(max(x, n.floor), n.ceil))
		return
	}
	n.known.Store(true)
	for {
		q := n.ns.Load()
		next := q
		switch {
		case censored:
			if x < q {
				return
			}
			next = max(q, x) + max(q, x)/2
		case x > q:
			next = q + max(q/16, (x-q)/2)
		default:
			next = q - q/144
		}
		next = min(max(next, n.floor), n.ceil)
		if next == q || n.ns.CompareAndSwap(q, next) {
			return
		}
	}
}
