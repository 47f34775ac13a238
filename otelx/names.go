package otelx

import "go.opentelemetry.io/otel/attribute"

// ScopeName is the instrumentation scope of the meter and the tracer otelx
// creates.
const ScopeName = "github.com/tierguard/tierguard/otelx"

// SemConvVersion names the revision of the OpenTelemetry GenAI semantic
// conventions whose names otelx emits — the gen_ai.* metrics, their
// attributes and bucket boundaries, the inference span's name, kind and
// attributes: the development schema 1.42.0-dev of the GenAI conventions'
// own repository, github.com/open-telemetry/semantic-conventions-genai
// (docs/gen-ai/client-inference.md and gen-ai-token-metrics.md). That
// repository has cut no release; 1.42.0-dev is the schema its
// model/manifest.yaml declares, built on the core semantic conventions
// v1.44.0, where error.type, server.* and http.* come from.
const SemConvVersion = "1.42.0-dev"

// SchemaURL is the schema URL of SemConvVersion, set on otelx's meter and
// tracer so that a backend can tell which conventions the names follow.
const SchemaURL = "https://opentelemetry.io/schemas/gen-ai-dev/" + SemConvVersion

// This file is otelx's naming table: every metric, attribute and bucket
// boundary otelx emits is named here, and nowhere else. A metric added in
// another file adds its name here. Exported through the OpenTelemetry
// Prometheus exporter, dots become underscores and the unit is appended
// (seconds as _seconds, counters get _total; a {…} unit is dropped).

// GenAI inference metrics, as the GenAI semantic conventions name them.
const (
	// metricInferenceDuration is gen_ai.client.inference.duration: the
	// duration of each upstream attempt, in seconds.
	metricInferenceDuration = "gen_ai.client.inference.duration"
	// metricTimeToFirstChunk is gen_ai.client.inference.time_to_first_chunk:
	// for a streaming attempt, the time from the call to its first chunk.
	metricTimeToFirstChunk = "gen_ai.client.inference.time_to_first_chunk"
	// metricTimePerOutputChunk is
	// gen_ai.client.inference.time_per_output_chunk: for each chunk after
	// the first, the time since the previous one.
	metricTimePerOutputChunk = "gen_ai.client.inference.time_per_output_chunk"
	// metricUsageInput and the other usage counters count tokens over
	// time, by gen_ai.token.modality; recorded for every upstream response
	// that reported usage, failures and late replies included.
	metricUsageInput      = "gen_ai.client.inference.usage.input_tokens"
	metricUsageOutput     = "gen_ai.client.inference.usage.output_tokens"
	metricUsageCacheRead  = "gen_ai.client.inference.usage.cache_read.input_tokens"
	metricUsageCacheWrite = "gen_ai.client.inference.usage.cache_write.input_tokens"
	metricUsageReasoning  = "gen_ai.client.inference.usage.reasoning.output_tokens"
	// metricOperationInput and metricOperationOutput are the per-attempt
	// token histograms (percentiles, outliers), with error.type on
	// failures.
	metricOperationInput  = "gen_ai.client.inference.operation.input_tokens"
	metricOperationOutput = "gen_ai.client.inference.operation.output_tokens"
)

// The names of the GenAI semantic conventions before SemConvVersion
// (semantic-conventions v1.37.0 to v1.41.0, the last release of the core
// repository with GenAI conventions in it), emitted as well when
// Options.PreviousNames is set, for one release.
const (
	// metricPrevOperationDuration is gen_ai.client.operation.duration.
	metricPrevOperationDuration = "gen_ai.client.operation.duration"
	// metricPrevTokenUsage is gen_ai.client.token.usage, by
	// gen_ai.token.type.
	metricPrevTokenUsage = "gen_ai.client.token.usage"
	// metricPrevTimeToFirstChunk is
	// gen_ai.client.operation.time_to_first_chunk.
	metricPrevTimeToFirstChunk = "gen_ai.client.operation.time_to_first_chunk"
)

