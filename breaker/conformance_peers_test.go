package breaker_test

// Behavioural cases translated from resilience4j's and Polly's circuit
// breaker tests; see conformance_test.go for how they are written.

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
)

// r4jConfig is resilience4j CircuitBreakerStateMachineTest's setUp: 50%
// failure and slow-call thresholds, 4 half-open calls, slow above 4s, a
// 20s time window with at least 5 calls, a 5s wait in open.
func r4jConfig() breaker.Config {
	return breaker.Config{
		Name: "testName", ConsecutiveFailures: -1,
		FailureRatio: 0.5, SlowCallDuration: 4 * time.Second, SlowCallRatio: 0.5,
		Window: 20 * time.Second, MinCalls: 5,
		Cooldown: 5 * time.Second, HalfOpenProbes: 4, ProbeSuccesses: 4,
	}
}

// openByRatio trips a breaker configured like r4jConfig.
func openByRatio(t *testing.T, b *breaker.Breaker) {
	t.Helper()
	outcomes(t, b, "fffff")
	require.Equal(t, breaker.Open, b.State())
}

// probes takes n probe tokens.
func probes(t *testing.T, b *breaker.Breaker, n int) []breaker.Token {
	t.Helper()
	toks := make([]breaker.Token, n)
	for i := range toks {
		var err error
		toks[i], err = b.Allow()
		require.NoError(t, err, "probe %d", i+1)
	}
	return toks
}

// slowCall makes a call that takes d and reports o.
func slowCall(t *testing.T, b *breaker.Breaker, d time.Duration, o breaker.Outcome) {
	t.Helper()
	tok, err := b.Allow()
	require.NoError(t, err)
	time.Sleep(d)
	tok.Done(o)
}

// --- resilience4j, resilience4j-circuitbreaker/.../internal/CircuitBreakerStateMachineTest.java

// resilience4j CircuitBreakerStateMachineTest shouldReturnTheCorrectName.
func TestR4jShouldReturnTheCorrectName(t *testing.T) {
	b, _ := newBreaker(t, r4jConfig())
	assert.Equal(t, "testName", b.Name())
}

// resilience4j CircuitBreakerStateMachineTest
// shouldThrowCallNotPermittedExceptionWhenStateIsOpen: the refusal is
// counted.
func TestR4jCallNotPermittedWhenOpen(t *testing.T) {
	conformance(t, r4jConfig(), func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		openByRatio(t, b)
		_, err := b.Allow()
		assert.ErrorIs(t, err, breaker.ErrOpen)
		assert.Equal(t, int64(1), b.Counts().Rejected)
	})
}

// resilience4j CircuitBreakerStateMachineTest
// shouldThrowCallNotPermittedExceptionWhenStateIsForcedOpen.
func TestR4jCallNotPermittedWhenForcedOpen(t *testing.T) {
	b, _ := newBreaker(t, r4jConfig())
	b.ForceOpen()
	_, err := b.Allow()
	assert.ErrorIs(t, err, breaker.ErrOpen)
	assert.Equal(t, int64(1), b.Counts().Rejected)
}

// resilience4j CircuitBreakerStateMachineTest
// shouldIncreaseCounterOnReleasePermission and
// shouldThrowCallNotPermittedExceptionWhenNotFurtherTestCallsArePermitted:
// four permits in half-open, refusals after, and a released permit (an
// ignored outcome) lets one more through.
func TestR4jHalfOpenPermits(t *testing.T) {
	conformance(t, r4jConfig(), func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		openByRatio(t, b)
		elapse(5 * time.Second)
		toks := probes(t, b, 4)
		assert.True(t, rejects(b))
		assert.True(t, rejects(b))
		assert.Equal(t, int64(2), b.Counts().Rejected)
		toks[0].Done(breaker.Ignored)
		tok, err := b.Allow()
		require.NoError(t, err)
		tok.Done(breaker.Ignored)
		for _, tok := range toks[1:] {
			tok.Done(breaker.Ignored)
		}
	})
}

