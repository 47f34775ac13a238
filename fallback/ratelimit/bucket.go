package ratelimit

import (
	"math"
	"math/bits"
	"sync/atomic"
)

// bucket is a token bucket kept as one number, from the generic cell rate
// algorithm: drained is the instant (nanoseconds on the limiter's
// monotonic clock) at which the bucket holds nothing. At time now it holds
// min(now − drained, window) / interval tokens, so a single
// compare-and-swap takes or returns tokens: no lock, no allocation.
//
// It is golang.org/x/time/rate's bucket in another form — the same
// admissions, the same times to act, the same cancellations (the tests
// compare the two) — except that costs are whole nanoseconds, rounded up.
//
// The algorithm's theoretical arrival time is drained + window. Keeping
// drained instead keeps every sum within an int64 whatever the rate: a
// window of two centuries is added to nothing, and drained moves past
// now only for a reservation to act later, which is refused (act
// math.MaxInt64) when its time to act lies beyond the clock's range. The
// few figures that cannot fit saturate, and none wraps around: a window
// is cut to math.MaxInt64 nanoseconds (less of a huge burst at once), and
// a call whose tokens take longer than that to come back takes all of it.
type bucket struct {
	drained atomic.Int64
	*rate
	// slow multiplies interval while a 429 has lowered the rate: the bits
	// of a float64 ≥ 1, or 0 for 1.
	slow atomic.Uint64
	// pending counts the reservations being scheduled to act later (their
	// compare-and-swap not done yet), and horizon is the highest drained
	// such a reservation (or a hold) left: a refund of turns taken at
	// once is whole only when nothing scheduled later was placed behind
	// them.
	pending, horizon atomic.Int64
}

// rate is a bucket's limit, never written once made: the members of a
// Group share their buckets' rates, so that an idle member holds only
// its buckets' state.
type rate struct {
	// The rate is count tokens per per nanoseconds, kept exactly: costs
	// are rounded up from it, never from a rounded interval. interval is
	// per/count, for token counts and a lowered rate's costs; unit is the
	// cost of one token.
	per, count, unit int64
	interval         float64
	// window is burst tokens' worth of time (see newRate).
	window, burst int64
}

// newRate returns the limit of burst tokens coming back at count per per
// nanoseconds (all three positive).
func newRate(per, count, burst int64) *rate {
	r := &rate{per: per, count: count, burst: burst, interval: float64(per) / float64(count)}
	r.unit = mulDivCeil(1, uint64(per), uint64(count))
	r.window = mulDivCeil(uint64(burst), uint64(per), uint64(count))
	if per%count != 0 {
		// Costs are rounded up one by one: a nanosecond of slack per token
		// lets a burst of single tokens fit at once. Never as much as one
		// more token takes, though: with calls of many tokens, which round
		// up once, the slack would otherwise admit more than the burst at
		// once, and more than the quota in a Per.
		r.window = min(satAdd(r.window, burst), mulDivCeil(uint64(burst)+1, uint64(per), uint64(count))-1)
	}
	// Above a token a nanosecond a small burst's worth of time rounds to
	// nothing; one token's cost must still fit.
	r.window = max(r.window, r.unit)
	return r
}

// init makes b a full bucket of rate r.
func (b *bucket) init(r *rate) {
	b.rate = r
	b.drained.Store(math.MinInt64)
	b.horizon.Store(math.MinInt64)
}

// full is the latest drained at which the bucket is full at now: more
// than a window ago.
func (b *bucket) full(now int64) int64 { return now - b.window }

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
	c := b.unit
	if n != 1 {
		c = b.costOf(n)
	}
	if s := b.slow.Load(); s != 0 {
		f := math.Ceil(float64(c) * math.Float64frombits(s))
		if f >= math.MaxInt64 {
			return math.MaxInt64
		}
		c = max(int64(f), c)
	}
	return c
}

// costOf is ⌈n·per/count⌉ (n > 1) at the configured rate. The float64
// product is a guess, taken when two 128-bit products prove it the
// ceiling (it may be a nanosecond off either way); otherwise the exact
// quotient is worked out, which costs a 128-bit division.
func (r *rate) costOf(n int64) int64 {
	if f := math.Ceil(float64(n) * r.interval); f >= 1 && f < 1<<62 {
		c := uint64(f)
		whi, wlo := bits.Mul64(uint64(n), uint64(r.per))
		hi, lo := bits.Mul64(c, uint64(r.count))
		if hi > whi || hi == whi && lo >= wlo {
			// c·count ≥ n·per: c is enough; and c−1 is not.
			if hi, lo = bits.Mul64(c-1, uint64(r.count)); hi < whi || hi == whi && lo < wlo {
				return int64(c)
			}
		}
	}
	return mulDivCeil(uint64(n), uint64(r.per), uint64(r.count))
}

// mulDivCeil is ⌈a·b/d⌉ (d > 0), or math.MaxInt64 when that is more. The
// product is 128 bits wide: nothing is rounded down on the way.
func mulDivCeil(a, b, d uint64) int64 {
	hi, lo := bits.Mul64(a, b)
	if hi >= d {
		return math.MaxInt64
	}
	q, r := bits.Div64(hi, lo, d)
	if q >= math.MaxInt64 {
		return math.MaxInt64
	}
	if r != 0 {
		q++
	}
	return int64(q)
}

