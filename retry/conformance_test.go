package retry_test

// Behavioural cases translated from the retry tests of
// failsafe-go/failsafe-go, resilience4j/resilience4j and App-vNext/Polly.
// Each test names the case it comes from. Where tierguard differs on
// purpose, the test asserts tierguard's behaviour and names the difference,
// listed in the package documentation ("Differences from failsafe-go,
// resilience4j and Polly").

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/retry"
)

// errTransient is retried; errPermanent (a 400) is not.
var (
	errTransient = failure(classify.Transient, 0)
	errPermanent = failure(classify.InvalidRequest, 0)
)

// counting returns a function that fails with err for its first n calls
// (n < 0: always), then succeeds, and the number of calls made.
func counting(err error, n int) (func(context.Context) error, *int) {
	calls := 0
	return func(context.Context) error {
		calls++
		if n < 0 || calls <= n {
			return err
		}
		return nil
	}, &calls
}

// recordWaits returns an OnAttempt hook that collects the waits planned.
func recordWaits(waits *[]time.Duration) func(retry.Attempt) {
	return func(a retry.Attempt) {
		if a.Retry {
			*waits = append(*waits, a.Wait)
		}
	}
}

// --- failsafe-go/failsafe-go, test/retrypolicy_test.go -----------------------

// failsafe-go test/retrypolicy_test.go "should retry on failure": the
// defaults make three attempts, and the failure comes through.
func TestFailsafeShouldRetryOnFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fn, calls := counting(errTransient, -1)
		err := do(context.Background(), retry.Policy{}, fn)
		assert.ErrorIs(t, err, errTransient)
		assert.Equal(t, 3, *calls)
	})
}

// failsafe-go test/retrypolicy_test.go "should not retry on success".
func TestFailsafeShouldNotRetryOnSuccess(t *testing.T) {
	fn, calls := counting(errTransient, 0)
	require.NoError(t, do(context.Background(), retry.Policy{}, fn))
	assert.Equal(t, 1, *calls)
}

// failsafe-go test/retrypolicy_test.go "should return ExceededError": two
// retries, then a dedicated error saying the attempts ran out.
func TestFailsafeShouldReturnExceededError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		retries := 0
		fn, _ := counting(errTransient, -1)
		err := do(context.Background(), retry.Policy{OnAttempt: func(a retry.Attempt) {
			if a.Retry {
				retries++
			}
		}}, fn)
		var se *retry.StoppedError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, retry.AttemptsExhausted, se.Reason)
		assert.Equal(t, 3, se.Attempts)
		assert.Equal(t, 2, retries)
	})
}

// failsafe-go test/retrypolicy_test.go "should return ExceededError with
// wrapped results": the error carries the last attempt's error.
// Difference: there are no results to carry (package doc, no retry on
// results).
func TestFailsafeExceededErrorWrapsTheLastError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		underlying := classify.Wrap(errors.New("test"), classify.Verdict{Class: classify.Transient})
		err := do(context.Background(), retry.Policy{}, func(context.Context) error { return underlying })
		var se *retry.StoppedError
		require.ErrorAs(t, err, &se)
		assert.Same(t, underlying, se.Last)
	})
}

// failsafe-go test/retrypolicy_test.go "should not retry on non-retriable
// failure": an error that is not handled is not retried.
func TestFailsafeShouldNotRetryOnNonRetriableFailure(t *testing.T) {
	fn, calls := counting(errPermanent, -1)
	err := do(context.Background(), retry.Policy{MaxAttempts: -1}, fn)
	assert.Same(t, errPermanent, err)
	assert.Equal(t, 1, *calls)
}

