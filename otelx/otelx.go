package otelx

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/tierguard/tierguard/classify"
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
	// each distinct value of a listed label is a new time series. The
	// attribute sets of each combination of values are built once and
	// kept, for the first 2,000 combinations (8,192 sets in all); a
	// request whose combination is past that builds its sets for each
	// measurement, a few allocations each. Listing KeyRequestID makes
	// every request a combination of its own.
	MetricAttributes []attribute.Key
	// KnownLabels declares label values known before any request (the
	// tenants, the scenarios), so that their series of tierguard.requests
	// start at 0 as the unlabelled ones do: every outcome each watched
	// chain can have, for every combination of the declared values (one
	// value of each declared key). A Prometheus rate or increase then
	// counts a tenant's first requests, which it cannot for a series whose
	// first sample is already above 0. Each key must be listed in
	// MetricAttributes: declaring values never puts a label on a metric by
	// itself. A request labelled with a value not declared starts its own
	// series at its first count. Each combination is one more series per
	// outcome; at most 2000 combinations.
	KnownLabels []attribute.KeyValue
	// TenantLabels puts the request's tenant (its fallback.Request's) on
	// spans and log events. Off by default: a tenant id is often personal
	// data. The request id and the scenario always label spans and log
	// events; metrics carry the tenant only when MetricAttributes lists
	// KeyTenant.
	TenantLabels bool
	// PreviousNames also emits the GenAI metrics under the names of the
	// conventions before SemConvVersion — gen_ai.client.operation.duration,
	// gen_ai.client.token.usage (successes only, by gen_ai.token.type) and
	// gen_ai.client.operation.time_to_first_chunk, with the attributes they
	// had — so that dashboards and alerts can move over. Off by default;
	// it will be removed in the release after the one that introduced it.
	PreviousNames bool
}

// Chain is what Instrument needs of a chain. *fallback.Chain[In, Out] and
// *fallback.StreamChain[In, Chunk] implement it for every In, Out and
// Chunk.
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
	// NopObserver makes it a fallback.Observer; it implements every
	// event's method.
	fallback.NopObserver

	tracer trace.Tracer
	// traces is false for a no-op TracerProvider: no span is started, and
	// the context is left alone.
	traces     bool
	logger     *slog.Logger
	m          instruments
	hits       cacheHits
	metricKeys []attribute.Key
	// labelled is set when a request's labels reach its metrics or log
	// events (Options.MetricAttributes, Options.Logger); without either,
	// only a recording request span carries them, and a request without
	// one leaves its context's labels unread.
	labelled bool
	// tenantLabels is Options.TenantLabels.
	tenantLabels bool
	prevNames    bool
	// known are the label sets of Options.KnownLabels, each in the order
	// of MetricAttributes.
	known [][]attribute.KeyValue

	// meterKey and logKey say where the Instrumentation exports to — its
	// MeterProvider, its logger's handler (nil without a logger) — so
	// that a guard watched by several exports and logs each event once
	// per destination (see watchers).
	meterKey, logKey any

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
	// active counts the requests in flight, for the active_requests gauge.
	active activeSet
	// collections counts the gauge callback's runs, one per collection
	// by any reader: the intervals addCount adds one 0 in.
	collections atomic.Uint64
	// waits caches the queue-wait attribute sets per bulkhead name.
	waits sync.Map
	// transitions caches transition attribute sets.
	transitions sync.Map
	// profiles caches the sets of labelled requests (MetricAttributes).
	profiles labelProfiles
	// bufs holds the *kvBuf of requests whose spans ended: a recording
	// request takes one as it starts and gives it back once its span ended
	// with no attempt span open, so that the buffer (1 KiB) is not
	// allocated with every request. Nothing reads a buffer between
	// spans: each span's attributes are set (flush) before it ends.
	bufs sync.Pool

	mu sync.Mutex
}

