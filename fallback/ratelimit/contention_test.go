package ratelimit_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback/ratelimit"
)

// contend runs callers goroutines that each call try every tick for run,
// on a bubble's clock: the callers of a tick arrive at the same instant
// and race for real on the machine's cores. It returns when try admitted
// a call, sorted.
func contend(callers int, tick, run time.Duration, try func() bool) []time.Duration {
	start := time.Now()
	var mu sync.Mutex
	var admitted []time.Duration
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for time.Since(start) < run {
				if try() {
					mu.Lock()
					admitted = append(admitted, time.Since(start))
					mu.Unlock()
				}
				time.Sleep(tick)
			}
		})
	}
	wg.Wait()
	slices.Sort(admitted)
	return admitted
}

// worstWindow is the most admissions in any window of per.
func worstWindow(admitted []time.Duration, per time.Duration) int {
	worst := 0
	for i := range admitted {
		j, _ := slices.BinarySearch(admitted[i:], admitted[i]+per)
		worst = max(worst, j)
	}
	return worst
}

// TestTakeUnderContentionLosesNothing: 64 callers that will not wait ask
// a limiter of 600 a minute (a burst of 60, then 540 a minute) for a turn
// every 20 ms. Take admits what one caller alone would get — the burst
// and the rate — and never more than 600 in a minute; so does Allow. Before
// Take, a caller that would not wait reserved and cancelled: that loses
// quota under contention, which this test shows too.
func TestTakeUnderContentionLosesNothing(t *testing.T) {
	ceiling := 60 + 540*3
	for _, c := range []struct {
		name string
		try  func(l *ratelimit.Limiter) bool
	}{
		{"Take", func(l *ratelimit.Limiter) bool { r := l.Take(0); return r.OK() && !r.Retry() }},
		{"Allow", func(l *ratelimit.Limiter) bool { return l.Allow(0) }},
		{"TakeWithin", func(l *ratelimit.Limiter) bool {
			r := l.TakeWithin(0, 5*time.Millisecond)
			if r.Retry() || !r.OK() {
				return false
			}
			time.Sleep(r.Delay())
			return true
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 600})
				admitted := contend(64, 20*time.Millisecond, 3*time.Minute, func() bool { return c.try(l) })
				t.Logf("%d admitted of %d, worst minute %d", len(admitted), ceiling, worstWindow(admitted, time.Minute))
				assert.GreaterOrEqual(t, len(admitted), ceiling-1, "all the quota")
				assert.LessOrEqual(t, len(admitted), ceiling+1)
				assert.LessOrEqual(t, worstWindow(admitted, time.Minute), 600)
				assert.Zero(t, l.Stats().Cancelled, "nothing to give back")
			})
		})
	}
	// For comparison (logged only: how much is lost depends on how the
	// machine's cores interleave the callers).
	t.Run("Reserve and Cancel", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 600})
			admitted := contend(64, 20*time.Millisecond, 3*time.Minute, func() bool {
				r := l.Reserve(0)
				if r.Delay() > 0 {
					r.Cancel()
					return false
				}
				return true
			})
			t.Logf("%d admitted of %d", len(admitted), ceiling)
			assert.LessOrEqual(t, worstWindow(admitted, time.Minute), 600)
		})
	})
}

// TestTwoLimitsUnderContentionLoseNothing: a limiter with a request and a
// token limit takes the request's turn first; when the tokens refuse, the
// request's turn comes back whole even though other callers took turns
// behind it. Under contention the token limit (30 calls of 100 tokens at
// once, then 270 a minute) is what admits, and the request limit loses
// nothing to the refusals.
func TestTwoLimitsUnderContentionLoseNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 600, Tokens: 30_000, TokenBurst: 3_000})
		admitted := contend(64, 20*time.Millisecond, 3*time.Minute, func() bool { return l.Allow(100) })
		ceiling := 30 + 270*3
		t.Logf("%d admitted of %d; requests at hand %.1f", len(admitted), ceiling, l.Stats().Requests)
		assert.GreaterOrEqual(t, len(admitted), ceiling-1)
		assert.LessOrEqual(t, len(admitted), ceiling+1)
		assert.LessOrEqual(t, worstWindow(admitted, time.Minute), 300, "the token quota: 300 calls of 100 a minute")
		time.Sleep(time.Second)
		// 600 a minute is 10 a second, but one second's rest must not
		// matter: the request bucket was never drained by the refusals.
		assert.Greater(t, l.Stats().Requests, 50.0, "the request limit lost nothing")
	})
}

