package otelx

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tierguard/tierguard/fallback"
)

// metricCacheHits counts answers from a cache by how it matched: the
// dashboard row of exact, template, semantic and simplified hits, next to
// tierguard.requests{tierguard.source="default"} for the default answers.
const metricCacheHits = "tierguard.cache.hits"

// attrCacheHit is how the cache matched: "exact", "template",
// "semantic", "simplified", or "unknown" for a cache that does not say
// (fallback.CacheHit).
const attrCacheHit = attribute.Key("tierguard.cache.hit")

// numCacheHits is the number of fallback.CacheHit values.
const numCacheHits = int(fallback.CacheHitSimplified) + 1

// cacheHits is the cache hit counter and its attribute sets per
// operation.
type cacheHits struct {
	counter metric.Int64Counter
	byOp    sync.Map // operation → *[numCacheHits]*attrs
}

func (c *cacheHits) create(meter metric.Meter) error {
	var err error
	c.counter, err = meter.Int64Counter(metricCacheHits,
		metric.WithUnit("{hit}"),
		metric.WithDescription("Answers from the cache, by how it matched (exact, template, semantic, simplified)."))
	return err
}

func (c *cacheHits) attrs(op string, h fallback.CacheHit) *attrs {
	if int(h) >= numCacheHits {
		h = fallback.CacheHitUnknown
	}
	if v, ok := c.byOp.Load(op); ok {
		return v.(*[numCacheHits]*attrs)[h]
	}
	var set [numCacheHits]*attrs
	for k := range numCacheHits {
		set[k] = newAttrs(attrOperation.String(op), attrCacheHit.String(fallback.CacheHit(k).String()))
	}
	v, _ := c.byOp.LoadOrStore(op, &set)
	return v.(*[numCacheHits]*attrs)[h]
}

// cacheHit counts an answer from the cache and marks the request's span
// with the kind of hit.
func (i *Instrumentation) cacheHit(ctx context.Context, r *reqState, op string, hit fallback.CacheHit) {
	i.hits.counter.Add(ctx, 1, r.add(i.hits.attrs(op, hit))...)
	if r.span != nil && r.span.IsRecording() {
		r.span.SetAttributes(attrCacheHit.String(hit.String()))
	}
}