type instruments struct {
	duration   metric.Float64Histogram
	firstChunk metric.Float64Histogram
	perChunk   metric.Float64Histogram
	usageIn    metric.Int64Counter
	usageOut   metric.Int64Counter
	cacheRead  metric.Int64Counter
	cacheWrite metric.Int64Counter
	reasoning  metric.Int64Counter
	opIn       metric.Int64Histogram
	opOut      metric.Int64Histogram

	// The previous names (Options.PreviousNames); nil otherwise.
	prevDuration   metric.Float64Histogram
	prevTokens     metric.Int64Histogram
	prevFirstChunk metric.Float64Histogram

	attempts    metric.Int64Counter
	requests    metric.Int64Counter
	reqDuration metric.Float64Histogram
	remaining   metric.Float64Histogram
	active      metric.Int64ObservableUpDownCounter
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
	// bhRejectedPriority is in adaptive.go.
	bhRejectedPriority metric.Int64ObservableCounter
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
	known, err := knownLabelSets(opts.MetricAttributes, opts.KnownLabels)
	if err != nil {
		return nil, err
	}
	i := &Instrumentation{
		profiles:     labelProfiles{seed: maphash.MakeSeed()},
		tracer:       tp.Tracer(ScopeName, trace.WithSchemaURL(SchemaURL)),
		traces:       !noopTP,
		logger:       opts.Logger,
		metricKeys:   append([]attribute.Key(nil), opts.MetricAttributes...),
		prevNames:    opts.PreviousNames,
		tenantLabels: opts.TenantLabels,
		labelled:     opts.Logger != nil || len(opts.MetricAttributes) > 0,
		known:        known,
	}
	i.meterKey = identity(mp, i)
	if opts.Logger != nil {
		i.logKey = identity(opts.Logger.Handler(), opts.Logger)
	}
	i.reg.Store(&registry{stages: map[stageKey]*stageState{}, infos: map[*fallback.StageInfo]*stageState{}, chains: map[*fallback.ChainInfo]*opState{}, ops: map[opKey]*opState{}, endpoints: map[endpointKey]endpoint{}, prev: i.prevNames})
	i.watched.Store(&watchList{})
	meter := mp.Meter(ScopeName, metric.WithSchemaURL(SchemaURL))
	if err := errors.Join(i.m.create(meter, i.prevNames), i.hits.create(meter)); err != nil {
		return nil, fmt.Errorf("otelx: creating instruments: %w", err)
	}
	reg, err := meter.RegisterCallback(i.collect, i.m.active,
		i.m.breakerState, i.m.bhAccepted, i.m.bhRejected, i.m.bhInFlight, i.m.bhQueued, i.m.bhLimit, i.m.bhRejectedPriority)
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

// Watch prepares the attribute sets of c's stages — with the server each
// tier calls and whether it reports token usage, which only the chain's
// StageInfo tells — and watches the breakers and bulkheads they use, the
// breakers of a pool's members included (StageInfo.MemberBreakers),
// without observing c's requests. Watching a breaker or bulkhead twice,
// through two chains, watches it once.
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
	o := reg.opLocked(opKey{op: op, stream: stages[0].Stream})
	if waits {
		o.waits.Store(true)
	}
	for _, s := range stages {
		reg.endpoints[endpointKey{op: op, tier: s.Tier, index: s.TierIndex, stream: s.Stream}] = endpoint{address: s.Address, port: s.Port}
		st := reg.stageLocked(stageKey{op: op, tier: s.Tier, model: s.Model, provider: s.Provider, index: s.TierIndex, stream: s.Stream})
		if s.Bulkhead != nil && s.Bulkhead.Config().MaxWait > 0 {
			st.waits.Store(true)
		}
	}
	i.reg.Store(reg)
	i.mu.Unlock()
	i.zeroRequests(reg, op, stages)
	for _, s := range stages {
		if s.Breaker != nil {
			i.WatchBreaker(s.Breaker)
		}
		for _, b := range s.MemberBreakers {
			i.WatchBreaker(b)
		}
		if s.Bulkhead != nil {
			i.WatchBulkhead(s.Bulkhead)
		}
	}
}

