package breaker_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
)

// recorder collects transitions.
type recorder struct {
	mu  sync.Mutex
	trs []breaker.Transition
}

func (r *recorder) hook(t breaker.Transition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trs = append(r.trs, t)
}

func (r *recorder) steps() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.trs))
	for i, t := range r.trs {
		out[i] = fmt.Sprintf("%v->%v (%s)", t.From, t.To, t.Reason)
	}
	return out
}

func newBreaker(t *testing.T, cfg breaker.Config) (*breaker.Breaker, *recorder) {
	t.Helper()
	rec := &recorder{}
	if cfg.Name == "" {
		cfg.Name = "pro"
	}
	b, err := breaker.New(cfg)
	require.NoError(t, err)
	b.Observe(rec.hook)
	return b, rec
}

// peek returns the error Allow would return if the breaker is open, nil
// otherwise, taking no probe.
func peek(b *breaker.Breaker) error {
	if b.State() != breaker.Open {
		return nil
	}
	_, err := b.Allow()
	return err
}

func call(t *testing.T, b *breaker.Breaker, o breaker.Outcome) {
	t.Helper()
	tok, err := b.Allow()
	require.NoError(t, err)
	tok.Done(o)
}

func TestDefaults(t *testing.T) {
	b, err := breaker.New(breaker.Config{})
	require.NoError(t, err)
	cfg := b.Config()
	assert.Equal(t, breaker.DefaultConsecutiveFailures, cfg.ConsecutiveFailures)
	assert.Equal(t, breaker.DefaultCooldown, cfg.Cooldown)
	assert.Equal(t, breaker.DefaultCooldown, cfg.MaxCooldown)
	assert.Equal(t, breaker.DefaultHalfOpenProbes, cfg.HalfOpenProbes)
	assert.Equal(t, breaker.DefaultProbeSuccesses, cfg.ProbeSuccesses)
	assert.Equal(t, breaker.Closed, b.State())
}

func TestFullCycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, rec := newBreaker(t, breaker.Config{ConsecutiveFailures: 3, Cooldown: 10 * time.Second, ProbeSuccesses: 2, HalfOpenProbes: 2})
		start := time.Now()

		call(t, b, breaker.Failure)
		call(t, b, breaker.Failure)
		call(t, b, breaker.Success) // breaks the run
		call(t, b, breaker.Failure)
		call(t, b, breaker.Failure)
		assert.Equal(t, breaker.Closed, b.State())
		call(t, b, breaker.Failure)
		require.Equal(t, breaker.Open, b.State())

		_, err := b.Allow()
		require.ErrorIs(t, err, breaker.ErrOpen)
		var oe *breaker.OpenError
		require.ErrorAs(t, err, &oe)
		assert.Equal(t, start.Add(10*time.Second), oe.Until)
		assert.Equal(t, 10*time.Second, oe.RetryIn())
		v := classify.Classify(err)
		assert.Equal(t, classify.Rejected, v.Class)
		assert.Equal(t, 10*time.Second, v.RetryAfter)

		time.Sleep(10*time.Second - 1)
		assert.Equal(t, breaker.Open, b.State())
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		assert.Equal(t, breaker.HalfOpen, b.State(), "the timer moves open to half-open when the cooldown ends")

		p1, err := b.Allow()
		require.NoError(t, err)
		assert.True(t, p1.IsProbe())
		p2, err := b.Allow()
		require.NoError(t, err)
		_, err = b.Allow()
		require.ErrorIs(t, err, breaker.ErrOpen, "only two probes at once")
		require.ErrorAs(t, err, &oe)
		assert.True(t, oe.HalfOpen)

		p1.Done(breaker.Success)
		assert.Equal(t, breaker.HalfOpen, b.State(), "two successes are needed")
		p2.Done(breaker.Success)
		assert.Equal(t, breaker.Closed, b.State())

		assert.Equal(t, []string{
			"closed->open (consecutive failures)",
			"open->half_open (cooldown elapsed)",
			"half_open->closed (probe succeeded)",
		}, rec.steps())
		assert.Equal(t, uint64(3), breaker.Generation(b))
	})
}

func TestProbeFailureReopensWithGrowingCooldown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, rec := newBreaker(t, breaker.Config{ConsecutiveFailures: 1, Cooldown: time.Second, MaxCooldown: 5 * time.Second})
		call(t, b, breaker.Failure)
		var opens []time.Duration
		for range 5 {
			_, err := b.Allow()
			var oe *breaker.OpenError
			require.ErrorAs(t, err, &oe)
			opens = append(opens, oe.RetryIn())
			time.Sleep(oe.RetryIn())
			synctest.Wait()
			require.Equal(t, breaker.HalfOpen, b.State())
			call(t, b, breaker.Failure) // the probe fails
		}
		assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}, opens)

		// A close resets the growth.
		time.Sleep(5 * time.Second)
		synctest.Wait()
		call(t, b, breaker.Success)
		require.Equal(t, breaker.Closed, b.State())
		call(t, b, breaker.Failure)
		_, err := b.Allow()
		var oe *breaker.OpenError
		require.ErrorAs(t, err, &oe)
		assert.Equal(t, time.Second, oe.RetryIn())
		assert.Contains(t, rec.steps(), "half_open->open (probe failed)")
	})
}

