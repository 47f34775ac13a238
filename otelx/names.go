package otelx

import "go.opentelemetry.io/otel/attribute"

// ScopeName is the instrumentation scope of the meter and the tracer otelx
// creates.
const ScopeName = "github.com/tierguard/tierguard/otelx"

// Metric names. The two gen_ai.* histograms follow the OpenTelemetry GenAI
// semantic conventions; the rest are tierguard's own. Exported through the
// OpenTelemetry Prometheus exporter, dots become underscores and the unit is
// appended (seconds as _seconds, counters get _total; a {…} unit is dropped).
const (
	// MetricOperationDuration is gen_ai.client.operation.duration: the
	// duration of each upstream attempt, in seconds.
	MetricOperationDuration = "gen_ai.client.operation.duration"
	// MetricTokenUsage is gen_ai.client.token.usage: tokens per answer, by
	// gen_ai.token.type (input, output), when the tier reports usage.
	MetricTokenUsage = "gen_ai.client.token.usage"
	// MetricTimeToFirstChunk is gen_ai.client.operation.time_to_first_chunk:
	// for a streaming attempt, the time from the call to its first chunk.
	MetricTimeToFirstChunk = "gen_ai.client.operation.time_to_first_chunk"
	// MetricAttempts counts upstream attempts by tier and class ("ok" for a
	// success).
	MetricAttempts = "tierguard.attempts"
	// MetricRequests counts finished requests by source (tier, cache,
	// default, error) and degraded flag.
	MetricRequests = "tierguard.requests"
	// MetricRequestDuration is the end-to-end duration of a request, every
	// attempt and fallback included, in seconds.
	MetricRequestDuration = "tierguard.request.duration"
	// MetricDeadlineRemaining is the time left in a request's budget when
	// it ended, in seconds; recorded only for requests with a deadline.
	MetricDeadlineRemaining = "tierguard.request.deadline_remaining"
	// MetricActiveRequests is the number of requests in flight in the
	// chain.
	MetricActiveRequests = "tierguard.active_requests"
	// MetricRetryWait is the delay chosen before retrying the same tier, in
	// seconds, by the class that caused the retry.
	MetricRetryWait = "tierguard.retry.wait"
	// MetricSkips counts tiers passed over without an upstream call, by
	// reason (open, full, retired, quota, budget).
	MetricSkips = "tierguard.skips"
	// MetricBreakerState is each circuit breaker's state: closed 0,
	// half-open 1, open 2.
	MetricBreakerState = "tierguard.breaker.state"
	// MetricBreakerTransitions counts breaker state changes by from, to and
	// reason.
	MetricBreakerTransitions = "tierguard.breaker.transitions"
	// MetricBulkheadAccepted counts acquisitions that got a slot.
	MetricBulkheadAccepted = "tierguard.bulkhead.accepted"
	// MetricBulkheadRejected counts acquisitions refused: full, queue full,
	// wait ended.
	MetricBulkheadRejected = "tierguard.bulkhead.rejected"
	// MetricBulkheadInFlight is the number of slots held.
	MetricBulkheadInFlight = "tierguard.bulkhead.in_flight"
	// MetricBulkheadQueued is the number of acquisitions waiting for a slot.
	MetricBulkheadQueued = "tierguard.bulkhead.queued"
	// MetricBulkheadLimit is the number of slots.
	MetricBulkheadLimit = "tierguard.bulkhead.limit"
	// MetricBulkheadQueueWait is the time an acquisition waited in a
	// bulkhead's queue, in seconds, by whether it got a slot.
	MetricBulkheadQueueWait = "tierguard.bulkhead.queue.wait"
)

