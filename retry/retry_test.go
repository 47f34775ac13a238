package retry_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/deadline"
	"github.com/tierguard/tierguard/retry"
)

func failure(c classify.Class, retryAfter time.Duration) error {
	return classify.Wrap(errors.New(c.String()), classify.Verdict{Class: c, RetryAfter: retryAfter})
}

// script returns a function that fails with errs in turn, then succeeds, and
// records the time of each call.
func script(errs ...error) (func(context.Context) error, *[]time.Duration) {
	start := time.Now()
	var at []time.Duration
	n := 0
	return func(context.Context) error {
		at = append(at, time.Since(start))
		if n < len(errs) {
			n++
			return errs[n-1]
		}
		return nil
	}, &at
}

func TestRetriesTransientWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fn, at := script(failure(classify.Transient, 0), failure(classify.Transient, 0))
		var seen []retry.Attempt
		p := retry.Policy{MaxAttempts: 3, BaseDelay: 100 * time.Millisecond, Jitter: retry.NoJitter,
			OnAttempt: func(a retry.Attempt) { seen = append(seen, a) }}
		require.NoError(t, do(context.Background(), p, fn))
		assert.Equal(t, []time.Duration{0, 100 * time.Millisecond, 300 * time.Millisecond}, *at)
		require.Len(t, seen, 3)
		assert.Equal(t, retry.Attempt{N: 1, Verdict: classify.Verdict{Class: classify.Transient}, Retry: true, Wait: 100 * time.Millisecond}, seen[0])
		assert.Equal(t, 200*time.Millisecond, seen[1].Wait)
		assert.Equal(t, retry.Attempt{N: 3}, seen[2])
	})
}

func TestRetryAfterWinsOverBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fn, at := script(failure(classify.RateLimited, 3*time.Second))
		p := retry.Policy{BaseDelay: 100 * time.Millisecond, Jitter: retry.NoJitter}
		require.NoError(t, do(context.Background(), p, fn))
		assert.Equal(t, []time.Duration{0, 3 * time.Second}, *at)
	})
}

func TestPermanentErrorsReturnAfterOneAttempt(t *testing.T) {
	for _, c := range []classify.Class{classify.Retired, classify.InvalidRequest, classify.Auth, classify.Safety, classify.QuotaExhausted, classify.ContextTooLong, classify.Unknown} {
		t.Run(c.String(), func(t *testing.T) {
			want := failure(c, 0)
			fn, at := script(want, want)
			err := do(context.Background(), retry.Policy{}, fn)
			assert.Same(t, want, err, "a permanent error comes back as it was")
			assert.Len(t, *at, 1)
		})
	}
}

func TestAttemptsExhausted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		last := failure(classify.Transient, 0)
		fn, at := script(failure(classify.Transient, 0), failure(classify.Transient, 0), last)
		err := do(context.Background(), retry.Policy{MaxAttempts: 3}, fn)
		var se *retry.StoppedError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, 3, se.Attempts)
		assert.Equal(t, retry.AttemptsExhausted, se.Reason)
		assert.ErrorIs(t, err, last)
		assert.Equal(t, classify.Transient, classify.Classify(err).Class, "the last error's class shows through")
		assert.Len(t, *at, 3)
		assert.Contains(t, err.Error(), "after 3 attempts (attempts exhausted)")
	})
}

func TestDecidesBeforeSleepingPastTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		fn, at := script(failure(classify.RateLimited, 37*time.Second))
		err := do(ctx, retry.Policy{}, fn)
		var se *retry.StoppedError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, retry.DeadlineTooClose, se.Reason)
		assert.Zero(t, time.Since(start), "no sleep at all: the caller can fall back at once")
		assert.Len(t, *at, 1)
	})
}

func TestDecideKeepsTheReserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p := retry.Policy{Jitter: retry.NoJitter, BaseDelay: time.Second}.WithDefaults()
		b := deadline.New(ctx, 0)
		v := classify.Verdict{Class: classify.RateLimited, RetryAfter: 5 * time.Second}
		a := p.DecideIn(1, v, b, deadline.Try{Reserve: 4 * time.Second, MinUseful: time.Second})
		assert.True(t, a.Retry, "5s wait + 1s attempt fits in 10s - 4s reserve")
		a = p.DecideIn(1, v, b, deadline.Try{Reserve: 4*time.Second + 1, MinUseful: time.Second})
		assert.Equal(t, retry.DeadlineTooClose, a.Stop)
	})
}

func TestCancelEndsTheSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		start := time.Now()
		go func() {
			time.Sleep(50 * time.Millisecond)
			cancel()
		}()
		last := failure(classify.Transient, 0)
		fn, _ := script(last)
		err := do(ctx, retry.Policy{BaseDelay: time.Hour, MaxDelay: time.Hour, Jitter: retry.NoJitter}, fn)
		assert.Equal(t, 50*time.Millisecond, time.Since(start))
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, err, last)
		var se *retry.StoppedError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, retry.ContextCanceled, se.Reason)
	})
}

func TestPerTryTimeoutIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		err := do(context.Background(), retry.Policy{MaxAttempts: 2}, func(ctx context.Context) error {
			calls++
			if calls == 1 {
				return context.DeadlineExceeded // the attempt's own timeout
			}
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, 2, calls)
	})
}

