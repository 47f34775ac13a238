package oaicompat

import (
	"context"
	"errors"
	"net/http"
	"strings"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/cache"
)

// EmbedderConfig configures an Embedder.
type EmbedderConfig struct {
	// Client makes the calls. Required.
	Client *oai.Client
	// Model is the embedding model the gateway serves
	// ("text-embedding-3-small"). Required.
	Model string
	// Dimensions shortens the embedding (the dimensions parameter, which
	// the text-embedding-3 models accept); 0 means the model's own size.
	Dimensions int64
}

// Embedder is a cache.Embedder over the embeddings endpoint of OpenAI or
// an OpenAI-compatible gateway. As for a Tier, each call makes one HTTP
// request (option.WithMaxRetries(0): the cache gives each call a short
// deadline of its own, and the SDK's retries would not fit in it), error
// responses come back as a *ResponseError that classifies through Rule,
// and the token usage the API reports reaches the cache's
// cache.UsageRecorder.
type Embedder struct {
	client *oai.Client
	model  string
	dims   int64
}

var _ cache.Embedder = (*Embedder)(nil)

// NewEmbedder returns an Embedder, or an error naming the invalid fields.
func NewEmbedder(cfg EmbedderConfig) (*Embedder, error) {
	var bad []string
	if cfg.Client == nil {
		bad = append(bad, "Client required")
	}
	if cfg.Model == "" {
		bad = append(bad, "Model required")
	}
	if cfg.Dimensions < 0 {
		bad = append(bad, "negative Dimensions")
	}
	if len(bad) > 0 {
		return nil, errors.New("openai: invalid embedder config: " + strings.Join(bad, ", "))
	}
	return &Embedder{client: cfg.Client, model: cfg.Model, dims: cfg.Dimensions}, nil
}

// Model returns the embedding model.
func (e *Embedder) Model() string { return e.model }

// ErrNoEmbedding is the error of a 200 that carried no embedding.
var ErrNoEmbedding = errors.New("openai: response has no embedding")

// Embed implements cache.Embedder.
func (e *Embedder) Embed(ctx context.Context, text string) (cache.Embedding, error) {
	params := oai.EmbeddingNewParams{
		Model:          oai.EmbeddingModel(e.model),
		Input:          oai.EmbeddingNewParamsInputUnion{OfString: oai.String(text)},
		EncodingFormat: oai.EmbeddingNewParamsEncodingFormatFloat,
	}
	if e.dims > 0 {
		params.Dimensions = oai.Int(e.dims)
	}
	var httpResp *http.Response
	resp, err := e.client.Embeddings.New(ctx, params, option.WithMaxRetries(0), option.WithResponseInto(&httpResp), option.WithMiddleware(limitErrorBody))
	if err != nil {
		return cache.Embedding{}, responseError(err, httpResp)
	}
	if resp == nil || len(resp.Data) == 0 || len(resp.Data[0].Embedding) == 0 {
		return cache.Embedding{}, classify.Wrap(ErrNoEmbedding, classify.Verdict{Class: classify.InvalidOutput, Reason: "no embedding"})
	}
	vec := make([]float32, len(resp.Data[0].Embedding))
	for i, x := range resp.Data[0].Embedding {
		vec[i] = float32(x)
	}
	emb := cache.Embedding{Vector: vec, Model: resp.Model}
	if emb.Model == "" {
		emb.Model = e.model
	}
	if resp.Usage.JSON.PromptTokens.Valid() {
		emb.Usage, emb.HasUsage = fallback.Usage{InputTokens: resp.Usage.PromptTokens}, true
	}
	return emb, nil
}