func TestCooldownJitterStaysInRange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: 1, Cooldown: 10 * time.Second, CooldownJitter: 0.2})
		seen := map[time.Duration]bool{}
		for range 20 {
			call(t, b, breaker.Failure)
			_, err := b.Allow()
			var oe *breaker.OpenError
			require.ErrorAs(t, err, &oe)
			d := oe.RetryIn()
			assert.GreaterOrEqual(t, d, 8*time.Second)
			assert.LessOrEqual(t, d, 12*time.Second)
			seen[d] = true
			b.Reset()
		}
		assert.Greater(t, len(seen), 1, "jitter spreads the cooldowns")
	})
}

func TestIgnoredOutcomesDecideNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: 2, Cooldown: time.Second})
		call(t, b, breaker.Failure)
		call(t, b, breaker.Ignored) // neither breaks nor extends the run
		call(t, b, breaker.Failure)
		require.Equal(t, breaker.Open, b.State())

		time.Sleep(time.Second)
		synctest.Wait()
		require.Equal(t, breaker.HalfOpen, b.State())
		probe, err := b.Allow()
		require.NoError(t, err)
		probe.Done(breaker.Ignored)
		assert.Equal(t, breaker.HalfOpen, b.State(), "an ignored probe decides nothing")
		probe, err = b.Allow()
		require.NoError(t, err, "and frees its slot")
		probe.Done(breaker.Success)
		assert.Equal(t, breaker.Closed, b.State())
	})
}

func TestReportUsesClassTable(t *testing.T) {
	b, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: 1})
	for _, err := range []error{
		classify.Wrap(nil, classify.Verdict{Class: classify.InvalidRequest}),
		classify.Wrap(nil, classify.Verdict{Class: classify.Safety}),
		classify.Wrap(nil, classify.Verdict{Class: classify.InvalidOutput}),
		context.Canceled,
	} {
		tok, aerr := b.Allow()
		require.NoError(t, aerr)
		tok.Report(err)
		assert.Equal(t, breaker.Closed, b.State(), "%v must not count", err)
	}
	tok, _ := b.Allow()
	tok.Report(classify.Wrap(nil, classify.Verdict{Class: classify.Transient}))
	assert.Equal(t, breaker.Open, b.State())

	assert.Equal(t, breaker.Success, breaker.OutcomeOf(nil))
	assert.Equal(t, breaker.Failure, breaker.OutcomeOf(errors.New("boom")), "unknown errors count")
	assert.Equal(t, breaker.Ignored, breaker.OutcomeOf(classify.Wrap(errors.New("404 model gone"), classify.Verdict{Class: classify.Retired})))
}

// TestStaleResultsAreIgnored: a call admitted in an earlier state cannot
// change a later one.
func TestStaleResultsAreIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: 1, Cooldown: time.Second, HalfOpenProbes: 1})
		slowSuccess, err := b.Allow() // admitted while closed
		require.NoError(t, err)
		slowFailure, err := b.Allow()
		require.NoError(t, err)

		call(t, b, breaker.Failure)
		time.Sleep(time.Second)
		synctest.Wait()
		require.Equal(t, breaker.HalfOpen, b.State())
		probe, err := b.Allow()
		require.NoError(t, err)

		slowSuccess.Done(breaker.Success)
		assert.Equal(t, breaker.HalfOpen, b.State(), "a stale success must not close a half-open breaker")
		slowFailure.Done(breaker.Failure)
		assert.Equal(t, breaker.HalfOpen, b.State(), "a stale failure must not reopen it")
		_, err = b.Allow()
		assert.ErrorIs(t, err, breaker.ErrOpen, "stale results must not free probe slots")

		probe.Done(breaker.Success)
		assert.Equal(t, breaker.Closed, b.State())

		// A probe that ends after the breaker was reset is stale too.
		call(t, b, breaker.Failure)
		time.Sleep(time.Second)
		synctest.Wait()
		probe, err = b.Allow()
		require.NoError(t, err)
		b.Reset()
		probe.Done(breaker.Failure)
		assert.Equal(t, breaker.Closed, b.State())
	})
}

func TestFailureRatio(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, rec := newBreaker(t, breaker.Config{ConsecutiveFailures: -1, FailureRatio: 0.5, MinCalls: 10, Window: 10 * time.Second})
		for i := range 9 {
			o := breaker.Success
			if i%2 == 0 {
				o = breaker.Failure
			}
			call(t, b, o)
		}
		assert.Equal(t, breaker.Closed, b.State(), "fewer than MinCalls")
		call(t, b, breaker.Success) // 10 calls, 5 failures: at the threshold
		assert.Equal(t, breaker.Open, b.State())
		assert.Equal(t, []string{"closed->open (failure ratio)"}, rec.steps())
	})
}