// resilience4j CircuitBreakerStateMachineTest
// shouldOnlyPermitFourCallsInHalfOpenState: four permits in each half-open
// period. Difference: probes of the first period that have not reported
// keep their slots in the second (package doc, HalfOpenProbes across
// periods); once they report, the second period has its four.
func TestR4jOnlyFourCallsInHalfOpen(t *testing.T) {
	conformance(t, r4jConfig(), func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		openByRatio(t, b)
		elapse(5 * time.Second)
		first := probes(t, b, 4)
		assert.True(t, rejects(b))
		b.ForceOpen()
		b.Reset()
		openByRatio(t, b)
		elapse(5 * time.Second)
		require.Equal(t, breaker.HalfOpen, b.State())
		assert.True(t, rejects(b), "the four probes of the first period still run")
		for _, tok := range first {
			tok.Done(breaker.Success) // stale: decides nothing
		}
		assert.Equal(t, breaker.HalfOpen, b.State())
		second := probes(t, b, 4)
		assert.True(t, rejects(b))
		for _, tok := range second {
			tok.Done(breaker.Ignored)
		}
	})
}

// resilience4j CircuitBreakerStateMachineTest
// shouldOpenAfterFailureRateThresholdExceeded: f f f s s opens on the fifth
// call, a success, at 60%; the next call is refused and counted.
func TestR4jOpenAfterFailureRateExceeded(t *testing.T) {
	conformance(t, r4jConfig(), func(t *testing.T, b *breaker.Breaker, rec *recorder) {
		outcomes(t, b, "fff")
		c := b.Counts()
		assert.Equal(t, breaker.Closed, c.State)
		assert.Equal(t, int64(3), c.Calls)
		assert.Equal(t, int64(3), c.Failures)
		outcomes(t, b, "s")
		assert.Equal(t, breaker.Closed, b.State())
		outcomes(t, b, "s")
		assert.Equal(t, breaker.Open, b.State())
		assert.Equal(t, []string{"closed->open (failure ratio)"}, rec.steps())
		assert.True(t, rejects(b))
		assert.Equal(t, int64(1), b.Counts().Rejected)
	})
}

// resilience4j CircuitBreakerStateMachineTest
// shouldOpenAfterFailureRateThresholdExceeded2: s s s f f a second apart
// stay closed (40%); a third failure makes 50% of 6 and opens.
func TestR4jOpenAfterFailureRateExceededOverTime(t *testing.T) {
	conformance(t, r4jConfig(), func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		for _, c := range "sssff" {
			outcomes(t, b, string(c))
			elapse(time.Second)
		}
		assert.Equal(t, breaker.Closed, b.State())
		outcomes(t, b, "f")
		assert.Equal(t, breaker.Open, b.State())
	})
}

// resilience4j CircuitBreakerStateMachineTest
// shouldOpenAfterSlowCallRateThresholdExceeded (and ...UsingMockClock):
// slow failure, slow success, fast failure, fast success, slow success —
// 3 slow calls of 5 open the breaker although only 40% failed.
func TestR4jOpenAfterSlowCallRateExceeded(t *testing.T) {
	conformance(t, r4jConfig(), func(t *testing.T, b *breaker.Breaker, rec *recorder) {
		slowCall(t, b, 5*time.Second, breaker.Failure)
		slowCall(t, b, 5*time.Second, breaker.Success)
		slowCall(t, b, 100*time.Millisecond, breaker.Failure)
		slowCall(t, b, 100*time.Millisecond, breaker.Success)
		c := b.Counts()
		assert.Equal(t, breaker.Closed, c.State)
		assert.Equal(t, int64(2), c.SlowCalls)
		slowCall(t, b, 5*time.Second, breaker.Success)
		assert.Equal(t, breaker.Open, b.State())
		assert.Equal(t, []string{"closed->open (slow calls)"}, rec.steps())
	})
}

