package otelx

// The adaptive bulkhead's names, for the tests.
var (
	AttrPriority                   = attrPriority
	MetricBulkheadRejectedPriority = metricBulkheadRejectedPriority
)