// TestRatiosAreCheckedOnEveryOutcome: a window that reaches MinCalls with a
// ratio at its threshold trips on that call, whatever its outcome — a
// success that fills the window to MinCalls trips it too.
func TestRatiosAreCheckedOnEveryOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, rec := newBreaker(t, breaker.Config{ConsecutiveFailures: -1, FailureRatio: 0.5, MinCalls: 5, Window: time.Minute})
		for _, o := range []breaker.Outcome{breaker.Failure, breaker.Failure, breaker.Failure, breaker.Success} {
			call(t, b, o)
		}
		require.Equal(t, breaker.Closed, b.State(), "4 calls, fewer than MinCalls")
		call(t, b, breaker.Success)
		assert.Equal(t, breaker.Open, b.State(), "3 failures of 5 calls")
		assert.Equal(t, []string{"closed->open (failure ratio)"}, rec.steps())

		// The slow-call ratio too: a fast success that brings the window to
		// MinCalls trips it when enough calls were slow.
		b, rec = newBreaker(t, breaker.Config{ConsecutiveFailures: -1, SlowCallDuration: time.Second, SlowCallRatio: 0.5, MinCalls: 4})
		for range 2 {
			tok, err := b.Allow()
			require.NoError(t, err)
			time.Sleep(time.Second)
			tok.Done(breaker.Success)
		}
		call(t, b, breaker.Success)
		require.Equal(t, breaker.Closed, b.State())
		call(t, b, breaker.Success)
		assert.Equal(t, breaker.Open, b.State(), "2 slow calls of 4")
		assert.Equal(t, []string{"closed->open (slow calls)"}, rec.steps())
	})
}

// TestRatioTripsWhenOldSuccessesLeaveTheWindow: successes rolling out of the
// window can raise the ratio; the next outcome, a success included, sees it.
func TestRatioTripsWhenOldSuccessesLeaveTheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: -1, FailureRatio: 0.5, MinCalls: 4, Window: 10 * time.Second})
		for range 4 {
			call(t, b, breaker.Success)
		}
		time.Sleep(5 * time.Second)
		for range 3 {
			call(t, b, breaker.Failure)
		}
		require.Equal(t, breaker.Closed, b.State(), "3 failures of 7")
		time.Sleep(6 * time.Second) // the four successes leave the window
		call(t, b, breaker.Success)
		assert.Equal(t, breaker.Open, b.State(), "3 failures of 4")
	})
}

func TestFailureRatioWindowRolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: -1, FailureRatio: 0.5, MinCalls: 4, Window: 10 * time.Second})
		call(t, b, breaker.Failure)
		call(t, b, breaker.Failure)
		call(t, b, breaker.Failure)
		time.Sleep(11 * time.Second) // those failures leave the window
		call(t, b, breaker.Success)
		call(t, b, breaker.Success)
		call(t, b, breaker.Success)
		call(t, b, breaker.Failure)
		assert.Equal(t, breaker.Closed, b.State(), "1 failure in 4 calls in the window")
		call(t, b, breaker.Failure)
		call(t, b, breaker.Failure)
		assert.Equal(t, breaker.Open, b.State(), "3 of 6")
	})
}

func TestSlowCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, rec := newBreaker(t, breaker.Config{ConsecutiveFailures: -1, SlowCallDuration: time.Second, SlowCallRatio: 0.5, MinCalls: 4})
		slow := func() {
			tok, err := b.Allow()
			require.NoError(t, err)
			time.Sleep(time.Second)
			tok.Done(breaker.Success)
		}
		call(t, b, breaker.Success)
		call(t, b, breaker.Success)
		slow()
		assert.Equal(t, breaker.Closed, b.State())
		slow()
		assert.Equal(t, breaker.Open, b.State(), "2 slow of 4")
		assert.Equal(t, []string{"closed->open (slow calls)"}, rec.steps())
	})
}

func TestForceAndReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, rec := newBreaker(t, breaker.Config{ConsecutiveFailures: 1, Cooldown: time.Second})
		b.ForceOpen()
		_, err := b.Allow()
		var oe *breaker.OpenError
		require.ErrorAs(t, err, &oe)
		assert.Zero(t, oe.RetryIn(), "forced open has no planned end")
		time.Sleep(time.Hour)
		assert.Equal(t, breaker.Open, b.State(), "forced open stays open")

		b.ForceClosed()
		for range 10 {
			call(t, b, breaker.Failure)
		}
		assert.Equal(t, breaker.Closed, b.State(), "forced closed ignores failures")

		b.Reset()
		call(t, b, breaker.Failure)
		assert.Equal(t, breaker.Open, b.State())
		b.Reset()
		time.Sleep(2 * time.Second)
		assert.Equal(t, breaker.Closed, b.State(), "reset stops the cooldown timer")
		assert.Equal(t, []string{
			"closed->open (forced open)",
			"open->closed (forced closed)",
			"closed->closed (reset)", // from forced closed: a real change
			"closed->open (consecutive failures)",
			"open->closed (reset)",
		}, rec.steps())
	})
}

func TestHookRunsOutsideTheLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b *breaker.Breaker
		var reentered atomic.Bool
		var err error
		b, err = breaker.New(breaker.Config{ConsecutiveFailures: 1})
		require.NoError(t, err)
		b.Observe(func(tr breaker.Transition) {
			// Re-entering the breaker from the hook must not deadlock.
			assert.Equal(t, tr.To, b.State())
			if reentered.CompareAndSwap(false, true) {
				b.Reset()
			}
		})
		call(t, b, breaker.Failure)
		assert.Equal(t, breaker.Closed, b.State())
	})
}

