package breaker_test

// Behavioural cases translated from the test suites of sony/gobreaker and
// failsafe-go/failsafe-go (this file) and of resilience4j and Polly
// (conformance_peers_test.go). Each test names the case it comes from. Where
// tierguard differs on purpose, the test asserts tierguard's behaviour and
// names the difference, listed in the package documentation ("Differences
// from gobreaker, failsafe-go, resilience4j and Polly").

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/retry"
)

// conformance runs fn in a synctest bubble with a fresh breaker.
func conformance(t *testing.T, cfg breaker.Config, fn func(t *testing.T, b *breaker.Breaker, rec *recorder)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		b, rec := newBreaker(t, cfg)
		fn(t, b, rec)
		b.Reset()
	})
}

// elapse moves the fake clock and lets the breaker's timers run.
func elapse(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// outcomes reports each outcome of seq as one call: 's' success, 'f'
// failure, 'i' ignored.
func outcomes(t *testing.T, b *breaker.Breaker, seq string) {
	t.Helper()
	for _, c := range seq {
		o := map[rune]breaker.Outcome{'s': breaker.Success, 'f': breaker.Failure, 'i': breaker.Ignored}[c]
		call(t, b, o)
	}
}

// rejects reports whether a call would be refused now.
func rejects(b *breaker.Breaker) bool {
	tok, err := b.Allow()
	if err == nil {
		tok.Done(breaker.Ignored)
	}
	return errors.Is(err, breaker.ErrOpen)
}

var errBoom = errors.New("boom")

// --- sony/gobreaker, v2/gobreaker_test.go -----------------------------------

// sony/gobreaker v2/gobreaker_test.go TestStateConstants. Difference: the
// half-open state's string is "half_open" (package doc, state strings).
func TestGobreakerStateConstants(t *testing.T) {
	assert.Equal(t, breaker.State(0), breaker.Closed)
	assert.Equal(t, breaker.State(1), breaker.HalfOpen)
	assert.Equal(t, breaker.State(2), breaker.Open)
	assert.Equal(t, "closed", breaker.Closed.String())
	assert.Equal(t, "half_open", breaker.HalfOpen.String())
	assert.Equal(t, "open", breaker.Open.String())
	assert.Equal(t, "invalid_state", breaker.State(100).String())
}

// sony/gobreaker v2/gobreaker_test.go TestNewCircuitBreaker: a zero
// configuration is a working breaker, closed, with empty counts.
func TestGobreakerNewCircuitBreaker(t *testing.T) {
	b, err := breaker.New(breaker.Config{})
	require.NoError(t, err)
	assert.Equal(t, "", b.Name())
	assert.Equal(t, breaker.Closed, b.State())
	assert.Equal(t, breaker.Counts{}, b.Counts())
	cfg := b.Config()
	assert.Equal(t, breaker.DefaultHalfOpenProbes, cfg.HalfOpenProbes)
	assert.Equal(t, breaker.DefaultCooldown, cfg.Cooldown)
}

// sony/gobreaker v2/gobreaker_test.go TestDefaultCircuitBreaker: the full
// cycle with default settings. Difference: the default trips on the fifth
// failure in a row, gobreaker's on the sixth (package doc, inclusive
// thresholds).
func TestGobreakerDefaultCircuitBreaker(t *testing.T) {
	conformance(t, breaker.Config{}, func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		outcomes(t, b, "ffff")
		assert.Equal(t, int64(4), b.Counts().ConsecutiveFailures)
		outcomes(t, b, "s")
		assert.Equal(t, breaker.Closed, b.State())
		assert.Zero(t, b.Counts().ConsecutiveFailures)
		outcomes(t, b, "fffff")
		require.Equal(t, breaker.Open, b.State())
		assert.Equal(t, breaker.Counts{State: breaker.Open, Generation: 1}, b.Counts())
		assert.True(t, rejects(b))

		elapse(breaker.DefaultCooldown - time.Millisecond)
		assert.Equal(t, breaker.Open, b.State())
		elapse(time.Millisecond)
		require.Equal(t, breaker.HalfOpen, b.State())
		outcomes(t, b, "f")
		require.Equal(t, breaker.Open, b.State())
		elapse(breaker.DefaultCooldown)
		outcomes(t, b, "s")
		assert.Equal(t, breaker.Closed, b.State())
		assert.Equal(t, breaker.Counts{State: breaker.Closed, Generation: 5}, b.Counts())
	})
}

