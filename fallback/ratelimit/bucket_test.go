package ratelimit_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/tierguard/tierguard/fallback/ratelimit"
)

// The cases below are golang.org/x/time/rate's own (rate_test.go,
// v0.16.0: https://cs.opensource.google/go/x/time/+/refs/tags/v0.16.0:rate/rate_test.go),
// translated to the bucket behind Limiter: times are multiples of d from
// t0, and each case states what x/time/rate answers.

const d = 100 * time.Millisecond

func at(n int) time.Duration { return time.Duration(n) * d }

type allow struct {
	t    int
	toks float64
	n    int64
	ok   bool
}

func runAllows(t *testing.T, b *ratelimit.TestBucket, allows []allow) {
	t.Helper()
	for i, a := range allows {
		assert.InDelta(t, a.toks, b.TokensAt(at(a.t)), 1e-9, "step %d: tokens at t%d", i, a.t)
		assert.Equal(t, a.ok, b.AllowN(at(a.t), a.n), "step %d: AllowN(t%d, %d)", i, a.t, a.n)
	}
}

// TestLimiterBurst1 is x/time/rate's TestLimiterBurst1.
func TestLimiterBurst1(t *testing.T) {
	runAllows(t, ratelimit.NewTestBucket(10, 1), []allow{
		{0, 1, 1, true}, {0, 0, 1, false}, {0, 0, 1, false},
		{1, 1, 1, true}, {1, 0, 1, false}, {1, 0, 1, false},
		{2, 1, 2, false}, // burst size is 1, so n=2 always fails
		{2, 1, 1, true}, {2, 0, 1, false},
	})
}

// TestLimiterBurst3 is x/time/rate's TestLimiterBurst3.
func TestLimiterBurst3(t *testing.T) {
	runAllows(t, ratelimit.NewTestBucket(10, 3), []allow{
		{0, 3, 2, true}, {0, 1, 2, false}, {0, 1, 1, true}, {0, 0, 1, false},
		{1, 1, 4, false}, {2, 2, 1, true}, {3, 2, 1, true},
		{4, 2, 1, true}, {4, 1, 1, true}, {4, 0, 1, false}, {4, 0, 1, false},
		{9, 3, 3, true}, {9, 0, 0, true},
	})
}

type request struct {
	t   int
	n   int64
	act int
	ok  bool
}

func reserve(t *testing.T, b *ratelimit.TestBucket, r request, maxWait time.Duration) ratelimit.TestReservation {
	t.Helper()
	got := b.ReserveN(at(r.t), r.n, maxWait)
	require.Equal(t, r.ok, got.OK, "ReserveN(t%d, %d) ok", r.t, r.n)
	if r.ok {
		assert.Equal(t, at(r.act), got.Act, "ReserveN(t%d, %d) time to act", r.t, r.n)
	}
	return got
}

func TestSimpleReserve(t *testing.T) {
	b := ratelimit.NewTestBucket(10, 2)
	reserve(t, b, request{0, 2, 0, true}, -1)
	reserve(t, b, request{0, 2, 2, true}, -1)
	reserve(t, b, request{3, 2, 4, true}, -1)
}

func TestMix(t *testing.T) {
	b := ratelimit.NewTestBucket(10, 2)
	reserve(t, b, request{0, 3, 1, false}, -1) // n > burst
	reserve(t, b, request{0, 2, 0, true}, -1)
	runAllows(t, b, []allow{{1, 1, 2, false}}) // not enough tokens
	reserve(t, b, request{1, 2, 2, true}, -1)
	runAllows(t, b, []allow{{1, -1, 1, false}}) // negative tokens
	runAllows(t, b, []allow{{3, 1, 1, true}})
}

func TestCancelInvalid(t *testing.T) {
	b := ratelimit.NewTestBucket(10, 2)
	reserve(t, b, request{0, 2, 0, true}, -1)
	r := reserve(t, b, request{0, 3, 3, false}, -1)
	b.CancelAt(r, at(0))                      // no effect
	reserve(t, b, request{0, 2, 2, true}, -1) // no extra tokens
}