// tierguard's own metrics.
const (
	// metricAttempts counts upstream attempts by tier and class ("ok" for a
	// success).
	metricAttempts = "tierguard.attempts"
	// metricRequests counts finished requests by source (tier, cache,
	// default, error) and degraded flag.
	metricRequests = "tierguard.requests"
	// metricRequestDuration is the end-to-end duration of a request, every
	// attempt and fallback included, in seconds.
	metricRequestDuration = "tierguard.request.duration"
	// metricDeadlineRemaining is the time left in a request's budget when
	// it ended, in seconds; recorded only for requests with a deadline.
	metricDeadlineRemaining = "tierguard.request.deadline_remaining"
	// metricActiveRequests is the number of requests in flight in the
	// chain.
	metricActiveRequests = "tierguard.active_requests"
	// metricRetryWait is the delay chosen before retrying the same tier, in
	// seconds, by the class that caused the retry.
	metricRetryWait = "tierguard.retry.wait"
	// metricSkips counts tiers passed over without an upstream call, by
	// reason (open, full, retired, quota, budget).
	metricSkips = "tierguard.skips"
	// metricBreakerState is each circuit breaker's state: closed 0,
	// half-open 1, open 2.
	metricBreakerState = "tierguard.breaker.state"
	// metricBreakerTransitions counts breaker state changes by from and to
	// state (the reason is in the log event).
	metricBreakerTransitions = "tierguard.breaker.transitions"
	// metricBulkheadAccepted counts acquisitions that got a slot.
	metricBulkheadAccepted = "tierguard.bulkhead.accepted"
	// metricBulkheadRejected counts acquisitions refused: full, queue full,
	// wait ended.
	metricBulkheadRejected = "tierguard.bulkhead.rejected"
	// metricBulkheadInFlight is the number of slots held.
	metricBulkheadInFlight = "tierguard.bulkhead.in_flight"
	// metricBulkheadQueued is the number of acquisitions waiting for a slot.
	metricBulkheadQueued = "tierguard.bulkhead.queued"
	// metricBulkheadLimit is the number of slots.
	metricBulkheadLimit = "tierguard.bulkhead.limit"
	// metricBulkheadQueueWait is the time an acquisition waited in a
	// bulkhead's queue, in seconds, by whether it got a slot.
	metricBulkheadQueueWait = "tierguard.bulkhead.queue.wait"
)

// Span names. An upstream attempt is a GenAI inference span, named
// "{gen_ai.operation.name} {gen_ai.request.model}" (spanName); the request
// that wraps a chain's attempts is tierguard's own, "tierguard
// {operation}".
const requestSpanPrefix = "tierguard "

// Attribute keys of the OpenTelemetry semantic conventions (GenAI, error,
// server, HTTP).
const (
	// attrOperation is gen_ai.operation.name: the chain's Operation.
	attrOperation = attribute.Key("gen_ai.operation.name")
	// attrProvider is gen_ai.provider.name: the stage's Provider, or its
	// tier's (fallback.EndpointReporter); absent when neither names one.
	attrProvider = attribute.Key("gen_ai.provider.name")
	// attrModel is gen_ai.request.model: the stage's Model.
	attrModel = attribute.Key("gen_ai.request.model")
	// attrResponseModel is gen_ai.response.model: the model that answered,
	// when the tier reports it.
	attrResponseModel = attribute.Key("gen_ai.response.model")
	// attrResponseID is gen_ai.response.id (spans only).
	attrResponseID = attribute.Key("gen_ai.response.id")
	// attrFinishReasons is gen_ai.response.finish_reasons (spans only):
	// the tier's finish reason, or "error" for an attempt that failed.
	attrFinishReasons = attribute.Key("gen_ai.response.finish_reasons")
	// attrRequestStream is gen_ai.request.stream: true on the attempt
	// spans of a stream chain, absent otherwise.
	attrRequestStream = attribute.Key("gen_ai.request.stream")
	// attrTimeToFirstChunk is gen_ai.response.time_to_first_chunk, in
	// seconds (stream attempt spans).
	attrTimeToFirstChunk = attribute.Key("gen_ai.response.time_to_first_chunk")
	// attrTokenModality is gen_ai.token.modality on the usage counters:
	// one of modalityNames.
	attrTokenModality = attribute.Key("gen_ai.token.modality")
	// attrRequestMaxTokens, attrRequestTemperature and attrRequestTopP
	// are gen_ai.request.max_tokens, .temperature and .top_p (attempt
	// spans only), when the tier reports them (fallback.Reply).
	attrRequestMaxTokens   = attribute.Key("gen_ai.request.max_tokens")
	attrRequestTemperature = attribute.Key("gen_ai.request.temperature")
	attrRequestTopP        = attribute.Key("gen_ai.request.top_p")
	// attrInputTokens and the other gen_ai.usage.* keys are an attempt's
	// token usage (spans only); the cache and reasoning ones appear when
	// the tier reports them.
	attrInputTokens     = attribute.Key("gen_ai.usage.input_tokens")
	attrOutputTokens    = attribute.Key("gen_ai.usage.output_tokens")
	attrCacheReadTokens = attribute.Key("gen_ai.usage.cache_read.input_tokens")
	attrCacheWriteToken = attribute.Key("gen_ai.usage.cache_write.input_tokens")
	attrReasoningTokens = attribute.Key("gen_ai.usage.reasoning.output_tokens")
	// attrErrorType is error.type: the failure's class name
	// ("transient", "rate_limited", ...), never its message.
	attrErrorType = attribute.Key("error.type")
	// attrServerAddress and attrServerPort are server.address and
	// server.port: the server the tier calls, when it reports it.
	attrServerAddress = attribute.Key("server.address")
	attrServerPort    = attribute.Key("server.port")
	// attrHTTPStatus is http.response.status_code (spans only).
	attrHTTPStatus = attribute.Key("http.response.status_code")
)