// sony/gobreaker v2/gobreaker_test.go TestCustomCircuitBreaker (closed
// part): a ratio of at least 0.6 over at least 3 requests trips, excluded
// errors count for nothing, and counts older than the window no longer
// weigh. Difference: the window rolls instead of being cleared every
// Interval (package doc, rolling window).
func TestGobreakerCustomRatio(t *testing.T) {
	conformance(t, breaker.Config{ConsecutiveFailures: -1, FailureRatio: 0.6, MinCalls: 3, Window: 30 * time.Second, Cooldown: 90 * time.Second},
		func(t *testing.T, b *breaker.Breaker, rec *recorder) {
			for range 5 {
				outcomes(t, b, "sfi")
			}
			c := b.Counts()
			assert.Equal(t, breaker.Closed, c.State)
			assert.Equal(t, int64(10), c.Calls, "excluded calls are not counted")
			assert.Equal(t, int64(5), c.Failures)
			assert.Equal(t, int64(1), c.ConsecutiveFailures)

			elapse(31 * time.Second)
			outcomes(t, b, "f")
			assert.Equal(t, int64(1), b.Counts().Calls, "the old calls left the window")
			outcomes(t, b, "s")
			require.Equal(t, breaker.Closed, b.State())
			outcomes(t, b, "f") // 2 of 3 ≥ 0.6
			assert.Equal(t, breaker.Open, b.State())
			assert.Equal(t, []string{"closed->open (failure ratio)"}, rec.steps())
		})
}

// sony/gobreaker v2/gobreaker_test.go TestCustomCircuitBreaker (half-open
// part): excluded requests are neutral in half-open — they neither decide
// nor use up the half-open budget — and the first real failure reopens.
func TestGobreakerExcludedAreNeutralInHalfOpen(t *testing.T) {
	conformance(t, breaker.Config{ConsecutiveFailures: 1, HalfOpenProbes: 3, ProbeSuccesses: 3, Cooldown: 90 * time.Second},
		func(t *testing.T, b *breaker.Breaker, rec *recorder) {
			halfOpen(t, b)
			outcomes(t, b, "iiii")
			assert.Equal(t, breaker.HalfOpen, b.State())
			outcomes(t, b, "f")
			assert.Equal(t, breaker.Open, b.State())
			assert.Equal(t, "half_open->open (probe failed)", rec.steps()[len(rec.steps())-1])
		})
}

// sony/gobreaker v2/gobreaker_test.go TestCustomCircuitBreaker (closing
// part): successes in half-open are counted but close only at the
// threshold (MaxRequests 3). Difference: the limit bounds probes in flight,
// not requests per period, so with two successes done and one probe in
// flight more probes may still start (package doc, HalfOpenProbes).
func TestGobreakerHalfOpenSuccessesUpToMaxRequests(t *testing.T) {
	conformance(t, breaker.Config{ConsecutiveFailures: 1, HalfOpenProbes: 3, ProbeSuccesses: 3},
		func(t *testing.T, b *breaker.Breaker, rec *recorder) {
			halfOpen(t, b)
			outcomes(t, b, "ss")
			assert.Equal(t, breaker.HalfOpen, b.State())
			assert.Equal(t, int64(2), b.Counts().Calls)
			slow, err := b.Allow()
			require.NoError(t, err)
			extra, err := b.Allow()
			require.NoError(t, err, "gobreaker refuses a fourth request here; tierguard has 2 slots free")
			extra.Done(breaker.Ignored)
			slow.Done(breaker.Success)
			assert.Equal(t, breaker.Closed, b.State())
			assert.Equal(t, "half_open->closed (probe succeeded)", rec.steps()[len(rec.steps())-1])
		})
}

