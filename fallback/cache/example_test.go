package cache_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/cache"
	"github.com/tierguard/tierguard/retry"
)

// Example puts a cache behind a chain: answers the tier gave are written
// back, and once the tier is down the cache answers the same question, a
// question of the same template, and a paraphrase.
func Example() {
	// A deterministic embedder: a paraphrase gets the same vector. In
	// production use fallback/gemini's or fallback/oaicompat's.
	vectors := map[string][]float32{
		"How do I reset my password?":      {1, 0, 0},
		"I forgot my password, what now?":  {0.98, 0.2, 0},
		"What are your opening hours?":     {0, 1, 0},
		"Where is order 1234?":             {0, 0, 1},
		"Tell me something else entirely.": {0.6, 0.6, 0.53},
	}
	emb := cache.EmbedderFunc(func(_ context.Context, text string) (cache.Embedding, error) {
		return cache.Embedding{Vector: vectors[text]}, nil
	})
	c, err := cache.New(cache.Config[string, string]{
		Prompt:   func(q string) string { return q },
		Semantic: cache.SemanticConfig{Embedder: emb, Threshold: 0.95},
		Template: cache.TemplateConfig[string]{Refill: cache.SubstituteVars},
	})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	up := true
	model := fallback.Tier("flash", func(_ context.Context, q string) (string, error) {
		if !up {
			return "", errors.New("503 unavailable")
		}
		return "answer to: " + q, nil
	})
	chain, err := fallback.New(fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{{Tier: model, Retry: retry.Policy{MaxAttempts: 1}}},
		Cache:  c,
	})
	if err != nil {
		panic(err)
	}
	ctx := fallback.WithRequest(context.Background(), fallback.Request{Tenant: "acme"})
	for _, q := range []string{"How do I reset my password?", "Where is order 1234?"} {
		if _, err := chain.Do(ctx, q); err != nil {
			panic(err)
		}
	}
	for c.Stats().Embedded < 2 { // the embeddings are made in the background
		time.Sleep(time.Millisecond)
	}

	up = false
	for _, q := range []string{"how do I reset my  password?", "Where is order 5678?", "I forgot my password, what now?", "Tell me something else entirely."} {
		res, err := chain.Do(ctx, q)
		if err != nil {
			fmt.Printf("%-34q no answer\n", q)
			continue
		}
		fmt.Printf("%-34q %-8s %q\n", q, res.CacheHit, res.Value)
	}
	// Output:
	// "how do I reset my  password?"     exact    "answer to: How do I reset my password?"
	// "Where is order 5678?"             template "answer to: Where is order 5678?"
	// "I forgot my password, what now?"  semantic "answer to: How do I reset my password?"
	// "Tell me something else entirely." no answer
}
