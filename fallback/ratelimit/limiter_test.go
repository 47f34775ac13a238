package ratelimit_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback/ratelimit"
)

func newLimiter(t *testing.T, cfg ratelimit.Config) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(cfg)
	require.NoError(t, err)
	return l
}

// TestNoWindowHoldsMoreThanRequests: callers that take every call the
// limiter admits, as fast as it admits them, never get more than Requests
// calls into any window of Per — the promise that keeps a sliding-minute
// upstream quota from answering 429.
func TestNoWindowHoldsMoreThanRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 60})
		start := time.Now()
		var admitted []time.Duration
		for time.Since(start) < 5*time.Minute {
			if l.Allow(0) {
				admitted = append(admitted, time.Since(start))
				continue
			}
			time.Sleep(10 * time.Millisecond)
		}
		worst := 0
		for i := range admitted {
			n := 0
			for j := i; j < len(admitted) && admitted[j]-admitted[i] < time.Minute; j++ {
				n++
			}
			worst = max(worst, n)
		}
		assert.LessOrEqual(t, worst, 60, "never more than the quota in a minute")
		assert.GreaterOrEqual(t, worst, 59, "and almost all of it")
		assert.InDelta(t, 6+54*5, len(admitted), 2, "a burst of 6, then 54 a minute")
	})
}

// TestTokensAreEstimatedThenCorrected: a call is admitted on its estimate;
// Adjust takes what it really used beyond it (the limiter goes into debt
// that later calls wait out), or gives back what it did not use.
func TestTokensAreEstimatedThenCorrected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, ratelimit.Config{Name: "pro", Tokens: 1000, TokenBurst: 400})
		require.True(t, l.Allow(300))
		assert.InDelta(t, 100, l.Stats().Tokens, 1e-6)
		l.Adjust(-200) // it used 100
		assert.InDelta(t, 300, l.Stats().Tokens, 1e-6)
		l.Adjust(500) // it used 600 more
		assert.InDelta(t, -200, l.Stats().Tokens, 1e-6)
		assert.False(t, l.Allow(1), "in debt")
		r := l.Reserve(100)
		require.True(t, r.OK())
		// 300 tokens at 600 a minute: 30 s.
		assert.Equal(t, 30*time.Second, r.Delay())
		assert.False(t, l.Reserve(401).OK(), "above the burst: never")
	})
}

// TestThrottleHoldsThenLowersTheRate: a 429 asking for 10 s holds every
// call for 10 s and halves the rate; 429s during the hold do not halve it
// again; calls that pass bring it back.
func TestThrottleHoldsThenLowersTheRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 610, Burst: 10})
		var events []ratelimit.Event
		defer l.Observe(func(e ratelimit.Event) { events = append(events, e) })()
		l.Throttle(10 * time.Second)
		l.Throttle(5 * time.Second)
		assert.False(t, l.Allow(0), "held")
		r := l.Reserve(0)
		assert.Equal(t, 10*time.Second, r.Delay())
		r.Cancel()
		assert.Equal(t, 2.0, l.Stats().Slowdown)
		assert.Equal(t, uint64(1), l.Stats().Throttles, "the second 429 came during the hold")
		time.Sleep(10 * time.Second)
		// 600 a minute halved: one call per 200 ms.
		require.True(t, l.Allow(0))
		assert.False(t, l.Allow(0))
		time.Sleep(199 * time.Millisecond)
		assert.False(t, l.Allow(0))
		time.Sleep(time.Millisecond)
		assert.True(t, l.Allow(0))
		for range 40 {
			l.Passed()
		}
		assert.Equal(t, 1.0, l.Stats().Slowdown, "back to the configured rate")
		kinds := []ratelimit.EventKind{}
		for _, e := range events {
			kinds = append(kinds, e.Kind)
		}
		assert.Contains(t, kinds, ratelimit.Throttled)
		assert.Contains(t, kinds, ratelimit.Recovered)
		assert.Equal(t, "pro", events[0].Limiter)
	})
}

// TestMinShareBoundsTheLowering: repeated 429s halve the rate at most down
// to MinShare.
func TestMinShareBoundsTheLowering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 100, MinShare: 0.25})
		for range 5 {
			l.Throttle(time.Second)
			time.Sleep(2 * time.Second)
		}
		assert.Equal(t, 4.0, l.Stats().Slowdown)
		still := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 100, MinShare: 1})
		still.Throttle(time.Second)
		assert.Equal(t, 1.0, still.Stats().Slowdown, "MinShare 1: holds only")
	})
}