// failsafe-go test/retrypolicy_test.go "should fail when max duration
// exceeded": the second attempt runs past the 100ms limit and retrying
// stops after it.
func TestFailsafeShouldFailWhenMaxDurationExceeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		calls := 0
		err := do(ctx, retry.Policy{BaseDelay: time.Millisecond}, func(context.Context) error {
			calls++
			if calls == 2 {
				time.Sleep(120 * time.Millisecond)
			}
			return errTransient
		})
		var se *retry.StoppedError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, retry.DeadlineExceeded, se.Reason)
		assert.Equal(t, 2, calls)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

// failsafe-go test/retrypolicy_test.go "should return last failure": three
// retries make four attempts, and the last failure is what is returned.
// Difference: it comes wrapped in a *StoppedError that errors.Is sees
// through (package doc, StoppedError).
func TestFailsafeShouldReturnLastFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fn, calls := counting(errTransient, -1)
		err := do(context.Background(), retry.Policy{MaxAttempts: 4}, fn)
		assert.ErrorIs(t, err, errTransient)
		assert.Equal(t, 4, *calls)
	})
}

// failsafe-go test/retrypolicy_test.go "unlimited attempts": -1 retries
// until the function succeeds, on the sixth attempt.
func TestFailsafeUnlimitedAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fn, calls := counting(errTransient, 5)
		require.NoError(t, do(context.Background(), retry.Policy{MaxAttempts: -1}, fn))
		assert.Equal(t, 6, *calls)
	})
}

// failsafe-go test/retrypolicy_test.go "with backoff delay": from 1ms,
// doubling, capped at 10ms, over six retries.
func TestFailsafeWithBackoffDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var waits []time.Duration
		fn, _ := counting(errTransient, -1)
		_ = do(context.Background(), retry.Policy{MaxAttempts: 7, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond,
			Jitter: retry.NoJitter, OnAttempt: recordWaits(&waits)}, fn)
		ms := time.Millisecond
		assert.Equal(t, []time.Duration{ms, 2 * ms, 4 * ms, 8 * ms, 10 * ms, 10 * ms}, waits)
	})
}

// failsafe-go retrypolicy/retry_test.go TestRetriesExceededError,
// TestErrExceeded, TestIsExceededError and TestAsExceededError: the
// exceeded error is found with errors.Is and errors.As, and so is the
// error it wraps.
func TestFailsafeExceededErrorIsAndAs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cause := classify.Wrap(errors.New("connection reset"), classify.Verdict{Class: classify.Transient})
		err := do(context.Background(), retry.Policy{MaxAttempts: 2}, func(context.Context) error { return cause })
		var se *retry.StoppedError
		assert.True(t, errors.As(err, &se))
		assert.True(t, errors.Is(err, cause))
		assert.False(t, errors.Is(err, errPermanent))
		assert.Equal(t, classify.Transient, classify.Classify(err).Class)
	})
}

// --- resilience4j/resilience4j, resilience4j-retry/.../internal/SupplierRetryTest.java

// resilience4j SupplierRetryTest shouldNotRetry: a success, no sleep.
func TestR4jShouldNotRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		out, err := retry.Do(context.Background(), retry.Policy{}, func(context.Context) (string, error) { return "Hello world", nil })
		require.NoError(t, err)
		assert.Equal(t, "Hello world", out)
		assert.Zero(t, time.Since(start))
	})
}

// resilience4j SupplierRetryTest testDecorateSupplier and
// shouldReturnSuccessfullyAfterSecondAttempt: one failure, one wait, then
// the answer.
func TestR4jSuccessAfterSecondAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		n := 0
		out, err := retry.Do(context.Background(), retry.Policy{BaseDelay: 500 * time.Millisecond, Jitter: retry.NoJitter}, func(context.Context) (string, error) {
			n++
			if n == 1 {
				return "", errTransient
			}
			return "Hello world", nil
		})
		require.NoError(t, err)
		assert.Equal(t, "Hello world", out)
		assert.Equal(t, 2, n)
		assert.Equal(t, 500*time.Millisecond, time.Since(start))
	})
}