func TestExecute(t *testing.T) {
	b, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: 1, HalfOpenProbes: 1})
	out, err := breaker.Do(context.Background(), b, func(context.Context) (string, error) { return "ok", nil })
	require.NoError(t, err)
	assert.Equal(t, "ok", out)

	_, err = breaker.Do(context.Background(), b, func(context.Context) (string, error) { return "", errors.New("boom") })
	require.EqualError(t, err, "boom")
	_, err = breaker.Do(context.Background(), b, func(context.Context) (string, error) { return "never", nil })
	require.ErrorIs(t, err, breaker.ErrOpen)
}

func TestExecutePanicFreesProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: 1, Cooldown: time.Second})
		call(t, b, breaker.Failure)
		time.Sleep(time.Second)
		synctest.Wait()
		require.Equal(t, breaker.HalfOpen, b.State())
		assert.Panics(t, func() {
			_, _ = breaker.Do(context.Background(), b, func(context.Context) (int, error) { panic("tier exploded") })
		})
		_, err := breaker.Do(context.Background(), b, func(context.Context) (int, error) { return 1, nil })
		require.NoError(t, err, "the panicking probe released its slot")
		assert.Equal(t, breaker.Closed, b.State())
	})
}

func TestInvalidConfig(t *testing.T) {
	_, err := breaker.New(breaker.Config{Name: "x", FailureRatio: 1.5, CooldownJitter: 1, HalfOpenProbes: -1, Cooldown: -time.Second})
	require.Error(t, err)
	for _, want := range []string{`breaker "x"`, "FailureRatio", "CooldownJitter", "HalfOpenProbes", "Cooldown must not be negative"} {
		assert.ErrorContains(t, err, want)
	}
	_, err = breaker.NewGroup(breaker.Config{}, 0)
	assert.ErrorContains(t, err, "maxKeys")
	_, err = breaker.NewGroup(breaker.Config{SlowCallRatio: -1}, 1)
	assert.ErrorContains(t, err, "SlowCallRatio")
}

func TestGroup(t *testing.T) {
	g, err := breaker.NewGroup(breaker.Config{Name: "gemini", ConsecutiveFailures: 1, KeysInNames: true}, 2)
	require.NoError(t, err)
	pro, flash := g.Get("pro"), g.Get("flash")
	assert.Same(t, pro, g.Get("pro"))
	assert.Equal(t, "gemini/pro", pro.Name())
	call(t, pro, breaker.Failure)
	assert.Equal(t, breaker.Open, pro.State())
	assert.Equal(t, breaker.Closed, flash.State())
	assert.Same(t, g.Get("a"), g.Get("b"), "keys past the limit share the overflow breaker")
	n := 0
	g.Each(func(string, *breaker.Breaker) { n++ })
	assert.Equal(t, 3, n)
}

// TestHalfOpenNeverExceedsProbes hammers a breaker with random outcomes and
// random slow calls across many transitions, and checks the probe limit
// from inside the calls.
func TestHalfOpenNeverExceedsProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const probes = 3
		b, rec := newBreaker(t, breaker.Config{ConsecutiveFailures: 3, Cooldown: 50 * time.Millisecond, HalfOpenProbes: probes, ProbeSuccesses: 2})
		var inProbe, peak, probesRun atomic.Int64
		var wg sync.WaitGroup
		for g := range 64 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(g), 7))
				for range 400 {
					tok, err := b.Allow()
					if err != nil {
						time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
						continue
					}
					if tok.IsProbe() {
						n := inProbe.Add(1)
						probesRun.Add(1)
						for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
						}
					}
					time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
					if tok.IsProbe() {
						inProbe.Add(-1)
					}
					tok.Done(breaker.Outcome(rng.IntN(3)))
				}
			})
		}
		wg.Wait()
		assert.LessOrEqual(t, peak.Load(), int64(probes))
		assert.Positive(t, probesRun.Load())
		assert.Greater(t, len(rec.steps()), 10, "the test must cross many transitions")
		b.Reset()
	})
}

func TestClosedPathAllocatesNothing(t *testing.T) {
	for _, cfg := range []breaker.Config{{}, {FailureRatio: 0.5}, {SlowCallDuration: time.Second}} {
		b, _ := newBreaker(t, cfg)
		allocs := testing.AllocsPerRun(1000, func() {
			tok, err := b.Allow()
			if err != nil {
				t.Fatal(err)
			}
			tok.Done(breaker.Success)
		})
		assert.Zero(t, allocs, "%+v", cfg)
	}
	b, _ := newBreaker(t, breaker.Config{})
	b.ForceOpen()
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := b.Allow(); err == nil {
			t.Fatal("expected open")
		}
	})
	assert.Zero(t, allocs)
}

func TestSubscribe(t *testing.T) {
	b, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: 1})
	var got []string
	unsubscribe := b.Observe(func(tr breaker.Transition) { got = append(got, tr.To.String()) })
	other := b.Observe(func(breaker.Transition) {})
	call(t, b, breaker.Failure)
	unsubscribe()
	other()
	b.Reset()
	assert.Equal(t, []string{"open"}, got)
}

