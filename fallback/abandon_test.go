package fallback_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
)

// TestStuckTierIsAbandonedAtTheDeadline: a tier that ignores its context
// cannot hold the request; the stuck call keeps its slot and is counted
// until it returns.
func TestStuckTierIsAbandonedAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		unblock := make(chan struct{})
		stuck := fallback.Tier("pro", func(ctx context.Context, _ string) (string, error) {
			<-unblock // ignores ctx
			return "too late", nil
		})
		bh := newBulkhead(t, "pro", 2)
		br := newBreaker(t, breaker.Config{Name: "pro", ConsecutiveFailures: 1})
		c := newChain(t, fallback.Config[string, string]{
			Stages: []fallback.Stage[string, string]{
				{Tier: stuck, Bulkhead: bh, Breaker: br, TryTimeout: time.Second},
				{Tier: newFake("flash", ok("quick"))},
			},
			AbandonAfter: 100 * time.Millisecond,
		})
		start := time.Now()
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "quick", res.Value)
		assert.Equal(t, 1100*time.Millisecond, time.Since(start), "per-try timeout plus the grace")
		assert.ErrorIs(t, res.Attempts()[0].Err, fallback.ErrAbandoned)
		assert.Equal(t, classify.Transient, res.Attempts()[0].Verdict.Class)
		assert.Equal(t, 1, res.Attempts()[0].N, "no retry on a tier that ignores its context")
		assert.Equal(t, breaker.Open, br.State())
		assert.Equal(t, fallback.Stats{Abandoned: 1, Stuck: 1}, c.Stats())
		assert.Equal(t, 1, bh.Stats().InFlight, "the stuck call holds its slot")

		close(unblock)
		synctest.Wait()
		assert.Equal(t, fallback.Stats{Abandoned: 1, Stuck: 0}, c.Stats())
		assert.Zero(t, bh.Stats().InFlight, "released when the call finally returned")
	})
}

func TestDetachedCallsAnswerNormally(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slowButFair := newFake("pro", step{fn: func(ctx context.Context) (string, error) {
			select {
			case <-time.After(50 * time.Millisecond):
				return "deep", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}})
		c := newChain(t, fallback.Config[string, string]{Stages: stages(slowButFair), AbandonAfter: time.Second})
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "deep", res.Value)
		assert.Equal(t, fallback.Stats{}, c.Stats())

		boom := fallback.Tier("boom", func(context.Context, string) (string, error) { panic("tier exploded") })
		c = newChain(t, fallback.Config[string, string]{Stages: stages(boom), AbandonAfter: time.Second})
		assertCarriedPanic(t, "tier exploded", func() { _, _ = c.Do(context.Background(), "q") })
	})
}
