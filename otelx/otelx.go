package otelx

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/tierguard/tierguard/fallback"
)

// Options configures an Instrumentation. The zero value exports metrics and
// traces through the global providers and logs nothing.
type Options struct {
	// MeterProvider creates the meter; nil means otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// TracerProvider creates the tracer; nil means
	// otel.GetTracerProvider(). A noop.TracerProvider turns tracing off
	// altogether, which saves a few allocations per request; log events
	// then carry the trace and span ids of the caller's span, if any.
	TracerProvider trace.TracerProvider
	// Logger receives one structured event per decision; nil logs nothing.
	// Successes are logged at Debug, absorbed failures (a retry, a
	// fallback, a degraded answer) at Info and Warn, failed requests at
	// Error.
	Logger *slog.Logger
	// MetricAttributes lists request labels copied from the request's
	// context onto the request-scoped metrics: KeyRequestID, KeyTenant,
	// KeyScenario, or keys set with WithAttributes. The default, none,
	// keeps every metric's cardinality fixed by the chain's configuration;
	// each distinct value of a listed label is a new time series, and each
	// request with such labels costs a few allocations more.
	MetricAttributes []attribute.Key
	// AttemptErrorStatus sets the status of the span of a failed attempt to
	// Error, as the GenAI semantic conventions do for a failed call. By
	// default only a request that failed for its caller has an Error span;
	// a failed attempt carries error.type and keeps its status unset,
	// since the chain absorbed it.
	AttemptErrorStatus bool
}

// Chain is what Instrument needs of a chain. *fallback.Chain[In, Out]
// implements it for every In and Out.
type Chain interface {
	// Observe adds an observer to the chain and returns the function that
	// removes it.
	Observe(fallback.Observer) (remove func())
	// Stages describes the chain's stages, in order.
	Stages() []fallback.StageInfo
	// Operation returns the chain's operation name.
	Operation() string
}

// Instrumentation exports a chain's decisions, and the state of the
// breakers and bulkheads it watches, as OpenTelemetry metrics and traces
// and as slog events. It is a fallback.Observer: Instrument attaches it to
// a chain, or put it in fallback.Config.Observer yourself. It is safe for
// concurrent use. Close it when done.
type Instrumentation struct {
	tracer trace.Tracer
	// traces is false for a no-op TracerProvider: no span is started, and
	// the context is left alone.
	traces      bool
	logger      *slog.Logger
	m           instruments
	hits        cacheHits
	metricKeys  []attribute.Key
	attemptErrs bool

	registration metric.Registration
	closed       atomic.Bool
	// detach removes the Instrumentation from the chains it was attached
	// to; guarded by mu.
	detach []func()

	// reg caches precomputed attribute sets per operation and stage;
	// copy-on-write under mu.
	reg atomic.Pointer[registry]
	// watched lists the breakers and bulkheads the gauges read;
	// copy-on-write under mu.
	watched atomic.Pointer[watchList]
	// waits caches the queue-wait attribute sets per bulkhead name.
	waits sync.Map
	// transitions caches transition attribute sets.
	transitions sync.Map

	mu sync.Mutex
}

type instruments struct {
	opDuration  metric.Float64Histogram
	firstChunk  metric.Float64Histogram
	tokens      metric.Int64Histogram
	attempts    metric.Int64Counter
	requests    metric.Int64Counter
	reqDuration metric.Float64Histogram
	remaining   metric.Float64Histogram
	active      metric.Int64UpDownCounter
	retryWait   metric.Float64Histogram
	skips       metric.Int64Counter
	transitions metric.Int64Counter
	queueWait   metric.Float64Histogram

	breakerState metric.Int64ObservableGauge
	bhAccepted   metric.Int64ObservableCounter
	bhRejected   metric.Int64ObservableCounter
	bhInFlight   metric.Int64ObservableUpDownCounter
	bhQueued     metric.Int64ObservableUpDownCounter
	bhLimit      metric.Int64ObservableUpDownCounter
}