func TestHugeCooldownsDoNotOverflow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: 1, Cooldown: time.Duration(1) << 61, MaxCooldown: time.Duration(1<<63 - 1), CooldownJitter: 0.5})
		for range 4 {
			call(t, b, breaker.Failure)
			_, err := b.Allow()
			var oe *breaker.OpenError
			require.ErrorAs(t, err, &oe)
			assert.Positive(t, oe.RetryIn())
			b.ForceOpen()
			b.Reset()
		}
	})
}

func TestGroupOnMember(t *testing.T) {
	g, err := breaker.NewGroup(breaker.Config{Name: "gemini"}, 4)
	require.NoError(t, err)
	g.Get("pro")
	var members []string
	g.Observe(func(key string, _ *breaker.Breaker) { members = append(members, key) })
	g.Get("flash")
	g.Get("flash")
	assert.ElementsMatch(t, []string{"pro", "_overflow", "flash"}, members)
}

func TestOpenErrorPeeksWithoutTakingAnything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: 1, Cooldown: time.Second})
		assert.NoError(t, peek(b))
		call(t, b, breaker.Failure)
		require.ErrorIs(t, peek(b), breaker.ErrOpen)
		time.Sleep(time.Second)
		synctest.Wait()
		assert.NoError(t, peek(b), "half-open: the peek takes no probe")
		probe, err := b.Allow()
		require.NoError(t, err, "the probe is still free")
		probe.Done(breaker.Success)
	})
}

func TestTransitionSaysWhenForced(t *testing.T) {
	var forced []bool
	b, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: 1})
	b.Observe(func(tr breaker.Transition) { forced = append(forced, tr.Forced) })
	b.ForceOpen()
	b.ForceClosed()
	b.Reset()
	call(t, b, breaker.Failure)
	assert.Equal(t, []bool{true, true, false, false}, forced)
}

// TestRepeatedForcingIsNoTransition: forcing a breaker into the state it is
// already forced into changes nothing — no transition for hooks and metrics
// to count, no new generation — while forcing a tripped breaker open, or a
// normal closed one closed, is a real change (the cooldown stops; outcomes
// stop counting).
func TestRepeatedForcingIsNoTransition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, rec := newBreaker(t, breaker.Config{ConsecutiveFailures: 1, Cooldown: time.Second})
		b.ForceOpen()
		gen := breaker.Generation(b)
		b.ForceOpen()
		b.ForceOpen()
		assert.Equal(t, gen, breaker.Generation(b))
		b.ForceClosed()
		gen = breaker.Generation(b)
		b.ForceClosed()
		assert.Equal(t, gen, breaker.Generation(b))
		assert.Equal(t, []string{"closed->open (forced open)", "open->closed (forced closed)"}, rec.steps())

		b.Reset()
		call(t, b, breaker.Failure)
		b.ForceOpen() // tripped → forced: the cooldown no longer ends it
		time.Sleep(2 * time.Second)
		synctest.Wait()
		assert.Equal(t, breaker.Open, b.State())
		assert.Equal(t, []string{
			"closed->open (forced open)", "open->closed (forced closed)", "closed->closed (reset)",
			"closed->open (consecutive failures)", "open->open (forced open)",
		}, rec.steps())
	})
}

// halfOpen trips b with its consecutive failures and waits out the
// cooldown. Call it inside a synctest bubble.
func halfOpen(t *testing.T, b *breaker.Breaker) {
	t.Helper()
	for b.State() == breaker.Closed {
		call(t, b, breaker.Failure)
	}
	var oe *breaker.OpenError
	_, err := b.Allow()
	require.ErrorAs(t, err, &oe)
	time.Sleep(oe.RetryIn())
	synctest.Wait()
	require.Equal(t, breaker.HalfOpen, b.State())
}

// TestProbeLimitHoldsAcrossHalfOpenPeriods: a probe still running from an
// earlier half-open period keeps its slot in the next one, until it
// reports; its late report decides nothing but frees the slot.
func TestProbeLimitHoldsAcrossHalfOpenPeriods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, rec := newBreaker(t, breaker.Config{ConsecutiveFailures: 1, Cooldown: time.Second, HalfOpenProbes: 2})
		halfOpen(t, b)
		slow, err := b.Allow()
		require.NoError(t, err)
		failing, err := b.Allow()
		require.NoError(t, err)
		failing.Done(breaker.Failure)
		require.Equal(t, breaker.Open, b.State())

		halfOpen(t, b)
		p, err := b.Allow()
		require.NoError(t, err, "one slot is free")
		_, err = b.Allow()
		require.ErrorIs(t, err, breaker.ErrOpen, "the slow probe of the last period holds the other")

		assert.True(t, slow.Stale())
		slow.Done(breaker.Success)
		assert.Equal(t, breaker.HalfOpen, b.State(), "a stale probe decides nothing")
		q, err := b.Allow()
		require.NoError(t, err, "but its report frees its slot")
		p.Done(breaker.Success)
		q.Done(breaker.Ignored)
		assert.Equal(t, breaker.Closed, b.State())
		assert.Equal(t, "half_open->closed (probe succeeded)", rec.steps()[len(rec.steps())-1])
	})
}