// resilience4j SupplierRetryTest testDecorateSupplierAndInvokeTwice: one
// policy serves many calls, each retried on its own.
func TestR4jPolicyIsReusable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := retry.Policy{BaseDelay: 500 * time.Millisecond, Jitter: retry.NoJitter}
		start := time.Now()
		total := 0
		for range 2 {
			fn, calls := counting(errTransient, 1)
			require.NoError(t, do(context.Background(), p, fn))
			total += *calls
		}
		assert.Equal(t, 4, total)
		assert.Equal(t, time.Second, time.Since(start))
	})
}

// resilience4j SupplierRetryTest shouldReturnAfterThreeAttempts and
// shouldReturnAfterThreeAttemptsAndRecover: three attempts, two waits.
// Difference: the waits grow (base, then twice the base) where
// resilience4j's default waits 500ms each time (package doc, backoff).
func TestR4jShouldReturnAfterThreeAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		fn, calls := counting(errTransient, -1)
		err := do(context.Background(), retry.Policy{BaseDelay: 500 * time.Millisecond, Jitter: retry.NoJitter}, fn)
		assert.ErrorIs(t, err, errTransient)
		assert.Equal(t, 3, *calls)
		assert.Equal(t, 1500*time.Millisecond, time.Since(start))
	})
}

// resilience4j SupplierRetryTest shouldReturnAfterOneAttempt: maxAttempts
// 1 makes one attempt and no wait.
func TestR4jShouldReturnAfterOneAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		fn, calls := counting(errTransient, -1)
		err := do(context.Background(), retry.Policy{MaxAttempts: 1}, fn)
		assert.ErrorIs(t, err, errTransient)
		assert.Equal(t, 1, *calls)
		assert.Zero(t, time.Since(start))
	})
}

// resilience4j SupplierRetryTest shouldReturnAfterOneAttemptAndIgnoreException:
// an error the policy does not retry is rethrown at once, as it is.
func TestR4jIgnoredExceptionIsRethrownAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		fn, calls := counting(errPermanent, -1)
		err := do(context.Background(), retry.Policy{}, fn)
		assert.Same(t, errPermanent, err)
		assert.Equal(t, 1, *calls)
		assert.Zero(t, time.Since(start))
	})
}

// resilience4j SupplierRetryTest shouldMarkThreadInterruptedWhenInterruptedDuringRetry
// and shouldThrowCancellationExceptionWhenInterruptedDuringRetryOnResult:
// interrupted during the wait, retrying stops with a cancellation.
func TestR4jInterruptedDuringRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		fn, calls := counting(errTransient, -1)
		go func() {
			time.Sleep(100 * time.Millisecond)
			cancel()
		}()
		err := do(ctx, retry.Policy{BaseDelay: time.Second, Jitter: retry.NoJitter}, fn)
		var se *retry.StoppedError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, retry.ContextCanceled, se.Reason)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, 1, *calls)
	})
}

// resilience4j SupplierRetryTest shouldTakeIntoAccountBackoffFunction: an
// exponential backoff from 500ms with multiplier 2 waits 500ms, then 1s.
func TestR4jExponentialBackoffFunction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		fn, calls := counting(errTransient, -1)
		_ = do(context.Background(), retry.Policy{BaseDelay: 500 * time.Millisecond, Jitter: retry.NoJitter}, fn)
		assert.Equal(t, 3, *calls)
		assert.Equal(t, 1500*time.Millisecond, time.Since(start))
	})
}

// resilience4j SupplierRetryTest shouldUseBackoffBiFunctionWhenRetryWithResult:
// the wait is taken from the failed attempt (100ms, then 200ms). tierguard
// takes it from the server's retry-after carried by the error.
func TestR4jWaitFromTheFailedAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		n := 0
		out, err := retry.Do(context.Background(), retry.Policy{BaseDelay: time.Millisecond, Jitter: retry.NoJitter}, func(context.Context) (string, error) {
			n++
			switch n {
			case 1:
				return "", failure(classify.RateLimited, 100*time.Millisecond)
			case 2:
				return "", failure(classify.RateLimited, 200*time.Millisecond)
			}
			return "Hello world", nil
		})
		require.NoError(t, err)
		assert.Equal(t, "Hello world", out)
		assert.Equal(t, 300*time.Millisecond, time.Since(start))
	})
}