func TestCancelLast(t *testing.T) {
	b := ratelimit.NewTestBucket(10, 2)
	reserve(t, b, request{0, 2, 0, true}, -1)
	r := reserve(t, b, request{0, 2, 2, true}, -1)
	b.CancelAt(r, at(1)) // 2 tokens back
	reserve(t, b, request{1, 2, 2, true}, -1)
}

func TestCancelTooLate(t *testing.T) {
	b := ratelimit.NewTestBucket(10, 2)
	reserve(t, b, request{0, 2, 0, true}, -1)
	r := reserve(t, b, request{0, 2, 2, true}, -1)
	b.CancelAt(r, at(3)) // too late: no effect
	reserve(t, b, request{3, 2, 4, true}, -1)
}

func TestCancel0Tokens(t *testing.T) {
	b := ratelimit.NewTestBucket(10, 2)
	reserve(t, b, request{0, 2, 0, true}, -1)
	r := reserve(t, b, request{0, 1, 1, true}, -1)
	reserve(t, b, request{0, 1, 2, true}, -1)
	b.CancelAt(r, at(0)) // 0 tokens back
	reserve(t, b, request{0, 1, 3, true}, -1)
}

func TestCancel1Token(t *testing.T) {
	b := ratelimit.NewTestBucket(10, 2)
	reserve(t, b, request{0, 2, 0, true}, -1)
	r := reserve(t, b, request{0, 2, 2, true}, -1)
	reserve(t, b, request{0, 1, 3, true}, -1)
	b.CancelAt(r, at(2)) // 1 token back
	reserve(t, b, request{2, 2, 4, true}, -1)
}

func TestCancelMulti(t *testing.T) {
	b := ratelimit.NewTestBucket(10, 4)
	reserve(t, b, request{0, 4, 0, true}, -1)
	rA := reserve(t, b, request{0, 3, 3, true}, -1)
	reserve(t, b, request{0, 1, 4, true}, -1)
	rC := reserve(t, b, request{0, 1, 5, true}, -1)
	b.CancelAt(rC, at(1)) // 1 token back
	b.CancelAt(rA, at(1)) // 2 tokens back, as if C was never reserved
	reserve(t, b, request{1, 3, 5, true}, -1)
}

func TestReserveMax(t *testing.T) {
	b := ratelimit.NewTestBucket(10, 2)
	reserve(t, b, request{0, 2, 0, true}, d)
	reserve(t, b, request{0, 1, 1, true}, d)  // close future
	reserve(t, b, request{0, 1, 2, false}, d) // too far
}

// TestSimultaneousRequests is x/time/rate's: of 15 concurrent Allows on a
// bucket of 5 at 1 per second, exactly 5 pass.
func TestSimultaneousRequests(t *testing.T) {
	l, err := ratelimit.New(ratelimit.Config{Name: "s", Requests: 65, Burst: 5})
	require.NoError(t, err)
	var ok = make(chan bool, 15)
	for range 15 {
		go func() { ok <- l.Allow(0) }()
	}
	n := 0
	for range 15 {
		if <-ok {
			n++
		}
	}
	assert.Equal(t, 5, n)
}

