package retry_test

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
	"github.com/tierguard/tierguard/deadline"
	"github.com/tierguard/tierguard/retry"
)

// TestDecideNeverPlansAWaitPastTheDeadline: a verdict asking for an absurd
// wait (math.MaxInt64, from an SDK adapter or a custom classifier; the
// standard classifier caps at 24h) stops at once instead of planning a
// retry that could never happen. Found by the chaos soak.
func TestDecideNeverPlansAWaitPastTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		p := retry.Policy{}.WithDefaults()
		b := deadline.New(ctx, 0)
		for _, wait := range []time.Duration{math.MaxInt64, math.MaxInt64 - 1, classify.MaxRetryAfter, time.Second} {
			a := p.DecideIn(1, classify.Verdict{Class: classify.RateLimited, RetryAfter: wait}, b, deadline.Try{MinUseful: 10 * time.Millisecond})
			assert.False(t, a.Retry, "retry-after %v", wait)
			assert.Equal(t, retry.DeadlineTooClose, a.Stop, "retry-after %v", wait)
			assert.Zero(t, a.Wait)
		}

		start := time.Now()
		err := do(ctx, retry.Policy{}, func(context.Context) error {
			return classify.Wrap(errors.New("429"), classify.Verdict{Class: classify.RateLimited, RetryAfter: math.MaxInt64})
		})
		var se *retry.StoppedError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, retry.DeadlineTooClose, se.Reason)
		assert.Zero(t, time.Since(start), "no sleep to the deadline")
	})
}

// TestNegativeRetryAfterIsNoWait: a negative server delay never makes a
// negative (or an early) wait.
func TestNegativeRetryAfterIsNoWait(t *testing.T) {
	p := retry.Policy{Jitter: retry.NoJitter, BaseDelay: time.Millisecond}.WithDefaults()
	a := p.DecideIn(1, classify.Verdict{Class: classify.RateLimited, RetryAfter: math.MinInt64}, deadline.New(context.Background(), 0), deadline.Try{})
	require.True(t, a.Retry)
	assert.Equal(t, time.Millisecond, a.Wait, "the backoff, not the negative delay")
}

// TestMoreConfigErrorsNameTheirField completes TestInvalidConfig.
func TestMoreConfigErrorsNameTheirField(t *testing.T) {
	_, err := retry.NewBudget(math.NaN(), 0.1)
	assert.ErrorContains(t, err, "maxTokens")
	_, err = retry.NewBudget(math.Inf(1), 0.1)
	assert.ErrorContains(t, err, "maxTokens")
	_, err = retry.NewBudget(10, 20)
	assert.ErrorContains(t, err, "tokenRatio")
	_, err = retry.NewBudget(10, math.NaN())
	assert.ErrorContains(t, err, "tokenRatio")
	err = retry.Policy{BaseDelay: -1, MaxDelay: -1, Jitter: 9}.Validate()
	for _, want := range []string{"BaseDelay", "MaxDelay", "Jitter"} {
		assert.ErrorContains(t, err, want)
	}
}