// resilience4j CircuitBreakerStateMachineTest
// shouldTransitionToHalfOpenAfterWaitDuration: refused (and counted) for
// the 5s wait, half-open after it, with fresh counts.
func TestR4jHalfOpenAfterWaitDuration(t *testing.T) {
	conformance(t, r4jConfig(), func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		openByRatio(t, b)
		assert.True(t, rejects(b))
		elapse(3 * time.Second)
		assert.Equal(t, breaker.Open, b.State())
		assert.True(t, rejects(b))
		assert.Equal(t, int64(2), b.Counts().Rejected)
		elapse(3 * time.Second)
		tok, err := b.Allow()
		require.NoError(t, err)
		assert.Equal(t, breaker.HalfOpen, b.State())
		c := b.Counts()
		assert.Zero(t, c.Rejected)
		assert.Zero(t, c.Calls)
		tok.Done(breaker.Ignored)
	})
}

// resilience4j CircuitBreakerStateMachineTest
// shouldTransitionToHalfOpenAfterWaitInterval: an exponential wait — 5s,
// then longer after the next trip. tierguard doubles the cooldown after a
// failed probe, up to MaxCooldown.
func TestR4jHalfOpenAfterWaitInterval(t *testing.T) {
	cfg := r4jConfig()
	cfg.MaxCooldown = time.Minute
	conformance(t, cfg, func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		openByRatio(t, b)
		elapse(3 * time.Second)
		assert.True(t, rejects(b))
		elapse(3 * time.Second)
		require.Equal(t, breaker.HalfOpen, b.State())
		outcomes(t, b, "f") // reopens, for twice as long
		elapse(6 * time.Second)
		assert.Equal(t, breaker.Open, b.State(), "the new wait is 10s")
		elapse(5 * time.Second)
		assert.Equal(t, breaker.HalfOpen, b.State())
	})
}

// resilience4j CircuitBreakerStateMachineTest
// shouldTransitionBackToOpenStateWhenFailureRateIsAboveThreshold and
// shouldTransitionBackToClosedStateWhenFailureIsBelowThreshold: resilience4j
// decides after its four half-open calls, by ratio. Difference: the first
// failure reopens (package doc, half-open runs); four successes close.
func TestR4jHalfOpenDecision(t *testing.T) {
	conformance(t, r4jConfig(), func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		openByRatio(t, b)
		elapse(5 * time.Second)
		outcomes(t, b, "f")
		assert.Equal(t, breaker.Open, b.State(), "one failure of four reopens")
		elapse(5 * time.Second)
		outcomes(t, b, "sss")
		assert.Equal(t, breaker.HalfOpen, b.State())
		outcomes(t, b, "s")
		assert.Equal(t, breaker.Closed, b.State())
		outcomes(t, b, "s")
		assert.Equal(t, int64(1), b.Counts().Calls, "the closed state starts with fresh counts")
	})
}

// resilience4j CircuitBreakerStateMachineTest
// shouldTransitionBackToOpenStateWhenSlowCallRateIsAboveThreshold: three
// slow successes and a fast one in half-open reopen it (75% slow).
func TestR4jHalfOpenSlowCallRate(t *testing.T) {
	conformance(t, r4jConfig(), func(t *testing.T, b *breaker.Breaker, rec *recorder) {
		openByRatio(t, b)
		elapse(5 * time.Second)
		slowCall(t, b, 5*time.Second, breaker.Success)
		slowCall(t, b, 5*time.Second, breaker.Success)
		slowCall(t, b, 5*time.Second, breaker.Success)
		slowCall(t, b, time.Second, breaker.Success)
		assert.Equal(t, breaker.Open, b.State())
		assert.Equal(t, "half_open->open (slow probes)", rec.steps()[len(rec.steps())-1])
	})
}

// resilience4j CircuitBreakerStateMachineTest shouldResetMetrics,
// shouldResetClosedState and shouldResetToClosedState.
func TestR4jReset(t *testing.T) {
	conformance(t, r4jConfig(), func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		outcomes(t, b, "sf")
		assert.Equal(t, int64(2), b.Counts().Calls)
		b.Reset()
		assert.Equal(t, breaker.Counts{State: breaker.Closed, Generation: 1}, b.Counts())
		openByRatio(t, b)
		b.Reset()
		assert.Equal(t, breaker.Closed, b.State())
	})
}

