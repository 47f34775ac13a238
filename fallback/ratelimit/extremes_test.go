package ratelimit_test

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback/ratelimit"
)

// allowed is how many of tries calls of tokens tokens l admits now.
func allowed(l *ratelimit.Limiter, tries int, tokens int64) int {
	n := 0
	for range tries {
		if l.Allow(tokens) {
			n++
		}
	}
	return n
}

// TestTinyLimit is the shape of golang.org/x/time/rate's TestTinyLimit: a
// rate so low that one turn takes two centuries to come back. The burst
// is one call, and the next comes a whole Per later, not before.
func TestTinyLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const per = 200 * 365 * 24 * time.Hour
		l := newLimiter(t, ratelimit.Config{Name: "tiny", Requests: 2, Burst: 1, Per: per})
		assert.Equal(t, 1, allowed(l, 10, 0), "a burst of one")
		time.Sleep(per - time.Nanosecond)
		assert.Zero(t, allowed(l, 10, 0), "a nanosecond early")
		time.Sleep(time.Nanosecond)
		assert.Equal(t, 1, allowed(l, 10, 0), "the refill brings one turn back")
		assert.Zero(t, allowed(l, 10, 0))
	})
}

// TestExtremeLimitsKeepTheQuota: at the ends of what Config accepts — a
// Per of the longest duration, a burst of one, bursts near the largest
// int64, more tokens than nanoseconds in a Per — no call is admitted
// beyond the burst at once, nor beyond the quota in a Per.
func TestExtremeLimitsKeepTheQuota(t *testing.T) {
	const maxDuration = time.Duration(math.MaxInt64)
	t.Run("requests over the longest Per", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := newLimiter(t, ratelimit.Config{Name: "x", Requests: 2, Burst: 1, Per: maxDuration})
			assert.Equal(t, 1, allowed(l, 10, 0))
			time.Sleep(100 * 365 * 24 * time.Hour)
			assert.Zero(t, allowed(l, 10, 0), "a century is not the Per")
			r := l.Take(0)
			assert.True(t, r.Retry(), "nothing held")
			assert.Greater(t, r.Delay(), 190*365*24*time.Hour, "the turn is almost two centuries away")
		})
	})
	t.Run("tokens over the longest Per", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := newLimiter(t, ratelimit.Config{Name: "x", Tokens: 2, TokenBurst: 1, Per: maxDuration})
			assert.Equal(t, 1, allowed(l, 10, 1))
			time.Sleep(100 * 365 * 24 * time.Hour)
			assert.Zero(t, allowed(l, 10, 1))
		})
	})
	t.Run("a burst near the largest int64", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// One token a minute after the burst: a burst this large cannot
			// come back within an int64 of nanoseconds, so less of it is
			// available at once; never more.
			const burst = math.MaxInt64 - 1
			l := newLimiter(t, ratelimit.Config{Name: "x", Tokens: math.MaxInt64, TokenBurst: burst})
			assert.False(t, l.Allow(burst+1), "above the burst: never")
			taken := int64(0)
			for _, n := range []int64{burst, burst / 2, 1 << 40, 1 << 20, 1} {
				for l.Allow(n) {
					require.LessOrEqual(t, n, burst-taken, "at once: %d taken before", taken)
					taken += n
				}
			}
			assert.Positive(t, taken)
			time.Sleep(time.Minute - time.Nanosecond)
			assert.False(t, l.Allow(1), "one token a minute")
			time.Sleep(time.Nanosecond)
			assert.True(t, l.Allow(1))
			assert.False(t, l.Allow(1))
		})
	})
	t.Run("many tokens a nanosecond", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// BenchmarkLimiter's limit: 2^40 tokens a minute, a burst of
			// 2^38, about 14 tokens a nanosecond. Costs round up to whole
			// nanoseconds; the rounding must never make room for more.
			const quota, burst = 1 << 40, 1 << 38
			l := newLimiter(t, ratelimit.Config{Name: "x", Tokens: quota, TokenBurst: burst})
			require.True(t, l.Allow(burst))
			assert.False(t, l.Allow(burst/2), "the burst is spent")
			assert.False(t, l.Allow(1), "the burst is spent")
			total := int64(burst)
			for i := range 600 {
				time.Sleep(100 * time.Millisecond)
				for _, n := range []int64{burst / 8, 1 << 20, 100, 1} {
					for l.Allow(n) {
						total += n
						if i < 599 {
							// Within a minute of the burst.
							require.LessOrEqual(t, total, int64(quota), "a minute's quota")
						}
					}
				}
			}
			assert.Greater(t, total, int64(quota)*9/10, "and most of it is admitted")
		})
	})
	t.Run("a 429 asking for the longest wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := newLimiter(t, ratelimit.Config{Name: "x", Requests: 100})
			// Some time on the limiter's clock, so that the wait's end is
			// past the largest int64.
			time.Sleep(time.Second)
			l.Throttle(maxDuration)
			time.Sleep(time.Hour)
			assert.Zero(t, allowed(l, 10, 0), "held for as long as asked")
		})
	})
}

