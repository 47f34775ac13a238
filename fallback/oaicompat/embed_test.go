package oaicompat_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/cache"
	"github.com/tierguard/tierguard/fallback/oaicompat"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
)

const embedModel = "text-embedding-3-small"

func (e *env) embedder(t *testing.T, dims int64) *oaicompat.Embedder {
	t.Helper()
	emb, err := oaicompat.NewEmbedder(oaicompat.EmbedderConfig{Client: &e.client, Model: embedModel, Dimensions: dims})
	require.NoError(t, err)
	return emb
}

func TestEmbedderThroughTheSDK(t *testing.T) {
	e := newEnv(t)
	emb := e.embedder(t, 256)
	assert.Equal(t, embedModel, emb.Model())
	got, err := emb.Embed(context.Background(), "The food was delicious")
	require.NoError(t, err)
	assert.Len(t, got.Vector, 256)
	assert.Equal(t, embedModel, got.Model)
	assert.True(t, got.HasUsage)
	assert.Positive(t, got.Usage.InputTokens)
	assert.Equal(t, int64(1), e.sent.n.Load())

	_, err = oaicompat.NewEmbedder(oaicompat.EmbedderConfig{Dimensions: -1})
	require.ErrorContains(t, err, "Client required, Model required, negative Dimensions")
}

// TestEmbedderReadsTheDocumentedResponse answers the SDK with the example
// response of https://platform.openai.com/docs/api-reference/embeddings/create
// (the vector cut to three values).
func TestEmbedderReadsTheDocumentedResponse(t *testing.T) {
	var body map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{
  "object": "list",
  "data": [
    {
      "object": "embedding",
      "embedding": [
        0.0023064255,
        -0.009327292,
        -0.0028842222
      ],
      "index": 0
    }
  ],
  "model": "text-embedding-ada-002",
  "usage": {
    "prompt_tokens": 8,
    "total_tokens": 8
  }
}`)
	}))
	defer srv.Close()
	client := oai.NewClient(option.WithAPIKey("k"), option.WithBaseURL(srv.URL), option.WithHTTPClient(srv.Client()))
	emb, err := oaicompat.NewEmbedder(oaicompat.EmbedderConfig{Client: &client, Model: "text-embedding-ada-002"})
	require.NoError(t, err)
	got, err := emb.Embed(context.Background(), "The food was delicious and the waiter...")
	require.NoError(t, err)
	assert.Equal(t, []float32{0.0023064255, -0.009327292, -0.0028842222}, got.Vector)
	assert.Equal(t, fallback.Usage{InputTokens: 8}, got.Usage)
	assert.Equal(t, map[string]any{"model": "text-embedding-ada-002", "input": "The food was delicious and the waiter...", "encoding_format": "float"}, body)
}

func TestEmbedderErrorsClassify(t *testing.T) {
	e := newEnv(t)
	emb := e.embedder(t, 0)
	for _, tc := range []struct {
		kind fakegemini.Kind
		want classify.Class
	}{
		{fakegemini.Unavailable, classify.Transient},
		{fakegemini.RateLimited, classify.RateLimited},
		{fakegemini.Unauthenticated, classify.Auth},
	} {
		e.srv.SetScript(embedModel, fakegemini.Script{Rules: []fakegemini.Rule{{Kind: tc.kind, P: fakegemini.Always}}})
		_, err := emb.Embed(context.Background(), "x")
		require.Error(t, err)
		var re *oaicompat.ResponseError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, tc.want, classify.Classify(err).Class, "%s", tc.kind)
	}
	assert.EqualValues(t, 3, e.sent.n.Load(), "no SDK retries")
}

// TestSemanticCacheOverAnOpenAIGateway: the models are down, the cache
// answers a reworded question through embeddings made by openai-go, and
// the ledger sees their tokens; when the embeddings endpoint fails too,
// the exact layer still answers and the breaker opens.
func TestSemanticCacheOverAnOpenAIGateway(t *testing.T) {
	e := newEnv(t)
	var recorded []cache.EmbeddingUsage
	br, err := breaker.New(breaker.Config{Name: "embed", ConsecutiveFailures: 2})
	require.NoError(t, err)
	c, err := cache.New(cache.Config[question, oaicompat.Answer]{
		Prompt: func(q question) string { return q.Text },
		Semantic: cache.SemanticConfig{Embedder: e.embedder(t, 512), Breaker: br,
			Usage: cache.UsageFunc(func(_ context.Context, u cache.EmbeddingUsage) { recorded = append(recorded, u) })},
	})
	require.NoError(t, err)
	defer c.Close()
	chain, err := fallback.New(fallback.Config[question, oaicompat.Answer]{
		Stages: []fallback.Stage[question, oaicompat.Answer]{
			e.tier(t, "primary", primaryModel).Stage(), e.tier(t, "fallback", fallbackModel).Stage(),
		},
		Total: 5 * time.Second, Classifier: oaicompat.Classifier, Cache: c,
	})
	require.NoError(t, err)
	stored := "what is your refund policy for items damaged during shipping"
	first, err := chain.Do(context.Background(), question{Text: stored})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return c.Stats().Embedded == 1 }, 5*time.Second, time.Millisecond)

	for _, m := range []string{primaryModel, fallbackModel} {
		e.srv.SetScript(m, fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.Unavailable, P: fakegemini.Always}}})
	}
	res, err := chain.Do(context.Background(), question{Text: "so what is your refund policy for items damaged during shipping"})
	require.NoError(t, err)
	assert.Equal(t, cache.HitSemantic, res.CacheHit)
	assert.Equal(t, first.Value.Text, res.Value.Text)
	require.Len(t, recorded, 2)
	assert.True(t, recorded[0].HasUsage)
	assert.Positive(t, recorded[1].Usage.InputTokens)

	e.srv.SetScript(embedModel, fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.Unavailable, P: fakegemini.Always}}})
	res, err = chain.Do(context.Background(), question{Text: stored + "  "})
	require.NoError(t, err)
	assert.Equal(t, cache.HitExact, res.CacheHit)
	for range 3 {
		_, err = chain.Do(context.Background(), question{Text: "something new"})
		require.Error(t, err)
	}
	assert.Equal(t, breaker.Open, br.State())
	assert.EqualValues(t, 2, e.srv.Count(embedModel, fakegemini.Unavailable))
}
