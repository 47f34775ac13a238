package gemini_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/cache"
	"github.com/tierguard/tierguard/fallback/gemini"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
)

const embedModel = "gemini-embedding-001"

func (e *env) embedder(t *testing.T, cfg gemini.EmbedderConfig) *gemini.Embedder {
	t.Helper()
	cfg.Client = e.client
	emb, err := gemini.NewEmbedder(cfg)
	require.NoError(t, err)
	return emb
}

func TestEmbedderThroughTheSDK(t *testing.T) {
	e := newEnv(t, genai.ClientConfig{})
	emb := e.embedder(t, gemini.EmbedderConfig{Dimensions: 768})
	assert.Equal(t, embedModel, emb.Model())
	got, err := emb.Embed(context.Background(), "What is the refund policy?")
	require.NoError(t, err)
	assert.Equal(t, fakegemini.Embed("What is the refund policy?", 768), got.Vector)
	assert.Equal(t, embedModel, got.Model)
	assert.False(t, got.HasUsage, "the Gemini API reports no usage for embeddings")
	assert.Equal(t, int64(1), e.sent.n.Load(), "one request")
	assert.EqualValues(t, 1, e.srv.Count(embedModel, fakegemini.Success))

	_, err = gemini.NewEmbedder(gemini.EmbedderConfig{Dimensions: -1})
	require.ErrorContains(t, err, "missing Client")
	require.ErrorContains(t, err, "negative Dimensions")
}

// TestEmbedderReadsTheDocumentedResponse answers the SDK with the
// documented batchEmbedContents request and response shapes
// (https://ai.google.dev/api/embeddings#method:-models.batchembedcontents):
// {"requests": [{"model", "content", "taskType", "outputDimensionality"}]}
// in, {"embeddings": [{"values": [...]}]} out.
func TestEmbedderReadsTheDocumentedResponse(t *testing.T) {
	var got map[string]any
	var path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.Path
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &got)
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		_, _ = io.WriteString(w, `{
  "embeddings": [
    {
      "values": [
        0.007600335,
        -0.0072232406,
        -0.013802436
      ]
    }
  ]
}
`)
	}))
	defer srv.Close()
	client, err := gemini.NewClient(context.Background(), genai.ClientConfig{APIKey: "k", HTTPClient: srv.Client(), HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL}})
	require.NoError(t, err)
	emb, err := gemini.NewEmbedder(gemini.EmbedderConfig{Client: client, Dimensions: 3})
	require.NoError(t, err)
	out, err := emb.Embed(context.Background(), "What is the meaning of life?")
	require.NoError(t, err)
	assert.Equal(t, []float32{0.007600335, -0.0072232406, -0.013802436}, out.Vector)
	assert.Equal(t, "/v1beta/models/gemini-embedding-001:batchEmbedContents", path)
	require.Len(t, got["requests"], 1)
	req := got["requests"].([]any)[0].(map[string]any)
	assert.Equal(t, "models/gemini-embedding-001", req["model"])
	assert.Equal(t, "SEMANTIC_SIMILARITY", req["taskType"])
	assert.EqualValues(t, 3, req["outputDimensionality"])
	assert.Equal(t, "What is the meaning of life?", req["content"].(map[string]any)["parts"].([]any)[0].(map[string]any)["text"])
}

func TestEmbedderErrorsClassify(t *testing.T) {
	e := newEnv(t, genai.ClientConfig{})
	emb := e.embedder(t, gemini.EmbedderConfig{})
	for _, tc := range []struct {
		kind fakegemini.Kind
		want classify.Class
	}{
		{fakegemini.Unavailable, classify.Transient},
		{fakegemini.RateLimited, classify.RateLimited},
		{fakegemini.Retired, classify.Retired},
	} {
		e.srv.SetScript(embedModel, always(tc.kind, fakegemini.Params{}))
		_, err := emb.Embed(context.Background(), "x")
		require.Error(t, err)
		assert.Equal(t, tc.want, classify.Classify(err).Class, "%s: the default classifier understands it", tc.kind)
		assert.Equal(t, tc.want == classify.Transient || tc.want == classify.RateLimited, breaker.OutcomeOf(err) == breaker.Failure, "%s counts for the breaker", tc.kind)
	}
}