// TestWaitNeverOutlastsTheDeadline: Wait waits for its turn when it comes
// before ctx's deadline, and otherwise refuses at once, giving its turn
// back.
func TestWaitNeverOutlastsTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 61, Burst: 1})
		require.NoError(t, l.Wait(context.Background(), 0))
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := l.Wait(ctx, 0)
		var le *ratelimit.LimitedError
		require.ErrorAs(t, err, &le)
		assert.ErrorIs(t, err, ratelimit.ErrLimited)
		assert.Equal(t, time.Second, le.RetryIn)
		assert.Zero(t, time.Since(start), "refused without waiting")
		assert.Equal(t, classify.Rejected, classify.Classify(err).Class)
		ctx2, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel2()
		require.NoError(t, l.Wait(ctx2, 0))
		assert.Equal(t, time.Second, time.Since(start), "its turn, a second later")
		out, err := ratelimit.Do(ctx2, l, func(context.Context) (string, error) { return "ok", nil })
		require.NoError(t, err)
		assert.Equal(t, "ok", out)
		assert.Equal(t, 2*time.Second, time.Since(start))
	})
}

// TestWaitTakesATurnAtTheDeadline: a turn due at ctx's deadline itself is
// within it, so Wait takes it. The turn's timer and the deadline fire at
// the same instant, and the select in Wait sees them in either order; the
// rounds make both orders occur (each round is its own limiter and
// context), and every round must take its turn.
func TestWaitTakesATurnAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for round := range 200 {
			l := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 61, Burst: 1})
			require.True(t, l.Allow(0))
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			start := time.Now()
			err := l.Wait(ctx, 0)
			cancel()
			require.NoError(t, err, "round %d: the turn a second later, at the deadline, is refused", round)
			require.Equal(t, time.Second, time.Since(start), "round %d", round)
			assert.False(t, l.Allow(0), "round %d: the turn was taken, not given back", round)
		}
	})
}

// TestTurnAtTheDeadlineWhenTheDeadlineIsSeenFirst is the order the rounds
// above rarely meet (the deadline's cancellation reaching Wait before its
// timer does), decided directly: once the deadline has passed, a turn due
// at it or before it is the caller's; a turn still to come, or a caller
// who cancelled, gives it back.
func TestTurnAtTheDeadlineWhenTheDeadlineIsSeenFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		due := time.Now().Add(time.Second)
		ctx, cancel := context.WithDeadline(context.Background(), due)
		defer cancel()
		<-ctx.Done()
		assert.True(t, ratelimit.TurnCame(ctx, due), "due at the deadline")
		assert.True(t, ratelimit.TurnCame(ctx, due.Add(-time.Millisecond)), "due before it")
		assert.False(t, ratelimit.TurnCame(ctx, due.Add(time.Nanosecond)), "due after it")

		canceled, cancelNow := context.WithCancel(context.Background())
		time.Sleep(time.Second)
		cancelNow()
		assert.False(t, ratelimit.TurnCame(canceled, due), "the caller gave up")
	})
}

// TestWaitEndsWithItsContext: a caller that gives up while waiting gets
// its context's error and its turn goes back.
func TestWaitEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 61, Burst: 1})
		require.True(t, l.Allow(0))
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(100 * time.Millisecond); cancel() }()
		assert.ErrorIs(t, l.Wait(ctx, 0), context.Canceled)
		time.Sleep(900 * time.Millisecond)
		assert.True(t, l.Allow(0), "the cancelled turn was given back")
	})
}

func TestInvalidConfigNamesEveryField(t *testing.T) {
	_, err := ratelimit.New(ratelimit.Config{Name: "x", Requests: -1, Tokens: 10, TokenBurst: 10, Per: -time.Second, MinShare: 2})
	require.Error(t, err)
	for _, f := range []string{"Per", "Requests", "TokenBurst", "MinShare"} {
		assert.Contains(t, err.Error(), f)
	}
	_, err = ratelimit.New(ratelimit.Config{Name: "x"})
	assert.ErrorContains(t, err, "Requests or Tokens")
	_, err = ratelimit.New(ratelimit.Config{Name: "x", Requests: 5, Burst: 5})
	assert.ErrorContains(t, err, "Burst")
	l := newLimiter(t, ratelimit.Config{Name: "x", Requests: 1})
	assert.Equal(t, 1, l.Config().Burst)
	assert.Equal(t, time.Minute, l.Config().Per)
}

// TestGroupHidesKeys: members of a group are named by a hash of their key,
// have their own quota, and the overflow member is shared.
func TestGroupHidesKeys(t *testing.T) {
	g, err := ratelimit.NewGroup(ratelimit.Config{Name: "tenant", Requests: 20, Burst: 2}, 2)
	require.NoError(t, err)
	a, b := g.Get("acme-corp"), g.Get("globex")
	assert.NotContains(t, a.Name(), "acme")
	assert.Regexp(t, `^tenant/#[0-9a-f]{12}$`, a.Name())
	assert.True(t, a.Allow(0))
	assert.True(t, a.Allow(0))
	assert.False(t, a.Allow(0), "acme spent its burst")
	assert.True(t, b.Allow(0), "globex has its own")
	assert.Same(t, g.Get("third"), g.Get("fourth"), "beyond maxKeys: the overflow limiter")
	assert.Equal(t, "tenant/_overflow", g.Get("third").Name())
	n := 0
	g.Each(func(string, *ratelimit.Limiter) { n++ })
	assert.Equal(t, 3, n)
}