// TestAgainstXTimeRate drives the bucket and a golang.org/x/time/rate
// Limiter of the same rate and burst through the same random sequences of
// AllowN, ReserveN (with and without a maximum wait), CancelAt and TokensAt,
// on a clock that only moves forward (the limiter's clock is monotonic),
// and requires the same answers: every
// admission, every time to act (within a microsecond: x/time/rate computes
// in float64 seconds, the bucket in whole nanoseconds), every token count.
func TestAgainstXTimeRate(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	for _, c := range []struct {
		limit float64
		burst int
	}{{10, 1}, {10, 3}, {1, 5}, {50, 20}, {1000.0 / 60, 7}, {200, 1}, {0.5, 2}} {
		for seed := range uint64(40) {
			rng := rand.New(rand.NewPCG(seed, uint64(c.burst)))
			ours := ratelimit.NewTestBucket(c.limit, int64(c.burst))
			theirs := rate.NewLimiter(rate.Limit(c.limit), c.burst)
			var now time.Duration
			type pair struct {
				ours   ratelimit.TestReservation
				theirs *rate.Reservation
			}
			// last is the latest reservation, if it is still held: the one
			// cancelled (see TestCancelAfterAPartialCancel for why not
			// others).
			var last *pair
			for step := range 200 {
				now += time.Duration(rng.IntN(int(2*float64(time.Second)/c.limit/float64(time.Millisecond))+1)) * time.Millisecond
				tm := base.Add(now)
				n := int64(rng.IntN(c.burst + 2))
				where := func() string {
					return "limit " + ftoa(c.limit) + " burst " + itoa(c.burst) + " seed " + itoa(int(seed)) + " step " + itoa(step)
				}
				switch op := rng.IntN(4); op {
				case 0:
					ok := theirs.AllowN(tm, int(n))
					require.Equal(t, ok, ours.AllowN(now, n), "AllowN %s", where())
					if ok {
						last = nil
					}
				case 1, 2:
					maxWait := time.Duration(-1)
					if op == 2 {
						maxWait = time.Duration(rng.IntN(3)) * time.Duration(float64(time.Second)/c.limit)
					}
					var tr *rate.Reservation
					slack := maxWait.Seconds()*c.limit - (float64(n) - theirs.TokensAt(tm))
					if maxWait >= 0 && math.Abs(slack) < 1e-6 {
						// On the boundary, float64 seconds and whole
						// nanoseconds may round either way.
						continue
					}
					if maxWait < 0 || slack >= 0 {
						// x/time/rate's reserveN(t, n, maxFutureReserve),
						// which WaitN uses, is not exported: reserve only
						// what acts within maxWait, by its token count.
						tr = theirs.ReserveN(tm, int(n))
					}
					or := ours.ReserveN(now, n, maxWait)
					if tr == nil {
						require.False(t, or.OK, "ReserveN beyond the maximum wait %s", where())
						continue
					}
					require.Equal(t, tr.OK(), or.OK, "ReserveN ok %s", where())
					if tr.OK() {
						assert.InDelta(t, float64(tr.DelayFrom(tm)), float64(max(or.Act-now, 0)), float64(time.Microsecond), "delay %s", where())
						last = &pair{or, tr}
					}
				case 3:
					if last != nil && (last.ours.Act-now).Abs() > time.Microsecond {
						// (Exactly at the time to act, float64 seconds and
						// whole nanoseconds may disagree on "too late".)
						last.theirs.CancelAt(tm)
						ours.CancelAt(last.ours, now)
						last = nil
					}
				}
				assert.InDelta(t, theirs.TokensAt(tm), ours.TokensAt(now), 1e-3, "tokens %s", where())
			}
		}
	}
}

// TestCancelAfterAPartialCancel is the one deliberate difference from
// x/time/rate: when a reservation is cancelled after a later one was
// partly cancelled, x/time/rate still counts the later one whole (its
// lastEvent moves back only when the last reservation is cancelled) and
// gives back nothing; the bucket knows what the later reservations still
// hold, and gives back the rest.
func TestCancelAfterAPartialCancel(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	ours := ratelimit.NewTestBucket(10, 4)
	theirs := rate.NewLimiter(10, 4)
	reserveBoth := func(n int64) (ratelimit.TestReservation, *rate.Reservation) {
		return ours.ReserveN(0, n, -1), theirs.ReserveN(base, int(n))
	}
	reserveBoth(4)           // the burst, at once
	oA, tA := reserveBoth(3) // acts at t3
	oB, tB := reserveBoth(2) // acts at t5
	reserveBoth(1)           // acts at t6
	tB.CancelAt(base)        // 2 − 1 reserved after it: 1 back
	ours.CancelAt(oB, 0)
	require.InDelta(t, theirs.TokensAt(base), ours.TokensAt(0), 1e-9, "the same so far")
	tA.CancelAt(base)
	ours.CancelAt(oA, 0)
	assert.InDelta(t, -5, theirs.TokensAt(base), 1e-9, "x/time/rate counts B's 2 tokens and C's 1 after A: 3 − 3 = nothing back")
	assert.InDelta(t, -4, ours.TokensAt(0), 1e-9, "B and C hold 2 after A: 1 back")
}