// New returns an Instrumentation that watches nothing yet: add it to a
// chain's fallback.Config.Observer and call Watch on the chain (for its
// breakers and bulkheads), or use Attach, or WatchBreaker and WatchBulkhead
// for guards used on their own.
func New(opts Options) (*Instrumentation, error) {
	mp := opts.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	tp := opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	_, noopTP := tp.(tracenoop.TracerProvider)
	i := &Instrumentation{
		tracer:      tp.Tracer(ScopeName),
		traces:      !noopTP,
		logger:      opts.Logger,
		metricKeys:  append([]attribute.Key(nil), opts.MetricAttributes...),
		attemptErrs: opts.AttemptErrorStatus,
	}
	i.reg.Store(&registry{stages: map[stageKey]*stageState{}, ops: map[opKey]*opState{}})
	i.watched.Store(&watchList{})
	meter := mp.Meter(ScopeName)
	if err := errors.Join(i.m.create(meter), i.hits.create(meter)); err != nil {
		return nil, fmt.Errorf("otelx: creating instruments: %w", err)
	}
	reg, err := meter.RegisterCallback(i.collect,
		i.m.breakerState, i.m.bhAccepted, i.m.bhRejected, i.m.bhInFlight, i.m.bhQueued, i.m.bhLimit)
	if err != nil {
		return nil, fmt.Errorf("otelx: registering the gauge callback: %w", err)
	}
	i.registration = reg
	return i, nil
}

// Instrument attaches metrics, traces and log events to c and to the
// breakers and bulkheads of its stages: New followed by Attach.
func Instrument(c Chain, opts Options) (*Instrumentation, error) {
	i, err := New(opts)
	if err != nil {
		return nil, err
	}
	i.Attach(c)
	return i, nil
}

// Attach watches c (see Watch) and adds the Instrumentation to c's
// observers. Attach a chain once; a chain built with the Instrumentation in
// its fallback.Config.Observer needs only Watch.
func (i *Instrumentation) Attach(c Chain) {
	i.Watch(c)
	remove := c.Observe(i)
	i.mu.Lock()
	i.detach = append(i.detach, remove)
	i.mu.Unlock()
}

// Watch prepares the attribute sets of c's stages and watches the breakers
// and bulkheads they use, without observing c's requests. Watching a
// breaker or bulkhead twice, through two chains, watches it once.
func (i *Instrumentation) Watch(c Chain) {
	stages := c.Stages()
	if len(stages) == 0 {
		return
	}
	op := c.Operation()
	waits := false
	for _, s := range stages {
		if s.Bulkhead != nil && s.Bulkhead.Config().MaxWait > 0 {
			waits = true
		}
	}
	i.mu.Lock()
	reg := i.reg.Load().clone()
	o := reg.opLocked(opKey{op: op, model: stages[0].Model, provider: stages[0].Provider})
	if waits {
		o.waits.Store(true)
	}
	for _, s := range stages {
		st := reg.stageLocked(stageKey{op: op, tier: s.Tier, model: s.Model, provider: s.Provider, index: s.TierIndex})
		if s.Bulkhead != nil && s.Bulkhead.Config().MaxWait > 0 {
			st.waits.Store(true)
		}
	}
	i.reg.Store(reg)
	i.mu.Unlock()
	for _, s := range stages {
		if s.Breaker != nil {
			i.WatchBreaker(s.Breaker)
		}
		if s.Bulkhead != nil {
			i.WatchBulkhead(s.Bulkhead)
		}
	}
}

// Close stops the Instrumentation: the gauge callback is unregistered, the
// breaker subscriptions and bulkhead observers removed, the Instrumentation
// detached from the chains it was attached to, and
// requests that start afterwards are not observed. Requests in flight
// finish their spans. Close is idempotent.
func (i *Instrumentation) Close() error {
	if !i.closed.CompareAndSwap(false, true) {
		return nil
	}
	err := i.registration.Unregister()
	i.mu.Lock()
	w := i.watched.Swap(&watchList{})
	detach := i.detach
	i.detach = nil
	i.mu.Unlock()
	for _, remove := range detach {
		remove()
	}
	for _, b := range w.breakers {
		b.stop()
	}
	for _, b := range w.bulkheads {
		b.stopped.Store(true)
		b.remove()
	}
	if err != nil {
		return fmt.Errorf("otelx: unregistering the gauge callback: %w", err)
	}
	return nil
}

