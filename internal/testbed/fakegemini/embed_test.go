package fakegemini_test

import (
	"math"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
)

func norm(v []float32) float64 {
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	return math.Sqrt(ss)
}

func cosine(a, b []float32) float64 {
	var d float64
	for i := range a {
		d += float64(a[i]) * float64(b[i])
	}
	return d / norm(a) / norm(b)
}

func TestEmbedIsDeterministicAndSimilarForSharedWords(t *testing.T) {
	a := fakegemini.Embed("How do I reset my password?", 0)
	require.Len(t, a, fakegemini.EmbeddingDims)
	assert.InDelta(t, 1, norm(a), 1e-5, "the full size is unit length")
	assert.Equal(t, a, fakegemini.Embed("how do i RESET my password", 0), "case and punctuation do not count")
	assert.Greater(t, cosine(a, fakegemini.Embed("How do I reset my password please?", 0)), 0.9)
	assert.Less(t, cosine(a, fakegemini.Embed("What are your opening hours?", 0)), 0.3)
	short := fakegemini.Embed("How do I reset my password?", 768)
	require.Len(t, short, 768)
	assert.Equal(t, a[:768], short, "a shorter embedding is the full one cut, as the API truncates")
	assert.Less(t, norm(short), 0.9, "and so not unit length")
}

// The bodies below are the request shapes of
// https://ai.google.dev/api/embeddings (embedContent, batchEmbedContents).
func TestEmbedContentEndpoints(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	r := do(t, srv, http.MethodPost, "/v1beta/models/gemini-embedding-001:embedContent",
		`{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"What is the meaning of life?"}]},"taskType":"SEMANTIC_SIMILARITY","outputDimensionality":768}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	one := decode[struct {
		Embedding struct {
			Values []float32 `json:"values"`
		} `json:"embedding"`
	}](t, r.body)
	assert.Equal(t, fakegemini.Embed("What is the meaning of life?", 768), one.Embedding.Values)

	r = do(t, srv, http.MethodPost, "/v1beta/models/gemini-embedding-001:batchEmbedContents",
		`{"requests":[{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"a b"}]}},{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"c"}]},"outputDimensionality":8}]}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	batch := decode[struct {
		Embeddings []struct {
			Values []float32 `json:"values"`
		} `json:"embeddings"`
	}](t, r.body)
	require.Len(t, batch.Embeddings, 2)
	assert.Len(t, batch.Embeddings[0].Values, fakegemini.EmbeddingDims)
	assert.Equal(t, fakegemini.Embed("c", 8), batch.Embeddings[1].Values)
	assert.EqualValues(t, 2, srv.Count("gemini-embedding-001", fakegemini.Success))

	r = do(t, srv, http.MethodPost, "/v1beta/models/gemini-embedding-001:embedContent", `{"taskType":"SEMANTIC_SIMILARITY"}`)
	assert.Equal(t, http.StatusBadRequest, r.status)
	assert.Contains(t, string(r.body), "content is not specified")
	r = do(t, srv, http.MethodPost, "/v1beta/models/gemini-embedding-001:batchEmbedContents", `{}`)
	assert.Equal(t, http.StatusBadRequest, r.status)
}

func TestEmbedRequestsFollowTheModelsScript(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript("gemini-embedding-001", fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.Unavailable, P: fakegemini.Always, FirstN: 1}}})
	body := `{"content":{"parts":[{"text":"x"}]}}`
	r := do(t, srv, http.MethodPost, "/v1beta/models/gemini-embedding-001:embedContent", body)
	assert.Equal(t, http.StatusServiceUnavailable, r.status)
	assert.Equal(t, "UNAVAILABLE", decode[apiError](t, r.body).Error.Status)
	assert.Equal(t, http.StatusOK, do(t, srv, http.MethodPost, "/v1beta/models/gemini-embedding-001:embedContent", body).status)
	srv.Retire("gemini-embedding-001")
	assert.Equal(t, http.StatusNotFound, do(t, srv, http.MethodPost, "/v1beta/models/gemini-embedding-001:embedContent", body).status)
}

// The body is the request shape of
// https://platform.openai.com/docs/api-reference/embeddings/create.
func TestOpenAIEmbeddings(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	for _, path := range []string{"/v1/embeddings", "/v1beta/openai/embeddings"} {
		r := do(t, srv, http.MethodPost, path, `{"model":"text-embedding-3-small","input":"The food was delicious","encoding_format":"float","dimensions":256}`)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		o := decode[struct {
			Object string `json:"object"`
			Data   []struct {
				Object    string    `json:"object"`
				Index     int       `json:"index"`
				Embedding []float32 `json:"embedding"`
			} `json:"data"`
			Model string `json:"model"`
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
				TotalTokens  int `json:"total_tokens"`
			} `json:"usage"`
		}](t, r.body)
		assert.Equal(t, "list", o.Object)
		assert.Equal(t, "text-embedding-3-small", o.Model)
		require.Len(t, o.Data, 1)
		assert.Equal(t, "embedding", o.Data[0].Object)
		assert.Len(t, o.Data[0].Embedding, 256)
		assert.InDelta(t, 1, norm(o.Data[0].Embedding), 1e-5, "OpenAI scales a shortened embedding back to unit length")
		assert.Positive(t, o.Usage.PromptTokens)
		assert.Equal(t, o.Usage.PromptTokens, o.Usage.TotalTokens)
	}
	r := do(t, srv, http.MethodPost, "/v1/embeddings", `{"model":"m","input":["a","b"]}`)
	require.Equal(t, http.StatusOK, r.status)
	assert.Contains(t, string(r.body), `"index":1`)
	r = do(t, srv, http.MethodPost, "/v1/embeddings", `{"model":"m","input":[]}`)
	assert.Equal(t, http.StatusBadRequest, r.status)
	r = do(t, srv, http.MethodPost, "/v1/embeddings", `{"input":"x"}`)
	assert.Equal(t, http.StatusBadRequest, r.status)
}
