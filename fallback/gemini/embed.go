package gemini

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/genai"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback/cache"
)

// DefaultEmbeddingModel is the embedding model an Embedder uses when its
// config names none.
const DefaultEmbeddingModel = "gemini-embedding-001"

// EmbedderConfig configures an Embedder.
type EmbedderConfig struct {
	// Client makes the calls; build it with NewClient. Required.
	Client *genai.Client
	// Model is the embedding model. "" means gemini-embedding-001.
	Model string
	// TaskType tells the model what the embedding is for. "" means
	// SEMANTIC_SIMILARITY: a cache compares a question with questions.
	TaskType string
	// Dimensions truncates the embedding (outputDimensionality): 768 costs
	// a quarter of the memory of gemini-embedding-001's 3,072 for little
	// loss of quality. 0 means the model's own size. The cache scales
	// truncated vectors, which are not of unit length, itself.
	Dimensions int32
}

// Embedder is a cache.Embedder over the Gemini API's embedding endpoint
// (client.Models.EmbedContent; the genai SDK calls batchEmbedContents with
// one request on the Gemini API). As for a Tier, each call makes one HTTP
// request — the SDK's retries are off: the cache gives each call a short
// deadline of its own, and a retry would not fit in it — and an error
// classifies through Rule, so that the cache's embedder breaker counts
// 5xx and 429 answers and ignores a request it cut short. The Gemini API
// reports no token usage for embeddings; the cache records the text's
// length in characters instead (cache.EmbeddingUsage).
type Embedder struct {
	client *genai.Client
	model  string
	config genai.EmbedContentConfig
}

var _ cache.Embedder = (*Embedder)(nil)

// NewEmbedder returns an Embedder, or an error naming the invalid fields.
func NewEmbedder(cfg EmbedderConfig) (*Embedder, error) {
	var errs []error
	if cfg.Client == nil {
		errs = append(errs, errors.New("missing Client"))
	}
	if cfg.Dimensions < 0 {
		errs = append(errs, errors.New("negative Dimensions"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, errors.New("gemini: invalid embedder config: " + strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	e := &Embedder{client: cfg.Client, model: cfg.Model}
	if e.model == "" {
		e.model = DefaultEmbeddingModel
	}
	e.config.TaskType = cfg.TaskType
	if e.config.TaskType == "" {
		e.config.TaskType = "SEMANTIC_SIMILARITY"
	}
	if cfg.Dimensions > 0 {
		d := cfg.Dimensions
		e.config.OutputDimensionality = &d
	}
	e.config.HTTPOptions = &genai.HTTPOptions{RetryOptions: &genai.HTTPRetryOptions{Attempts: &one}}
	return e, nil
}

// Model returns the embedding model.
func (e *Embedder) Model() string { return e.model }

// ErrNoEmbedding is the error of a 200 that carried no embedding values.
var ErrNoEmbedding = errors.New("gemini: response has no embedding")

// Embed implements cache.Embedder.
func (e *Embedder) Embed(ctx context.Context, text string) (cache.Embedding, error) {
	ctx, capture := WithCapture(ctx)
	// The SDK sets defaults on the config and the HTTP options it is
	// given (their Headers): each call gets copies.
	cfg, h := e.config, *e.config.HTTPOptions
	cfg.HTTPOptions = &h
	resp, err := e.client.Models.EmbedContent(ctx, e.model, []*genai.Content{genai.NewContentFromText(text, genai.RoleUser)}, &cfg)
	if err != nil {
		err = capture.Wrap(err)
		if v, ok := Rule(err); ok {
			return cache.Embedding{}, classify.Wrap(err, v)
		}
		return cache.Embedding{}, err
	}
	if len(resp.Embeddings) == 0 || resp.Embeddings[0] == nil || len(resp.Embeddings[0].Values) == 0 {
		return cache.Embedding{}, classify.Wrap(ErrNoEmbedding, classify.Verdict{Class: classify.InvalidOutput, Reason: "no embedding"})
	}
	emb := cache.Embedding{Vector: resp.Embeddings[0].Values, Model: e.model}
	if st := resp.Embeddings[0].Statistics; st != nil && st.TokenCount > 0 {
		// Vertex AI counts the tokens; the Gemini API does not.
		emb.Usage.InputTokens, emb.HasUsage = int64(st.TokenCount), true
	}
	return emb, nil
}