// satAdd is a + c (c ≥ 0), or math.MaxInt64 when that is more.
func satAdd(a, c int64) int64 {
	if a > math.MaxInt64-c {
		return math.MaxInt64
	}
	return a + c
}

// satSub is a − c (c ≥ 0), or math.MinInt64 when that is less.
func satSub(a, c int64) int64 {
	if a < math.MinInt64+c {
		return math.MinInt64
	}
	return a - c
}

// reserve takes n tokens at now, into the future if need be: the caller
// may act at act (now: at once). after is drained once they are taken and
// c their cost, for cancel or refund. n above the burst can never be
// served: ok is false and nothing is taken. With limit set, tokens that
// would only be there after limit are not taken either (ok false, act
// says when they would be): the check and the take are one
// compare-and-swap, so a caller that will not wait never takes a turn it
// has to give back. Tokens that would only be there past the clock's
// range are never taken (ok false, act math.MaxInt64).
func (b *bucket) reserve(now, n, limit int64) (after, act, c int64, ok bool) {
	if n > b.burst {
		return 0, 0, 0, false
	}
	c = b.cost(n)
	marked := false
	for {
		d := b.drained.Load()
		next := max(d, b.full(now))
		if next > math.MaxInt64-c {
			act = math.MaxInt64
		} else {
			next += c
			act = max(next, now)
		}
		if act > limit || act == math.MaxInt64 {
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
		if b.drained.CompareAndSwap(d, next) {
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
// hold, reaches drained.
func (b *bucket) raiseHorizon(drained int64) {
	for {
		h := b.horizon.Load()
		if h >= drained || b.horizon.CompareAndSwap(h, drained) {
			return
		}
	}
}

// refund gives back, whole, the tokens of a reservation that acted at
// once (its act was the time it was taken) and whose call is not made:
// drained moves back by their cost, even when calls admitted at once
// since then were placed behind them — they were admitted with these
// tokens counted, so the bucket without them admits no more than it
// would have had they never been taken. A reservation scheduled to act
// later behind them is different: its time to act was computed with them,
// and moving drained back under it would let another call act in its
// turn. Then only what no later reservation holds comes back, as cancel
// does.
func (b *bucket) refund(now, after, c, act int64) {
	if c == 0 {
		return
	}
	for {
		d := b.drained.Load()
		restore := c
		// Read pending before horizon: a reservation raises the horizon
		// before it stops counting as pending.
		if b.pending.Load() > 0 || b.horizon.Load() > after {
			if act < now {
				return
			}
			restore = c - behind(d, after, c)
			if restore == 0 {
				return
			}
		}
		next := max(satSub(d, restore), b.full(now))
		if next >= d || b.drained.CompareAndSwap(d, next) {
			return
		}
	}
}

// cancel returns the tokens of a reservation whose drained was after,
// cost c and time to act act, as golang.org/x/time/rate's
// Reservation.CancelAt does: nothing once its time to act has passed, and
// only those not reserved by later reservations (they keep their times).
func (b *bucket) cancel(now, after, c, act int64) {
	if c == 0 || act < now {
		return
	}
	for {
		d := b.drained.Load()
		restore := c - behind(d, after, c)
		if restore == 0 {
			return
		}
		next := max(satSub(d, restore), b.full(now))
		if next >= d || b.drained.CompareAndSwap(d, next) {
			return
		}
	}
}

// behind is how much of a reservation's cost c the reservations placed
// behind it hold: drained's advance d − after past the reservation's own,
// at most c (the difference of two far-apart instants overflows an int64).
func behind(d, after, c int64) int64 {
	if d <= after {
		return 0
	}
	return int64(min(uint64(d)-uint64(after), uint64(c)))
}

// adjust takes n more tokens (n > 0) without waiting, going into debt if
// need be (at most to the end of the clock's range), or gives −n back
// (n < 0), never above the burst.
func (b *bucket) adjust(now, n int64) {
	switch {
	case n > 0:
		c := b.cost(n)
		for {
			d := b.drained.Load()
			if b.drained.CompareAndSwap(d, satAdd(max(d, b.full(now)), c)) {
				return
			}
		}
	case n < 0:
		c := b.cost(-n)
		for {
			d := b.drained.Load()
			next := max(satSub(d, c), b.full(now))
			if next >= d || b.drained.CompareAndSwap(d, next) {
				return
			}
		}
	}
}

// hold empties the bucket until until: its next token comes back then.
// A refund of turns taken before it gives back only what the hold does
// not cover.
func (b *bucket) hold(until int64) {
	next := satSub(until, b.cost(1))
	b.raiseHorizon(next)
	for {
		d := b.drained.Load()
		if next <= d || b.drained.CompareAndSwap(d, next) {
			return
		}
	}
}

// tokens returns the tokens available at now (negative when reservations
// reach into the future).
func (b *bucket) tokens(now int64) float64 {
	d := b.drained.Load()
	if d <= b.full(now) {
		return min(float64(b.window)/b.interval, float64(b.burst))
	}
	return min(float64(now-d)/b.interval, float64(b.burst))
}
