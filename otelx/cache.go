package otelx

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// metricCacheHits counts answers from a cache by how it matched: the
// dashboard row of exact, template, semantic and simplified hits, next to
// tierguard.requests{tierguard.source="default"} for the default answers.
const metricCacheHits = "tierguard.cache.hits"

// attrCacheHit is how the cache matched, in the cache's own words
// (fallback.Summary.CacheHit): package cache says "exact", "template",
// "semantic" or "simplified"; "unknown" stands for a cache that does not
// say, and "other" for labels past the first maxCacheHitLabels of an
// operation, so that a cache cannot grow the series without bound.
const attrCacheHit = attribute.Key("tierguard.cache.hit")

// maxCacheHitLabels bounds the hit labels counted per operation.
const maxCacheHitLabels = 16

// cacheHits is the cache hit counter and its attribute sets per
// operation and label.
type cacheHits struct {
	counter metric.Int64Counter
	byOp    sync.Map // operation → *hitLabels
}

// hitLabels are one operation's attribute sets by hit label.
type hitLabels struct {
	m     sync.Map // label → *attrs
	mu    sync.Mutex
	n     int
	other *attrs
}

func (c *cacheHits) create(meter metric.Meter) error {
	var err error
	c.counter, err = meter.Int64Counter(metricCacheHits,
		metric.WithUnit("{hit}"),
		metric.WithDescription("Answers from the cache, by how it matched (exact, template, semantic, simplified)."))
	return err
}

// hitLabel is how a hit is exported: "unknown" for a cache that did not say.
func hitLabel(h string) string {
	if h == "" {
		return "unknown"
	}
	return h
}

func (c *cacheHits) attrs(op, h string) *attrs {
	v, ok := c.byOp.Load(op)
	if !ok {
		v, _ = c.byOp.LoadOrStore(op, &hitLabels{other: newAttrs(attrOperation.String(op), attrCacheHit.String("other"))})
	}
	ls := v.(*hitLabels)
	h = hitLabel(h)
	if a, ok := ls.m.Load(h); ok {
		return a.(*attrs)
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if a, ok := ls.m.Load(h); ok {
		return a.(*attrs)
	}
	if ls.n >= maxCacheHitLabels {
		return ls.other
	}
	ls.n++
	a := newAttrs(attrOperation.String(op), attrCacheHit.String(h))
	ls.m.Store(h, a)
	return a
}

// cacheHit counts an answer from the cache and marks the request's span
// with the kind of hit.
func (i *Instrumentation) cacheHit(ctx context.Context, r *reqState, op string, hit string) {
	a := i.hits.attrs(op, hit)
	i.hits.counter.Add(ctx, 1, r.add(a)...)
	if r.span != nil && r.span.IsRecording() {
		if v, ok := a.set.Value(attrCacheHit); ok {
			r.span.SetAttributes(attrCacheHit.String(v.AsString()))
		}
	}
}