// resilience4j SupplierRetryTest shouldThrowMaxRetriesExceededIfConfigured:
// the error says the attempts are exhausted, and how many were made.
func TestR4jMaxRetriesExceeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fn, calls := counting(errTransient, -1)
		err := do(context.Background(), retry.Policy{MaxAttempts: 3}, fn)
		assert.Contains(t, err.Error(), "retry stopped after 3 attempts (attempts exhausted)")
		assert.Equal(t, 3, *calls)
	})
}

// resilience4j SupplierRetryTest shouldRetryWithResult. Difference: a value
// returned with a nil error is a success and is not retried (package doc,
// no retry on results).
func TestR4jNoRetryOnResult(t *testing.T) {
	n := 0
	out, err := retry.Do(context.Background(), retry.Policy{MaxAttempts: 2}, func(context.Context) (string, error) { n++; return "Hello world", nil })
	require.NoError(t, err)
	assert.Equal(t, "Hello world", out)
	assert.Equal(t, 1, n)
}

// --- App-vNext/Polly, test/Polly.Core.Tests/Retry/RetryResilienceStrategyTests.cs

// Polly RetryResilienceStrategyTests ExecuteAsync_CanceledBeforeExecution_EnsureNotExecuted.
// Difference: the first attempt is made on the ended context (the function
// sees it), then retrying stops (package doc, first attempt).
func TestPollyCanceledBeforeExecution(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := 0
	err := do(ctx, retry.Policy{}, func(ctx context.Context) error { calls++; return ctx.Err() })
	var se *retry.StoppedError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, retry.ContextCanceled, se.Reason)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 1, calls)
}

// Polly RetryResilienceStrategyTests ExecuteAsync_CanceledDuringExecution_EnsureResultReturned:
// an attempt that succeeds is returned even if the context was canceled
// meanwhile.
func TestPollyCanceledDuringExecutionResultReturned(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	out, err := retry.Do(ctx, retry.Policy{}, func(context.Context) (string, error) { calls++; cancel(); return "result", nil })
	require.NoError(t, err)
	assert.Equal(t, "result", out)
	assert.Equal(t, 1, calls)
}

// Polly RetryResilienceStrategyTests ExecuteAsync_CanceledDuringExecution_EnsureNotExecutedAgain:
// an attempt that fails after the context was canceled is reported and not
// retried.
func TestPollyCanceledDuringExecutionNotExecutedAgain(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	reported := false
	calls := 0
	err := do(ctx, retry.Policy{OnAttempt: func(retry.Attempt) { reported = true }}, func(context.Context) error {
		calls++
		cancel()
		return errTransient
	})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 1, calls)
	assert.True(t, reported)
}

// Polly RetryResilienceStrategyTests ExecuteAsync_CanceledAfterExecution_EnsureNotExecutedAgain:
// canceled from the retry hook, the next attempt is not made.
func TestPollyCanceledAfterExecution(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		fn, calls := counting(errTransient, -1)
		err := do(ctx, retry.Policy{OnAttempt: func(a retry.Attempt) {
			if a.Retry {
				cancel()
			}
		}}, fn)
		var se *retry.StoppedError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, retry.ContextCanceled, se.Reason)
		assert.Equal(t, 1, *calls)
	})
}