// zeroRequests starts the tierguard.requests series of the outcomes a
// chain can have at 0 — an answer from each tier, the cache or the
// default, a failure of each class but OK (a failed request is counted
// with a failure's class, Unknown when it had none) — so that a
// Prometheus rate counts the first of each too (a series whose first
// sample is already 1 counts nothing), and an error ratio sees the first
// errors. Only outcomes that can happen are started: a series that stays
// at 0 for good is noise on a dashboard and a cost in the database.
func (i *Instrumentation) zeroRequests(reg *registry, op string, stages []fallback.StageInfo) {
	ctx := context.Background()
	o := reg.ops[opKey{op: op, stream: stages[0].Stream}]
	if o == nil {
		return
	}
	outcomes := []*attrs{o.cache[1], o.def[1]}
	for c, a := range o.failed {
		if c != int(classify.OK) {
			outcomes = append(outcomes, a)
		}
	}
	for _, s := range stages {
		st := reg.stages[stageKey{op: op, tier: s.Tier, model: s.Model, provider: s.Provider, index: s.TierIndex, stream: s.Stream}]
		if st == nil {
			continue
		}
		d := 0
		if s.TierIndex > 0 {
			d = 1
		}
		outcomes = append(outcomes, st.result[d])
	}
	for _, a := range outcomes {
		i.m.requests.Add(ctx, 0, a.add...)
		// A labelled request's set is its outcome's with its labels
		// added (reqState.merge): the same set for a declared value.
		for _, labels := range i.known {
			i.m.requests.Add(ctx, 0, metric.WithAttributeSet(attribute.NewSet(append(a.set.ToSlice(), labels...)...)))
		}
	}
}

// maxKnownLabelSets bounds the combinations of Options.KnownLabels: each
// is a series per outcome of every chain, and a cross product grows fast.
const maxKnownLabelSets = 2000

// knownLabelSets returns every combination of the declared values, one
// value of each declared key, in the order of keys.
func knownLabelSets(keys []attribute.Key, known []attribute.KeyValue) ([][]attribute.KeyValue, error) {
	if len(known) == 0 {
		return nil, nil
	}
	byKey := map[attribute.Key][]attribute.KeyValue{}
	for _, kv := range known {
		if !slices.Contains(keys, kv.Key) {
			return nil, fmt.Errorf("otelx: KnownLabels declares %s, which MetricAttributes does not list", kv.Key)
		}
		if !slices.Contains(byKey[kv.Key], kv) {
			byKey[kv.Key] = append(byKey[kv.Key], kv)
		}
	}
	sets := [][]attribute.KeyValue{nil}
	seen := map[attribute.Key]bool{}
	for _, k := range keys {
		values := byKey[k]
		if len(values) == 0 || seen[k] {
			continue
		}
		seen[k] = true
		if len(sets)*len(values) > maxKnownLabelSets {
			return nil, fmt.Errorf("otelx: KnownLabels makes more than %d label sets", maxKnownLabelSets)
		}
		next := make([][]attribute.KeyValue, 0, len(sets)*len(values))
		for _, set := range sets {
			for _, v := range values {
				next = append(next, append(slices.Clip(set), v))
			}
		}
		sets = next
	}
	return sets, nil
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
		b.stop()
	}
	if err != nil {
		return fmt.Errorf("otelx: unregistering the gauge callback: %w", err)
	}
	return nil
}