// Attribute keys of the GenAI conventions before SemConvVersion, on the
// previous metrics only (Options.PreviousNames).
const (
	// attrPrevTokenType is gen_ai.token.type: "input" or "output".
	attrPrevTokenType = attribute.Key("gen_ai.token.type")
)

// tierguard's attribute keys. Every key used on a metric has a small, fixed
// set of values.
const (
	// attrTGOperation is the chain's Operation on the request span, which
	// is not an inference span and so does not carry gen_ai.* attributes.
	attrTGOperation = attribute.Key("tierguard.operation")
	// attrTier is the tier's name (fallback.ModelTier.Name).
	attrTier = attribute.Key("tierguard.tier.name")
	// attrMember is a pool member's hashed id (fallback.AttemptEnd.Member).
	attrMember = attribute.Key("tierguard.pool.member")
	// attrHedge marks the second call of a hedged attempt.
	attrHedge = attribute.Key("tierguard.hedge")
	// attrTierIndex is the tier's position in the chain, 0 for the primary
	// (spans only).
	attrTierIndex = attribute.Key("tierguard.tier.index")
	// attrAttempt is the attempt's number on its tier, from 1 (spans only).
	attrAttempt = attribute.Key("tierguard.attempt")
	// attrClass is the outcome's class name; "ok" for a success.
	attrClass = attribute.Key("tierguard.class")
	// attrStatus is the canonical status name ("UNAVAILABLE"), spans only.
	attrStatus = attribute.Key("tierguard.status")
	// attrReason is the verdict's fixed reason phrase (spans only).
	attrReason = attribute.Key("tierguard.reason")
	// attrSource is where the answer came from: "tier", "cache",
	// "default", or "error" when the request failed.
	attrSource = attribute.Key("tierguard.source")
	// attrDegraded is true for any answer but the first tier's.
	attrDegraded = attribute.Key("tierguard.degraded")
	// attrSkipReason says why a tier was skipped: "open", "full",
	// "retired", "quota", "budget".
	attrSkipReason = attribute.Key("tierguard.skip.reason")
	// attrRetry is true on an attempt span when another attempt follows
	// (spans only).
	attrRetry = attribute.Key("tierguard.retry")
	// attrRetryWait is the delay chosen before the next attempt, in
	// seconds (spans only).
	attrRetryWait = attribute.Key("tierguard.retry.wait")
	// attrRetryStop says why no retry followed a failure (spans only).
	attrRetryStop = attribute.Key("tierguard.retry.stop")
	// attrRoute says where the request went after a tier was given up:
	// "next_tier", "local", "fail_closed" (spans only).
	attrRoute = attribute.Key("tierguard.route")
	// attrUpstreamCalls is the number of upstream calls a request made
	// (spans only).
	attrUpstreamCalls = attribute.Key("tierguard.upstream_calls")
	// attrDeadlineRemaining is the time left in the request's budget, in
	// seconds (spans only).
	attrDeadlineRemaining = attribute.Key("tierguard.deadline.remaining")
	// attrQueueWait is the time a request waited for the tier's bulkhead,
	// in seconds (spans only).
	attrQueueWait = attribute.Key("tierguard.bulkhead.queue.wait")
	// attrStream is true on the request span of a stream chain.
	attrStream = attribute.Key("tierguard.stream")
	// attrChunks is the number of chunks a streaming attempt or request
	// delivered (spans only).
	attrChunks = attribute.Key("tierguard.stream.chunks")
	// attrIncomplete is true when a stream broke after its first chunk
	// (spans only).
	attrIncomplete = attribute.Key("tierguard.stream.incomplete")
	// attrValidationRule is the rule of the validator that rejected an
	// answer (spans only).
	attrValidationRule = attribute.Key("tierguard.validation.rule")
	// attrValidationReason is that validator's reason, which names no part
	// of the answer (spans only).
	attrValidationReason = attribute.Key("tierguard.validation.reason")
	// attrBreaker is a circuit breaker's name.
	attrBreaker = attribute.Key("tierguard.breaker.name")
	// attrBreakerState is the tier's breaker state when the attempt
	// started: "closed", "half_open", "open" (spans only).
	attrBreakerState = attribute.Key("tierguard.breaker.state")
	// attrBreakerFrom is the state a breaker left.
	attrBreakerFrom = attribute.Key("tierguard.breaker.from")
	// attrBreakerTo is the state a breaker entered.
	attrBreakerTo = attribute.Key("tierguard.breaker.to")
	// attrBulkhead is a bulkhead's name.
	attrBulkhead = attribute.Key("tierguard.bulkhead.name")
	// attrAcquired says whether a queued acquisition got its slot.
	attrAcquired = attribute.Key("tierguard.bulkhead.acquired")

	// KeyRequestID is the attribute under which the request id set by
	// WithRequestID appears on spans, and on metrics if listed in
	// Options.MetricAttributes.
	KeyRequestID = attribute.Key("tierguard.request.id")
	// KeyTenant is the attribute for the tenant set by WithTenant.
	KeyTenant = attribute.Key("tierguard.tenant")
	// KeyScenario is the attribute for the scenario set by WithScenario.
	KeyScenario = attribute.Key("tierguard.scenario")
)

