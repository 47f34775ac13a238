package fallback_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/ratelimit"
	"github.com/tierguard/tierguard/retry"
)

// The answer of a hedge that won is marked as the hedge's, in the trail and
// in its AttemptEnded, with its pool member: dashboards see the hedges that
// won, not only those that lost.
func TestWinningHedgeIsMarked(t *testing.T) {
	t.Run("next tier", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var proCalls, flashCalls atomic.Int64
			var obs events
			c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
				{Tier: slowTier("pro", &proCalls, func() time.Duration { return 5 * time.Second }), Hedge: fallback.Hedge{Delay: 100 * time.Millisecond, MaxExtra: 1}},
				{Tier: slowTier("flash", &flashCalls, func() time.Duration { return 50 * time.Millisecond })},
			}, Observer: &obs})
			res, err := c.Do(context.Background(), "q")
			require.NoError(t, err)
			require.Equal(t, "flash", res.Tier)
			a := res.Attempts()
			require.Len(t, a, 2)
			assert.False(t, a[0].Hedge, "pro's own call lost")
			assert.True(t, a[1].Hedge, "flash answered as the hedge")
			assert.Equal(t, 1, a[1].N, "the hedge is part of the first attempt")
			var won []fallback.Event
			for _, e := range obs.of(fallback.AttemptEnded) {
				if e.Verdict.Class == classify.OK {
					won = append(won, e)
				}
			}
			require.Len(t, won, 1)
			assert.True(t, won[0].Hedge)
			assert.Equal(t, "flash", won[0].Tier)
			synctest.Wait()
		})
	})
	t.Run("pool member", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var aCalls, bCalls, calls atomic.Int64
			// Whichever member is asked first hangs; the other answers.
			lat := func() time.Duration {
				if calls.Add(1) == 1 {
					return 5 * time.Second
				}
				return 50 * time.Millisecond
			}
			pool, err := fallback.NewPool(fallback.PoolConfig[string, string]{Name: "pro", Members: []fallback.Member[string, string]{
				{Key: "key-a", Tier: slowTier("a", &aCalls, lat)},
				{Key: "key-b", Tier: slowTier("b", &bCalls, lat)},
			}})
			require.NoError(t, err)
			var obs events
			c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
				{Tier: pool, Hedge: fallback.Hedge{Delay: 100 * time.Millisecond, MaxExtra: 1}},
			}, Observer: &obs})
			res, err := c.Do(context.Background(), "q")
			require.NoError(t, err)
			a := res.Attempts()
			require.Len(t, a, 2)
			slow, fast := a[0].Member, a[1].Member
			assert.NotEmpty(t, slow)
			assert.NotEmpty(t, fast)
			assert.NotEqual(t, slow, fast)
			assert.True(t, a[1].Hedge)
			assert.Equal(t, classify.OK, a[1].Verdict.Class)
			ended := obs.of(fallback.AttemptEnded)
			require.Len(t, ended, 2)
			assert.Equal(t, fast, ended[1].Member)
			assert.True(t, ended[1].Hedge)
			synctest.Wait()
		})
	})
}

// A hedge on another member of a pool runs in a window of its own, as the
// first call does: the stage's TryTimeout bounds it, with a request
// deadline and without one, so a hung member cannot hold the request (and
// eat the later tiers' reserve) or leak its goroutines.
func TestPoolMemberHedgeHonoursTryTimeout(t *testing.T) {
	for _, total := range []time.Duration{10 * time.Second, 0} {
		t.Run("total="+total.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var aCalls, bCalls, flashCalls atomic.Int64
				hung := func() time.Duration { return time.Hour }
				pool, err := fallback.NewPool(fallback.PoolConfig[string, string]{Name: "pro", Members: []fallback.Member[string, string]{
					{Key: "key-a", Tier: slowTier("a", &aCalls, hung)},
					{Key: "key-b", Tier: slowTier("b", &bCalls, hung)},
				}})
				require.NoError(t, err)
				c := newChain(t, fallback.Config[string, string]{Total: total, Stages: []fallback.Stage[string, string]{
					{Tier: pool, TryTimeout: 100 * time.Millisecond, Retry: retry.Policy{MaxAttempts: 1}, Hedge: fallback.Hedge{Delay: 20 * time.Millisecond, MaxExtra: 1}},
					{Tier: slowTier("flash", &flashCalls, func() time.Duration { return 10 * time.Millisecond })},
				}})
				start := time.Now()
				res, err := c.Do(context.Background(), "q")
				require.NoError(t, err)
				assert.Equal(t, "flash", res.Tier)
				assert.Equal(t, 130*time.Millisecond, time.Since(start),
					"the first call's 100 ms; the hedge's own 100 ms from 20 ms; flash's 10 ms")
				assert.Equal(t, int64(1), aCalls.Load()+bCalls.Load()-1, "one call on each member")
				synctest.Wait()
			})
		})
	}
}