// resilience4j CircuitBreakerStateMachineTest shouldForceOpenCircuitBreaker:
// forced open never moves to half-open, however long it waits, and counts
// its refusals.
func TestR4jForceOpen(t *testing.T) {
	conformance(t, r4jConfig(), func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		b.ForceOpen()
		assert.True(t, rejects(b))
		elapse(6 * time.Second)
		assert.True(t, rejects(b))
		assert.Equal(t, breaker.Open, b.State())
		assert.Equal(t, int64(2), b.Counts().Rejected)
	})
}

// resilience4j CircuitBreakerStateMachineTest shouldDisableCircuitBreaker.
// Difference: there is no disabled state; ForceClosed admits everything and
// counts nothing (package doc, no disabled state).
func TestR4jDisabled(t *testing.T) {
	b, _ := newBreaker(t, r4jConfig())
	b.ForceClosed()
	outcomes(t, b, "sfffff")
	assert.Equal(t, breaker.Counts{State: breaker.Closed, Generation: 1}, b.Counts())
}

// resilience4j CircuitBreakerStateMachineTest
// shouldReleasePermissionWhenExceptionIgnored and
// shouldIgnoreExceptionsAndThenTransitionToClosed: an ignored error frees
// its permit and decides nothing; the counted outcomes close the breaker.
func TestR4jIgnoredExceptionsInHalfOpen(t *testing.T) {
	conformance(t, r4jConfig(), func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		openByRatio(t, b)
		elapse(5 * time.Second)
		outcomes(t, b, "iiii")
		assert.Equal(t, breaker.HalfOpen, b.State())
		assert.Zero(t, b.Counts().Calls)
		outcomes(t, b, "sss")
		assert.Equal(t, int64(3), b.Counts().Calls)
		outcomes(t, b, "i")
		assert.Equal(t, breaker.HalfOpen, b.State())
		outcomes(t, b, "s")
		assert.Equal(t, breaker.Closed, b.State())
	})
}

// resilience4j CircuitBreakerStateMachineTest
// shouldNotAllowTransitionFromClosedToHalfOpen: a closed breaker refuses to
// become half-open (here, when another process says so).
func TestR4jNoTransitionFromClosedToHalfOpen(t *testing.T) {
	b, rec := newBreaker(t, r4jConfig())
	breaker.ApplyShared(b, breaker.Shared{State: breaker.HalfOpen})
	assert.Equal(t, breaker.Closed, b.State())
	assert.Empty(t, rec.steps())
}

// resilience4j CircuitBreakerStateMachineTest
// circuitBreakerDoesNotPublishStateTransitionEventsForInternalTransitions:
// asking for the state the breaker is already in publishes nothing.
func TestR4jNoEventsForInternalTransitions(t *testing.T) {
	b, rec := newBreaker(t, r4jConfig())
	b.ForceOpen()
	b.ForceOpen()
	b.ForceClosed()
	b.ForceClosed()
	b.Reset()
	b.Reset()
	assert.Equal(t, []string{"closed->open (forced open)", "open->closed (forced closed)", "closed->closed (reset)"}, rec.steps())
}

// resilience4j CircuitBreakerStateMachineTest
// circuitBreakerTransitionsToOpenAfterWaitDurationInHalfOpenState: after
// maxWaitDurationInHalfOpenState the breaker reopens. Difference: the wait
// runs per probe, so an idle half-open breaker stays half-open, and one
// with a probe that has not reported reopens (package doc, MaxHalfOpenWait).
func TestR4jMaxWaitInHalfOpen(t *testing.T) {
	cfg := r4jConfig()
	cfg.MaxHalfOpenWait = time.Second
	conformance(t, cfg, func(t *testing.T, b *breaker.Breaker, rec *recorder) {
		openByRatio(t, b)
		elapse(5 * time.Second)
		elapse(2 * time.Second)
		assert.Equal(t, breaker.HalfOpen, b.State(), "no probe is waited for")
		_, err := b.Allow()
		require.NoError(t, err)
		elapse(2 * time.Second)
		assert.Equal(t, breaker.Open, b.State())
		assert.Equal(t, "half_open->open (probe timed out)", rec.steps()[len(rec.steps())-1])
	})
}