// TestUnreportedProbeKeepsItsSlot: a probe whose token is never reported
// keeps its slot through Reset and later trips, so the limit counts the
// call that may still be running.
func TestUnreportedProbeKeepsItsSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: 1, Cooldown: time.Second, HalfOpenProbes: 1})
		halfOpen(t, b)
		abandoned, err := b.Allow()
		require.NoError(t, err)
		b.Reset()
		halfOpen(t, b)
		_, err = b.Allow()
		require.ErrorIs(t, err, breaker.ErrOpen, "the abandoned probe still holds the only slot")
		abandoned.Done(breaker.Failure)
		assert.Equal(t, breaker.HalfOpen, b.State(), "its late failure decides nothing")
		probe, err := b.Allow()
		require.NoError(t, err)
		probe.Done(breaker.Success)
		assert.Equal(t, breaker.Closed, b.State())
	})
}

// TestUnreportedProbeIsWrittenOff: a probe that has not reported
// MaxHalfOpenWait after it was admitted is written off: the breaker
// reopens as for a failed probe, and the probe's report, when it comes,
// neither decides anything nor frees a slot that is no longer its own.
func TestUnreportedProbeIsWrittenOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, rec := newBreaker(t, breaker.Config{ConsecutiveFailures: 1, Cooldown: time.Second, MaxCooldown: time.Minute, MaxHalfOpenWait: 10 * time.Second})
		halfOpen(t, b)
		lost, err := b.Allow()
		require.NoError(t, err)
		time.Sleep(10*time.Second - 1)
		synctest.Wait()
		require.Equal(t, breaker.HalfOpen, b.State())
		_, err = b.Allow()
		require.ErrorIs(t, err, breaker.ErrOpen)

		time.Sleep(time.Nanosecond)
		synctest.Wait()
		require.Equal(t, breaker.Open, b.State(), "written off after MaxHalfOpenWait")
		assert.Equal(t, "half_open->open (probe timed out)", rec.steps()[len(rec.steps())-1])
		var oe *breaker.OpenError
		require.ErrorAs(t, peek(b), &oe)
		assert.Equal(t, 2*time.Second, oe.RetryIn(), "a timed-out probe is a failed one: the cooldown grows")

		time.Sleep(2 * time.Second)
		synctest.Wait()
		probe, err := b.Allow()
		require.NoError(t, err, "the written-off probe's slot is free again")
		lost.Done(breaker.Success)
		assert.Equal(t, breaker.HalfOpen, b.State(), "the late report decides nothing")
		_, err = b.Allow()
		require.ErrorIs(t, err, breaker.ErrOpen, "and frees nothing: the slot is the new probe's")
		probe.Done(breaker.Success)
		assert.Equal(t, breaker.Closed, b.State())
	})
}

// TestProbeWaitIsPerProbe: the wait runs from each probe's admission, not
// from the start of the half-open period, so a probe admitted late keeps
// its full wait; a probe of an earlier period that times out is written
// off without deciding anything in this one.
func TestProbeWaitIsPerProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, rec := newBreaker(t, breaker.Config{ConsecutiveFailures: 1, Cooldown: time.Second, HalfOpenProbes: 2, MaxHalfOpenWait: 10 * time.Second})
		halfOpen(t, b)
		first, err := b.Allow()
		require.NoError(t, err)
		time.Sleep(8 * time.Second)
		first.Done(breaker.Ignored)
		late, err := b.Allow()
		require.NoError(t, err)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		require.Equal(t, breaker.HalfOpen, b.State(), "13s into the period, but the late probe is 5s old")
		time.Sleep(5 * time.Second)
		synctest.Wait()
		require.Equal(t, breaker.Open, b.State())

		// A probe left over from the previous period.
		steps := len(rec.steps())
		time.Sleep(2 * time.Second)
		synctest.Wait()
		require.Equal(t, breaker.HalfOpen, b.State())
		hung, err := b.Allow()
		require.NoError(t, err)
		failing, err := b.Allow()
		require.NoError(t, err)
		failing.Done(breaker.Failure)
		time.Sleep(4 * time.Second) // past the cooldown
		synctest.Wait()
		require.Equal(t, breaker.HalfOpen, b.State())
		_, err = b.Allow()
		require.NoError(t, err)
		_, err = b.Allow()
		require.ErrorIs(t, err, breaker.ErrOpen, "the hung probe holds a slot")
		time.Sleep(6 * time.Second) // the hung probe is 10s old
		synctest.Wait()
		assert.Equal(t, breaker.HalfOpen, b.State(), "a stale probe's time-out decides nothing")
		extra, err := b.Allow()
		require.NoError(t, err, "but its slot is free")
		extra.Done(breaker.Ignored)
		hung.Done(breaker.Failure)
		assert.Equal(t, breaker.HalfOpen, b.State())
		assert.Equal(t, []string{"open->half_open (cooldown elapsed)", "half_open->open (probe failed)", "open->half_open (cooldown elapsed)"}, rec.steps()[steps:])
		b.Reset()
		late.Done(breaker.Success) // written off long ago: nothing happens
		assert.Equal(t, breaker.Closed, b.State())
	})
}

