// Package otelx exports what a tierguard chain decides — and the state of
// the breakers and bulkheads it uses — as OpenTelemetry metrics and traces
// and as structured log/slog events. A resilience pattern you cannot see is
// a prayer: with otelx every retry, fallback, skip, circuit transition and
// degraded answer can be counted, traced and explained from the logs.
//
// One call instruments a chain:
//
//	inst, err := otelx.Instrument(chain, otelx.Options{Logger: logger})
//	defer inst.Close()
//
// With nil providers the global ones (otel.GetMeterProvider,
// otel.GetTracerProvider) are used. Instrumentation is a fallback.Observer
// that handles every kind of event (one method per kind: RequestStarted,
// AttemptStarted, AttemptEnded, TierSkipped, LocalAnswered, RequestEnded,
// FirstChunkReceived, ChunkReceived, LateReplyReceived), so it can also go
// in fallback.Config.Observer (then call Watch on the
// chain for its breakers and bulkheads); WatchBreaker and WatchBulkhead
// cover guards used on their own, WatchBreakerGroup and WatchBulkheadGroup
// the members of breaker and bulkhead groups, present and future. Close
// unregisters the gauge callback and every watch. The package depends on the
// OpenTelemetry API only; bring your own SDK and exporter.
//
// A breaker or bulkhead shared by several chains may be watched by as many
// Instrumentations — a unary and a stream chain, each instrumented with
// Instrument — and each of its transitions, queue waits and figures is
// still exported once per MeterProvider and logged once per log handler,
// by the first of them still open; the last to close unsubscribes. What
// they share hangs off the guard itself (breaker.Breaker.Attach,
// bulkhead.Bulkhead.Attach), not off a registry of the package.
//
// # Metrics
//
// The gen_ai.* names follow the OpenTelemetry GenAI semantic conventions
// at their development schema 1.42.0-dev (SemConvVersion): the revision of
// github.com/open-telemetry/semantic-conventions-genai, docs/gen-ai/client-inference.md
// and gen-ai-token-metrics.md, whose model/manifest.yaml declares that
// schema — their instruments, units, bucket boundaries and attributes. The
// GenAI conventions left the core repository after its v1.41.0 and have
// cut no release of their own since; they build on the core semantic
// conventions v1.44.0, where error.type, server.* and http.* come from. The
// meter and the tracer carry the schema URL (SchemaURL,
// https://opentelemetry.io/schemas/gen-ai-dev/1.42.0-dev). Durations are in
// seconds. Every attribute has a small fixed set of values, determined by
// the chain's configuration: no request id, tenant or other per-request
// value appears on a metric unless listed in Options.MetricAttributes.
// tierguard.breaker.name and tierguard.bulkhead.name (and the breaker log's
// "breaker" field) are the guards' Name: a member of a group keyed by
// tenant shows the group's name and a hash of its key, unless the group's
// Config has KeysInNames.
//
//	name                                                    instrument              unit          attributes
//	gen_ai.client.inference.duration                        Float64Histogram        s             genai, error.type (failures)
//	gen_ai.client.inference.time_to_first_chunk             Float64Histogram        s             genai (streams only)
//	gen_ai.client.inference.time_per_output_chunk           Float64Histogram        s             genai (streams, each chunk after the first)
//	gen_ai.client.inference.usage.input_tokens              Int64Counter            {token}       genai, gen_ai.token.modality
//	gen_ai.client.inference.usage.output_tokens             Int64Counter            {token}       genai, gen_ai.token.modality
//	gen_ai.client.inference.usage.cache_read.input_tokens   Int64Counter            {token}       genai, gen_ai.token.modality
//	gen_ai.client.inference.usage.cache_write.input_tokens  Int64Counter            {token}       genai, gen_ai.token.modality
//	gen_ai.client.inference.usage.reasoning.output_tokens   Int64Counter            {token}       genai, gen_ai.token.modality
//	gen_ai.client.inference.operation.input_tokens          Int64Histogram          {token}       genai, error.type (failures)
//	gen_ai.client.inference.operation.output_tokens         Int64Histogram          {token}       genai, error.type (failures)
//	tierguard.attempts                                      Int64Counter            {attempt}     gen_ai.operation.name, tierguard.tier.name, tierguard.class, tierguard.pool.member (pool tiers), tierguard.hedge (hedges)
//	tierguard.requests                                      Int64Counter            {request}     gen_ai.operation.name, tierguard.source, tierguard.degraded, tierguard.tier.name (source tier), error.type (source error)
//	tierguard.request.duration                              Float64Histogram        s             as tierguard.requests
//	tierguard.request.deadline_remaining                    Float64Histogram        s             as tierguard.requests; requests with a deadline only
//	tierguard.cache.hits                                    Int64Counter            {hit}         gen_ai.operation.name, tierguard.cache.hit
//	tierguard.active_requests                               Int64ObservableUpDown   {request}     gen_ai.operation.name
//	tierguard.retry.wait                                    Float64Histogram        s             gen_ai.operation.name, tierguard.tier.name, tierguard.class
//	tierguard.skips                                         Int64Counter            {skip}        gen_ai.operation.name, tierguard.tier.name, tierguard.skip.reason
//	tierguard.breaker.state                                 Int64ObservableGauge    {state}       tierguard.breaker.name
//	tierguard.breaker.transitions                           Int64Counter            {transition}  tierguard.breaker.name, tierguard.breaker.from, tierguard.breaker.to (every pair starts at 0)
//	tierguard.bulkhead.accepted                             Int64ObservableCounter  {call}        tierguard.bulkhead.name
//	tierguard.bulkhead.rejected                             Int64ObservableCounter  {call}        tierguard.bulkhead.name
//	tierguard.bulkhead.in_flight                            Int64ObservableUpDown   {call}        tierguard.bulkhead.name
//	tierguard.bulkhead.queued                               Int64ObservableUpDown   {call}        tierguard.bulkhead.name
//	tierguard.bulkhead.limit                                Int64ObservableUpDown   {call}        tierguard.bulkhead.name (an adaptive bulkhead's limit now)
//	tierguard.bulkhead.priority.rejected                    Int64ObservableCounter  {call}        tierguard.bulkhead.name, tierguard.bulkhead.priority (bulkheads with a Reserve)
//	tierguard.bulkhead.queue.wait                           Float64Histogram        s             tierguard.bulkhead.name, tierguard.bulkhead.acquired
//
// "genai" is gen_ai.operation.name (always), gen_ai.provider.name (when
// known; see below), gen_ai.request.model (when the stage has a Model),
// server.address and server.port (when the tier reports its server:
// fallback.EndpointReporter), gen_ai.response.model (when the tier reports
// the model that answered: fallback.ResponseReporter; at most 16 models per
// stage), and tierguard.tier.name. The provider is the stage's Provider,
// else its tier's Endpoint (the SDK adapters' tiers report "gcp.gemini",
// "gcp.vertex_ai" or "openai"). A stage that names none over a tier that
// reports none has no gen_ai.provider.name at all: the conventions require
// it but define no value for an unknown provider (_OTHER is error.type's
// fallback), and a provider otelx made up would be wrong on a dashboard. The duration and token
// histograms use the conventions' bucket boundaries (0.01 s to 81.92 s; 1
// to 67108864 tokens), and so do tierguard's duration histograms but the
// queue wait (1 ms to 10 s).
//
// The usage metrics are recorded for every upstream response whose tier
// reported its usage (fallback.Report), failures included: an answer a
// validator rejected counts its tokens, and so does a response that came
// after the chain stopped waiting for it (fallback.LateReply: an abandoned
// call, the loser of a hedged race), so that the counters match what the
// provider billed. Likewise tierguard.attempts counts every upstream call
// once: a hedge still calling when its race ended is counted, as an attempt
// of class canceled marked tierguard.hedge, when it returns
// (fallback.LateReply.Calls). The counters are by gen_ai.token.modality, as the tier
// broke its counts down (fallback.Usage; the SDK adapters fill it from
// Gemini's promptTokensDetails and candidatesTokensDetails and from
// OpenAI's prompt_tokens_details and completion_tokens_details): "text",
// "image", "audio", and "video" and "document" (Gemini's, under their own
// names), with what the breakdown leaves uncounted — and all of a count
// that is not broken down — under "unknown", as the conventions ask, so
// that a counter's modalities add up to what was billed. The cache and
// reasoning counters, which no provider breaks down, take their side's
// modality when one modality makes all of it, and "unknown" otherwise.
// A response that reports none of them still makes their series at 0:
// that 0 is measured once per series and collection interval, as adding
// it again would change nothing exported and cost a measurement.
// The per-operation histograms are not by modality (the conventions keep
// percentiles whole). An attempt that reported no usage records none.
//
// Values: tierguard.class and error.type are classify.Class names ("ok",
// "transient", "rate_limited", ...), tierguard.source is "tier", "cache",
// "default" or "error", tierguard.cache.hit is "exact", "template",
// "semantic", "simplified" — a cache's own label (fallback.Summary.CacheHit),
// at most 16 per operation and "other" past them — or "unknown" for a
// cache that does not say (the request span carries it too), tierguard.skip.reason is "open", "full", "retired",
// "quota", "budget", "rate_limited" or "throttled" (fallback/throttle), tierguard.pool.member is a pool
// member's hashed id ("#" and 12 hex digits, never its key), and the
// breaker state is closed 0, half-open 1, open 2. tierguard.degraded is
// true for any answer but the first tier's.
//
// When a chain is watched, tierguard.requests starts at 0 every outcome
// the chain can have (an answer from each tier, the cache or the default,
// a failure of each class), and tierguard.breaker.transitions every pair
// of states of a watched breaker: a Prometheus rate or increase never
// counts a series' first sample, so a series born at 1 loses its first
// request. A request's labels (Options.MetricAttributes) make series of
// their own: those of the values declared in Options.KnownLabels start at
// 0 with the others, those of a value first seen at run time at their
// first count — the PromQL of the outage example (examples/outage) counts
// a series born within its window whole.
//
// tierguard.active_requests is read when the metrics are collected, from
// counters the requests keep as they start and end (two atomic additions
// per request, not two measurements); with Options.MetricAttributes, past
// 2000 sets of labels the requests of a new set count in one series with
// otel.metric.overflow=true, as the SDK does for a synchronous instrument
// past its cardinality limit.
//
// Options.PreviousNames also emits, for one release, the names of the
// conventions before SemConvVersion (semantic conventions v1.37.0 to
// v1.41.0) with the attributes they had:
// gen_ai.client.operation.duration, gen_ai.client.token.usage (successes,
// by gen_ai.token.type) and gen_ai.client.operation.time_to_first_chunk.
//
// # Traces
//
// Each upstream attempt is a GenAI inference span: kind client, named
// "{operation} {model}", with gen_ai.operation.name, gen_ai.provider.name,
// gen_ai.request.model, server.address and server.port at its start
// (gen_ai.request.stream=true for a stream), and at its end
// gen_ai.response.model, gen_ai.response.id,
// gen_ai.response.finish_reasons ("error" when the attempt failed or its
// stream broke before a finish reason), gen_ai.request.max_tokens,
// gen_ai.request.temperature and gen_ai.request.top_p when the tier
// reports them (fallback.Reply; the SDK adapters report their request's),
// gen_ai.usage.input_tokens,
// output_tokens and, when reported, cache_read.input_tokens,
// cache_write.input_tokens and reasoning.output_tokens,
// gen_ai.response.time_to_first_chunk for a stream, and tierguard's own:
// the tier, the attempt number, the breaker state, the outcome's class,
// HTTP status (http.response.status_code) and canonical status, the retry
// wait chosen or why no retry followed. The attempt's context carries its
// span, so the tier's own HTTP spans nest under it.
//
// The request that wraps the attempts is not an inference: an internal span
// named "tierguard {operation}", with tierguard.* attributes only — it does
// not claim the first tier's model. Fallbacks, skips and local answers are
// events on it, a stream's first chunk an event on its attempt span.
//
// Span status follows the conventions' rules for recording errors: a failed
// attempt's span is Error with error.type, even when the chain absorbed the
// failure (the span describes the attempt); the request span is Error only
// when the request failed for its caller — an answer from a later tier,
// the cache or the default leaves it unset, with tierguard.degraded=true.
//
// # Streams
//
// A fallback.StreamChain is instrumented the same way and keeps its
// chain's operation name; its attempt spans say gen_ai.request.stream=true.
// Its commit point (the first chunk) records
// gen_ai.client.inference.time_to_first_chunk, each later chunk
// gen_ai.client.inference.time_per_output_chunk; a stream that breaks after
// its first chunk is logged at Warn, and its request fails for the caller
// with tierguard.stream.incomplete=true on the span.
//
// # Logs
//
// With Options.Logger set, each decision is one event, with
// component=tierguard: a success at Debug, a retry, a skip or a local
// answer at Info, a tier given up, a broken stream and a degraded answer at
// Warn, a failed request at Error, breaker transitions at Info (Warn when
// opening). Events carry request_id and scenario (the request's
// fallback.Request), its tenant with Options.TenantLabels, trace_id and
// span_id, tier,
// tier_index (the fallback index), attempt, class, http_status, status,
// reason, retryable, retry, retry_wait, stop, route, circuit,
// validation_rule and validation_reason, source, degraded, upstream_calls,
// chunks, response_model, latency, deadline_remaining, queue_wait,
// retry_after and cooldown; durations are slog.Duration values. The
// context each event is logged with carries the span it is about (the
// attempt's for an attempt's end), so a handler bridged to OpenTelemetry
// (go.opentelemetry.io/contrib/bridges/otelslog) correlates the record with
// its trace. The attributes are built only when the logger is enabled for
// the event's level.
//
// # The ledger
//
// InstrumentLedger exports a spend.Ledger's figures: tierguard.cost per
// attempt (by model, cost group, class and fallback flag),
// tierguard.budget.utilization per meter (the highest over tenants),
// tierguard.budget.thresholds and tierguard.budget.refusals. The tenant
// appears only when Options.MetricAttributes lists KeyTenant.
//
// # Nothing sensitive
//
// Prompts, answers, API keys and upstream error text never enter a metric,
// a span or a log event: otelx never calls Error on a tier's error. It
// exports the classify.Verdict (class, status code, canonical status name,
// fixed reason phrase) and, for a rejected answer, the Rule and Reason of
// the *validate.Error, which name no part of the answer. Labels you add
// with WithAttributes are exported as given.
//
// # Queue wait
//
// For tiers whose bulkhead may queue (bulkhead.Config.MaxWait), the chain
// measures each request's wait for a slot (fallback.AttemptStart.QueueWait,
// fallback.TierSkip.QueueWait): it is the queue_wait of the tier's first
// attempt or skip in the logs and the tierguard.bulkhead.queue.wait
// attribute of its attempt span. The
// tierguard.bulkhead.queue.wait histogram comes from the bulkhead itself.
package otelx