// TestWaitUnderContentionLosesNothing: 64 callers that would wait 50 ms
// at most call Wait every 20 ms. Those whose turn comes later are refused
// without taking it, so the limiter admits all its quota. Before, each of
// them reserved a turn and cancelled it, and the quota was lost.
func TestWaitUnderContentionLosesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 600})
		admitted := contend(64, 20*time.Millisecond, 3*time.Minute, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			return l.Wait(ctx, 0) == nil
		})
		ceiling := 60 + 540*3
		t.Logf("%d admitted of %d, worst minute %d", len(admitted), ceiling, worstWindow(admitted, time.Minute))
		assert.GreaterOrEqual(t, len(admitted), ceiling*99/100)
		assert.LessOrEqual(t, worstWindow(admitted, time.Minute), 600)
	})
}

// TestTakeTakesNothingWhenItRefuses: Take admits at once or takes
// nothing and says when to come back; TakeWithin takes a turn that comes
// within its wait, to act after Delay.
func TestTakeTakesNothingWhenItRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 61, Burst: 1, Tokens: 1000, TokenBurst: 100}) // one a second
		r := l.Take(10)
		require.True(t, r.OK())
		assert.False(t, r.Retry())
		assert.Zero(t, r.Delay())
		r = l.Take(10)
		assert.True(t, r.OK())
		assert.True(t, r.Retry(), "nothing held")
		assert.Equal(t, time.Second, r.Delay())
		assert.InDelta(t, 0, l.Stats().Requests, 1e-9, "the refusal took nothing")
		assert.InDelta(t, 90, l.Stats().Tokens, 1e-3)
		assert.False(t, l.Take(101).OK(), "above the burst: never")
		r = l.TakeWithin(10, 500*time.Millisecond)
		assert.True(t, r.Retry(), "a second is beyond half a second")
		r = l.TakeWithin(10, time.Second)
		require.True(t, r.OK())
		assert.False(t, r.Retry())
		assert.Equal(t, time.Second, r.Delay(), "held, to act in a second")
		assert.InDelta(t, -1, l.Stats().Requests, 1e-9)
		r.Cancel()
		assert.InDelta(t, 0, l.Stats().Requests, 1e-9, "given back before its time to act")
		assert.Equal(t, uint64(3), l.Stats().Refused)
		l.Throttle(10 * time.Second)
		r = l.TakeWithin(0, 5*time.Second)
		assert.True(t, r.Retry(), "a 429's hold is beyond the wait")
		assert.Equal(t, 10*time.Second, r.Delay())
	})
}

// TestCancelGivesATurnTakenAtOnceBackWhole: a call admitted at once and
// not made gets its turn back whole, even after another call was admitted
// behind it; a turn a later reservation was scheduled on does not come
// back, so that reservation keeps its time and no window holds more than
// the quota.
func TestCancelGivesATurnTakenAtOnceBackWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 63, Burst: 3}) // one a second after a burst of 3
		first := l.Reserve(0)
		require.Zero(t, first.Delay())
		require.True(t, l.Allow(0))
		first.Cancel()
		assert.InDelta(t, 2, l.Stats().Requests, 1e-9, "back whole, though a call was admitted behind it")
		time.Sleep(time.Minute)

		a := l.Reserve(0)
		require.Zero(t, a.Delay())
		require.True(t, l.Allow(0))
		require.True(t, l.Allow(0))
		later := l.Reserve(0)
		require.Equal(t, time.Second, later.Delay())
		a.Cancel()
		assert.False(t, l.Allow(0), "the turn the later reservation counts on stays taken")
		time.Sleep(time.Second)
		// The later reservation acts now, its turn counted: had the
		// cancelled turn come back, a fourth call would act beside the
		// burst's three within a second.
		assert.False(t, l.Allow(0), "the later reservation's turn is not given to another call")
		time.Sleep(time.Second)
		assert.True(t, l.Allow(0))
	})
}