// TestMaxHalfOpenWaitIsOnByDefault: without any setting, a lost probe is
// written off after DefaultMaxHalfOpenWait instead of leaving the breaker
// half-open, rejecting everything, for ever; a negative wait keeps the
// old behaviour.
func TestMaxHalfOpenWaitIsOnByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: 1, Cooldown: time.Second})
		assert.Equal(t, breaker.DefaultMaxHalfOpenWait, b.Config().MaxHalfOpenWait)
		halfOpen(t, b)
		_, err := b.Allow()
		require.NoError(t, err)
		time.Sleep(breaker.DefaultMaxHalfOpenWait)
		synctest.Wait()
		assert.Equal(t, breaker.Open, b.State())

		never, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: 1, Cooldown: time.Second, MaxHalfOpenWait: -1})
		halfOpen(t, never)
		_, err = never.Allow()
		require.NoError(t, err)
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		assert.Equal(t, breaker.HalfOpen, never.State())
		_, err = never.Allow()
		assert.ErrorIs(t, err, breaker.ErrOpen)
		never.Reset()
		b.Reset()
	})
}

// TestSlowProbes: with slow calls tracked, the half-open decision weighs
// them too — when ProbeSuccesses probes have succeeded, the breaker closes
// only if the share of slow ones is below SlowCallRatio; otherwise it
// reopens.
func TestSlowProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := breaker.Config{ConsecutiveFailures: 1, Cooldown: time.Second, SlowCallDuration: 4 * time.Second, SlowCallRatio: 0.5, HalfOpenProbes: 4, ProbeSuccesses: 4}
		probes := func(b *breaker.Breaker, slow int) {
			t.Helper()
			var toks []breaker.Token
			for range 4 {
				tok, err := b.Allow()
				require.NoError(t, err)
				toks = append(toks, tok)
			}
			for i, tok := range toks {
				if i == 4-slow {
					time.Sleep(5 * time.Second)
				}
				tok.Done(breaker.Success)
			}
		}
		b, rec := newBreaker(t, cfg)
		halfOpen(t, b)
		probes(b, 3)
		assert.Equal(t, breaker.Open, b.State(), "3 slow probes of 4")
		assert.Equal(t, "half_open->open (slow probes)", rec.steps()[len(rec.steps())-1])

		b, rec = newBreaker(t, cfg)
		halfOpen(t, b)
		probes(b, 1)
		assert.Equal(t, breaker.Closed, b.State(), "1 slow probe of 4")
		assert.Equal(t, "half_open->closed (probe succeeded)", rec.steps()[len(rec.steps())-1])

		cfg.HalfOpenProbes, cfg.ProbeSuccesses = 0, 0 // one probe decides
		b, _ = newBreaker(t, cfg)
		halfOpen(t, b)
		tok, err := b.Allow()
		require.NoError(t, err)
		time.Sleep(4 * time.Second)
		tok.Done(breaker.Success)
		assert.Equal(t, breaker.Open, b.State(), "one slow probe of one")
	})
}

// TestCounts: the snapshot follows the current state — the window's
// figures and the run of failures while closed, the refusals while open
// (counted from the state's start), the probes while half-open — and
// reading it allocates nothing.
func TestCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: 3, FailureRatio: 0.9, MinCalls: 10, SlowCallDuration: time.Second,
			Cooldown: time.Second, HalfOpenProbes: 2, ProbeSuccesses: 2})
		assert.Equal(t, breaker.Counts{State: breaker.Closed}, b.Counts())
		call(t, b, breaker.Success)
		call(t, b, breaker.Ignored)
		tok, err := b.Allow()
		require.NoError(t, err)
		time.Sleep(time.Second)
		tok.Done(breaker.Success) // slow
		call(t, b, breaker.Failure)
		call(t, b, breaker.Failure)
		assert.Equal(t, breaker.Counts{State: breaker.Closed, Calls: 4, Failures: 2, SlowCalls: 1, FailureRatio: 0.5, SlowCallRatio: 0.25, ConsecutiveFailures: 2}, b.Counts())

		call(t, b, breaker.Failure)
		require.Equal(t, breaker.Open, b.State())
		for range 3 {
			_, err := b.Allow()
			require.Error(t, err)
		}
		require.Error(t, peek(b))
		assert.Equal(t, breaker.Counts{State: breaker.Open, Generation: 1, Rejected: 4}, b.Counts())

		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, breaker.Counts{State: breaker.HalfOpen, Generation: 2}, b.Counts(), "refusals are counted per state")
		p1, err := b.Allow()
		require.NoError(t, err)
		p2, err := b.Allow()
		require.NoError(t, err)
		_, err = b.Allow()
		require.Error(t, err)
		p1.Done(breaker.Success)
		assert.Equal(t, breaker.Counts{State: breaker.HalfOpen, Generation: 2, Calls: 1, Rejected: 1, ProbesInFlight: 1}, b.Counts())
		assert.Zero(t, testing.AllocsPerRun(100, func() { _ = b.Counts() }))
		p2.Done(breaker.Success)
		assert.Equal(t, breaker.Counts{State: breaker.Closed, Generation: 3}, b.Counts())
	})
}

