package retry_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/deadline"
	"github.com/tierguard/tierguard/retry"
)

// TestZeroPolicyDecides: the zero Policy works as documented without
// WithDefaults — Decide and Backoff apply the defaults themselves.
func TestZeroPolicyDecides(t *testing.T) {
	var p retry.Policy
	b := deadline.New(context.Background(), 0)
	v := classify.Verdict{Class: classify.Transient}
	a := p.DecideIn(1, v, b, deadline.Try{})
	assert.True(t, a.Retry, "attempt 1 of DefaultMaxAttempts")
	assert.LessOrEqual(t, a.Wait, retry.DefaultBaseDelay)
	assert.True(t, p.DecideIn(2, v, b, deadline.Try{}).Retry)
	assert.Equal(t, retry.AttemptsExhausted, p.DecideIn(3, v, b, deadline.Try{}).Stop)
	assert.Equal(t, retry.NotRetryable, p.DecideIn(1, classify.Verdict{Class: classify.InvalidRequest}, b, deadline.Try{}).Stop)
	assert.Equal(t, 2*retry.DefaultBaseDelay, retry.Policy{Jitter: retry.NoJitter}.Backoff(2))
}

// TestBackoffFormula: the backoff after failed attempt n (n ≥ 1), before
// attempt n+1, is min(MaxDelay, BaseDelay·2ⁿ⁻¹) before jitter: BaseDelay
// before the second attempt, twice that before the third.
func TestBackoffFormula(t *testing.T) {
	p := retry.Policy{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second, Jitter: retry.NoJitter}
	var got []time.Duration
	for n := 1; n <= 6; n++ {
		got = append(got, p.Backoff(n))
	}
	assert.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}, got)
	assert.Equal(t, 100*time.Millisecond, p.Backoff(0), "n below 1 is the first backoff")
}

// TestContextStopSaysWhich: when the caller's context ends — canceled, or
// past its deadline — during an attempt or the wait after it, Run stops with
// a *StoppedError whose reason says which, wrapping both the context's error
// and the last attempt's.
func TestContextStopSaysWhich(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		run := func(ctx context.Context, cancel func(), sleepInside bool) ([]retry.Attempt, error) {
			var seen []retry.Attempt
			p := retry.Policy{BaseDelay: time.Hour, MaxDelay: time.Hour, Jitter: retry.NoJitter, OnAttempt: func(a retry.Attempt) { seen = append(seen, a) }}
			err := do(ctx, p, func(ctx context.Context) error {
				if cancel != nil {
					cancel()
				}
				if sleepInside {
					<-ctx.Done()
				}
				return failure(classify.Transient, 0)
			})
			return seen, err
		}

		ctx, cancel := context.WithCancel(context.Background())
		seen, err := run(ctx, cancel, false)
		var se *retry.StoppedError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, retry.ContextCanceled, se.Reason)
		assert.Equal(t, 1, se.Attempts)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, classify.Transient, classify.Classify(se.Last).Class, "the last attempt's error is kept")
		require.Len(t, seen, 1)
		assert.Equal(t, retry.ContextCanceled, seen[0].Stop)
		assert.Contains(t, err.Error(), "(context canceled)")

		dctx, dcancel := context.WithTimeout(context.Background(), time.Second)
		defer dcancel()
		seen, err = run(dctx, nil, true)
		require.ErrorAs(t, err, &se)
		assert.Equal(t, retry.DeadlineExceeded, se.Reason)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, retry.DeadlineExceeded, seen[0].Stop)

		// Canceled while waiting to retry.
		wctx, wcancel := context.WithCancel(context.Background())
		go func() {
			time.Sleep(time.Minute)
			wcancel()
		}()
		_, err = run(wctx, nil, false)
		require.ErrorAs(t, err, &se)
		assert.Equal(t, retry.ContextCanceled, se.Reason)
		assert.ErrorIs(t, err, context.Canceled)
	})
}

// TestUnlimitedAttempts: a negative MaxAttempts retries until success, a
// non-retryable error, the shared budget or the deadline stops it.
func TestUnlimitedAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var errs []error
		for range 20 {
			errs = append(errs, failure(classify.Transient, 0))
		}
		fn, at := script(errs...)
		p := retry.Policy{MaxAttempts: -1, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond}
		require.NoError(t, p.Validate())
		require.NoError(t, do(context.Background(), p, fn))
		assert.Len(t, *at, 21)

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		calls := 0
		err := do(ctx, retry.Policy{MaxAttempts: -1, BaseDelay: 100 * time.Millisecond, MaxDelay: 100 * time.Millisecond, Jitter: retry.NoJitter},
			func(context.Context) error { calls++; return failure(classify.Transient, 0) })
		var se *retry.StoppedError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, retry.DeadlineTooClose, se.Reason, "within the deadline, then stopped before sleeping past it")
		assert.Equal(t, 10, calls)

		permanent := errors.New("400")
		calls = 0
		err = do(context.Background(), retry.Policy{MaxAttempts: -1}, func(context.Context) error {
			calls++
			return classify.Wrap(permanent, classify.Verdict{Class: classify.InvalidRequest})
		})
		assert.ErrorIs(t, err, permanent)
		assert.Equal(t, 1, calls)
	})
}