// sony/gobreaker v2/gobreaker_test.go TestRollingWindowCircuitBreaker: counts
// are summed over buckets, the oldest bucket leaves the window as time
// passes, and the ratio trips when it is reached.
func TestGobreakerRollingWindow(t *testing.T) {
	conformance(t, breaker.Config{ConsecutiveFailures: -1, FailureRatio: 0.6, MinCalls: 3, Window: 30 * time.Second},
		func(t *testing.T, b *breaker.Breaker, _ *recorder) {
			for range 5 {
				outcomes(t, b, "sfi")
			}
			elapse(3 * time.Second) // the next bucket
			outcomes(t, b, "s")
			assert.Equal(t, int64(11), b.Counts().Calls)
			for range 8 {
				elapse(3 * time.Second)
				outcomes(t, b, "sf")
			}
			// 27s after the first bucket: it is still in the window.
			assert.Equal(t, int64(27), b.Counts().Calls)
			elapse(3 * time.Second)
			c := b.Counts()
			assert.Equal(t, int64(17), c.Calls, "the first bucket (10 calls) left")
			assert.Equal(t, int64(8), c.Failures)
			outcomes(t, b, "ffff")
			assert.Equal(t, breaker.Closed, b.State(), "12 of 21")
			outcomes(t, b, "f") // 13 of 22 ≥ 0.6 (13.2 needed): still below
			outcomes(t, b, "f") // 14 of 23 ≥ 13.8
			assert.Equal(t, breaker.Open, b.State())
		})
}

// sony/gobreaker v2/gobreaker_test.go TestPanicInRequest. Difference: a
// panic counts as nothing — gobreaker counts it as a failure (package doc,
// panics).
func TestGobreakerPanicInRequest(t *testing.T) {
	b, _ := newBreaker(t, breaker.Config{FailureRatio: 0.5})
	assert.Panics(t, func() {
		_, _ = breaker.Do(context.Background(), b, func(context.Context) (bool, error) { panic("oops") })
	})
	assert.Equal(t, breaker.Counts{State: breaker.Closed}, b.Counts())
}

// sony/gobreaker v2/gobreaker_test.go TestGeneration: a request admitted in
// an earlier generation has no effect on the counts of the current one.
func TestGobreakerGeneration(t *testing.T) {
	conformance(t, breaker.Config{FailureRatio: 0.5, MinCalls: 3}, func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		outcomes(t, b, "s")
		late, err := b.Allow()
		require.NoError(t, err)
		b.Reset() // a new generation
		assert.Equal(t, breaker.Counts{State: breaker.Closed, Generation: 1}, b.Counts())
		late.Done(breaker.Failure)
		assert.Equal(t, breaker.Counts{State: breaker.Closed, Generation: 1}, b.Counts())
	})
}

// sony/gobreaker v2/gobreaker_test.go TestCustomIsSuccessful: a custom
// outcome mapping decides what counts as a failure.
func TestGobreakerCustomIsSuccessful(t *testing.T) {
	b, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: 5, FailureRatio: 0.5, Outcome: func(error) breaker.Outcome { return breaker.Success }})
	for range 5 {
		_, err := breaker.Do(context.Background(), b, func(context.Context) (int, error) { return 0, errBoom })
		require.ErrorIs(t, err, errBoom)
	}
	assert.Equal(t, breaker.Closed, b.State())
	assert.Equal(t, int64(5), b.Counts().Calls)
	assert.Zero(t, b.Counts().Failures)

	b, _ = newBreaker(t, breaker.Config{ConsecutiveFailures: 6})
	for range 6 {
		_, _ = breaker.Do(context.Background(), b, func(context.Context) (int, error) { return 0, errBoom })
	}
	assert.Equal(t, breaker.Open, b.State())
}

