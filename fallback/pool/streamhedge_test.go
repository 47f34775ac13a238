package pool_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
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
