package ratelimit

import (
	"math"
	"sync/atomic"
)

// bucket is a token bucket kept as one number, the generic cell rate
// algorithm's theoretical arrival time: tat is the instant (nanoseconds on
// the limiter's monotonic clock) at which the bucket is full again. At time
// now it holds (window − max(0, tat − now)) / interval tokens, so a single
// compare-and-swap takes or returns tokens: no lock, no allocation.
//
// It is golang.org/x/time/rate's bucket in another form — the same
// admissions, the same times to act, the same cancellations (the tests
// compare the two) — except that costs are whole nanoseconds, rounded up.
type bucket struct {
	tat atomic.Int64
	// interval is the time one token takes to come back at the configured
	// rate, in nanoseconds; window is burst tokens' worth of it.
	interval float64
	window   int64
	burst    int64
	// slow multiplies interval while a 429 has lowered the rate: the bits
	// of a float64 ≥ 1, or 0 for 1.
	slow atomic.Uint64
	// pending counts the reservations being scheduled to act later (their
	// compare-and-swap not done yet), and horizon is the highest tat such
	// a reservation (or a hold) left: a refund of turns taken at once is
	// whole only when nothing scheduled later was placed behind them.
	pending, horizon atomic.Int64
}

func (b *bucket) init(interval float64, burst int64) {
	b.interval, b.burst = interval, burst
	b.window = int64(math.Ceil(float64(burst) * interval))
	if interval != math.Trunc(interval) {
		// A nanosecond per token of slack: costs are rounded up one by
		// one, and a full burst of them must still fit.
		b.window += burst
	}
}

// slowdown returns the factor the rate is lowered by (1: not lowered).
func (b *bucket) slowdown() float64 {
	if s := b.slow.Load(); s != 0 {
		return math.Float64frombits(s)
	}
	return 1
}

// cost is the time n tokens take to come back at the current rate.
func (b *bucket) cost(n int64) int64 {
	if n <= 0 {
		return 0
	}
	c := float64(n) * b.interval
	if s := b.slow.Load(); s != 0 {
		c *= math.Float64frombits(s)
	}
	if c >= math.MaxInt64/4 {
		return math.MaxInt64 / 4
	}
	return int64(math.Ceil(c))
}

// reserve takes n tokens at now, into the future if need be: the caller
// may act at act (now: at once). after is tat once they are taken and c
// their cost, for cancel or refund. n above the burst can never be served:
// ok is false and nothing is taken. With limit set, tokens that would only
// be there after limit are not taken either (ok false, act says when they
// would be): the check and the take are one compare-and-swap, so a caller
// that will not wait never takes a turn it has to give back.
func (b *bucket) reserve(now, n, limit int64) (after, act, c int64, ok bool) {
	if n > b.burst {
		return 0, 0, 0, false
	}
	c = b.cost(n)
	marked := false
	for {
		t := b.tat.Load()
		next := max(t, now) + c
		act = max(next-b.window, now)
		if act > limit {
			if marked {
				b.pending.Add(-1)
			}
			return 0, act, 0, false
		}
		if act > now && !marked {
			// Scheduled to act later: refunds of the turns before it must
			// see it before it is placed (see refund).
			b.pending.Add(1)
			marked = true
			continue
		}
		if b.tat.CompareAndSwap(t, next) {
			if marked {
				if act > now {
					b.raiseHorizon(next)
				}
				b.pending.Add(-1)
			}
			return next, act, c, true
		}
	}
}

// raiseHorizon records that a reservation scheduled to act later, or a
// hold, reaches tat.
func (b *bucket) raiseHorizon(tat int64) {
	for {
		h := b.horizon.Load()
		if h >= tat || b.horizon.CompareAndSwap(h, tat) {
			return
		}
	}
}

// refund gives back, whole, the tokens of a reservation that acted at
// once (its act was the time it was taken) and whose call is not made:
// tat moves back by their cost, even when calls admitted at once since
// then were placed behind them — they were admitted with these tokens
// counted, so the bucket without them admits no more than it would have
// had they never been taken. A reservation scheduled to act later behind
// them is different: its time to act was computed with them, and moving
// tat back under it would let another call act in its turn. Then only
// what no later reservation holds comes back, as cancel does.
func (b *bucket) refund(now, after, c, act int64) {
	if c == 0 {
		return
	}
	for {
		t := b.tat.Load()
		restore := c
		// Read pending before horizon: a reservation raises the horizon
		// before it stops counting as pending.
		if b.pending.Load() > 0 || b.horizon.Load() > after {
			if act < now {
				return
			}
			restore = c - max(t-after, 0)
			if restore <= 0 {
				return
			}
		}
		next := max(t-restore, now)
		if next >= t || b.tat.CompareAndSwap(t, next) {
			return
		}
	}
}

// cancel returns the tokens of a reservation whose tat was after, cost c
// and time to act act, as golang.org/x/time/rate's Reservation.CancelAt
// does: nothing once its time to act has passed, and only those not
// reserved by later reservations (they keep their times).
func (b *bucket) cancel(now, after, c, act int64) {
	if c == 0 || act < now {
		return
	}
	for {
		t := b.tat.Load()
		restore := c - max(t-after, 0)
		if restore <= 0 {
			return
		}
		next := max(t-restore, now)
		if next >= t || b.tat.CompareAndSwap(t, next) {
			return
		}
	}
}

// adjust takes n more tokens (n > 0) without waiting, going into debt if
// need be, or gives −n back (n < 0), never above the burst.
func (b *bucket) adjust(now, n int64) {
	switch {
	case n > 0:
		c := b.cost(n)
		for {
			t := b.tat.Load()
			if b.tat.CompareAndSwap(t, max(t, now)+c) {
				return
			}
		}
	case n < 0:
		c := b.cost(-n)
		for {
			t := b.tat.Load()
			next := max(t-c, now)
			if next >= t || b.tat.CompareAndSwap(t, next) {
				return
			}
		}
	}
}

// hold empties the bucket until until: its next token comes back then.
// A refund of turns taken before it gives back only what the hold does
// not cover.
func (b *bucket) hold(until int64) {
	next := until + b.window - b.cost(1)
	b.raiseHorizon(next)
	for {
		t := b.tat.Load()
		if next <= t || b.tat.CompareAndSwap(t, next) {
			return
		}
	}
}

// tokens returns the tokens available at now (negative when reservations
// reach into the future).
func (b *bucket) tokens(now int64) float64 {
	return float64(b.window-max(b.tat.Load()-now, 0)) / b.interval
}