func TestBackoffCeiling(t *testing.T) {
	p := retry.Policy{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}.WithDefaults()
	for n := 1; n <= 10; n++ {
		ceiling := min(100*time.Millisecond<<(n-1), time.Second)
		for range 200 {
			d := p.Backoff(n)
			assert.GreaterOrEqual(t, d, time.Duration(0))
			assert.LessOrEqual(t, d, ceiling)
		}
		p.Jitter = retry.EqualJitter
		for range 200 {
			d := p.Backoff(n)
			assert.GreaterOrEqual(t, d, ceiling/2)
			assert.LessOrEqual(t, d, ceiling)
		}
		p.Jitter = retry.NoJitter
		assert.Equal(t, ceiling, p.Backoff(n))
		p.Jitter = retry.FullJitter
	}
	assert.Equal(t, time.Second, retry.Policy{BaseDelay: time.Second, MaxDelay: time.Second, Jitter: retry.NoJitter}.WithDefaults().Backoff(1000))
}

func TestBudgetThrottlesRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		budget, err := retry.NewBudget(4, 1)
		require.NoError(t, err)
		p := retry.Policy{MaxAttempts: 10, BaseDelay: time.Millisecond, Budget: budget}
		fn, at := script(failure(classify.Transient, 0), failure(classify.Transient, 0), failure(classify.Transient, 0), failure(classify.Transient, 0))
		err = do(context.Background(), p, fn)
		var se *retry.StoppedError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, retry.BudgetExhausted, se.Reason)
		assert.Len(t, *at, 2, "4 tokens: one failure leaves 3 > 2, a second leaves 2, not > 2")
		assert.Equal(t, 2.0, budget.Tokens())

		// Non-retryable failures leave the budget alone.
		permanent, _ := script(failure(classify.InvalidRequest, 0))
		_ = do(context.Background(), p, permanent)
		assert.Equal(t, 2.0, budget.Tokens())

		// Successes refill it.
		ok, _ := script()
		require.NoError(t, do(context.Background(), p, ok))
		assert.Equal(t, 3.0, budget.Tokens())
		assert.True(t, budget.Allow())
	})
}

func TestBudgetIsShared(t *testing.T) {
	budget, err := retry.NewBudget(10, 0.1)
	require.NoError(t, err)
	p := retry.Policy{MaxAttempts: 3, BaseDelay: time.Nanosecond, MaxDelay: time.Nanosecond, Budget: budget}
	var mu sync.Mutex
	calls := 0
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			_ = do(context.Background(), p, func(context.Context) error {
				mu.Lock()
				calls++
				mu.Unlock()
				return failure(classify.Transient, 0)
			})
		})
	}
	wg.Wait()
	// 16 first attempts; the bucket allows retries only while above 5
	// tokens, so at most 5 failures' worth of retries in all.
	assert.LessOrEqual(t, calls, 16+5)
	assert.GreaterOrEqual(t, calls, 16)
}

func TestInvalidConfig(t *testing.T) {
	_, err := retry.NewBudget(0, 0.1)
	assert.ErrorContains(t, err, "maxTokens")
	_, err = retry.NewBudget(10, 0)
	assert.ErrorContains(t, err, "tokenRatio")
	err = retry.Policy{MaxAttempts: -1, BaseDelay: time.Minute, MaxDelay: time.Second}.Validate()
	assert.NotContains(t, err.Error(), "MaxAttempts", "a negative MaxAttempts means no limit")
	assert.ErrorContains(t, err, "exceeds MaxDelay")
	assert.NoError(t, retry.Policy{}.Validate())
}

func TestRunReturnsValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		out, err := retry.Do(context.Background(), retry.Policy{}, func(context.Context) (string, error) {
			n++
			if n == 1 {
				return "", failure(classify.Transient, 0)
			}
			return "answer", nil
		})
		require.NoError(t, err)
		assert.Equal(t, "answer", out)
	})
}

func BenchmarkDoSuccess(b *testing.B) {
	ctx := context.Background()
	p := retry.Policy{}
	fn := func(context.Context) (string, error) { return "ok", nil }
	b.ReportAllocs()
	for b.Loop() {
		_, _ = retry.Do(ctx, p, fn)
	}
}

func TestRunSuccessAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	p := retry.Policy{}
	fn := func(context.Context) (string, error) { return "ok", nil }
	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = retry.Do(ctx, p, fn) }))
}

func TestBackoffNeverOverflows(t *testing.T) {
	p := retry.Policy{BaseDelay: time.Duration(1) << 61, MaxDelay: time.Duration(1<<63 - 1), Jitter: retry.NoJitter}.WithDefaults()
	for n := 1; n < 70; n++ {
		d := p.Backoff(n)
		assert.GreaterOrEqual(t, d, time.Duration(0), "attempt %d", n)
	}
	p.Jitter = retry.FullJitter
	assert.GreaterOrEqual(t, p.Backoff(64), time.Duration(0))
}

func FuzzBackoff(f *testing.F) {
	f.Add(int64(time.Millisecond), int64(time.Second), 3, uint8(0))
	f.Add(int64(1)<<62, int64(1<<63-1), 64, uint8(2))
	f.Fuzz(func(t *testing.T, base, maxDelay int64, n int, jitter uint8) {
		p := retry.Policy{BaseDelay: time.Duration(base), MaxDelay: time.Duration(maxDelay), Jitter: retry.Jitter(jitter % 3)}
		if p.Validate() != nil || n < 1 || n > 1000 {
			return
		}
		p = p.WithDefaults()
		if d := p.Backoff(n); d < 0 || d > p.MaxDelay {
			t.Fatalf("Backoff(%d) = %v with %+v", n, d, p)
		}
	})
}

// do runs fn, which returns only an error, under p.
func do(ctx context.Context, p retry.Policy, fn func(context.Context) error) error {
	_, err := retry.Do(ctx, p, func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) })
	return err
}