// sony/gobreaker v2/gobreaker_test.go TestCircuitBreakerInParallel: ten
// goroutines of successes and excluded calls leave exact counts and a
// closed breaker.
func TestGobreakerInParallel(t *testing.T) {
	b, _ := newBreaker(t, breaker.Config{FailureRatio: 0.6, MinCalls: 3, Window: time.Hour})
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			for i := range 1000 {
				o := breaker.Success
				if i%2 == 1 {
					o = breaker.Ignored
				}
				tok, err := b.Allow()
				if !assert.NoError(t, err) {
					return
				}
				tok.Done(o)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, breaker.Counts{State: breaker.Closed, Calls: 5000}, b.Counts())
}

// sony/gobreaker v2/gobreaker_test.go TestIsExcludedAndIsSuccessfulCombination:
// excluded errors are neither successes nor failures; nil is a success and
// other errors are failures.
func TestGobreakerExcludedAndSuccessful(t *testing.T) {
	excluded := errors.New("excluded")
	b, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: 10, FailureRatio: 0.9, Outcome: func(err error) breaker.Outcome {
		if errors.Is(err, excluded) {
			return breaker.Ignored
		}
		return breaker.OutcomeOf(err)
	}})
	for range 3 {
		_, _ = breaker.Do(context.Background(), b, func(context.Context) (int, error) { return 0, excluded })
	}
	assert.Zero(t, b.Counts().Calls, "excluded errors are not counted")
	for range 3 {
		_, _ = breaker.Do(context.Background(), b, func(context.Context) (int, error) { return 1, nil })
	}
	assert.Equal(t, int64(3), b.Counts().Calls)
	for range 2 {
		_, _ = breaker.Do(context.Background(), b, func(context.Context) (int, error) { return 0, errBoom })
	}
	c := b.Counts()
	assert.Equal(t, int64(5), c.Calls)
	assert.Equal(t, int64(2), c.Failures)
	assert.Equal(t, int64(2), c.ConsecutiveFailures)
}

// sony/gobreaker v2/gobreaker_test.go TestRollingWindowCircuitBreakerInParallel:
// concurrent successes, failures and exclusions on a rolling window are
// safe (run under -race) and keep the window's figures consistent.
func TestGobreakerRollingWindowInParallel(t *testing.T) {
	b, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: -1, FailureRatio: 0.6, MinCalls: 3, Window: time.Hour})
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			for j := range 100 {
				tok, err := b.Allow()
				if !assert.NoError(t, err) {
					return
				}
				tok.Done([]breaker.Outcome{breaker.Success, breaker.Failure, breaker.Ignored}[j%3])
			}
		})
	}
	wg.Wait()
	c := b.Counts()
	assert.Equal(t, breaker.Closed, c.State, "a third of the counted calls fail")
	assert.Equal(t, int64(12*67), c.Calls)
	assert.Equal(t, int64(12*33), c.Failures)
}

// sony/gobreaker v2/twostep_gobreaker_test.go TestTwoStepCircuitBreaker:
// Allow, then report; an open breaker refuses at the first step, and the
// refused call has nothing to report.
func TestGobreakerTwoStep(t *testing.T) {
	conformance(t, breaker.Config{ConsecutiveFailures: 5}, func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		for range 5 {
			tok, err := b.Allow()
			require.NoError(t, err)
			tok.Report(errBoom)
		}
		require.Equal(t, breaker.Open, b.State())
		tok, err := b.Allow()
		require.ErrorIs(t, err, breaker.ErrOpen)
		tok.Done(breaker.Success) // inert
		assert.Equal(t, breaker.Open, b.State())
		elapse(breaker.DefaultCooldown)
		tok, err = b.Allow()
		require.NoError(t, err)
		tok.Report(nil)
		assert.Equal(t, breaker.Closed, b.State())
	})
}

// --- failsafe-go/failsafe-go, circuitbreaker/closedstate_test.go ------------