// Polly RetryResilienceStrategyTests ExecuteAsync_CanceledDuringDelay_EnsureNotExecutedAgain:
// a context that ends during the delay stops retrying. Difference: a delay
// that would outlast the deadline is not started at all (package doc,
// decided before sleeping).
func TestPollyCanceledDuringDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		delay := 2 * time.Second
		ctx, cancel := context.WithTimeout(context.Background(), delay)
		defer cancel()
		start := time.Now()
		fn, calls := counting(errTransient, -1)
		err := do(ctx, retry.Policy{BaseDelay: delay, Jitter: retry.NoJitter}, fn)
		var se *retry.StoppedError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, retry.DeadlineTooClose, se.Reason)
		assert.Equal(t, 1, *calls)
		assert.Zero(t, time.Since(start), "no sleep")
	})
}

// Polly RetryResilienceStrategyTests Retry_RetryCount_Respected and
// RetryException_RetryCount_Respected: twelve retries mean thirteen
// attempts (Polly counts retries, tierguard attempts: package doc,
// MaxAttempts).
func TestPollyRetryCountRespected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		retries := 0
		fn, calls := counting(errTransient, -1)
		_ = do(context.Background(), retry.Policy{MaxAttempts: 13, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, OnAttempt: func(a retry.Attempt) {
			if a.Retry {
				retries++
			}
		}}, fn)
		assert.Equal(t, 12, retries)
		assert.Equal(t, 13, *calls)
	})
}

// Polly RetryResilienceStrategyTests RetryDelayGenerator_Respected: a delay
// supplied for each retry (here the server's retry-after) is used as it is.
func TestPollyRetryDelayGeneratorRespected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var waits []time.Duration
		fn, _ := counting(failure(classify.RateLimited, 120*time.Millisecond), -1)
		_ = do(context.Background(), retry.Policy{MaxAttempts: 4, BaseDelay: time.Millisecond, OnAttempt: recordWaits(&waits)}, fn)
		assert.Equal(t, []time.Duration{120 * time.Millisecond, 120 * time.Millisecond, 120 * time.Millisecond}, waits)
	})
}

// Polly RetryResilienceStrategyTests OnRetry_EnsureCorrectArguments: each
// retry reports its attempt number and delay. tierguard numbers attempts
// from 1 (Polly's AttemptNumber from 0) and doubles the delay (Polly's test
// uses a linear one).
func TestPollyOnRetryArguments(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen []retry.Attempt
		fn, _ := counting(errTransient, -1)
		_ = do(context.Background(), retry.Policy{MaxAttempts: 4, BaseDelay: 2 * time.Second, MaxDelay: time.Minute, Jitter: retry.NoJitter,
			OnAttempt: func(a retry.Attempt) { seen = append(seen, a) }}, fn)
		require.Len(t, seen, 4)
		for i, a := range seen[:3] {
			assert.Equal(t, i+1, a.N)
			assert.True(t, a.Retry)
			assert.Equal(t, classify.Transient, a.Verdict.Class)
		}
		assert.Equal(t, []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second}, []time.Duration{seen[0].Wait, seen[1].Wait, seen[2].Wait})
		assert.Equal(t, retry.AttemptsExhausted, seen[3].Stop)
	})
}

// Polly RetryResilienceStrategyTests MaxDelay_EnsureRespected: no backoff
// wait exceeds MaxDelay.
func TestPollyMaxDelayRespected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var waits []time.Duration
		fn, _ := counting(errTransient, -1)
		_ = do(context.Background(), retry.Policy{MaxAttempts: 4, BaseDelay: 100 * time.Millisecond, MaxDelay: 123 * time.Millisecond,
			Jitter: retry.NoJitter, OnAttempt: recordWaits(&waits)}, fn)
		ms := time.Millisecond
		assert.Equal(t, []time.Duration{100 * ms, 123 * ms, 123 * ms}, waits)
	})
}

// --- App-vNext/Polly, test/Polly.Core.Tests/Retry/RetryHelperTests.cs --------

