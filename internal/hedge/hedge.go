package hedge

import (
	"sync/atomic"
	"time"
)

// Bank is how many hedges a Budget may save up.
const Bank = 20

// Budget bounds hedges to a share of a tier's attempts: every attempt
// earns the share, a hedge spends one, and at most Bank hedges are banked
// (for a few slow calls close together), so that over any run hedges stay
// within the share of attempts plus the bank. It starts full: the first
// slow calls of a run — a burst of concurrent requests before any has
// earned its share — are hedged too. It is safe for concurrent use.
type Budget struct {
	milli atomic.Int64
	earn  int64
}

// Init sets the share (0.1: one hedge per ten attempts) and fills the
// bank. It must be called before the Budget is shared.
func (b *Budget) Init(share float64) {
	b.earn = int64(share * 1000)
	b.milli.Store(Bank * 1000)
}

// Attempted credits one attempt.
func (b *Budget) Attempted() {
	for {
		t := b.milli.Load()
		if t >= Bank*1000 || b.milli.CompareAndSwap(t, min(t+b.earn, Bank*1000)) {
			return
		}
	}
}

// Take spends one hedge, if at least least of them are banked.
func (b *Budget) Take(least int64) bool {
	for {
		t := b.milli.Load()
		if t < least*1000 {
			return false
		}
		if b.milli.CompareAndSwap(t, t-1000) {
			return true
		}
	}
}

// Refund gives back a hedge that could not start after all.
func (b *Budget) Refund() { b.milli.Add(1000) }

// Quantile tracks a quantile of a tier's latency, lock-free: up by a step
// when an observation is above it, down by a smaller one when below, the
// steps in the ratio that makes it settle where the share q of
// observations falls below. It is safe for concurrent use.
type Quantile struct {
	q     float64
	floor time.Duration
	ns    atomic.Int64
}

// Init sets the quantile q, within (0, 1) (0: none, only the floor), and
// the least delay. It must be called before the Quantile is shared.
func (e *Quantile) Init(q float64, floor time.Duration) { e.q, e.floor = q, floor }

// Observe adds one latency.
func (e *Quantile) Observe(d time.Duration) {
	if e.q == 0 || d <= 0 {
		return
	}
	x := int64(d)
	for {
		cur := e.ns.Load()
		next := x
		if cur != 0 {
			down := max(cur/64, 1)
			if x > cur {
				next = cur + max(int64(float64(down)*e.q/(1-e.q)), 1)
				next = min(next, x)
			} else {
				next = max(cur-down, x)
			}
		}
		if next == cur || e.ns.CompareAndSwap(cur, next) {
			return
		}
	}
}

// Delay is how long a first attempt runs alone: the quantile once known
// (at least the floor), the floor until then; with neither, no hedge
// (ok false).
func (e *Quantile) Delay() (d time.Duration, ok bool) {
	if e.q > 0 {
		if v := time.Duration(e.ns.Load()); v > 0 {
			return max(v, e.floor), true
		}
	}
	return e.floor, e.floor > 0
}