// failsafe-go circuitbreaker/closedstate_test.go
// TestClosedStateFailureWithDefaultConfig. Difference: failsafe-go's default
// opens on the first failure, tierguard's on the fifth in a row (package
// doc, inclusive thresholds); one failure opens with ConsecutiveFailures 1.
func TestFailsafeClosedFailureWithDefaultConfig(t *testing.T) {
	b, _ := newBreaker(t, breaker.Config{})
	outcomes(t, b, "f")
	assert.Equal(t, breaker.Closed, b.State())
	one, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: 1})
	outcomes(t, one, "f")
	assert.Equal(t, breaker.Open, one.State())
	one.Reset()
}

// failsafe-go circuitbreaker/closedstate_test.go
// TestClosedStateFailureWithFailureThreshold: a success breaks the run.
func TestFailsafeClosedFailureWithFailureThreshold(t *testing.T) {
	b, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: 3})
	outcomes(t, b, "fsff")
	assert.Equal(t, breaker.Closed, b.State())
	outcomes(t, b, "f")
	assert.Equal(t, breaker.Open, b.State())
	b.Reset()
}

// failsafe-go circuitbreaker/closedstate_test.go
// TestClosedStateFailureWithFailureRatio: 2 failures of 3 calls.
func TestFailsafeClosedFailureWithFailureRatio(t *testing.T) {
	b, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: -1, FailureRatio: 2.0 / 3, MinCalls: 3})
	outcomes(t, b, "fs")
	assert.Equal(t, breaker.Closed, b.State())
	outcomes(t, b, "f")
	assert.Equal(t, breaker.Open, b.State())
	b.Reset()
}

// failsafe-go circuitbreaker/closedstate_test.go
// TestClosedStateSuccessWithDefaultConfig.
func TestFailsafeClosedSuccessWithDefaultConfig(t *testing.T) {
	b, _ := newBreaker(t, breaker.Config{})
	outcomes(t, b, "s")
	assert.Equal(t, breaker.Closed, b.State())
}

// failsafe-go circuitbreaker/closedstate_test.go
// TestClosedStateSuccessWithFailureRatio: alternating outcomes never reach
// 3 of 4.
func TestFailsafeClosedSuccessWithFailureRatio(t *testing.T) {
	b, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: -1, FailureRatio: 0.75, MinCalls: 4})
	for range 20 {
		outcomes(t, b, "sf")
		require.Equal(t, breaker.Closed, b.State())
	}
}

// failsafe-go circuitbreaker/closedstate_test.go
// TestClosedStateSuccessWithFailureThreshold: alternating outcomes never
// make 2 failures in a row.
func TestFailsafeClosedSuccessWithFailureThreshold(t *testing.T) {
	b, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: 2})
	for range 20 {
		outcomes(t, b, "sf")
		require.Equal(t, breaker.Closed, b.State())
	}
}

// --- failsafe-go, circuitbreaker/halfopenstate_test.go ----------------------

// failsafe-go circuitbreaker/halfopenstate_test.go
// TestHalfOpenStateFailureWithDefaultConfig: one failure reopens.
func TestFailsafeHalfOpenFailureWithDefaultConfig(t *testing.T) {
	conformance(t, breaker.Config{ConsecutiveFailures: 1}, func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		halfOpen(t, b)
		outcomes(t, b, "f")
		assert.Equal(t, breaker.Open, b.State())
	})
}

// failsafe-go circuitbreaker/halfopenstate_test.go
// TestHalfOpenFailureWithFailureThreshold. Difference: failsafe-go needs 3
// failures in half-open; tierguard reopens on the first (package doc,
// half-open runs).
func TestFailsafeHalfOpenFailureWithFailureThreshold(t *testing.T) {
	conformance(t, breaker.Config{ConsecutiveFailures: 3}, func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		halfOpen(t, b)
		outcomes(t, b, "f")
		assert.Equal(t, breaker.Open, b.State())
	})
}

