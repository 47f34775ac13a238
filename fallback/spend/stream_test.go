package spend_test

import (
	"context"
	"iter"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/spend"
)

// chunk is a streamed piece of an answer; the last one carries the usage.
type chunk struct {
	text   string
	finish string
	usage  fallback.Usage
}

type streamTier struct{ chunks []chunk }

func (streamTier) Name() string { return "pro" }
func (s streamTier) Stream(ctx context.Context, _ string) iter.Seq2[chunk, error] {
	return func(yield func(chunk, error) bool) {
		// The usage of the last chunk, reported once as the stream ends.
		var rep fallback.Reply
		defer func() { fallback.Report(ctx, rep) }()
		for _, c := range s.chunks {
			if c.usage != (fallback.Usage{}) {
				rep.Usage, rep.HasUsage = c.usage, true
			}
			if !yield(c, nil) {
				return
			}
		}
	}
}
func (streamTier) Inspect(c chunk) fallback.ChunkInfo {
	return fallback.ChunkInfo{Text: c.text, FinishReason: c.finish}
}

// A streaming chain reports to the ledger like a unary one: the usage of
// the stream's last chunk is priced when the stream ends.
func TestStreamChain(t *testing.T) {
	l := newLedger(t, spend.Config{Prices: testPrices(t), Tenants: map[string]spend.Allowance{"acme": {DailyTokens: 10_000}}})
	tier := streamTier{chunks: []chunk{{text: "hello "}, {text: "world", finish: "STOP", usage: fallback.Usage{InputTokens: 1000, OutputTokens: 100}}}}
	c, err := fallback.NewStream(fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: tier, Model: "pro"}}})
	require.NoError(t, err)
	_, err = l.Attach(c)
	require.NoError(t, err)
	tk, err := l.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{Tokens: 2000})
	require.NoError(t, err)
	s := c.Stream(tk, "q")
	for _, err := range s.Chunks() {
		require.NoError(t, err)
	}
	tk.End()
	tot := l.Totals("acme")
	assert.Equal(t, int64(1), tot.Valid)
	assert.Equal(t, perM(1000, proIn)+perM(100, proOut), tot.Cost)
	u := l.Use("acme")[spend.DailyTokens]
	assert.Equal(t, int64(1100), u.Used)
	assert.Equal(t, int64(0), u.Reserved)
}