// --- App-vNext/Polly, test/Polly.Core.Tests/CircuitBreaker/Controller/CircuitStateControllerTests.cs

// pollyConfig is Polly's defaults as far as they translate: a 5s break, one
// probe; the trip here is one failure.
func pollyConfig() breaker.Config {
	return breaker.Config{ConsecutiveFailures: 1, Cooldown: 5 * time.Second}
}

// Polly CircuitStateControllerTests Ctor_EnsureDefaults.
func TestPollyCtorEnsureDefaults(t *testing.T) {
	b, _ := newBreaker(t, pollyConfig())
	assert.Equal(t, breaker.Closed, b.State())
	assert.NoError(t, peek(b))
}

// Polly CircuitStateControllerTests IsolateAsync_Ok and BreakAsync_Ok: an
// isolated circuit rejects with no retry-after, marked as manual; closing
// it brings calls back.
func TestPollyIsolateAndClose(t *testing.T) {
	b, rec := newBreaker(t, pollyConfig())
	var forced []bool
	b.Observe(func(tr breaker.Transition) { forced = append(forced, tr.Forced) })
	b.ForceOpen()
	_, err := b.Allow()
	var oe *breaker.OpenError
	require.ErrorAs(t, err, &oe)
	assert.Zero(t, oe.RetryIn())
	assert.True(t, oe.Until.IsZero())
	b.Reset()
	outcomes(t, b, "s")
	assert.Equal(t, breaker.Closed, b.State())
	assert.Equal(t, []bool{true, false}, forced, "the isolation is marked as manual, the reset is not")
	assert.Equal(t, []string{"closed->open (forced open)", "open->closed (reset)"}, rec.steps())
}

// Polly CircuitStateControllerTests OnActionPreExecute_CircuitOpenedByValue
// and OnActionPreExecute_CircuitOpenedByException: the rejection says when
// the circuit will let a call through, and classifies as a local refusal.
func TestPollyCircuitOpenedRejection(t *testing.T) {
	conformance(t, pollyConfig(), func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		start := time.Now()
		outcomes(t, b, "f")
		_, err := b.Allow()
		var oe *breaker.OpenError
		require.ErrorAs(t, err, &oe)
		assert.Equal(t, start.Add(5*time.Second), oe.Until)
		v := classify.Classify(err)
		assert.Equal(t, classify.Rejected, v.Class)
		assert.Equal(t, 5*time.Second, v.RetryAfter)
	})
}

// Polly CircuitStateControllerTests
// OnActionPreExecute_CircuitOpened_EnsureExceptionStackTraceDoesNotGrow:
// every rejection is the same error value, with a fixed message.
func TestPollyRejectionDoesNotGrow(t *testing.T) {
	b, _ := newBreaker(t, pollyConfig())
	b.ForceOpen()
	_, first := b.Allow()
	for range 100 {
		_, err := b.Allow()
		require.Same(t, first, err)
	}
	assert.Equal(t, `tierguard: circuit "pro" open`, first.Error())
	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = b.Allow() }))
}

// Polly CircuitStateControllerTests HalfOpen_EnsureCorrectStateTransitionAfterExecution,
// Flow_Closed_HalfOpen_Closed: half-open, a success closes and a failure
// reopens.
func TestPollyHalfOpenTransitionAfterExecution(t *testing.T) {
	for _, success := range []bool{true, false} {
		conformance(t, pollyConfig(), func(t *testing.T, b *breaker.Breaker, _ *recorder) {
			halfOpen(t, b)
			if success {
				outcomes(t, b, "s")
				assert.Equal(t, breaker.Closed, b.State())
			} else {
				outcomes(t, b, "f")
				assert.Equal(t, breaker.Open, b.State())
			}
		})
	}
}