// TestFleetRefusalGivesTheLocalTurnBackWhole: when the fleet refuses a
// call the local limiter admitted, the local turn comes back whole; when
// another limiter (a chain's tier) refuses a call the fleet admitted, the
// fleet gets its turn back through Refunder.
func TestFleetRefusalGivesTheLocalTurnBackWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &refundingStore{}
		l := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 20, Burst: 2, Tokens: 1000, Store: s})
		r := l.Reserve(10)
		require.False(t, r.Retry())
		require.Zero(t, r.Delay())
		s.refuse = true
		require.True(t, l.Reserve(10).Retry())
		assert.InDelta(t, 1, l.Stats().Requests, 1e-9, "the refused call's local turn is back")
		r.Cancel()
		assert.Equal(t, []int64{10}, s.refunds, "the fleet got its turn back")
		assert.Zero(t, s.adjusted, "through Refund, not Adjust")
		assert.InDelta(t, 2, l.Stats().Requests, 1e-9)
	})
}

type refundingStore struct {
	stubStore
	refunds []int64
}

func (s *refundingStore) Join(string, ratelimit.Quota) (ratelimit.Member, error) { return s, nil }
func (s *refundingStore) Refund(n int64)                                         { s.refunds = append(s.refunds, n) }

// TestADelayedCallTakesItsFleetTurn: a call the local limiter admits to
// act after a wait takes its fleet turn when it is admitted; before, only
// calls admitted at once asked the fleet, so a process that waited for
// its local turns (Wait, a stage's LimitWait) spent the fleet's quota
// without it knowing. When the fleet refuses, the local turn goes back
// and the refusal says when the later of the two turns comes.
func TestADelayedCallTakesItsFleetTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &countingStore{}
		l := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 61, Burst: 1, Store: s}) // one a second
		require.True(t, l.Allow(0))
		r := l.Reserve(0)
		require.Equal(t, time.Second, r.Delay())
		assert.Equal(t, 2, s.takes, "the delayed call asked the fleet")
		r.Cancel()
		assert.Equal(t, 1, s.refunds, "and gives its fleet turn back when cancelled")
		s.refuse = true
		r = l.Reserve(0)
		assert.True(t, r.Retry())
		assert.Equal(t, 3*time.Second, r.Delay(), "the fleet's turn, later than the local one")
		assert.InDelta(t, 0, l.Stats().Requests, 1e-9, "the local turn went back")
		s.refuse = false
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		require.NoError(t, l.Wait(ctx, 0))
		assert.Equal(t, time.Second, time.Since(start))
		assert.Equal(t, 4, s.takes)
	})
}

// countingStore is a fleet that counts its takes and refunds, and refuses
// for 3 s when told to.
type countingStore struct {
	refuse         bool
	takes, refunds int
}

func (s *countingStore) Join(string, ratelimit.Quota) (ratelimit.Member, error) { return s, nil }
func (s *countingStore) Take(int64) (bool, time.Duration) {
	s.takes++
	if s.refuse {
		return false, 3 * time.Second
	}
	return true, 0
}
func (s *countingStore) Adjust(int64)       {}
func (s *countingStore) Hold(time.Duration) {}
func (s *countingStore) Leave()             {}
func (s *countingStore) Refund(int64)       { s.refunds++ }