// failsafe-go circuitbreaker/halfopenstate_test.go
// TestHalfOpenFailureWithSuccessAndFailureThresholds: two successes short of
// three, then a failure, reopens.
func TestFailsafeHalfOpenFailureWithSuccessAndFailureThresholds(t *testing.T) {
	conformance(t, breaker.Config{ConsecutiveFailures: 2, ProbeSuccesses: 3}, func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		halfOpen(t, b)
		outcomes(t, b, "ss")
		assert.Equal(t, breaker.HalfOpen, b.State())
		outcomes(t, b, "f")
		assert.Equal(t, breaker.Open, b.State())
	})
}

// failsafe-go circuitbreaker/halfopenstate_test.go
// TestHalfOpenFailureWithSuccessThreshold: s f reopens.
func TestFailsafeHalfOpenFailureWithSuccessThreshold(t *testing.T) {
	conformance(t, breaker.Config{ConsecutiveFailures: 1, ProbeSuccesses: 3}, func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		halfOpen(t, b)
		outcomes(t, b, "sf")
		assert.Equal(t, breaker.Open, b.State())
	})
}

// failsafe-go circuitbreaker/halfopenstate_test.go
// TestHalfOpenFailureWithSuccessRatio and TestHalfOpenFailureWithFailureRatio.
// Difference: failsafe-go waits for its ratio over three calls; tierguard
// reopens on the first failure (package doc, half-open runs).
func TestFailsafeHalfOpenFailureWithRatios(t *testing.T) {
	conformance(t, breaker.Config{ConsecutiveFailures: -1, FailureRatio: 2.0 / 3, MinCalls: 3, ProbeSuccesses: 2},
		func(t *testing.T, b *breaker.Breaker, _ *recorder) {
			outcomes(t, b, "fff")
			require.Equal(t, breaker.Open, b.State())
			elapse(breaker.DefaultCooldown)
			outcomes(t, b, "f")
			assert.Equal(t, breaker.Open, b.State())
		})
}

// failsafe-go circuitbreaker/halfopenstate_test.go
// TestHalfOpenSuccessWithDefaultConfig: one success closes.
func TestFailsafeHalfOpenSuccessWithDefaultConfig(t *testing.T) {
	conformance(t, breaker.Config{ConsecutiveFailures: 1}, func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		halfOpen(t, b)
		outcomes(t, b, "s")
		assert.Equal(t, breaker.Closed, b.State())
	})
}

// failsafe-go circuitbreaker/halfopenstate_test.go
// TestHalfOpenSuccessWithFailureThreshold and
// TestHalfOpenSuccessWithSuccessRatio: failsafe-go closes on f s (or f s s).
// Difference: the failure reopens first (package doc, half-open runs).
func TestFailsafeHalfOpenSuccessAfterAFailure(t *testing.T) {
	conformance(t, breaker.Config{ConsecutiveFailures: 3}, func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		halfOpen(t, b)
		outcomes(t, b, "f")
		assert.True(t, rejects(b), "open: the success that would have closed it is refused")
		assert.Equal(t, breaker.Open, b.State())
	})
}

// failsafe-go circuitbreaker/halfopenstate_test.go
// TestHalfOpenSuccessWithSuccessThreshold and
// TestHalfOpenSuccessWithSuccessAndFailureThresholds: three successes close.
func TestFailsafeHalfOpenSuccessWithSuccessThreshold(t *testing.T) {
	conformance(t, breaker.Config{ConsecutiveFailures: 2, ProbeSuccesses: 3}, func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		halfOpen(t, b)
		for range 3 {
			assert.Equal(t, breaker.HalfOpen, b.State())
			outcomes(t, b, "s")
		}
		assert.Equal(t, breaker.Closed, b.State())
	})
}