// Attribute keys. The gen_ai.*, error.type and http.* keys are those of the
// OpenTelemetry semantic conventions; the tierguard.* keys are the
// library's own. Every key used on a metric has a small, fixed set of
// values.
const (
	// AttrOperation is gen_ai.operation.name: the chain's Operation.
	AttrOperation = attribute.Key("gen_ai.operation.name")
	// AttrProvider is gen_ai.provider.name: the stage's Provider.
	AttrProvider = attribute.Key("gen_ai.provider.name")
	// AttrModel is gen_ai.request.model: the stage's Model.
	AttrModel = attribute.Key("gen_ai.request.model")
	// AttrTokenType is gen_ai.token.type: "input" or "output".
	AttrTokenType = attribute.Key("gen_ai.token.type")
	// AttrErrorType is error.type: the failure's class name
	// ("transient", "rate_limited", ...), never its message.
	AttrErrorType = attribute.Key("error.type")
	// AttrHTTPStatus is http.response.status_code (spans only).
	AttrHTTPStatus = attribute.Key("http.response.status_code")
	// AttrInputTokens is gen_ai.usage.input_tokens (spans only).
	AttrInputTokens = attribute.Key("gen_ai.usage.input_tokens")
	// AttrOutputTokens is gen_ai.usage.output_tokens (spans only).
	AttrOutputTokens = attribute.Key("gen_ai.usage.output_tokens")

	// AttrTier is the tier's name (fallback.ModelTier.Name).
	AttrTier = attribute.Key("tierguard.tier.name")
	// AttrTierIndex is the tier's position in the chain, 0 for the primary
	// (spans only).
	AttrTierIndex = attribute.Key("tierguard.tier.index")
	// AttrAttempt is the attempt's number on its tier, from 1 (spans only).
	AttrAttempt = attribute.Key("tierguard.attempt")
	// AttrClass is the outcome's class name; "ok" for a success.
	AttrClass = attribute.Key("tierguard.class")
	// AttrStatus is the canonical status name ("UNAVAILABLE"), spans only.
	AttrStatus = attribute.Key("tierguard.status")
	// AttrReason is the verdict's fixed reason phrase (spans only).
	AttrReason = attribute.Key("tierguard.reason")
	// AttrSource is where the answer came from: "tier", "cache",
	// "default", or "error" when the request failed.
	AttrSource = attribute.Key("tierguard.source")
	// AttrDegraded is true for any answer but the first tier's.
	AttrDegraded = attribute.Key("tierguard.degraded")
	// AttrSkipReason says why a tier was skipped: "open", "full",
	// "retired", "quota", "budget".
	AttrSkipReason = attribute.Key("tierguard.skip.reason")
	// AttrRetry is true on an attempt span when another attempt follows
	// (spans only).
	AttrRetry = attribute.Key("tierguard.retry")
	// AttrRetryWait is the delay chosen before the next attempt, in
	// seconds (spans only).
	AttrRetryWait = attribute.Key("tierguard.retry.wait")
	// AttrRetryStop says why no retry followed a failure (spans only).
	AttrRetryStop = attribute.Key("tierguard.retry.stop")
	// AttrRoute says where the request went after a tier was given up:
	// "next_tier", "local", "fail_closed" (spans only).
	AttrRoute = attribute.Key("tierguard.route")
	// AttrUpstreamCalls is the number of upstream calls a request made
	// (spans only).
	AttrUpstreamCalls = attribute.Key("tierguard.upstream_calls")
	// AttrDeadlineRemaining is the time left in the request's budget, in
	// seconds (spans only).
	AttrDeadlineRemaining = attribute.Key("tierguard.deadline.remaining")
	// AttrQueueWait is the time a request waited for the tier's bulkhead,
	// in seconds (spans only).
	AttrQueueWait = attribute.Key("tierguard.bulkhead.queue.wait")
	// AttrChunks is the number of chunks a streaming attempt or request
	// delivered (spans only).
	AttrChunks = attribute.Key("tierguard.stream.chunks")
	// AttrIncomplete is true when a stream broke after its first chunk
	// (spans only).
	AttrIncomplete = attribute.Key("tierguard.stream.incomplete")
	// AttrValidationRule is the rule of the validator that rejected an
	// answer (spans only).
	AttrValidationRule = attribute.Key("tierguard.validation.rule")
	// AttrValidationReason is that validator's reason, which names no part
	// of the answer (spans only).
	AttrValidationReason = attribute.Key("tierguard.validation.reason")
	// AttrBreaker is a circuit breaker's name.
	AttrBreaker = attribute.Key("tierguard.breaker.name")
	// AttrBreakerState is the tier's breaker state when the attempt
	// started: "closed", "half_open", "open" (spans only).
	AttrBreakerState = attribute.Key("tierguard.breaker.state")
	// AttrBreakerFrom is the state a breaker left.
	AttrBreakerFrom = attribute.Key("tierguard.breaker.from")
	// AttrBreakerTo is the state a breaker entered.
	AttrBreakerTo = attribute.Key("tierguard.breaker.to")
	// AttrBreakerReason is the transition's fixed reason phrase
	// ("consecutive failures", "cooldown elapsed", ...).
	AttrBreakerReason = attribute.Key("tierguard.breaker.reason")
	// AttrBulkhead is a bulkhead's name.
	AttrBulkhead = attribute.Key("tierguard.bulkhead.name")
	// AttrAcquired says whether a queued acquisition got its slot.
	AttrAcquired = attribute.Key("tierguard.bulkhead.acquired")

	// KeyRequestID is the attribute under which the request id set by
	// WithRequestID appears on spans, and on metrics if listed in
	// Options.MetricAttributes.
	KeyRequestID = attribute.Key("tierguard.request.id")
	// KeyTenant is the attribute for the tenant set by WithTenant.
	KeyTenant = attribute.Key("tierguard.tenant")
	// KeyScenario is the attribute for the scenario set by WithScenario.
	KeyScenario = attribute.Key("tierguard.scenario")
)

// Histogram bucket boundaries. durationBuckets (seconds) are those the
// GenAI semantic conventions advise for gen_ai.client.operation.duration and
// serve every duration histogram but the bulkhead queue wait, which uses the
// finer queueWaitBuckets; tokenBuckets are those advised for
// gen_ai.client.token.usage; firstChunkBuckets serve the time to first
// chunk, finer below a second.
var (
	durationBuckets   = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	tokenBuckets      = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	firstChunkBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	queueWaitBuckets  = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
)