// Values of the conventions' attributes.
const (
	// finishError is the finish reason of an attempt that ended without
	// one: it failed, or its stream broke.
	finishError = "error"
)

// The gen_ai.token.modality values, indexed by the mod* constants: the
// conventions' text, image, audio and unknown, and video and document
// (Gemini's, which the conventions do not list) under their own names, as
// the conventions allow. Unknown is the tokens a provider does not break
// down, as the conventions ask.
var modalityNames = [numModalities]string{"text", "image", "audio", "video", "document", "unknown"}

const (
	modText = iota
	modImage
	modAudio
	modVideo
	modDocument
	modUnknown
	numModalities
)

// Log event keys that are not attributes: every event carries
// logComponent=logComponentValue.
const (
	logComponent      = "component"
	logComponentValue = "tierguard"
)

// Histogram bucket boundaries. durationBuckets (seconds) are those the
// GenAI semantic conventions advise for the inference duration, the time to
// first chunk and the time per output chunk, and serve tierguard's request
// durations too; tokenBuckets those advised for the per-operation token
// histograms (and the previous gen_ai.client.token.usage). The bulkhead
// queue wait uses the finer queueWaitBuckets, and the previous
// gen_ai.client.operation.time_to_first_chunk kept prevFirstChunkBuckets.
var (
	durationBuckets       = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	tokenBuckets          = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	queueWaitBuckets      = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	prevFirstChunkBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
)
