package fallback_test

import (
	"context"
	"iter"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
)

// tooLarge is a guard's refusal of a request it can never admit.
func tooLarge(ctx context.Context, tier string) error {
	fallback.RecordOf(ctx).CountCalls()
	return &fallback.SkipError{Tier: tier, Skip: fallback.SkipTooLarge}
}

// TestEveryTierSkippingAsTooLargeFailsClosed: any guard can say a request
// is never admissible by skipping it as SkipTooLarge. When every tier
// does and none was called, the chain fails closed — neither the cache
// nor the default answers it — with an error that matches ErrTooLarge;
// when one tier skips it for another reason, the default answers as
// before. Unary and streaming alike.
func TestEveryTierSkippingAsTooLargeFailsClosed(t *testing.T) {
	large := func(name string) fallback.ModelTier[string, string] {
		return fallback.Tier(name, func(ctx context.Context, _ string) (string, error) { return "", tooLarge(ctx, name) })
	}
	busy := fallback.Tier("busy", func(ctx context.Context, _ string) (string, error) {
		fallback.RecordOf(ctx).CountCalls()
		return "", &fallback.SkipError{Tier: "busy", Skip: fallback.SkipRateLimited}
	})
	def := func(context.Context, string) (string, bool) { return "default", true }
	t.Run("unary", func(t *testing.T) {
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: large("pro")}, {Tier: large("flash")}}, Default: def})
		res, err := c.Do(context.Background(), "q")
		require.ErrorIs(t, err, fallback.ErrTooLarge)
		assert.Equal(t, classify.InvalidRequest, classify.Classify(err).Class)
		assert.Zero(t, res.UpstreamCalls)
		assert.NotEqual(t, fallback.SourceDefault, res.Source)

		c = newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: large("pro")}, {Tier: busy}}, Default: def})
		res, err = c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "default", res.Value)
	})
	t.Run("stream", func(t *testing.T) {
		largeStream := fallback.StreamTierFunc("pro", func(ctx context.Context, _ string) iter.Seq2[chunk, error] {
			return func(yield func(chunk, error) bool) { yield(chunk{}, tooLarge(ctx, "pro")) }
		}, inspect)
		c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: largeStream}},
			Default: func(context.Context, string) (chunk, bool) { return chunk{text: "default", finish: "STOP"}, true }})
		got, err := collect(c.Stream(context.Background(), "q"))
		require.ErrorIs(t, err, fallback.ErrTooLarge)
		assert.NotContains(t, got, "default")
	})
}