func (m *instruments) create(meter metric.Meter, prev bool) error {
	var errs []error
	f64 := func(name, unit, desc string, buckets []float64) metric.Float64Histogram {
		h, err := meter.Float64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(buckets...))
		errs = append(errs, err)
		return h
	}
	i64 := func(name, desc string) metric.Int64Histogram {
		h, err := meter.Int64Histogram(name, metric.WithUnit("{token}"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(tokenBuckets...))
		errs = append(errs, err)
		return h
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	observable := func(name, desc string) metric.Int64ObservableUpDownCounter {
		c, err := meter.Int64ObservableUpDownCounter(name, metric.WithUnit("{call}"), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}

	m.duration = f64(metricInferenceDuration, "s", "GenAI client inference operation duration: one upstream attempt of a model tier.", durationBuckets)
	m.firstChunk = f64(metricTimeToFirstChunk, "s", "Time to receive the first chunk of a streaming attempt, from the call.", durationBuckets)
	m.perChunk = f64(metricTimePerOutputChunk, "s", "Time per output chunk after the first, from the previous chunk.", durationBuckets)
	m.usageIn = counter(metricUsageInput, "{token}", "Input (prompt) tokens used, cached tokens included.")
	m.usageOut = counter(metricUsageOutput, "{token}", "Output (completion) tokens used, reasoning tokens included.")
	m.cacheRead = counter(metricUsageCacheRead, "{token}", "Input tokens served from the provider's cache.")
	m.cacheWrite = counter(metricUsageCacheWrite, "{token}", "Input tokens written to the provider's cache.")
	m.reasoning = counter(metricUsageReasoning, "{token}", "Output tokens used for reasoning.")
	m.opIn = i64(metricOperationInput, "Input (prompt) tokens used per inference operation.")
	m.opOut = i64(metricOperationOutput, "Output (completion) tokens used per inference operation.")
	if prev {
		m.prevDuration = f64(metricPrevOperationDuration, "s", "GenAI operation duration (previous name of gen_ai.client.inference.duration).", durationBuckets)
		m.prevTokens = i64(metricPrevTokenUsage, "Number of input and output tokens used (previous name of the inference usage metrics).")
		m.prevFirstChunk = f64(metricPrevTimeToFirstChunk, "s", "Time to receive the first chunk (previous name of gen_ai.client.inference.time_to_first_chunk).", prevFirstChunkBuckets)
	}

	m.attempts = counter(metricAttempts, "{attempt}", "Upstream attempts, by tier and outcome class (ok for a success).")
	m.requests = counter(metricRequests, "{request}", "Finished requests, by answer source (tier, cache, default, error) and degraded flag.")
	m.reqDuration = f64(metricRequestDuration, "s", "End-to-end request duration, every attempt and fallback included.", durationBuckets)
	m.remaining = f64(metricDeadlineRemaining, "s", "Time left in the request's deadline budget when it ended.", durationBuckets)
	var err error
	m.active, err = meter.Int64ObservableUpDownCounter(metricActiveRequests, metric.WithUnit("{request}"), metric.WithDescription("Requests in flight in the chain."))
	errs = append(errs, err)
	m.retryWait = f64(metricRetryWait, "s", "Delay chosen before retrying the same tier, by the class that caused the retry.", durationBuckets)
	m.skips = counter(metricSkips, "{skip}", "Tiers passed over without an upstream call, by reason (open, full, retired, quota, budget).")
	m.transitions = counter(metricBreakerTransitions, "{transition}", "Circuit breaker state changes, by from and to state.")
	m.queueWait = f64(metricBulkheadQueueWait, "s", "Time an acquisition waited in a bulkhead's queue, by whether it got a slot.", queueWaitBuckets)
	m.breakerState, err = meter.Int64ObservableGauge(metricBreakerState, metric.WithUnit("{state}"), metric.WithDescription("Circuit breaker state: closed 0, half-open 1, open 2."))
	errs = append(errs, err)
	m.bhAccepted, err = meter.Int64ObservableCounter(metricBulkheadAccepted, metric.WithUnit("{call}"), metric.WithDescription("Bulkhead acquisitions that got a slot."))
	errs = append(errs, err)
	m.bhRejected, err = meter.Int64ObservableCounter(metricBulkheadRejected, metric.WithUnit("{call}"), metric.WithDescription("Bulkhead acquisitions refused: full, queue full, or wait ended."))
	errs = append(errs, err)
	m.bhInFlight = observable(metricBulkheadInFlight, "Bulkhead slots held.")
	m.bhQueued = observable(metricBulkheadQueued, "Bulkhead acquisitions waiting for a slot.")
	m.bhLimit = observable(metricBulkheadLimit, "Bulkhead slots in all.")
	errs = append(errs, m.createAdaptive(meter))
	return errors.Join(errs...)
}

// Router is what InstrumentRouter and AttachRouter need of a router: the
// chains of its routes. *route.Router and *route.StreamRouter implement
// it.
type Router[C Chain] interface {
	// Chains returns every route's chain.
	Chains() []C
}

// InstrumentRouter attaches metrics, traces and log events to every
// route's chain of r and to the guards of their stages, as Instrument does
// for one chain: one Instrumentation for the whole router. AttachRouter
// adds another router, of unary chains or streams, to it. Leave each
// router's Config.Base.Observer unset, or the routes' requests are
// observed twice.
func InstrumentRouter[C Chain](r Router[C], opts Options) (*Instrumentation, error) {
	i, err := New(opts)
	if err != nil {
		return nil, err
	}
	AttachRouter(i, r)
	return i, nil
}

// AttachRouter attaches i to every route's chain of r, as Attach does to
// one chain. It is a function, not a method, because it is generic: a
// router of unary chains and one of streams have chains of different
// types.
func AttachRouter[C Chain](i *Instrumentation, r Router[C]) {
	for _, c := range r.Chains() {
		i.Attach(c)
	}
}
