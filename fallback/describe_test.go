package fallback_test

import (
	"context"
	"iter"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/ratelimit"
	"github.com/tierguard/tierguard/internal/testbed/reported"
	"github.com/tierguard/tierguard/validate"
)

// describedTier answers with its input and reports an endpoint, usage and
// a response description, as the SDK adapters' tiers do.
type describedTier struct{ name string }

func (t describedTier) Name() string { return t.name }
func (t describedTier) Call(ctx context.Context, in string) (string, error) {
	fallback.Report(ctx, fallback.Reply{
		Usage:    fallback.Usage{InputTokens: 10, OutputTokens: int64(len(in)), CacheReadInputTokens: 4, ReasoningOutputTokens: 1},
		HasUsage: true,
		Response: fallback.ResponseInfo{ID: "resp-" + in, Model: "gemini-2.5-pro-001", FinishReason: "STOP"},
	})
	return in, nil
}
func (t describedTier) Endpoint() fallback.Endpoint {
	return fallback.Endpoint{Provider: "gcp.gemini", Address: "generativelanguage.googleapis.com", Port: 443}
}

// events records what a chain tells its observers.
type events = reported.Recorder

func TestEndpointNamesTheProvider(t *testing.T) {
	var obs events
	c := newChain(t, fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{
			{Tier: describedTier{name: "pro"}, Model: "gemini-2.5-pro"},
			// A stage's own Provider wins over the tier's.
			{Tier: describedTier{name: "proxy"}, Model: "gemini-2.5-flash", Provider: "gcp.gen_ai"},
			// A tier that reports nothing leaves the provider empty.
			{Tier: fallback.Tier("plain", func(context.Context, string) (string, error) { return "x", nil })},
		},
		Observer: &obs,
	})
	info := c.Stages()
	require.Len(t, info, 3)
	assert.Equal(t, "gcp.gemini", info[0].Provider)
	assert.Equal(t, "generativelanguage.googleapis.com", info[0].Address)
	assert.Equal(t, 443, info[0].Port)
	assert.False(t, info[0].Stream)
	assert.Equal(t, "gcp.gen_ai", info[1].Provider)
	assert.Equal(t, "generativelanguage.googleapis.com", info[1].Address, "the server still comes from the tier")
	assert.Empty(t, info[2].Provider)
	assert.Empty(t, info[2].Address)

	_, err := c.Do(context.Background(), "q")
	require.NoError(t, err)
	started := reported.Of[fallback.RequestStart](&obs)
	require.Len(t, started, 1)
	assert.Equal(t, "gcp.gemini", started[0].Chain.Stages[0].Provider, "the request names the first tier's provider")
	assert.Equal(t, info, started[0].Chain.Stages, "the chain's stages, as Stages describes them")
	ended := reported.Of[fallback.AttemptEnd](&obs)
	require.Len(t, ended, 1)
	ev := ended[0]
	assert.Equal(t, "gcp.gemini", ev.Stage.Provider)
	assert.Equal(t, "generativelanguage.googleapis.com", ev.Stage.Address)
	assert.Same(t, &started[0].Chain.Stages[0], ev.Stage, "an attempt points to its stage's description")
	assert.False(t, ev.Stage.Stream)
	require.True(t, ev.Reply.HasUsage)
	assert.Equal(t, fallback.Usage{InputTokens: 10, OutputTokens: 1, CacheReadInputTokens: 4, ReasoningOutputTokens: 1}, ev.Reply.Usage)
	assert.Equal(t, fallback.ResponseInfo{ID: "resp-q", Model: "gemini-2.5-pro-001", FinishReason: "STOP"}, ev.Reply.Response)
}

// TestWrappedTiersKeepTheEndpoint: the chain finds the endpoint of a tier
// through any decorators that wrap it (Unwrap), however many.
func TestWrappedTiersKeepTheEndpoint(t *testing.T) {
	mapped := fallback.MapTier[string, string, int](describedTier{name: "pro"}, func(s string) int { return len(s) })
	lim, err := ratelimit.New(ratelimit.Config{Name: "pro", Requests: 100})
	require.NoError(t, err)
	t.Cleanup(lim.Close)
	limited := ratelimit.Tier(fallback.MapTier[string, string, int](describedTier{name: "pro2"}, func(s string) int { return len(s) }),
		ratelimit.TierConfig[string]{Limiter: lim})
	c, err := fallback.New(fallback.Config[string, int]{Stages: []fallback.Stage[string, int]{{Tier: mapped}, {Tier: limited}}})
	require.NoError(t, err)
	for _, st := range c.Stages() {
		assert.Equal(t, "gcp.gemini", st.Provider, st.TierIndex)
	}
	plain := fallback.MapTier(fallback.Tier("p", func(context.Context, string) (string, error) { return "", nil }), func(s string) int { return 0 })
	p, err := fallback.New(fallback.Config[string, int]{Stages: []fallback.Stage[string, int]{{Tier: plain}}})
	require.NoError(t, err)
	assert.Empty(t, p.Stages()[0].Provider, "nothing to report")
}

