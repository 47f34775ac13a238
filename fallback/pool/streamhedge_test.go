package pool_test

import (
	"context"
	"iter"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/pool"
	"github.com/tierguard/tierguard/fallback/ratelimit"
)

// A hedged first chunk on a stream pool goes to the other key: the first
// stream, on the slow key, sends nothing by the hedge's delay; the hedge,
// on the fast key, wins, and the consumer reads it alone. Each key
// streamed once, and the trail names each stream's member.
func TestStreamHedgeGoesToTheOtherMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &member{name: "slow", script: func(int64) []piece {
			return []piece{{}, {c: chunk{text: "late"}, wait: time.Second}, {c: chunk{text: "!", finish: "STOP"}}}
		}}
		fast := &member{name: "fast", script: func(int64) []piece { return answer("hel", "lo") }}
		// A fresh pool's first pick, least in flight, is its second member.
		keys := twoKeys(t, fast, slow, nil)
		c, err := fallback.NewStream(fallback.StreamConfig[string, chunk]{Total: 10 * time.Second,
			Stages: []fallback.StreamStage[string, chunk]{{Tier: keys, Hedge: fallback.Hedge{Delay: 100 * time.Millisecond}}}})
		require.NoError(t, err)
		s := c.Stream(context.Background(), "q")
		var got string
		var from []string
		for ch, err := range s.Chunks() {
			require.NoError(t, err)
			got += ch.text
			from = append(from, ch.from)
		}
		res := s.Result()
		synctest.Wait()
		require.EqualValues(t, 1, slow.calls.Load(), "the first stream went to the slow key")
		assert.EqualValues(t, 1, fast.calls.Load(), "the hedge went to the other key")
		assert.Equal(t, "hello", got)
		assert.Equal(t, []string{"fast", "fast", "fast"}, from, "the hedge's chunks alone, its role chunk first")
		require.Len(t, res.Attempts(), 2)
		assert.Equal(t, classify.Canceled, res.Attempts()[0].Verdict.Class, "the slow key's stream lost")
		assert.True(t, res.Attempts()[1].Hedge)
		assert.NotEqual(t, res.Attempts()[0].Member, res.Attempts()[1].Member)
		assert.Equal(t, 100*time.Millisecond, res.TimeToFirstChunk, "the delay, then the fast key at once")
		for _, m := range keys.Members() {
			assert.Zero(t, m.InFlight)
		}
	})
}

// A stream's member limiter is charged the stage's estimate when the
// stream starts and corrected, when it ends, by the usage it reported.
func TestStreamMemberLimiterCorrectedByUsage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := ratelimit.New(ratelimit.Config{Name: "key-a", Tokens: 10_000, Per: time.Minute, TokenBurst: 1000})
		require.NoError(t, err)
		defer lim.Close()
		tier := fallback.StreamTierFunc("pro", func(ctx context.Context, _ string) iter.Seq2[chunk, error] {
			return func(yield func(chunk, error) bool) {
				fallback.Report(ctx, fallback.Reply{HasUsage: true, Usage: fallback.Usage{InputTokens: 30, OutputTokens: 20}})
				yield(chunk{text: "hi", finish: "STOP"}, nil)
			}
		}, inspect)
		keys, err := pool.NewStream(pool.StreamConfig[string, chunk]{Name: "pro", Members: []pool.StreamMember[string, chunk]{{Key: "key-a", Tier: tier, Limiter: lim}}})
		require.NoError(t, err)
		c, err := fallback.NewStream(fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: keys,
			Tokens: func(string) int64 { return 400 }}}})
		require.NoError(t, err)
		before := lim.Stats().Tokens
		for range s(c) {
		}
		assert.InDelta(t, before-50, lim.Stats().Tokens, 0.5, "the 50 tokens used, not the 400 estimated")
	})
}

// s ranges over one stream of c for "q".
func s(c *fallback.StreamChain[string, chunk]) iter.Seq2[chunk, error] {
	return c.Stream(context.Background(), "q").Chunks()
}