func (m *instruments) create(meter metric.Meter) error {
	var errs [18]error
	m.opDuration, errs[0] = meter.Float64Histogram(metricOperationDuration,
		metric.WithUnit("s"),
		metric.WithDescription("GenAI operation duration: one upstream attempt of a model tier."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	m.tokens, errs[1] = meter.Int64Histogram(metricTokenUsage,
		metric.WithUnit("{token}"),
		metric.WithDescription("Number of input and output tokens used per answer."),
		metric.WithExplicitBucketBoundaries(tokenBuckets...))
	m.attempts, errs[2] = meter.Int64Counter(metricAttempts,
		metric.WithUnit("{attempt}"),
		metric.WithDescription("Upstream attempts, by tier and outcome class (ok for a success)."))
	m.requests, errs[3] = meter.Int64Counter(metricRequests,
		metric.WithUnit("{request}"),
		metric.WithDescription("Finished requests, by answer source (tier, cache, default, error) and degraded flag."))
	m.reqDuration, errs[4] = meter.Float64Histogram(metricRequestDuration,
		metric.WithUnit("s"),
		metric.WithDescription("End-to-end request duration, every attempt and fallback included."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	m.remaining, errs[5] = meter.Float64Histogram(metricDeadlineRemaining,
		metric.WithUnit("s"),
		metric.WithDescription("Time left in the request's deadline budget when it ended."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	m.active, errs[6] = meter.Int64UpDownCounter(metricActiveRequests,
		metric.WithUnit("{request}"),
		metric.WithDescription("Requests in flight in the chain."))
	m.retryWait, errs[7] = meter.Float64Histogram(metricRetryWait,
		metric.WithUnit("s"),
		metric.WithDescription("Delay chosen before retrying the same tier, by the class that caused the retry."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	m.skips, errs[8] = meter.Int64Counter(metricSkips,
		metric.WithUnit("{skip}"),
		metric.WithDescription("Tiers passed over without an upstream call, by reason (open, full, retired, quota, budget)."))
	m.transitions, errs[9] = meter.Int64Counter(metricBreakerTransitions,
		metric.WithUnit("{transition}"),
		metric.WithDescription("Circuit breaker state changes, by from, to and reason."))
	m.queueWait, errs[10] = meter.Float64Histogram(metricBulkheadQueueWait,
		metric.WithUnit("s"),
		metric.WithDescription("Time an acquisition waited in a bulkhead's queue, by whether it got a slot."),
		metric.WithExplicitBucketBoundaries(queueWaitBuckets...))
	m.breakerState, errs[11] = meter.Int64ObservableGauge(metricBreakerState,
		metric.WithUnit("{state}"),
		metric.WithDescription("Circuit breaker state: closed 0, half-open 1, open 2."))
	m.bhAccepted, errs[12] = meter.Int64ObservableCounter(metricBulkheadAccepted,
		metric.WithUnit("{call}"),
		metric.WithDescription("Bulkhead acquisitions that got a slot."))
	m.bhRejected, errs[13] = meter.Int64ObservableCounter(metricBulkheadRejected,
		metric.WithUnit("{call}"),
		metric.WithDescription("Bulkhead acquisitions refused: full, queue full, or wait ended."))
	m.bhInFlight, errs[14] = meter.Int64ObservableUpDownCounter(metricBulkheadInFlight,
		metric.WithUnit("{call}"),
		metric.WithDescription("Bulkhead slots held."))
	m.bhQueued, errs[15] = meter.Int64ObservableUpDownCounter(metricBulkheadQueued,
		metric.WithUnit("{call}"),
		metric.WithDescription("Bulkhead acquisitions waiting for a slot."))
	m.bhLimit, errs[16] = meter.Int64ObservableUpDownCounter(metricBulkheadLimit,
		metric.WithUnit("{call}"),
		metric.WithDescription("Bulkhead slots in all."))
	m.firstChunk, errs[17] = meter.Float64Histogram(metricTimeToFirstChunk,
		metric.WithUnit("s"),
		metric.WithDescription("Time to receive the first chunk of a streaming attempt."),
		metric.WithExplicitBucketBoundaries(firstChunkBuckets...))
	return errors.Join(errs[:]...)
}
