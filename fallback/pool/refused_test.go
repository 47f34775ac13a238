package pool_test

import (
	"context"
	"iter"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/pool"
	"github.com/tierguard/tierguard/fallback/ratelimit"
	"github.com/tierguard/tierguard/internal/testbed/reported"
)

// spent is a limiter with no turn left for a while.
func spent(t *testing.T, name string) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(ratelimit.Config{Name: name, Requests: 1, Per: time.Hour})
	require.NoError(t, err)
	require.True(t, l.Allow(0))
	return l
}

// A member whose own rate limit, wrapped around its tier, refuses the call
// made no upstream call: the pool takes it back and tries the next
// member, and neither the trail nor observers count it — unary and
// streaming alike.
func TestMemberRefusedByItsOwnWrapperIsNoCall(t *testing.T) {
	t.Run("unary", func(t *testing.T) {
		var calls atomic.Int64
		tier := func(name string) fallback.ModelTier[string, string] {
			return fallback.Tier(name, func(context.Context, string) (string, error) { calls.Add(1); return name, nil })
		}
		p, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
			{Key: "a", Tier: ratelimit.Tier(tier("a"), ratelimit.TierConfig[string]{Limiter: spent(t, "a")})},
			{Key: "b", Tier: tier("b")},
		}, Sticky: func(string) string { return "s" }})
		require.NoError(t, err)
		var ev reported.Recorder
		c, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: p}}, Observer: &ev})
		require.NoError(t, err)
		for range 4 {
			res, err := c.Do(context.Background(), "q")
			require.NoError(t, err)
			assert.Equal(t, "b", res.Value)
			assert.Equal(t, 1, res.UpstreamCalls)
			assert.Len(t, res.Attempts(), 1)
		}
		assert.EqualValues(t, 4, calls.Load())
		assert.Len(t, reported.Of[fallback.AttemptEnd](&ev), 4, "one call told per request")
		for _, m := range p.Members() {
			assert.Zero(t, m.InFlight)
		}
	})
	t.Run("stream", func(t *testing.T) {
		var calls atomic.Int64
		tier := func(name string) fallback.StreamTier[string, chunk] {
			return fallback.StreamTierFunc(name, func(context.Context, string) iter.Seq2[chunk, error] {
				return func(yield func(chunk, error) bool) {
					calls.Add(1)
					yield(chunk{text: name, finish: "STOP"}, nil)
				}
			}, inspect)
		}
		p, err := pool.NewStream(pool.StreamConfig[string, chunk]{Name: "pro", Members: []pool.StreamMember[string, chunk]{
			{Key: "a", Tier: ratelimit.StreamTier(tier("a"), ratelimit.TierConfig[string]{Limiter: spent(t, "a")})},
			{Key: "b", Tier: tier("b")},
		}, Sticky: func(string) string { return "s" }})
		require.NoError(t, err)
		var ev reported.Recorder
		c, err := fallback.NewStream(fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: p}}, Observer: &ev})
		require.NoError(t, err)
		for range 4 {
			s := c.Stream(context.Background(), "q")
			var got string
			for ch, err := range s.Chunks() {
				require.NoError(t, err)
				got += ch.text
			}
			assert.Equal(t, "b", got)
			assert.Equal(t, 1, s.Result().UpstreamCalls)
			assert.Len(t, s.Result().Attempts(), 1)
		}
		assert.EqualValues(t, 4, calls.Load())
		assert.Len(t, reported.Of[fallback.AttemptEnd](&ev), 4)
		for _, m := range p.Members() {
			assert.Zero(t, m.InFlight)
		}
	})
	t.Run("every member refused", func(t *testing.T) {
		tier := fallback.Tier("x", func(context.Context, string) (string, error) { return "x", nil })
		p, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
			{Key: "a", Tier: ratelimit.Tier(tier, ratelimit.TierConfig[string]{Limiter: spent(t, "a")})},
			{Key: "b", Tier: ratelimit.Tier(tier, ratelimit.TierConfig[string]{Limiter: spent(t, "b")})},
		}})
		require.NoError(t, err)
		c, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: p}},
			Default: func(context.Context, string) (string, bool) { return "default", true }})
		require.NoError(t, err)
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "default", res.Value)
		assert.Zero(t, res.UpstreamCalls)
		require.Len(t, res.Attempts(), 1)
		assert.Equal(t, fallback.SkipRateLimited, res.Attempts()[0].Skip, "a skip, not a call")
	})
}