// A rejected answer cost its tokens: its usage reaches the observers with
// the failed attempt.
func TestRejectedAnswerReportsUsage(t *testing.T) {
	var obs events
	c := newChain(t, fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{
			{Tier: describedTier{name: "pro"}, Validate: validate.Func[string](func(string) error { return validate.Errorf("test", "never") })},
			{Tier: fallback.Tier("flash", func(context.Context, string) (string, error) { return "ok", nil })},
		},
		Observer: &obs,
	})
	res, err := c.Do(context.Background(), "abc")
	require.NoError(t, err)
	assert.Equal(t, "flash", res.Tier)
	ended := reported.Of[fallback.AttemptEnd](&obs)
	require.Len(t, ended, 2)
	assert.Error(t, ended[0].Err)
	require.True(t, ended[0].Reply.HasUsage)
	assert.Equal(t, int64(3), ended[0].Reply.Usage.OutputTokens)
	assert.Equal(t, "resp-abc", ended[0].Reply.Response.ID)
	assert.False(t, ended[1].Reply.HasUsage, "flash reports no usage")
}

// streamTier streams its chunks and describes them.
type streamTier struct {
	chunks []fallback.ChunkInfo
}

func (t streamTier) Name() string { return "pro" }
func (t streamTier) Stream(ctx context.Context, _ string) iter.Seq2[fallback.ChunkInfo, error] {
	return func(yield func(fallback.ChunkInfo, error) bool) {
		// A stream reports its response once, as it ends.
		defer fallback.Report(ctx, fallback.Reply{Response: fallback.ResponseInfo{ID: "chatcmpl-1", Model: "gpt-x-2025"}})
		for _, c := range t.chunks {
			if !yield(c, nil) {
				return
			}
		}
	}
}
func (t streamTier) Inspect(c fallback.ChunkInfo) fallback.ChunkInfo { return c }
func (t streamTier) Endpoint() fallback.Endpoint                     { return fallback.Endpoint{Provider: "openai"} }

func TestStreamEventsAreMarked(t *testing.T) {
	var obs events
	sc, err := fallback.NewStream(fallback.StreamConfig[string, fallback.ChunkInfo]{
		Stages: []fallback.StreamStage[string, fallback.ChunkInfo]{{Tier: streamTier{chunks: []fallback.ChunkInfo{
			{Text: "a"}, {Text: "b"}, {Text: "c", FinishReason: "stop"},
		}}}},
		Observer: &obs,
	})
	require.NoError(t, err)
	info := sc.Stages()
	assert.True(t, info[0].Stream)
	assert.Equal(t, "openai", info[0].Provider)
	for range sc.Stream(context.Background(), "q").Chunks() {
	}
	for _, ev := range reported.Of[fallback.RequestStart](&obs) {
		assert.True(t, ev.Chain.Stream)
	}
	for _, ev := range reported.Of[fallback.AttemptStart](&obs) {
		assert.True(t, ev.Stage.Stream)
	}
	ended := reported.Of[fallback.AttemptEnd](&obs)
	require.Len(t, ended, 1)
	assert.True(t, ended[0].Stage.Stream)
	assert.Equal(t, fallback.ResponseInfo{ID: "chatcmpl-1", Model: "gpt-x-2025", FinishReason: "stop"}, ended[0].Reply.Response,
		"the stream's report, with its finish reason")
	assert.Len(t, reported.Of[fallback.FirstChunk](&obs), 1)
	chunks := reported.Of[fallback.NextChunk](&obs)
	assert.Len(t, chunks, 2, "one event per chunk after the first")
	for _, ev := range chunks {
		assert.GreaterOrEqual(t, ev.Latency, time.Duration(0))
		assert.Equal(t, "pro", ev.Stage.Tier)
		assert.True(t, ev.Stage.Stream)
	}
	for _, ev := range reported.Of[fallback.RequestEnd](&obs) {
		assert.True(t, ev.Chain.Stream)
	}
}