// TestSemanticCacheOverTheGeminiAPI: both models down, the cache answers a
// reworded question through embeddings made by the real SDK.
func TestSemanticCacheOverTheGeminiAPI(t *testing.T) {
	e := newEnv(t, genai.ClientConfig{})
	var recorded []cache.EmbeddingUsage
	usage := cache.UsageFunc(func(_ context.Context, u cache.EmbeddingUsage) { recorded = append(recorded, u) })
	c, err := cache.New(cache.Config[question, gemini.Answer]{
		Prompt:   func(q question) string { return q.Text },
		Model:    func(a gemini.Answer) string { return a.ModelVersion },
		Semantic: cache.SemanticConfig{Embedder: e.embedder(t, gemini.EmbedderConfig{Dimensions: 768}), Usage: usage, SimplifiedThreshold: 0.86},
	})
	require.NoError(t, err)
	defer c.Close()
	chain := e.chain(t, nil, func(cfg *fallback.Config[question, gemini.Answer]) { cfg.Cache = c })

	stored := "what is your refund policy for items damaged during shipping"
	res, err := chain.Do(context.Background(), question{Text: stored})
	require.NoError(t, err)
	require.Equal(t, fallback.SourceTier, res.Source)
	answer := res.Value.Text
	require.Eventually(t, func() bool { return c.Stats().Embedded == 1 }, 5*time.Second, time.Millisecond)

	e.srv.SetScript(proModel, always(fakegemini.Unavailable, fakegemini.Params{}))
	e.srv.SetScript(flashModel, always(fakegemini.Unavailable, fakegemini.Params{}))
	for _, tc := range []struct {
		q    string
		want string
	}{
		{"What is your refund policy for items damaged during  SHIPPING", cache.HitExact},
		{"so what is your refund policy for items damaged during shipping", cache.HitSemantic},
		{"what is your refund policy for items damaged in shipping", cache.HitSimplified},
	} {
		res, err := chain.Do(context.Background(), question{Text: tc.q})
		require.NoError(t, err, tc.q)
		assert.Equal(t, fallback.SourceCache, res.Source)
		assert.Equal(t, tc.want, res.CacheHit, tc.q)
		assert.Equal(t, answer, res.Value.Text)
	}
	_, err = chain.Do(context.Background(), question{Text: "what are your opening hours"})
	require.Error(t, err, "an unrelated question finds nothing")
	require.Len(t, recorded, 4, "the written prompt and three lookups (the exact hit needs none)")
	assert.Equal(t, cache.EmbeddingUsage{Model: embedModel, Characters: len(stored)}, recorded[0])
	assert.True(t, recorded[1].Lookup)
	n, err := c.InvalidateModel(context.Background(), proModel)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "entries know the model version that answered")
}

// TestEmbeddingOutageFallsBackToExact: the embedding endpoint fails too;
// the exact layer still answers, inside the deadline, and the embedder's
// breaker opens.
func TestEmbeddingOutageFallsBackToExact(t *testing.T) {
	e := newEnv(t, genai.ClientConfig{})
	br, err := breaker.New(breaker.Config{Name: "embed", ConsecutiveFailures: 2, Cooldown: time.Minute})
	require.NoError(t, err)
	c, err := cache.New(cache.Config[question, gemini.Answer]{
		Prompt:   func(q question) string { return q.Text },
		Semantic: cache.SemanticConfig{Embedder: e.embedder(t, gemini.EmbedderConfig{}), Breaker: br},
	})
	require.NoError(t, err)
	defer c.Close()
	chain := e.chain(t, nil, func(cfg *fallback.Config[question, gemini.Answer]) { cfg.Cache = c })
	_, err = chain.Do(context.Background(), question{Text: "first question"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return c.Stats().Embedded == 1 }, 5*time.Second, time.Millisecond)

	for _, m := range []string{proModel, flashModel, embedModel} {
		e.srv.SetScript(m, always(fakegemini.Unavailable, fakegemini.Params{}))
	}
	res, err := chain.Do(context.Background(), question{Text: "First question"})
	require.NoError(t, err)
	assert.Equal(t, cache.HitExact, res.CacheHit)
	for range 3 {
		_, err := chain.Do(context.Background(), question{Text: "first question, reworded"})
		require.Error(t, err)
	}
	assert.Equal(t, breaker.Open, br.State())
	assert.EqualValues(t, 2, e.srv.Count(embedModel, fakegemini.Unavailable), "the open breaker spared the third lookup's call")
}
