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

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/gemini"
	"github.com/tierguard/tierguard/fallback/oaicompat"
	"github.com/tierguard/tierguard/fallback/pool"
	"github.com/tierguard/tierguard/internal/testbed/corpus"
)

// perMinute429 is a real Gemini API 429: a per-minute input-token quota
// with RetryInfo 26s, as quoted in the corpus with its source.
func perMinute429(t *testing.T) corpus.Case {
	t.Helper()
	cases, err := corpus.All()
	require.NoError(t, err)
	for _, c := range cases {
		if c.Name == "gemini-api-per-minute-input-tokens-429" {
			return c
		}
	}
	t.Fatal("corpus case gemini-api-per-minute-input-tokens-429 is missing")
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
// SDKs: a pool of two Gemini keys (genai) first, an OpenAI-compatible
// tier (openai-go) second.
func mixedStream(t *testing.T, keys *geminiKeys) *fallback.StreamChain[string, fallback.TextChunk] {
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
	c, err := fallback.NewStream(fallback.StreamConfig[string, fallback.TextChunk]{
		Stages: []fallback.StreamStage[string, fallback.TextChunk]{
			{Tier: keyed, Model: "gemini-2.5-flash", Classifier: gemini.Classifier},
			gpt.TextStreamStage(),
		},
		Total: 10 * time.Second,
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
		c := mixedStream(t, keys)
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
		c := mixedStream(t, keys)
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