// Polly RetryHelperTests Exponential_Ok: base·2ⁿ for the n-th retry
// counted from 0 — the same sequence as tierguard's base·2ⁿ⁻¹ for failed
// attempt n counted from 1.
func TestPollyExponentialOk(t *testing.T) {
	p := retry.Policy{BaseDelay: time.Second, MaxDelay: time.Hour, Jitter: retry.NoJitter}
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second},
		[]time.Duration{p.Backoff(1), p.Backoff(2), p.Backoff(3), p.Backoff(4)})
}

// Polly RetryHelperTests MaxDelay_Ok and MaxDelay_DelayLessThanMaxDelay_Respected.
func TestPollyMaxDelayOk(t *testing.T) {
	p := retry.Policy{BaseDelay: time.Second, MaxDelay: 3 * time.Second, Jitter: retry.NoJitter}
	assert.Equal(t, time.Second, p.Backoff(1), "below the cap, the delay as computed")
	assert.Equal(t, 3*time.Second, p.Backoff(3), "above it, the cap")
	for n := 1; n < 10; n++ {
		for _, j := range []retry.Jitter{retry.FullJitter, retry.EqualJitter} {
			p.Jitter = j
			assert.LessOrEqual(t, p.Backoff(n), 3*time.Second)
		}
	}
}

// Polly RetryHelperTests GetRetryDelay_Overflow_ReturnsMaxTimeSpan,
// GetRetryDelay_OverflowWithMaxDelay_ReturnsMaxDelay and
// GetRetryDelay_Exponential_Is_Positive_When_No_Maximum_Delay: however many
// attempts, the backoff never overflows and stays at its cap.
func TestPollyBackoffOverflow(t *testing.T) {
	p := retry.Policy{BaseDelay: time.Second, MaxDelay: math.MaxInt64, Jitter: retry.NoJitter}
	for _, n := range []int{63, 64, 1000, math.MaxInt32} {
		assert.Positive(t, p.Backoff(n), "attempt %d", n)
	}
	p.MaxDelay = time.Minute
	assert.Equal(t, time.Minute, p.Backoff(math.MaxInt32))
}

// Polly RetryHelperTests ApplyJitter_Meets_Specification and
// ExponentialWithJitter_EnsureRandomness: jittered delays stay within their
// bounds and vary. Full jitter lies in [0, backoff], equal jitter in
// [backoff/2, backoff].
func TestPollyJitterMeetsSpecification(t *testing.T) {
	p := retry.Policy{BaseDelay: time.Second, MaxDelay: time.Hour}
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := p.Backoff(3)
		require.GreaterOrEqual(t, d, time.Duration(0))
		require.LessOrEqual(t, d, 4*time.Second)
		seen[d] = true
	}
	assert.Greater(t, len(seen), 100, "the delays vary")
	p.Jitter = retry.EqualJitter
	for range 1000 {
		d := p.Backoff(3)
		require.GreaterOrEqual(t, d, 2*time.Second)
		require.LessOrEqual(t, d, 4*time.Second)
	}
}

// --- App-vNext/Polly, test/Polly.Core.Tests/Issues/IssuesTests.InfiniteRetry_2163.cs

// Polly IssuesTests InfiniteRetry_Delay_Does_Not_Overflow_2163: unlimited
// retries with an exponential, jittered delay from 2s capped at 30s reach
// success after 2049 attempts, every delay within bounds. Difference: full
// jitter may wait 0 (Polly's jitter never does).
func TestPollyInfiniteRetryDelayDoesNotOverflow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const succeedAfter = 2049
		var waits []time.Duration
		fn, calls := counting(errTransient, succeedAfter-1)
		require.NoError(t, do(context.Background(), retry.Policy{MaxAttempts: -1, BaseDelay: 2 * time.Second, MaxDelay: 30 * time.Second,
			OnAttempt: recordWaits(&waits)}, fn))
		assert.Equal(t, succeedAfter, *calls)
		require.Len(t, waits, succeedAfter-1)
		for _, w := range waits {
			require.GreaterOrEqual(t, w, time.Duration(0))
			require.LessOrEqual(t, w, 30*time.Second)
		}
	})
}