// TestAdmittingAllocatesNothing: Reserve, Take, TakeWithin and Allow on
// the success path allocate nothing, and neither does a refusal or a
// turn given back.
func TestAdmittingAllocatesNothing(t *testing.T) {
	l := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 1 << 30, Tokens: 1 << 40})
	assert.Zero(t, testing.AllocsPerRun(1000, func() {
		r := l.Reserve(100)
		if r.Delay() != 0 {
			r.Cancel()
		}
		l.Passed()
		l.Allow(10)
		l.Take(10).Cancel()
		l.TakeWithin(10, time.Second)
	}))
	tight := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 2, Burst: 1})
	assert.Zero(t, testing.AllocsPerRun(1000, func() {
		if r := tight.Take(0); !r.Retry() {
			r.Cancel()
		}
	}))
}

// stubStore is a fleet that refuses when told to, and records corrections.
type stubStore struct {
	refuse   bool
	adjusted int64
	held     time.Duration
	left     bool
	err      error
}

func (s *stubStore) Join(string, ratelimit.Quota) (ratelimit.Member, error) { return s, s.err }
func (s *stubStore) Take(int64) (bool, time.Duration) {
	if s.refuse {
		return false, 3 * time.Second
	}
	return true, 0
}
func (s *stubStore) Adjust(n int64)       { s.adjusted += n }
func (s *stubStore) Hold(d time.Duration) { s.held = d }
func (s *stubStore) Leave()               { s.left = true }

// TestStoreIsAskedAfterTheLocalLimit: the fleet is asked only for calls
// the local limiter admits now; its refusal holds nothing locally and
// says when to come back; corrections and 429 holds reach it.
func TestStoreIsAskedAfterTheLocalLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &stubStore{refuse: true}
		l := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 20, Burst: 2, Tokens: 1000, Store: s})
		r := l.Reserve(10)
		assert.True(t, r.OK())
		assert.True(t, r.Retry())
		assert.Equal(t, 3*time.Second, r.Delay())
		assert.InDelta(t, 2, l.Stats().Requests, 1e-9, "nothing held locally")
		assert.False(t, l.Allow(0))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		assert.ErrorIs(t, l.Wait(ctx, 0), ratelimit.ErrLimited)
		s.refuse = false
		require.True(t, l.Allow(100))
		l.Adjust(-40)
		assert.Equal(t, int64(-40), s.adjusted)
		l.Throttle(7 * time.Second)
		assert.Equal(t, 7*time.Second, s.held)
		l.Close()
		assert.True(t, s.left)
		_, err := ratelimit.New(ratelimit.Config{Name: "pro", Requests: 20, Store: &stubStore{err: errors.New("down")}})
		assert.ErrorContains(t, err, "down")
	})
}

func BenchmarkLimiter(b *testing.B) {
	for _, c := range []struct {
		name string
		cfg  ratelimit.Config
	}{
		{"requests", ratelimit.Config{Name: "b", Requests: 1 << 30}},
		{"requests+tokens", ratelimit.Config{Name: "b", Requests: 1 << 30, Tokens: 1 << 40}},
	} {
		l, err := ratelimit.New(c.cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if r := l.Reserve(100); r.Delay() != 0 {
					b.Fatal("delayed")
				}
			}
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if r := l.Reserve(100); r.Delay() != 0 {
						b.Fatal("delayed")
					}
				}
			})
		})
		b.Run(c.name+"/take/serial", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if r := l.Take(100); r.Retry() {
					b.Fatal("refused")
				}
			}
		})
		b.Run(c.name+"/take/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if r := l.Take(100); r.Retry() {
						b.Fatal("refused")
					}
				}
			})
		})
	}
}

// BenchmarkRefused is a caller that will not wait asking a limiter whose
// turn is not now: Take takes nothing, where Reserve and Cancel take a
// turn and give it back.
func BenchmarkRefused(b *testing.B) {
	for _, c := range []struct {
		name string
		try  func(l *ratelimit.Limiter)
	}{
		{"take", func(l *ratelimit.Limiter) { l.Take(0) }},
		{"reserve+cancel", func(l *ratelimit.Limiter) {
			if r := l.Reserve(0); r.Delay() > 0 {
				r.Cancel()
			}
		}},
	} {
		l, err := ratelimit.New(ratelimit.Config{Name: "b", Requests: 2, Burst: 1, Per: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		l.Allow(0)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.try(l)
			}
		})
	}
}

// BenchmarkXTimeRate is golang.org/x/time/rate's Limiter doing what
// BenchmarkLimiter/requests does, for comparison: ReserveN of one event.
func BenchmarkXTimeRate(b *testing.B) {
	l := rate.NewLimiter(rate.Limit(1<<30), 1<<20)
	b.Run("requests/serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if r := l.Reserve(); r.Delay() != 0 {
				b.Fatal("delayed")
			}
		}
	})
	b.Run("requests/parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if r := l.Reserve(); r.Delay() != 0 {
					b.Fatal("delayed")
				}
			}
		})
	})
}