// TestMixedCallersNeverExceedTheQuota: 64 callers mix every way of asking
// — Take, Allow, TakeWithin and waiting, Reserve and waiting, Reserve and
// cancelling, taking and then giving the turn back (as a chain does when a
// later limiter refuses) — on a limiter with a request and a token limit.
// Counting only the calls made, at the time they are made, no window of a
// minute holds more than the quota of either limit. Without the callers
// that reserve and cancel (which lose quota, as x/time/rate's do), the
// quota is also used. (A turn given back while a waiting reservation
// counts on it is rare in this mix: TestCancelGivesATurnTakenAtOnceBackWhole
// is the test that fails if such a turn comes back.)
func TestMixedCallersNeverExceedTheQuota(t *testing.T) {
	for _, c := range []struct {
		name   string
		ways   uint64
		useful bool
	}{{"every way", 6, false}, {"without reserve and cancel", 4, true}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				made, tokens, l := mixedCallers(t, c.ways)
				idx := make([]int, len(made))
				for i := range idx {
					idx[i] = i
				}
				slices.SortFunc(idx, func(a, b int) int { return int(made[a] - made[b]) })
				worstCalls, worstTokens := 0, int64(0)
				for i := range idx {
					calls, toks := 0, int64(0)
					for j := i; j < len(idx) && made[idx[j]]-made[idx[i]] < time.Minute; j++ {
						calls++
						toks += tokens[idx[j]]
					}
					worstCalls, worstTokens = max(worstCalls, calls), max(worstTokens, toks)
				}
				t.Logf("%d calls made; worst minute %d calls (quota 120), %d tokens (quota 12,000); %+v", len(made), worstCalls, worstTokens, l.Stats())
				assert.LessOrEqual(t, worstCalls, 120)
				assert.LessOrEqual(t, worstTokens, int64(12_000))
				assert.Positive(t, len(made))
				if c.useful {
					assert.Greater(t, worstCalls, 100, "and the quota is used")
				}
			})
		})
	}
}

// mixedCallers runs 64 callers for three minutes, each asking in one of
// the first ways ways at random, and returns when each call was made and
// with how many tokens.
func mixedCallers(t *testing.T, ways uint64) ([]time.Duration, []int64, *ratelimit.Limiter) {
	l := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 120, Burst: 12, Tokens: 12_000, TokenBurst: 1_200})
	start := time.Now()
	var mu sync.Mutex
	var made []time.Duration
	var tokens []int64
	call := func(n int64) {
		mu.Lock()
		made = append(made, time.Since(start))
		tokens = append(tokens, n)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			rng := uint64(i)*0x9e3779b97f4a7c15 + 1
			next := func(n uint64) uint64 {
				rng ^= rng << 13
				rng ^= rng >> 7
				rng ^= rng << 17
				return rng % n
			}
			for time.Since(start) < 3*time.Minute {
				n := int64(next(150))
				switch next(ways) {
				case 0:
					if r := l.Take(n); r.OK() && !r.Retry() {
						call(n)
					}
				case 1:
					if l.Allow(n) {
						call(n)
					}
				case 2:
					if r := l.TakeWithin(n, time.Duration(next(3000))*time.Millisecond); r.OK() && !r.Retry() {
						time.Sleep(r.Delay())
						call(n)
					}
				case 3:
					if r := l.Take(n); r.OK() && !r.Retry() {
						// A later limiter refused, at once or a moment later.
						time.Sleep(time.Duration(next(3)) * time.Millisecond)
						r.Cancel()
					}
				case 4:
					if r := l.Reserve(n); r.OK() {
						if r.Delay() > 2*time.Second {
							r.Cancel()
						} else {
							time.Sleep(r.Delay())
							call(n)
						}
					}
				case 5:
					if r := l.Reserve(n); r.OK() {
						time.Sleep(time.Duration(next(uint64(r.Delay()/time.Millisecond)+1)) * time.Millisecond)
						r.Cancel() // gave up while waiting
					}
				}
				time.Sleep(time.Duration(next(40)) * time.Millisecond)
			}
		})
	}
	wg.Wait()
	return made, tokens, l
}
