package pool_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/pool"
	"github.com/tierguard/tierguard/fallback/ratelimit"
)

// burst is a limiter of a token burst of n.
func burst(t *testing.T, name string, n int64) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(ratelimit.Config{Name: name, Tokens: 1000 * n, TokenBurst: n, Per: time.Hour})
	require.NoError(t, err)
	return l
}

// TestPoolTooLargeForEveryMember: a request whose tokens exceed every
// member's token burst is skipped as too large (SkipTooLarge), member
// limiters or limited member tiers alike, and the chain fails closed with
// ErrTooLarge instead of answering the default. Too large for one member
// only, it goes to the other; too large for one and over the other's
// rate, it is skipped as rate-limited.
func TestPoolTooLargeForEveryMember(t *testing.T) {
	tier := func(name string) fallback.ModelTier[string, string] {
		return fallback.Tier(name, func(context.Context, string) (string, error) { return name, nil })
	}
	chain := func(p fallback.ModelTier[string, string]) *fallback.Chain[string, string] {
		c, err := fallback.New(fallback.Config[string, string]{
			Stages:  []fallback.Stage[string, string]{{Tier: p, Tokens: func(q string) int64 { return int64(len(q)) }}},
			Default: func(context.Context, string) (string, bool) { return "default", true },
		})
		require.NoError(t, err)
		return c
	}
	q := string(make([]byte, 50))
	t.Run("member limiters", func(t *testing.T) {
		p, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
			{Key: "a", Tier: tier("a"), Limiter: burst(t, "a", 10)},
			{Key: "b", Tier: tier("b"), Limiter: burst(t, "b", 20)},
		}})
		require.NoError(t, err)
		res, err := chain(p).Do(context.Background(), q)
		require.ErrorIs(t, err, fallback.ErrTooLarge)
		require.Len(t, res.Attempts(), 1)
		assert.Equal(t, fallback.SkipTooLarge, res.Attempts()[0].Skip)

		p, err = pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
			{Key: "a", Tier: tier("a"), Limiter: burst(t, "a", 10)},
			{Key: "b", Tier: tier("b"), Limiter: burst(t, "b", 100)},
		}})
		require.NoError(t, err)
		res, err = chain(p).Do(context.Background(), q)
		require.NoError(t, err)
		assert.Equal(t, "b", res.Value)
		res, err = chain(p).Do(context.Background(), q+q) // b's burst spent
		require.NoError(t, err)
		assert.Equal(t, fallback.SourceDefault, res.Source)
		assert.Equal(t, fallback.SkipRateLimited, res.Attempts()[0].Skip)
	})
	t.Run("limited member tiers", func(t *testing.T) {
		limited := func(name string, n int64) fallback.ModelTier[string, string] {
			return ratelimit.Tier(tier(name), ratelimit.TierConfig[string]{Limiter: burst(t, name, n)})
		}
		p, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
			{Key: "a", Tier: limited("a", 10)},
			{Key: "b", Tier: limited("b", 20)},
		}})
		require.NoError(t, err)
		_, err = chain(p).Do(context.Background(), q)
		require.ErrorIs(t, err, fallback.ErrTooLarge)

		p, err = pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
			{Key: "a", Tier: limited("a", 10)},
			{Key: "b", Tier: limited("b", 60)},
		}, Sticky: func(string) string { return "s" }})
		require.NoError(t, err)
		c := chain(p)
		res, err := c.Do(context.Background(), q)
		require.NoError(t, err)
		assert.Equal(t, "b", res.Value)
		res, err = c.Do(context.Background(), q) // b's burst spent
		require.NoError(t, err)
		assert.Equal(t, fallback.SourceDefault, res.Source, "over b's rate, not too large for the pool")
	})
}