// A retry that its stage's rate limiter refuses is on the trail
// (SkipRateLimited after the failure), reaches observers as a StageSkipped
// event, and the request's error matches ErrLimited.
func TestRetryRefusedByTheLimiterIsTraced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pro := newFake("pro", fails(classify.Transient))
		lim := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 1})
		var obs events
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: pro, Limiter: lim, Retry: retry.Policy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}},
		}, Observer: &obs})
		res, err := c.Do(context.Background(), "q")
		require.Error(t, err)
		assert.ErrorIs(t, err, ratelimit.ErrLimited)
		assert.Equal(t, 1, res.UpstreamCalls)
		a := res.Attempts()
		require.Len(t, a, 2)
		assert.Equal(t, classify.Transient, a[0].Verdict.Class)
		assert.Equal(t, fallback.SkipRateLimited, a[1].Skip)
		skipped := obs.of(fallback.StageSkipped)
		require.Len(t, skipped, 1)
		assert.Equal(t, fallback.SkipRateLimited, skipped[0].Skip)
		var fe *fallback.Error
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, fallback.TierFailed, fe.Tiers[0].Outcome)
		assert.Equal(t, 1, fe.Tiers[0].Attempts)
		assert.Equal(t, fallback.SkipRateLimited, fe.Tiers[0].Skip)
		assert.Equal(t, classify.Transient, fe.Tiers[0].Verdict.Class, "the failure decided; the refusal is named with it")
	})
}

// A response that arrives after the chain stopped waiting for its call is
// reported on its own, as a LateReply with its usage: a call abandoned
// for ignoring its context, and the first call of a hedged attempt whose
// hedge won but that the provider finished all the same. A reply in time
// rides its AttemptEnded: each response is reported once.
func TestLateRepliesAreReported(t *testing.T) {
	ignoring := func(name string, d time.Duration, tokens int64) fallback.ModelTier[string, string] {
		return fallback.Tier(name, func(ctx context.Context, _ string) (string, error) {
			time.Sleep(d) // ignores ctx
			fallback.Report(ctx, fallback.Reply{Usage: fallback.Usage{InputTokens: tokens}, HasUsage: true})
			return name, nil
		})
	}
	cases := map[string]fallback.Config[string, string]{
		"abandoned": {AbandonAfter: 10 * time.Millisecond, Stages: []fallback.Stage[string, string]{
			{Tier: ignoring("pro", time.Second, 7), TryTimeout: 100 * time.Millisecond, Retry: retry.Policy{MaxAttempts: 1}},
			{Tier: ignoring("flash", 0, 3)},
		}},
		"hedge loser": {Stages: []fallback.Stage[string, string]{
			{Tier: ignoring("pro", time.Second, 7), Hedge: fallback.Hedge{Delay: 100 * time.Millisecond, MaxExtra: 1}},
			{Tier: ignoring("flash", 0, 3)},
		}},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var obs events
				cfg.Observer = &obs
				c := newChain(t, cfg)
				res, err := c.Do(context.Background(), "q")
				require.NoError(t, err)
				assert.Equal(t, "flash", res.Tier)
				assert.Empty(t, obs.of(fallback.LateReply), "pro has not answered yet")
				time.Sleep(2 * time.Second)
				synctest.Wait()
				late := obs.of(fallback.LateReply)
				require.Len(t, late, 1)
				assert.Equal(t, "pro", late[0].Tier)
				assert.Equal(t, 1, late[0].Attempt)
				assert.True(t, late[0].HasUsage)
				assert.Equal(t, int64(7), late[0].Usage.InputTokens)
				var inTime int64
				for _, e := range obs.of(fallback.AttemptEnded) {
					inTime += e.Usage.InputTokens
				}
				assert.Equal(t, int64(3), inTime, "flash's reply rode its attempt; pro's is not counted twice")
			})
		})
	}
}