// Polly CircuitStateControllerTests OnActionPreExecute_HalfOpen: while the
// probe runs, the next call is refused with a half-open rejection.
func TestPollyHalfOpenRefusesASecondCall(t *testing.T) {
	conformance(t, pollyConfig(), func(t *testing.T, b *breaker.Breaker, rec *recorder) {
		halfOpen(t, b)
		p, err := b.Allow()
		require.NoError(t, err)
		_, err = b.Allow()
		var oe *breaker.OpenError
		require.ErrorAs(t, err, &oe)
		assert.True(t, oe.HalfOpen)
		assert.Equal(t, breaker.HalfOpen, b.State())
		assert.Contains(t, rec.steps(), "open->half_open (cooldown elapsed)", "the half-open hook ran")
		p.Done(breaker.Ignored)
	})
}

// Polly CircuitStateControllerTests OnActionSuccess_EnsureCorrectBehavior:
// a success keeps a closed circuit closed and an isolated one isolated.
func TestPollyOnActionSuccess(t *testing.T) {
	b, _ := newBreaker(t, pollyConfig())
	outcomes(t, b, "s")
	assert.Equal(t, breaker.Closed, b.State())
	tok, err := b.Allow()
	require.NoError(t, err)
	b.ForceOpen()
	tok.Done(breaker.Success)
	assert.Equal(t, breaker.Open, b.State())
}

// Polly CircuitStateControllerTests OnActionFailureAsync_EnsureCorrectBehavior:
// a failure opens a closed circuit (when the threshold is met) or a
// half-open one, leaves an open one open and an isolated one isolated.
func TestPollyOnActionFailure(t *testing.T) {
	conformance(t, breaker.Config{ConsecutiveFailures: 2, Cooldown: 5 * time.Second}, func(t *testing.T, b *breaker.Breaker, rec *recorder) {
		early, err := b.Allow()
		require.NoError(t, err)
		outcomes(t, b, "f")
		assert.Equal(t, breaker.Closed, b.State(), "below the threshold")
		outcomes(t, b, "f")
		require.Equal(t, breaker.Open, b.State())
		early.Done(breaker.Failure) // reported while open
		assert.Equal(t, breaker.Open, b.State())
		assert.Len(t, rec.steps(), 1)
		b.ForceOpen()
		late, err := b.Allow()
		require.Error(t, err)
		late.Done(breaker.Failure)
		assert.Equal(t, breaker.Open, b.State())
	})
}

// Polly CircuitStateControllerTests BreakDurationGenerator_EnsureHalfOpenAttempts:
// the break grows with each half-open attempt in a row and starts again
// after a close. tierguard doubles the cooldown per failed probe.
func TestPollyBreakDurationGrowsWithHalfOpenAttempts(t *testing.T) {
	conformance(t, breaker.Config{ConsecutiveFailures: 1, Cooldown: time.Second, MaxCooldown: time.Hour}, func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		var waits []time.Duration
		next := func() {
			var oe *breaker.OpenError
			require.ErrorAs(t, peek(b), &oe)
			waits = append(waits, oe.RetryIn())
			elapse(oe.RetryIn())
		}
		outcomes(t, b, "f")
		for range 4 {
			next()
			outcomes(t, b, "f")
		}
		next()
		outcomes(t, b, "s")
		outcomes(t, b, "f")
		next()
		assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, time.Second}, waits)
	})
}

// Polly CircuitStateControllerTests OnActionFailureAsync_EnsureBreakDurationNotOverflow:
// a break that would pass the end of time is capped instead of wrapping.
func TestPollyBreakDurationNotOverflow(t *testing.T) {
	conformance(t, breaker.Config{ConsecutiveFailures: 1, Cooldown: math.MaxInt64 / 2, MaxCooldown: math.MaxInt64}, func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		for range 3 {
			outcomes(t, b, "f")
			var oe *breaker.OpenError
			require.ErrorAs(t, peek(b), &oe)
			assert.Positive(t, oe.RetryIn())
			b.ForceOpen()
			b.Reset()
		}
	})
}

