package throttle_test

import (
	"context"
	"iter"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/throttle"
	"github.com/tierguard/tierguard/retry"
)

// A stream chain gets the same: a throttled stream is a skip of its own
// reason before any chunk, the next tier streams the answer, and Feed
// teaches the first stage's adaptive bulkhead from its streams' ends.
func TestThrottleAndFeedServeStreams(t *testing.T) {
	var started atomic.Int64
	inspect := func(s string) fallback.ChunkInfo { return fallback.ChunkInfo{Text: s, FinishReason: "stop"} }
	pro := fallback.StreamTierFunc("pro", func(context.Context, string) iter.Seq2[string, error] {
		started.Add(1)
		return func(yield func(string, error) bool) { yield("", errOverloaded) }
	}, inspect)
	flash := fallback.StreamTierFunc("flash", func(context.Context, string) iter.Seq2[string, error] {
		return func(yield func(string, error) bool) { yield("flash", nil) }
	}, inspect)
	th := newThrottle(t, throttle.Config{Rand: func() float64 { return 0.5 }})
	b, err := bulkhead.New(bulkhead.Config{Name: "pro", Max: 20, Adaptive: &bulkhead.Adaptive{Floor: 2, Ceiling: 40, Window: 1}})
	require.NoError(t, err)
	skips := &skipped{}
	chain, err := fallback.NewStream(fallback.StreamConfig[string, string]{
		Stages: []fallback.StreamStage[string, string]{
			{Tier: throttle.StreamTier(pro, th), Bulkhead: b, Retry: retry.Policy{MaxAttempts: 1}},
			{Tier: flash},
		},
		Observer: fallback.Observers(skips, throttle.Feed()),
	})
	require.NoError(t, err)
	for range 3 {
		s := chain.Stream(context.Background(), "q")
		var got []string
		for c, err := range s.Chunks() {
			require.NoError(t, err)
			got = append(got, c)
		}
		assert.Equal(t, []string{"flash"}, got)
	}
	assert.Equal(t, int64(2), started.Load(), "two 503s, then throttled")
	assert.Equal(t, []fallback.Skip{fallback.SkipThrottled}, skips.got)
	assert.Equal(t, 16, b.Limit(), "20 × 0.9², fed by the two streams that failed")
}
