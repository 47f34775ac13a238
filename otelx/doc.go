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
// otel.GetTracerProvider) are used. Instrumentation is a fallback.Observer,
// so it can also go in fallback.Config.Observer (then call Watch on the
// chain for its breakers and bulkheads); WatchBreaker and WatchBulkhead
// cover guards used on their own, WatchBreakerGroup and WatchBulkheadGroup
// the members of breaker and bulkhead groups, present and future. Close
// unregisters the gauge callback and every watch. The package depends on the
// OpenTelemetry API only; bring your own SDK and exporter.
//
// # Metrics
//
// Durations are in seconds. Every attribute has a small fixed set of
// values, determined by the chain's configuration: no request id, tenant or
// other per-request value appears on a metric unless listed in
// Options.MetricAttributes. tierguard.breaker.name and
// tierguard.bulkhead.name (and the breaker log's "breaker" field) are the
// guards' Name: a member of a group keyed by tenant shows the group's name
// and a hash of its key, unless the group's Config has KeysInNames.
//
//	name                                         instrument              unit          attributes
//	gen_ai.client.operation.duration             Float64Histogram        s             gen_ai.operation.name, gen_ai.provider.name, gen_ai.request.model, tierguard.tier.name, error.type (failures)
//	gen_ai.client.token.usage                    Int64Histogram          {token}       gen_ai.operation.name, gen_ai.provider.name, gen_ai.request.model, tierguard.tier.name, gen_ai.token.type
//	gen_ai.client.operation.time_to_first_chunk  Float64Histogram        s             gen_ai.operation.name, gen_ai.provider.name, gen_ai.request.model, tierguard.tier.name (streams only)
//	tierguard.attempts                           Int64Counter            {attempt}     gen_ai.operation.name, tierguard.tier.name, tierguard.class
//	tierguard.requests                           Int64Counter            {request}     gen_ai.operation.name, tierguard.source, tierguard.degraded, tierguard.tier.name (source tier), error.type (source error)
//	tierguard.request.duration                   Float64Histogram        s             as tierguard.requests
//	tierguard.request.deadline_remaining         Float64Histogram        s             as tierguard.requests; requests with a deadline only
//	tierguard.cache.hits                         Int64Counter            {hit}         gen_ai.operation.name, tierguard.cache.hit
//	tierguard.active_requests                    Int64UpDownCounter      {request}     gen_ai.operation.name
//	tierguard.retry.wait                         Float64Histogram        s             gen_ai.operation.name, tierguard.tier.name, tierguard.class
//	tierguard.skips                              Int64Counter            {skip}        gen_ai.operation.name, tierguard.tier.name, tierguard.skip.reason
//	tierguard.breaker.state                      Int64ObservableGauge    {state}       tierguard.breaker.name
//	tierguard.breaker.transitions                Int64Counter            {transition}  tierguard.breaker.name, tierguard.breaker.from, tierguard.breaker.to, tierguard.breaker.reason
//	tierguard.bulkhead.accepted                  Int64ObservableCounter  {call}        tierguard.bulkhead.name
//	tierguard.bulkhead.rejected                  Int64ObservableCounter  {call}        tierguard.bulkhead.name
//	tierguard.bulkhead.in_flight                 Int64ObservableUpDown   {call}        tierguard.bulkhead.name
//	tierguard.bulkhead.queued                    Int64ObservableUpDown   {call}        tierguard.bulkhead.name
//	tierguard.bulkhead.limit                     Int64ObservableUpDown   {call}        tierguard.bulkhead.name
//	tierguard.bulkhead.queue.wait                Float64Histogram        s             tierguard.bulkhead.name, tierguard.bulkhead.acquired
//
// The gen_ai.* metrics follow the GenAI semantic conventions (Development
// status). gen_ai.client.operation.duration and gen_ai.client.token.usage
// use their advised bucket boundaries, and so do the other duration
// histograms but two: the time to first chunk (1 ms to 10 s, finer below a
// second) and the queue wait (1 ms to 10 s). Values:
// tierguard.class and error.type are classify.Class names ("ok",
// "transient", "rate_limited", ...), tierguard.source is "tier", "cache",
// "default" or "error", tierguard.cache.hit is "exact", "template",
// "semantic", "simplified" or "unknown" (fallback.CacheHit; the request
// span carries it too), tierguard.skip.reason is "open", "full", "retired",
// "quota" or "budget", and the breaker state is closed 0, half-open 1, open
// 2. tierguard.degraded is true for any answer but the first tier's.
//
// # Traces
//
// Each request gets a client span named "{operation} {first tier's model}"
// and each upstream attempt a child client span named "{operation}
// {model}" carrying the tier, the attempt number, the breaker state, the
// outcome's class, HTTP status and canonical status, the retry wait chosen
// or why no retry followed, and the gen_ai.* attributes. The attempt's
// context carries its span, so the tier's own HTTP spans nest under it.
// Fallbacks, skips and local answers are events on the request span, a
// stream's first chunk an event on its attempt span. The request span's
// status is Error only when the request failed for its caller; an answer
// from a later tier, the cache or the default is OK and carries
// tierguard.degraded=true. A failed attempt carries error.type and keeps
// its status unset, since the chain absorbed it, unless
// Options.AttemptErrorStatus asks for Error there too.
//
// # Streams
//
// A fallback.StreamChain is instrumented the same way. Its commit point
// (the first chunk) records gen_ai.client.operation.time_to_first_chunk;
// a stream that breaks after it is logged at Warn, and its request fails
// for the caller with tierguard.stream.incomplete=true on the span.
//
// # Logs
//
// With Options.Logger set, each decision is one event: a success at Debug,
// a retry, a skip or a local answer at Info, a tier given up, a broken
// stream and a degraded answer at Warn,
// a failed request at Error, breaker transitions at Info (Warn when
// opening). Events carry request_id, tenant and scenario (see
// WithRequestID, WithTenant, WithScenario), trace_id and span_id, tier,
// tier_index (the fallback index), attempt, class, http_status, status,
// reason, retryable, retry, retry_wait_ms, stop, route, circuit,
// validation_rule and validation_reason, source, degraded, upstream_calls,
// chunks, latency_ms, deadline_remaining_ms and queue_wait_ms. The attributes are built only when the logger is
// enabled for the event's level.
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
// measures each request's wait for a slot (fallback.Event.QueueWait): it is
// the queue_wait_ms of the tier's first attempt or skip in the logs and the
// tierguard.bulkhead.queue.wait attribute of its attempt span. The
// tierguard.bulkhead.queue.wait histogram comes from the bulkhead itself.
package otelx