// TestGroupKeysStayOutOfSignals: a Group keyed by tenant names its members
// after the group and a hash of the key, so the key appears in no error,
// transition or name (and so in no log or metric fed from them); the Store
// still sees the full name (it keeps only a hash of it). WithKeysInNames
// shows the keys for groups keyed by public values such as models.
func TestGroupKeysStayOutOfSignals(t *testing.T) {
	const tenant = "TENANT-4242"
	var names []string
	store := &joinRecorder{}
	g, err := breaker.NewGroup(breaker.Config{Name: "pro", ConsecutiveFailures: 1, Store: store}, 8)
	require.NoError(t, err)
	g.Observe(func(_ string, m *breaker.Breaker) {
		m.Observe(func(tr breaker.Transition) { names = append(names, tr.Name) })
	})
	b := g.Get(tenant)
	assert.Equal(t, b, g.Get(tenant))
	call(t, b, breaker.Failure)
	_, aerr := b.Allow()
	require.ErrorIs(t, aerr, breaker.ErrOpen)
	var oe *breaker.OpenError
	require.ErrorAs(t, aerr, &oe)
	for _, s := range []string{aerr.Error(), oe.Name, b.Name(), names[0]} {
		assert.NotContains(t, s, tenant)
		assert.Contains(t, s, "pro/#")
	}
	assert.Equal(t, "pro/#"+sha256Prefix(tenant), b.Name(), "a short stable hash")
	assert.Equal(t, "pro/"+tenant, b.Config().Name, "the configuration keeps the key")
	assert.Contains(t, store.names, "pro/"+tenant, "and so does the store's Join")
	g.Each(func(key string, m *breaker.Breaker) {
		if key == "_overflow" {
			assert.Equal(t, "pro/"+"_overflow", m.Name(), "the overflow member is no secret")
		}
	})

	shown, err := breaker.NewGroup(breaker.Config{Name: "gemini", KeysInNames: true}, 8)
	require.NoError(t, err)
	assert.Equal(t, "gemini/flash", shown.Get("flash").Name())
}

type joinRecorder struct{ names []string }

func (j *joinRecorder) Join(name string, _ breaker.Local) (breaker.Member, error) {
	j.names = append(j.names, name)
	return nopMember{}, nil
}

type nopMember struct{}

func (nopMember) Record(breaker.Outcome)          {}
func (nopMember) Transitioned(breaker.Transition) {}
func (nopMember) TryProbe() bool                  { return true }
func (nopMember) ReleaseProbe()                   {}
func (nopMember) Leave()                          {}

// leaveMember is a Member that remembers its Local and says when it left.
type leaveMember struct {
	nopMember
	left chan struct{}
}

func (m leaveMember) Leave() { close(m.left) }

type localStore struct {
	local  breaker.Local
	member leaveMember
}

func (s *localStore) Join(_ string, local breaker.Local) (breaker.Member, error) {
	s.local = local
	s.member = leaveMember{left: make(chan struct{})}
	return s.member, nil
}

// The Store seam: the Local a store gets reads and drives the breaker
// without a *Breaker, holds it weakly, and the member leaves once the
// breaker is garbage collected.
func TestStoreLocal(t *testing.T) {
	store := &localStore{}
	b, err := breaker.New(breaker.Config{Name: "pro", Cooldown: time.Minute, Store: store})
	require.NoError(t, err)
	local := store.local
	assert.Equal(t, time.Minute, local.Config().Cooldown)
	assert.Equal(t, breaker.Closed, local.State())

	var seen []string
	remove := local.Observe(func(tr breaker.Transition) { seen = append(seen, tr.To.String()+" ("+tr.Reason+")") })
	gen := local.Generation()
	local.ApplyShared(breaker.Shared{State: breaker.Open, OpenUntil: time.Now().Add(time.Minute)})
	assert.Equal(t, breaker.Open, b.State())
	assert.Equal(t, breaker.Open, local.State())
	assert.Greater(t, local.Generation(), gen)
	assert.Equal(t, []string{"open (shared)"}, seen)
	remove()
	b.ForceClosed()
	assert.Len(t, seen, 1, "removed")

	b = nil
	require.Eventually(t, func() bool {
		runtime.GC()
		select {
		case <-store.member.left:
			return true
		default:
			return false
		}
	}, 10*time.Second, time.Millisecond, "a breaker nobody holds leaves its store: the Local does not keep it alive")
	assert.Equal(t, breaker.Closed, local.State(), "a collected breaker's Local reads as closed")
	assert.Zero(t, local.Generation())
	assert.Zero(t, local.Config())
	local.ApplyShared(breaker.Shared{State: breaker.Open, OpenUntil: time.Now().Add(time.Minute)})
	local.Observe(func(breaker.Transition) {})()
}

type nilStore struct{}

func (nilStore) Join(string, breaker.Local) (breaker.Member, error) { return nil, nil }

func TestStoreJoinWithoutMember(t *testing.T) {
	_, err := breaker.New(breaker.Config{Name: "pro", Store: nilStore{}})
	assert.ErrorContains(t, err, "no Member")
}

func sha256Prefix(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

func TestTransitionString(t *testing.T) {
	until := time.Date(2026, 12, 1, 9, 30, 5, 250e6, time.UTC)
	assert.Equal(t, "pro: closed -> open (consecutive failures), until 09:30:05.250",
		breaker.Transition{Name: "pro", From: breaker.Closed, To: breaker.Open, Reason: "consecutive failures", OpenUntil: until}.String())
	assert.Equal(t, "pro: half_open -> closed (probe succeeded)",
		breaker.Transition{Name: "pro", From: breaker.HalfOpen, To: breaker.Closed, Reason: "probe succeeded"}.String())
}