// failsafe-go circuitbreaker/halfopenstate_test.go
// TestHalfOpenSuccessWithSuccessThresholdAndFailureRatio: the closed-state
// ratio does not apply in half-open; two successes close.
func TestFailsafeHalfOpenSuccessWithSuccessThresholdAndFailureRatio(t *testing.T) {
	conformance(t, breaker.Config{ConsecutiveFailures: 1, FailureRatio: 0.6, MinCalls: 5, ProbeSuccesses: 2},
		func(t *testing.T, b *breaker.Breaker, _ *recorder) {
			halfOpen(t, b)
			outcomes(t, b, "s")
			assert.Equal(t, breaker.HalfOpen, b.State())
			outcomes(t, b, "s")
			assert.Equal(t, breaker.Closed, b.State())
		})
}

// failsafe-go circuitbreaker/halfopenstate_test.go
// TestRemainingDelayInHalfOpenState: no delay is left once half-open.
func TestFailsafeRemainingDelayInHalfOpenState(t *testing.T) {
	conformance(t, breaker.Config{ConsecutiveFailures: 1, Cooldown: time.Second}, func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		halfOpen(t, b)
		assert.NoError(t, peek(b))
		p, err := b.Allow()
		require.NoError(t, err)
		_, err = b.Allow()
		var oe *breaker.OpenError
		require.ErrorAs(t, err, &oe)
		assert.True(t, oe.HalfOpen)
		assert.Zero(t, oe.RetryIn())
		p.Done(breaker.Ignored)
	})
}

// --- failsafe-go, circuitbreaker/openstate_test.go and circuitbreaker_test.go

// failsafe-go circuitbreaker/openstate_test.go TestTryAcquirePermit: open
// refuses until the delay has passed, then admits a probe, half-open.
func TestFailsafeTryAcquirePermit(t *testing.T) {
	conformance(t, breaker.Config{ConsecutiveFailures: 1, Cooldown: 100 * time.Millisecond}, func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		outcomes(t, b, "f")
		assert.True(t, rejects(b))
		elapse(110 * time.Millisecond)
		tok, err := b.Allow()
		require.NoError(t, err)
		assert.True(t, tok.IsProbe())
		assert.Equal(t, breaker.HalfOpen, b.State())
		tok.Done(breaker.Ignored)
	})
}

// failsafe-go circuitbreaker/openstate_test.go TestRemainingDelay and
// TestNoRemainingDelay: the rejection says how long is left, which shrinks
// with time, and nothing is left when closed or once the delay is over.
func TestFailsafeRemainingDelay(t *testing.T) {
	conformance(t, breaker.Config{ConsecutiveFailures: 1, Cooldown: time.Second}, func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		assert.NoError(t, peek(b))
		outcomes(t, b, "f")
		var oe *breaker.OpenError
		require.ErrorAs(t, peek(b), &oe)
		assert.Equal(t, time.Second, oe.RetryIn())
		elapse(110 * time.Millisecond)
		assert.Equal(t, 890*time.Millisecond, oe.RetryIn())
		elapse(time.Second)
		assert.Zero(t, oe.RetryIn())
		assert.NoError(t, peek(b))
	})
}

// failsafe-go circuitbreaker/circuitbreaker_test.go TestShouldDefaultDelay:
// an open breaker stays open for the default delay (failsafe-go: one
// minute; tierguard: DefaultCooldown).
func TestFailsafeShouldDefaultDelay(t *testing.T) {
	conformance(t, breaker.Config{ConsecutiveFailures: 1}, func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		outcomes(t, b, "f")
		require.Equal(t, breaker.Open, b.State())
		var oe *breaker.OpenError
		require.ErrorAs(t, peek(b), &oe)
		assert.Equal(t, breaker.DefaultCooldown, oe.RetryIn())
	})
}

