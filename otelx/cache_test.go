package otelx_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/cache"
	"github.com/tierguard/tierguard/otelx"
	"github.com/tierguard/tierguard/retry"
)

// TestCacheHitsByKind: one answer of each kind from a tierguard cache,
// counted by kind, next to the requests by source; the request span says
// the kind too.
func TestCacheHitsByKind(t *testing.T) {
	h := newHarness(t)
	vectors := map[string][]float32{
		"how do i reset my password": {1, 0},
		"i forgot my password":       {0.97, 0.243},
		"my password is gone":        {0.9, 0.436},
	}
	c, err := cache.New(cache.Config[string, string]{
		Prompt: func(q string) string { return q },
		Semantic: cache.SemanticConfig{SimplifiedThreshold: 0.86, Embedder: cache.EmbedderFunc(func(_ context.Context, q string) (cache.Embedding, error) {
			return cache.Embedding{Vector: vectors[q]}, nil
		})},
		Template: cache.TemplateConfig[string]{Refill: cache.SubstituteVars},
	})
	require.NoError(t, err)
	defer c.Close()
	c.Put(context.Background(), "how do i reset my password", "use the link")
	c.Put(context.Background(), "where is order 17", "order 17 shipped")
	require.Eventually(t, func() bool { return c.Stats().Embedded >= 1 }, 5e9, 1e6)

	chain := newChain(t, fallback.Config[string, string]{
		Operation: "chat",
		Stages:    []fallback.Stage[string, string]{{Tier: newTier("pro", step{err: http503()}), Retry: retry.Policy{MaxAttempts: 1}}},
		Cache:     c,
		Default:   func(context.Context, string) (string, bool) { return "busy", true },
	})
	instrument(t, chain, h.options())
	for _, q := range []string{"How do I reset my password", "where is order 18", "i forgot my password", "my password is gone", "my password is gone", "something else"} {
		_, err := chain.Do(context.Background(), q)
		require.NoError(t, err)
	}
	rm := h.collect(t)
	hits := ints(t, findMetric(t, rm, otelx.MetricCacheHits))
	op := otelx.AttrOperation.String("chat")
	assert.Equal(t, map[string]int64{
		kv(op, otelx.AttrCacheHit.String("exact")):      1,
		kv(op, otelx.AttrCacheHit.String("template")):   1,
		kv(op, otelx.AttrCacheHit.String("semantic")):   1,
		kv(op, otelx.AttrCacheHit.String("simplified")): 2,
	}, hits)
	reqs := ints(t, findMetric(t, rm, otelx.MetricRequests))
	assert.EqualValues(t, 5, reqs[kv(op, otelx.AttrSource.String("cache"), otelx.AttrDegraded.Bool(true))])
	assert.EqualValues(t, 1, reqs[kv(op, otelx.AttrSource.String("default"), otelx.AttrDegraded.Bool(true))])

	var kinds []string
	for _, s := range h.spans.Ended() {
		for _, a := range s.Attributes() {
			if a.Key == otelx.AttrCacheHit {
				kinds = append(kinds, a.Value.AsString())
			}
		}
	}
	assert.ElementsMatch(t, []string{"exact", "template", "semantic", "simplified", "simplified"}, kinds)
}

func TestCacheHitOfAPlainCacheIsUnknown(t *testing.T) {
	h := newHarness(t)
	chain := newChain(t, fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{{Tier: newTier("pro", step{err: http503()}), Retry: retry.Policy{MaxAttempts: 1}}},
		Cache:  cacheFunc(func(context.Context, string) (string, bool) { return "cached", true }),
	})
	instrument(t, chain, otelx.Options{MeterProvider: h.mp, MetricAttributes: []attribute.Key{otelx.KeyTenant}})
	_, err := chain.Do(fallback.WithRequest(context.Background(), fallback.Request{Tenant: "acme"}), "q")
	require.NoError(t, err)
	hits := ints(t, findMetric(t, h.collect(t), otelx.MetricCacheHits))
	assert.Equal(t, map[string]int64{
		kv(otelx.AttrOperation.String("generate_content"), otelx.AttrCacheHit.String("unknown"), otelx.KeyTenant.String("acme")): 1,
	}, hits, "a listed request label reaches the counter too")
}
