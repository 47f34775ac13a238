package otelx

// The metric and attribute names, for the tests.
var (
	AttrAcquired             = attrAcquired
	AttrAttempt              = attrAttempt
	AttrBreaker              = attrBreaker
	AttrBreakerFrom          = attrBreakerFrom
	AttrBreakerState         = attrBreakerState
	AttrBreakerTo            = attrBreakerTo
	AttrBulkhead             = attrBulkhead
	AttrChunks               = attrChunks
	AttrClass                = attrClass
	AttrDeadlineRemaining    = attrDeadlineRemaining
	AttrDegraded             = attrDegraded
	AttrErrorType            = attrErrorType
	AttrHTTPStatus           = attrHTTPStatus
	AttrIncomplete           = attrIncomplete
	AttrInputTokens          = attrInputTokens
	AttrMember               = attrMember
	AttrHedge                = attrHedge
	AttrModel                = attrModel
	AttrOperation            = attrOperation
	AttrOutputTokens         = attrOutputTokens
	AttrProvider             = attrProvider
	AttrQueueWait            = attrQueueWait
	AttrReason               = attrReason
	AttrRetry                = attrRetry
	AttrRetryStop            = attrRetryStop
	AttrRetryWait            = attrRetryWait
	AttrRoute                = attrRoute
	AttrSkipReason           = attrSkipReason
	AttrSource               = attrSource
	AttrStatus               = attrStatus
	AttrTier                 = attrTier
	AttrTierIndex            = attrTierIndex
	AttrPrevTokenType        = attrPrevTokenType
	AttrTokenModality        = attrTokenModality
	AttrResponseModel        = attrResponseModel
	AttrResponseID           = attrResponseID
	AttrFinishReasons        = attrFinishReasons
	AttrRequestStream        = attrRequestStream
	AttrTimeToFirstChunk     = attrTimeToFirstChunk
	AttrCacheReadTokens      = attrCacheReadTokens
	AttrCacheWriteTokens     = attrCacheWriteToken
	AttrReasoningTokens      = attrReasoningTokens
	AttrServerAddress        = attrServerAddress
	AttrServerPort           = attrServerPort
	AttrTGOperation          = attrTGOperation
	AttrStream               = attrStream
	AttrUpstreamCalls        = attrUpstreamCalls
	AttrValidationReason     = attrValidationReason
	AttrValidationRule       = attrValidationRule
	MetricActiveRequests     = metricActiveRequests
	MetricAttempts           = metricAttempts
	MetricBreakerState       = metricBreakerState
	MetricBreakerTransitions = metricBreakerTransitions
	MetricBulkheadAccepted   = metricBulkheadAccepted
	MetricBulkheadInFlight   = metricBulkheadInFlight
	MetricBulkheadLimit      = metricBulkheadLimit
	MetricBulkheadQueueWait  = metricBulkheadQueueWait
	MetricBulkheadQueued     = metricBulkheadQueued
	MetricBulkheadRejected   = metricBulkheadRejected
	MetricDeadlineRemaining  = metricDeadlineRemaining
	MetricInferenceDuration  = metricInferenceDuration
	MetricTimePerOutputChunk = metricTimePerOutputChunk
	MetricUsageInput         = metricUsageInput
	MetricUsageOutput        = metricUsageOutput
	MetricUsageCacheRead     = metricUsageCacheRead
	MetricUsageCacheWrite    = metricUsageCacheWrite
	MetricUsageReasoning     = metricUsageReasoning
	MetricOperationInput     = metricOperationInput
	MetricOperationOutput    = metricOperationOutput
	MetricPrevDuration       = metricPrevOperationDuration
	MetricPrevTokenUsage     = metricPrevTokenUsage
	MetricPrevFirstChunk     = metricPrevTimeToFirstChunk
	MetricRequestDuration    = metricRequestDuration
	MetricRequests           = metricRequests
	MetricRetryWait          = metricRetryWait
	MetricSkips              = metricSkips
	MetricTimeToFirstChunk   = metricTimeToFirstChunk
)

// The bucket boundaries, for the tests.
var (
	DurationBuckets       = durationBuckets
	TokenBuckets          = tokenBuckets
	PrevFirstChunkBuckets = prevFirstChunkBuckets
)

// The context getter, for the tests.
var Attributes = attributes
