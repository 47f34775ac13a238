package fallback_test

import (
	"context"
	"errors"
	"io"
	"iter"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/internal/testbed/reported"
)

type reply struct {
	text   string
	tokens int64
}

func TestMapTier(t *testing.T) {
	inner := fallback.Tier("pro", func(ctx context.Context, q string) (int, error) {
		if q == "fail" {
			return 0, classErr(classify.Transient)
		}
		fallback.Report(ctx, fallback.Reply{Usage: fallback.Usage{OutputTokens: int64(len(q))}, HasUsage: true})
		return len(q), nil
	})
	mapped := fallback.MapTier(inner, func(n int) reply { return reply{text: "len", tokens: int64(n)} })
	assert.Equal(t, "pro", mapped.Name())
	out, err := mapped.Call(context.Background(), "abcd")
	require.NoError(t, err)
	assert.Equal(t, reply{text: "len", tokens: 4}, out)

	_, err = mapped.Call(context.Background(), "fail")
	assert.Equal(t, classify.Transient, classify.Classify(err).Class)
	assert.False(t, errors.Is(err, context.Canceled))

	// The wrapped tier's report reaches the chain through the mapping.
	var obs events
	c, err := fallback.New(fallback.Config[string, reply]{Stages: []fallback.Stage[string, reply]{{Tier: mapped}}, Observer: &obs})
	require.NoError(t, err)
	_, err = c.Do(context.Background(), "abcdef")
	require.NoError(t, err)
	ended := reported.Of[fallback.AttemptEnd](&obs)
	require.Len(t, ended, 1)
	assert.True(t, ended[0].Reply.HasUsage)
	assert.Equal(t, int64(6), ended[0].Reply.Usage.OutputTokens)
}

// A stage's own classifier classifies its tier's errors.
func TestStageClassifier(t *testing.T) {
	type vendorErr struct{ error }
	rule := func(err error) (classify.Verdict, bool) {
		var v vendorErr
		if errors.As(err, &v) {
			return classify.Verdict{Class: classify.Auth}, true
		}
		return classify.Verdict{}, false
	}
	pro := fallback.Tier("pro", func(context.Context, string) (string, error) { return "", vendorErr{errors.New("401")} })
	c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
		{Tier: pro, Classifier: classify.New(rule)},
		{Tier: newFake("flash", ok("quick"))},
	}})
	_, err := c.Do(context.Background(), "q")
	var fe *fallback.Error
	require.ErrorAs(t, err, &fe)
	assert.True(t, fe.FailedClosed, "the stage's classifier saw Auth")
}

// delta is a second provider's chunk type, unlike chunk.
type delta struct {
	content string
	stop    bool
}

// endpointStream is a stream tier that knows the API it calls.
type endpointStream struct {
	fallback.StreamTier[string, delta]
}

func (endpointStream) Endpoint() fallback.Endpoint { return fallback.Endpoint{Provider: "openai"} }

// Two stream tiers over different chunk types share one chain through
// TextStream: the first fails before its content and the chain falls to
// the second, whose chunks arrive as TextChunks carrying the provider's
// own chunk. What the wrapped tier reports, and its endpoint, reach the
// chain through the mapping.
func TestTextStreamMixesProviders(t *testing.T) {
	gem := (&streamFake{name: "gemini", def: streamScript{before: classErr(classify.Transient)}}).tier()
	oai := endpointStream{fallback.StreamTierFunc("gpt", func(ctx context.Context, _ string) iter.Seq2[delta, error] {
		return func(yield func(delta, error) bool) {
			fallback.Report(ctx, fallback.Reply{HasUsage: true, Usage: fallback.Usage{InputTokens: 3, OutputTokens: 2}})
			for _, d := range []delta{{content: "hel"}, {content: "lo", stop: true}} {
				if !yield(d, nil) {
					return
				}
			}
		}
	}, func(d delta) fallback.ChunkInfo {
		info := fallback.ChunkInfo{Text: d.content}
		if d.stop {
			info.FinishReason = "stop"
		}
		return info
	})}
	var obs events
	c, err := fallback.NewStream(fallback.StreamConfig[string, fallback.TextChunk]{Observer: &obs, Stages: []fallback.StreamStage[string, fallback.TextChunk]{
		{Tier: fallback.TextStream(gem)}, {Tier: fallback.TextStream[string, delta](oai)},
	}})
	require.NoError(t, err)
	s := c.Stream(context.Background(), "q")
	var got []fallback.TextChunk
	for ch, err := range s.Chunks() {
		require.NoError(t, err)
		got = append(got, ch)
	}
	require.Len(t, got, 2)
	assert.Equal(t, fallback.TextChunk{Text: "hel", Source: delta{content: "hel"}}, got[0])
	assert.Equal(t, fallback.TextChunk{Text: "lo", FinishReason: "stop", Source: delta{content: "lo", stop: true}}, got[1])
	res := s.Result()
	assert.True(t, res.Complete)
	assert.Equal(t, 1, res.TierIndex)
	assert.Equal(t, "openai", c.Stages()[1].Provider, "the endpoint, found through Unwrap")
	ended := reported.Of[fallback.AttemptEnd](&obs)
	require.Len(t, ended, 4, "three attempts on the first tier, one on the second")
	assert.Equal(t, int64(2), ended[3].Reply.Usage.OutputTokens, "the report, through the mapping")
}

// MapStreamTier maps each chunk with the caller's functions; an error
// passes through untouched, with a zero chunk.
func TestMapStreamTier(t *testing.T) {
	inner := (&streamFake{name: "pro", def: streamScript{chunks: words("a", "bc"), after: io.ErrUnexpectedEOF}}).tier()
	m := fallback.MapStreamTier(inner, func(c chunk) int { return len(c.text) }, func(n int) fallback.ChunkInfo { return fallback.ChunkInfo{Text: strings.Repeat("x", n)} })
	assert.Equal(t, "pro", m.Name())
	var got []int
	var last error
	for n, err := range m.Stream(context.Background(), "q") {
		got, last = append(got, n), err
	}
	assert.Equal(t, []int{1, 2, 0}, got)
	assert.ErrorIs(t, last, io.ErrUnexpectedEOF)
	assert.Equal(t, "xx", m.Inspect(2).Text)
	assert.Equal(t, fallback.ChunkInfo{Text: "t", FinishReason: "STOP"}, fallback.TextChunkOf("t", "STOP").Info())
}
