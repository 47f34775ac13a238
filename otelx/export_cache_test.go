package otelx

// The cache hit counter's names, for the tests.
var (
	MetricCacheHits = metricCacheHits
	AttrCacheHit    = attrCacheHit
)