// Polly CircuitStateControllerTests Flow_Closed_HalfOpen_Open_HalfOpen_Closed:
// reopened, a call 1ms later is refused with the rest of the break as its
// retry-after; after the break a probe closes the circuit.
func TestPollyFlowClosedHalfOpenOpenHalfOpenClosed(t *testing.T) {
	conformance(t, pollyConfig(), func(t *testing.T, b *breaker.Breaker, rec *recorder) {
		halfOpen(t, b)
		outcomes(t, b, "f")
		require.Equal(t, breaker.Open, b.State())
		elapse(time.Millisecond)
		_, err := b.Allow()
		var oe *breaker.OpenError
		require.ErrorAs(t, err, &oe)
		assert.Equal(t, 5*time.Second-time.Millisecond, oe.RetryIn())
		elapse(10 * time.Second)
		assert.Equal(t, breaker.HalfOpen, b.State())
		outcomes(t, b, "s")
		assert.Equal(t, breaker.Closed, b.State())
		assert.Equal(t, []string{
			"closed->open (consecutive failures)", "open->half_open (cooldown elapsed)", "half_open->open (probe failed)",
			"open->half_open (cooldown elapsed)", "half_open->closed (probe succeeded)",
		}, rec.steps())
	})
}

// Polly CircuitStateControllerTests HalfOpen_EnsureBreakDuration. Difference:
// Polly lets another probe through one break after the last; tierguard
// keeps the probe's slot until it reports or MaxHalfOpenWait writes it off
// (package doc, HalfOpenProbes across periods).
func TestPollyHalfOpenBreakDuration(t *testing.T) {
	conformance(t, pollyConfig(), func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		halfOpen(t, b)
		p, err := b.Allow()
		require.NoError(t, err)
		elapse(5 * time.Second)
		assert.True(t, rejects(b), "the probe is still out")
		p.Done(breaker.Success)
		assert.Equal(t, breaker.Closed, b.State())
	})
}

// --- App-vNext/Polly, test/Polly.Core.Tests/CircuitBreaker/Controller/AdvancedCircuitBehaviorTests.cs

// Polly AdvancedCircuitBehaviorTests OnActionFailure_WhenClosed_EnsureCorrectBehavior:
// the circuit breaks when the throughput reaches the minimum and the
// failure ratio reaches the threshold.
func TestPollyAdvancedBehaviorWhenClosed(t *testing.T) {
	for _, tc := range []struct {
		calls, failures int
		minThroughput   int
		ratio           float64
		breaks          bool
	}{
		{10, 0, 10, 0.1, false},
		{10, 1, 10, 0.1, true},
		{10, 2, 10, 0.1, true},
		{11, 3, 10, 0.1, true},
		{9, 1, 10, 0.1, false},
	} {
		b, _ := newBreaker(t, breaker.Config{ConsecutiveFailures: -1, FailureRatio: tc.ratio, MinCalls: tc.minThroughput})
		for i := range tc.calls {
			o := breaker.Success
			if i >= tc.calls-tc.failures {
				o = breaker.Failure
			}
			call(t, b, o)
			if b.State() == breaker.Open {
				break
			}
		}
		assert.Equal(t, tc.breaks, b.State() == breaker.Open, "%+v", tc)
		b.Reset()
	}
}

// Polly AdvancedCircuitBehaviorTests OnActionFailure_State_EnsureCorrectCalls:
// failures in half-open do not feed the closed state's health figures.
func TestPollyHalfOpenFailuresAreNotCounted(t *testing.T) {
	conformance(t, breaker.Config{ConsecutiveFailures: 1, FailureRatio: 0.5, MinCalls: 100}, func(t *testing.T, b *breaker.Breaker, _ *recorder) {
		halfOpen(t, b)
		outcomes(t, b, "f")
		elapse(breaker.DefaultCooldown)
		outcomes(t, b, "s")
		require.Equal(t, breaker.Closed, b.State())
		assert.Zero(t, b.Counts().Failures)
	})
}
