package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/anthropic"
	"github.com/tierguard/tierguard/fallback/gemini"
	"github.com/tierguard/tierguard/fallback/oaicompat"
	"github.com/tierguard/tierguard/fallback/pool"
	"github.com/tierguard/tierguard/internal/testbed/corpus"
)

// perMinute429 is a real Gemini API 429: a per-minute input-token quota
// with RetryInfo 26s, as quoted in the corpus with its source.
func perMinute429(t *testing.T) corpus.Case {
	return corpusCase(t, "gemini-api-per-minute-input-tokens-429")
}

// corpusCase returns the named case of the conformance corpus.
func corpusCase(t *testing.T, name string) corpus.Case {
	t.Helper()
	cases, err := corpus.All()
	require.NoError(t, err)
	for _, c := range cases {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("corpus case %s is missing", name)
	return corpus.Case{}
}

// geminiKeys serves streamGenerateContent per API key: the keys in
// limited answer the corpus 429, the others stream "Hel", "lo" + STOP.
type geminiKeys struct {
	limited map[string]bool
	body    []byte
	calls   map[string]*atomic.Int64
}

func (g *geminiKeys) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("x-goog-api-key")
	g.calls[key].Add(1)
	if !strings.HasSuffix(r.URL.Path, ":streamGenerateContent") {
		http.Error(w, "unexpected "+r.URL.Path, http.StatusBadRequest)
		return
	}
	if g.limited[key] {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write(g.body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, c := range []string{
		`{"candidates":[{"content":{"role":"model","parts":[{"text":"Hel"}]}}],"modelVersion":"gemini-2.5-flash"}`,
		`{"candidates":[{"content":{"role":"model","parts":[{"text":"lo"}]},"finishReason":"STOP"}],"modelVersion":"gemini-2.5-flash","usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":2,"totalTokenCount":6}}`,
	} {
		_, _ = io.WriteString(w, "data: "+c+"\r\n\r\n")
	}
}

// chatStream serves a chat completion stream: "Hi", " there" + stop.
func chatStream(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, c := range []string{
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":" there"},"finish_reason":"stop"}]}`,
	} {
		_, _ = io.WriteString(w, "data: "+c+"\n\n")
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

// mixedStream is a streaming chain of fallback.TextChunks over the real
// SDKs: a pool of two Gemini keys (genai) first, Claude (anthropic-sdk-go)
// second when claude is set, an OpenAI-compatible tier (openai-go) last.
func mixedStream(t *testing.T, keys *geminiKeys, claude http.Handler) *fallback.StreamChain[string, fallback.TextChunk] {
	t.Helper()
	gsrv := httptest.NewServer(keys)
	t.Cleanup(gsrv.Close)
	osrv := httptest.NewServer(http.HandlerFunc(chatStream))
	t.Cleanup(osrv.Close)
	member := func(key string) pool.StreamMember[string, fallback.TextChunk] {
		client, err := gemini.NewClient(context.Background(), genai.ClientConfig{APIKey: key, HTTPOptions: genai.HTTPOptions{BaseURL: gsrv.URL}})
		require.NoError(t, err)
		tier, err := gemini.NewTier(gemini.TierConfig[string]{Name: "flash", Model: "gemini-2.5-flash", Client: client,
			Prompt: func(q string) ([]*genai.Content, *genai.GenerateContentConfig) { return genai.Text(q), nil }})
		require.NoError(t, err)
		return pool.StreamMember[string, fallback.TextChunk]{Key: key, Tier: tier.TextStreamStage().Tier}
	}
	keyed, err := pool.NewStream(pool.StreamConfig[string, fallback.TextChunk]{Name: "flash",
		Members: []pool.StreamMember[string, fallback.TextChunk]{member("key-a"), member("key-b")}})
	require.NoError(t, err)
	oclient := oaicompat.NewClient(option.WithBaseURL(osrv.URL), option.WithAPIKey("k"))
	gpt, err := oaicompat.NewTier(oaicompat.TierConfig[string]{Name: "gpt", Model: "gpt-4o-mini", Client: &oclient,
		Prompt: func(q string) oai.ChatCompletionNewParams {
			return oai.ChatCompletionNewParams{Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage(q)}}
		}})
	require.NoError(t, err)
	stages := []fallback.StreamStage[string, fallback.TextChunk]{{Tier: keyed, Model: "gemini-2.5-flash", Classifier: gemini.Classifier}}
	if claude != nil {
		csrv := httptest.NewServer(claude)
		t.Cleanup(csrv.Close)
		cclient := anthropic.NewClient(aoption.WithBaseURL(csrv.URL), aoption.WithAPIKey("k"))
		tier, err := anthropic.NewTier(anthropic.TierConfig[string]{Name: "claude", Model: "claude-sonnet-5-5", Client: &cclient,
			Prompt: func(q string) sdk.MessageNewParams {
				return sdk.MessageNewParams{MaxTokens: 256, Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(q))}}
			}})
		require.NoError(t, err)
		st := tier.TextStreamStage()
		st.Retry.MaxAttempts = 1
		stages = append(stages, st)
	}
	stages = append(stages, gpt.TextStreamStage())
	c, err := fallback.NewStream(fallback.StreamConfig[string, fallback.TextChunk]{
		Stages: stages,
		Total:  10 * time.Second,
		// One classifier for the stages that name none: the three SDKs'.
		Classifier: classify.New(gemini.Rule, anthropic.Rule, oaicompat.Rule),
	})
	require.NoError(t, err)
	return c
}

func read(t *testing.T, s *fallback.Stream[string, fallback.TextChunk]) (text string, sources []any) {
	t.Helper()
	for ch, err := range s.Chunks() {
		require.NoError(t, err)
		text += ch.Text
		sources = append(sources, ch.Source)
	}
	return text, sources
}

// A real Gemini 429 (a per-minute quota, RetryInfo 26s) on key A moves
// the stream to key B before anything is shown; with both keys limited,
// the OpenAI-compatible tier answers. Either way every chunk the consumer
// sees comes from one provider, its own chunk type in Source.
func TestMixedProviderStreamRotatesKeysThenFallsBack(t *testing.T) {
	limited := perMinute429(t)
	newKeys := func(limitedKeys ...string) *geminiKeys {
		k := &geminiKeys{limited: map[string]bool{}, body: limited.ResponseBody(),
			calls: map[string]*atomic.Int64{"key-a": new(atomic.Int64), "key-b": new(atomic.Int64)}}
		for _, key := range limitedKeys {
			k.limited[key] = true
		}
		return k
	}

	t.Run("key A limited", func(t *testing.T) {
		keys := newKeys("key-a")
		c := mixedStream(t, keys, nil)
		for range 3 {
			s := c.Stream(context.Background(), "hi")
			text, sources := read(t, s)
			assert.Equal(t, "Hello", text)
			for _, src := range sources {
				assert.IsType(t, gemini.Answer{}, src)
			}
			assert.Equal(t, 0, s.Result().TierIndex)
		}
		assert.EqualValues(t, 1, keys.calls["key-a"].Load(), "key A cools down for its 26 s after its per-minute 429")
		assert.EqualValues(t, 3, keys.calls["key-b"].Load())
	})

	t.Run("both keys limited", func(t *testing.T) {
		keys := newKeys("key-a", "key-b")
		c := mixedStream(t, keys, nil)
		s := c.Stream(context.Background(), "hi")
		text, sources := read(t, s)
		assert.Equal(t, "Hi there", text)
		for _, src := range sources {
			assert.IsType(t, oaicompat.Answer{}, src)
		}
		res := s.Result()
		assert.Equal(t, 1, res.TierIndex)
		assert.True(t, res.Complete)
		assert.EqualValues(t, 1, keys.calls["key-a"].Load())
		assert.EqualValues(t, 1, keys.calls["key-b"].Load())
	})
}

// Gemini → Claude → an OpenAI-compatible model, streaming: with both
// Gemini keys limited, Claude streams the answer (the docs' basic stream,
// message_stop its end); when Claude's stream fails before its first text
// delta (the docs' overloaded error event), the gateway answers. Either
// way the consumer sees one provider's chunks only.
func TestMixedProviderStreamThroughClaude(t *testing.T) {
	limited := perMinute429(t)
	basic := string(corpusCase(t, "anthropic-stream-basic-end-turn-docs").Body)
	overloaded := string(corpusCase(t, "anthropic-stream-error-overloaded-only-event").Body)
	serve := func(body string) (http.Handler, *atomic.Int64) {
		var n atomic.Int64
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, body)
		}), &n
	}
	keys := func() *geminiKeys {
		return &geminiKeys{limited: map[string]bool{"key-a": true, "key-b": true}, body: limited.ResponseBody(),
			calls: map[string]*atomic.Int64{"key-a": new(atomic.Int64), "key-b": new(atomic.Int64)}}
	}

	t.Run("claude answers", func(t *testing.T) {
		h, n := serve(basic)
		s := mixedStream(t, keys(), h).Stream(context.Background(), "hi")
		text, sources := read(t, s)
		assert.Equal(t, "Hello!", text)
		for _, src := range sources {
			assert.IsType(t, anthropic.Answer{}, src)
		}
		res := s.Result()
		assert.Equal(t, 1, res.TierIndex)
		assert.True(t, res.Complete)
		assert.Equal(t, "end_turn", res.FinishReason)
		assert.EqualValues(t, 1, n.Load())
	})

	t.Run("claude overloaded before content", func(t *testing.T) {
		h, n := serve(overloaded)
		s := mixedStream(t, keys(), h).Stream(context.Background(), "hi")
		text, sources := read(t, s)
		assert.Equal(t, "Hi there", text)
		for _, src := range sources {
			assert.IsType(t, oaicompat.Answer{}, src)
		}
		res := s.Result()
		assert.Equal(t, 2, res.TierIndex)
		a := res.Attempts()
		require.Len(t, a, 4, "flash on each key, claude, gpt")
		assert.Equal(t, "claude", a[2].Tier)
		assert.Equal(t, classify.Transient, a[2].Verdict.Class, "the error event's overloaded_error")
		assert.EqualValues(t, 1, n.Load())
	})
}