// FuzzBucketKeepsItsQuota drives a bucket of any rate and burst (count
// tokens per per, after the burst: a Limiter's shape) through AllowN,
// ReserveN and Adjust at times that move forward by steps of every scale,
// and checks the promise behind Config.Burst: no instant admits more than
// the burst, and no closed window of per holds more than the burst and
// count together; and that a bucket left to refill admits a token.
func FuzzBucketKeepsItsQuota(f *testing.F) {
	f.Add(uint64(time.Minute), uint64(54), uint64(6), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add(uint64(200*365*24*time.Hour), uint64(1), uint64(1), []byte{0, 0, 0, 0, 0, 0, 3, 255, 0, 0, 0, 0})
	f.Add(uint64(math.MaxInt64), uint64(1), uint64(1), []byte{0, 0, 0, 0, 0, 0, 3, 255, 0})
	f.Add(uint64(time.Minute), uint64(3<<38), uint64(1<<38), []byte{4, 0, 0, 8, 0, 128, 2, 3, 0, 0, 0, 1})
	f.Add(uint64(time.Minute), uint64(1), uint64(math.MaxInt64-1), []byte{4, 0, 0, 8, 0, 128, 3, 1, 0})
	f.Add(uint64(1), uint64(2), uint64(3), []byte{4, 0, 0, 8, 0, 128, 1, 1, 1, 12, 0, 200})
	f.Add(uint64(3), uint64(2), uint64(5), []byte{72, 2, 9, 64, 7, 1, 1, 1, 1, 12, 0, 200})
	f.Fuzz(func(t *testing.T, per, count, burst uint64, ops []byte) {
		per = (per-1)%math.MaxInt64 + 1
		count = (count-1)%math.MaxInt64 + 1
		burst = (burst-1)%math.MaxInt64 + 1
		b := ratelimit.NewTestBucketRate(time.Duration(per), int64(count), int64(burst))
		type event struct{ at, n int64 }
		var admitted []event
		now := int64(0)
		// A bucket left alone for refill after its last admission is full
		// (unless Adjust put it in debt): refill is at least the window,
		// burst+1 tokens' time.
		last, debt := int64(math.MinInt64), false
		hi, lo := bits.Mul64(burst+1, per)
		refill := uint64(math.MaxUint64)
		if hi < count {
			refill, _ = bits.Div64(hi, lo, count)
			refill++
		}
		for len(ops) >= 3 {
			op, x, y := ops[0], uint64(ops[1]), uint64(ops[2])
			ops = ops[3:]
			var dt uint64
			switch op & 3 {
			case 1:
				dt = x
			case 2: // about x/16 of a token's time
				hi, lo := bits.Mul64(per, x)
				dt, _ = bits.Div64(hi%count, lo, count)
				dt /= 16
				if hi >= count {
					dt = math.MaxInt64
				}
			case 3: // about x/64 of a Per
				dt = per / 64 * x
			}
			now = int64(min(uint64(now)+min(dt, math.MaxInt64), math.MaxInt64-1))
			var n uint64
			switch op >> 2 & 3 {
			case 0:
				n = 1
			case 1:
				n = burst
			case 2:
				hi, lo := bits.Mul64(burst, y+1)
				n = max(hi<<56|lo>>8, 1)
			case 3:
				n = max(burst-min(y, burst), 1)
			}
			if op>>4&1 == 1 && burst < math.MaxInt64 {
				n = burst + 1
			}
			switch op >> 5 & 3 {
			case 0, 1:
				full := !debt && (last == math.MinInt64 || now > last && uint64(now-last) >= refill)
				if b.AllowN(time.Duration(now), int64(n)) {
					require.LessOrEqual(t, n, burst, "AllowN(%d) above the burst", n)
					admitted = append(admitted, event{now, int64(n)})
					last = max(last, now)
				} else {
					require.False(t, full && n == 1, "a full bucket refused a token at %d", now)
				}
			case 2:
				r := b.ReserveN(time.Duration(now), int64(n), time.Duration(per/256*y))
				if r.OK {
					require.LessOrEqual(t, n, burst, "ReserveN(%d) above the burst", n)
					require.GreaterOrEqual(t, int64(r.Act), now, "a reservation acts at once or later")
					admitted = append(admitted, event{int64(r.Act), int64(n)})
					last = max(last, int64(r.Act))
				}
			case 3:
				b.Adjust(time.Duration(now), int64(n))
				debt = true
			}
		}
		slices.SortStableFunc(admitted, func(a, b event) int { return cmp.Compare(a.at, b.at) })
		// sum128 adds n to a 128-bit sum: a window may hold more than an
		// int64 of tokens when the quota itself is that large.
		type sum128 struct{ hi, lo uint64 }
		add := func(s sum128, n int64) sum128 {
			lo, carry := bits.Add64(s.lo, uint64(n), 0)
			return sum128{s.hi + carry, lo}
		}
		quotaLo, quotaCarry := bits.Add64(burst, count, 0)
		quota := sum128{quotaCarry, quotaLo}
		over := func(s, limit sum128) bool { return s.hi > limit.hi || s.hi == limit.hi && s.lo > limit.lo }
		for i, e := range admitted {
			var instant, window sum128
			end := int64(min(uint64(e.at)+per, math.MaxInt64))
			for _, later := range admitted[i:] {
				if later.at > end {
					break
				}
				window = add(window, later.n)
				if later.at == e.at {
					instant = add(instant, later.n)
				}
			}
			require.False(t, over(instant, sum128{0, burst}), "more than the burst %d at %d: %v", burst, e.at, instant)
			require.False(t, over(window, quota), "more than the quota %d+%d in the Per from %d: %v", burst, count, e.at, window)
		}
	})
}