// failsafe-go circuitbreaker/circuitbreaker_test.go
// TestGetSuccessAndFailureStats: the counts and ratios of the window.
// Difference: the window is time-based, so it holds every call made within
// it rather than the last ten (package doc, rolling window).
func TestFailsafeSuccessAndFailureStats(t *testing.T) {
	conformance(t, breaker.Config{ConsecutiveFailures: -1, FailureRatio: 0.9, MinCalls: 10}, func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		for i := range 7 {
			if i%2 == 0 {
				outcomes(t, b, "s")
			} else {
				outcomes(t, b, "f")
			}
		}
		c := b.Counts()
		assert.Equal(t, int64(3), c.Failures)
		assert.Equal(t, int64(7), c.Calls)
		assert.InDelta(t, 0.43, c.FailureRatio, 0.01)
		elapse(breaker.DefaultWindow) // the calls leave the window
		for i := range 15 {
			if i%4 == 0 {
				outcomes(t, b, "f")
			} else {
				outcomes(t, b, "s")
			}
		}
		c = b.Counts()
		assert.Equal(t, int64(4), c.Failures)
		assert.Equal(t, int64(15), c.Calls)
		assert.InDelta(t, 0.27, c.FailureRatio, 0.01)
	})
}

// --- failsafe-go, test/circuitbreaker_test.go --------------------------------

// failsafe-go test/circuitbreaker_test.go "should reject initial execution
// when circuit open": the function is not called.
func TestFailsafeRejectInitialExecutionWhenOpen(t *testing.T) {
	b, _ := newBreaker(t, breaker.Config{})
	b.ForceOpen()
	called := false
	_, err := breaker.Do(context.Background(), b, func(context.Context) (int, error) { called = true; return 0, nil })
	assert.ErrorIs(t, err, breaker.ErrOpen)
	assert.False(t, called)
	assert.Equal(t, breaker.Open, b.State())
}

// failsafe-go test/circuitbreaker_test.go "should reject excessive attempts
// when breaker half-open": while the probes run, every further call is
// refused.
func TestFailsafeRejectExcessiveAttemptsWhenHalfOpen(t *testing.T) {
	conformance(t, breaker.Config{ConsecutiveFailures: 1, HalfOpenProbes: 3, ProbeSuccesses: 3}, func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		halfOpen(t, b)
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				_, err := breaker.Do(context.Background(), b, func(context.Context) (int, error) { time.Sleep(time.Minute); return 0, nil })
				assert.NoError(t, err)
			})
		}
		synctest.Wait()
		for range 5 {
			_, err := breaker.Do(context.Background(), b, func(context.Context) (int, error) { return 0, nil })
			assert.ErrorIs(t, err, breaker.ErrOpen)
		}
		wg.Wait()
		assert.Equal(t, breaker.Closed, b.State())
	})
}

// failsafe-go test/circuitbreaker_test.go "should return ErrOpen after
// failures exceeded".
func TestFailsafeErrOpenAfterFailuresExceeded(t *testing.T) {
	b, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: 2, Cooldown: 10 * time.Second})
	for range 2 {
		_, _ = breaker.Do(context.Background(), b, func(context.Context) (bool, error) { return false, errBoom })
	}
	_, err := breaker.Do(context.Background(), b, func(context.Context) (bool, error) { return true, nil })
	assert.ErrorIs(t, err, breaker.ErrOpen)
	assert.Equal(t, breaker.Open, b.State())
	b.Reset()
}

// failsafe-go test/circuitbreaker_test.go "with rejected retries": a retry
// policy around a breaker that opens on the third failure. Difference:
// failsafe-go retries the rejections until its 7 attempts are used; a
// rejection classifies as Rejected, which is not retried, so retrying stops
// at the first refusal (package doc, ErrOpen is not retried).
func TestFailsafeWithRejectedRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: 3})
		calls, attempts := 0, 0
		_, err := retry.Do(context.Background(), retry.Policy{MaxAttempts: 7, BaseDelay: time.Millisecond}, func(context.Context) (int, error) {
			attempts++
			return breaker.Do(context.Background(), b, func(context.Context) (int, error) {
				calls++
				return 0, classify.Wrap(errBoom, classify.Verdict{Class: classify.Transient})
			})
		})
		assert.ErrorIs(t, err, breaker.ErrOpen, "the refusal is returned as it is")
		assert.Equal(t, 3, calls)
		assert.Equal(t, 4, attempts, "three calls, then one refusal, not retried")
		b.Reset()
	})
}
