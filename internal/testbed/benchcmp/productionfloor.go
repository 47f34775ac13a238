package benchcmp

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go"
	fsbulkhead "github.com/failsafe-go/failsafe-go/bulkhead"
	fscb "github.com/failsafe-go/failsafe-go/circuitbreaker"
	fsfallback "github.com/failsafe-go/failsafe-go/fallback"
	fsratelimiter "github.com/failsafe-go/failsafe-go/ratelimiter"
	fsretry "github.com/failsafe-go/failsafe-go/retrypolicy"
	fstimeout "github.com/failsafe-go/failsafe-go/timeout"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
)

// ProdFloor is the production stack written by hand against the same
// SDKs, the least a careful engineer would write for the same signals:
//
//   - the route: a map from tenant and scenario to the route's settings;
//   - admission: HandRolledBudget's atomic add and compare per meter, then
//     the call's usage priced and charged;
//   - the deadline: one context.WithTimeout for the route's total;
//   - the guards: tierguard's bulkhead (TryAcquire, Release) and breaker
//     (Allow, Token.Done), an x/time/rate limiter per key, the keys taken
//     in turn, one try (the call answers);
//   - the validator's check (a non-empty answer);
//   - the same two spans as otelx (the request's and the attempt's) with
//     the same attributes, on the same TracerProvider;
//   - the same measurements as otelx and the ledger's metrics for an
//     answer on the first try (inference duration, input and output token
//     counters and histograms, attempts by key, bulkhead admissions,
//     requests, request duration, deadline remaining, cost, requests in
//     flight), each on an attribute set built once;
//   - the same log decisions: a success is logged at Debug, which a JSON
//     handler at Info drops (one Enabled check per decision);
//   - the write-back: a sync.Map keyed by tenant, scenario and prompt.
//
// It has no fallback tier, no retry (nothing fails), no classes, no
// periods or thresholds on the budget, no normalisation, expiry or
// memory bound on the cache, and no record of the request.
type ProdFloor struct {
	routes map[floorRouteKey]*floorRoute
	budget *HandRolledBudget

	slots   *bulkhead.Bulkhead
	breaker *breaker.Breaker
	keys    [2]*rate.Limiter
	next    atomic.Uint32

	// Failsafe, when set, replaces the hand-written guards: failsafe-go's
	// timeout, bulkhead, circuit breaker, retry policy, rate limiter per
	// key and try timeout, with its fallback to the default answer.
	failsafe [2]failsafe.Executor[string]

	tracer   trace.Tracer
	logger   *slog.Logger
	m        floorInstruments
	labels   bool
	byTen    sync.Map // tenant → *floorSets, with tenant labels
	sets     floorSets
	cache    sync.Map
	call     func(ctx context.Context, model, key, q string) (string, error)
	spans    *SpanCounter
	reader   *sdkmetric.ManualReader
	mp       *sdkmetric.MeterProvider
	tp       *sdktrace.TracerProvider
	inFlight atomic.Int64
}

type floorRouteKey struct{ tenant, scenario string }

type floorRoute struct {
	total  time.Duration
	model  string
	estTok int64
	estUSD int64
}

type floorInstruments struct {
	active            metric.Int64ObservableUpDownCounter
	duration          metric.Float64Histogram
	usageIn, usageOut metric.Int64Counter
	opIn, opOut       metric.Int64Histogram
	attempts          metric.Int64Counter
	accepted          metric.Int64Counter
	requests          metric.Int64Counter
	reqDuration       metric.Float64Histogram
	remaining         metric.Float64Histogram
	cost              metric.Float64Counter
}

// floorSets are the attribute sets of one tenant's measurements (or of
// every request's, without tenant labels), each built once.
type floorSets struct {
	genai, usage, request, cost metric.MeasurementOption
	attempts                    [2]metric.MeasurementOption
	accepted                    metric.MeasurementOption
	spanTenant                  []attribute.KeyValue
}

// ProdFloorOptions varies the floor as ProdOptions varies the stack.
type ProdFloorOptions struct {
	ProdOptions
	// Failsafe guards the call with failsafe-go's policies.
	Failsafe bool
}

// NewProdFloor builds the floor.
func NewProdFloor(o ProdFloorOptions) (*ProdFloor, error) {
	if o.Call == nil {
		o.Call = func(ctx context.Context, _, _, q string) (string, error) { return Work() }
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	f := &ProdFloor{budget: NewHandRolledBudget(), call: o.Call, labels: o.TenantLabels, spans: &SpanCounter{}}
	f.routes = map[floorRouteKey]*floorRoute{{ProdTenant, ProdScenario}: {
		total: ProdTotal, model: "gemini-2.5-pro", estTok: ProdInputTokens + ProdOutputTokens,
		estUSD: ProdInputTokens*LedgerInputPrice + ProdOutputTokens*LedgerOutputPrice,
	}}
	var err error
	if f.slots, err = bulkhead.New(bulkhead.Config{Name: "pro", Max: ProdSlots}); err != nil {
		return nil, err
	}
	if f.breaker, err = breaker.New(breaker.Config{Name: "pro", Cooldown: ProdCooldown}); err != nil {
		return nil, err
	}
	for k := range f.keys {
		f.keys[k] = rate.NewLimiter(rate.Inf, 1)
	}
	if o.Failsafe {
		for k := range f.failsafe {
			f.failsafe[k] = failsafe.With[string](
				fsfallback.NewWithResult(ProdDefault),
				fstimeout.New[string](ProdTotal),
				fsbulkhead.New[string](ProdSlots),
				fscb.NewBuilder[string]().WithDelay(ProdCooldown).Build(),
				fsretry.NewBuilder[string]().WithMaxAttempts(2).WithBackoff(BaseDelay, MaxDelay).Build(),
				fsratelimiter.NewBursty[string](1<<30, time.Minute),
				fstimeout.New[string](ProdTry),
			)
		}
	}
	f.mp, f.reader = SDKMeterProvider()
	f.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(f.spans))
	f.tracer = f.tp.Tracer("benchcmp-floor")
	f.logger = slog.New(slog.NewJSONHandler(o.Log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := f.instruments(f.mp.Meter("benchcmp-floor")); err != nil {
		return nil, err
	}
	f.sets = floorSetsFor()
	return f, nil
}

func (f *ProdFloor) instruments(m metric.Meter) error {
	active := metric.WithAttributeSet(attribute.NewSet(attribute.String("gen_ai.operation.name", "generate_content")))
	var errs [11]error
	f.m.active, errs[0] = m.Int64ObservableUpDownCounter("tierguard.active_requests", metric.WithUnit("{request}"),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(f.inFlight.Load(), active)
			return nil
		}))
	f.m.duration, errs[1] = m.Float64Histogram("gen_ai.client.inference.duration", metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(otelSecondsBuckets...))
	f.m.usageIn, errs[2] = m.Int64Counter("gen_ai.client.inference.usage.input_tokens", metric.WithUnit("{token}"))
	f.m.usageOut, errs[3] = m.Int64Counter("gen_ai.client.inference.usage.output_tokens", metric.WithUnit("{token}"))
	f.m.opIn, errs[4] = m.Int64Histogram("gen_ai.client.inference.operation.input_tokens", metric.WithUnit("{token}"))
	f.m.opOut, errs[5] = m.Int64Histogram("gen_ai.client.inference.operation.output_tokens", metric.WithUnit("{token}"))
	f.m.attempts, errs[6] = m.Int64Counter("tierguard.attempts", metric.WithUnit("{attempt}"))
	f.m.accepted, errs[7] = m.Int64Counter("tierguard.bulkhead.accepted", metric.WithUnit("{call}"))
	f.m.requests, errs[8] = m.Int64Counter("tierguard.requests", metric.WithUnit("{request}"))
	f.m.reqDuration, errs[9] = m.Float64Histogram("tierguard.request.duration", metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(otelSecondsBuckets...))
	f.m.remaining, errs[10] = m.Float64Histogram("tierguard.request.deadline_remaining", metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(otelSecondsBuckets...))
	var err error
	f.m.cost, err = m.Float64Counter("tierguard.cost", metric.WithUnit("{USD}"))
	return errors.Join(append(errs[:], err)...)
}

// floorSetsFor builds the measurements' attribute sets, with the tenant
// when kv holds it.
func floorSetsFor(kv ...attribute.KeyValue) floorSets {
	op := attribute.String("gen_ai.operation.name", "generate_content")
	tier := attribute.String("tierguard.tier.name", "pro")
	set := func(kvs ...attribute.KeyValue) metric.MeasurementOption {
		return metric.WithAttributeSet(attribute.NewSet(append(kvs, kv...)...))
	}
	genai := []attribute.KeyValue{op, attribute.String("gen_ai.provider.name", "gcp.gemini"), attribute.String("gen_ai.request.model", "gemini-2.5-pro"), tier}
	s := floorSets{
		genai:    set(genai...),
		usage:    set(append(genai, attribute.String("gen_ai.token.modality", "unknown"))...),
		request:  set(op, attribute.Bool("tierguard.degraded", false), attribute.String("tierguard.source", "tier"), tier),
		cost:     set(attribute.String("gen_ai.request.model", "gemini-2.5-pro"), attribute.String("tierguard.class", "ok"), attribute.String("tierguard.cost_group", "stable"), attribute.String("tierguard.currency", "USD"), attribute.Bool("tierguard.fallback", false)),
		accepted: metric.WithAttributeSet(attribute.NewSet(attribute.String("tierguard.bulkhead.name", "pro"))),
	}
	for k := range s.attempts {
		s.attempts[k] = set(op, attribute.String("tierguard.class", "ok"), attribute.String("tierguard.pool.member", []string{"#key-a", "#key-b"}[k]), tier)
	}
	s.spanTenant = kv
	return s
}

// setsOf returns the sets of tenant's measurements.
func (f *ProdFloor) setsOf(tenant string) *floorSets {
	if !f.labels {
		return &f.sets
	}
	if s, ok := f.byTen.Load(tenant); ok {
		return s.(*floorSets)
	}
	s := floorSetsFor(attribute.String("tierguard.tenant", tenant))
	v, _ := f.byTen.LoadOrStore(tenant, &s)
	return v.(*floorSets)
}

// The spans' attributes known before the request.
var (
	floorReqStart = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}
	floorAttStart = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "generate_content"), attribute.String("gen_ai.provider.name", "gcp.gemini"),
		attribute.String("gen_ai.request.model", "gemini-2.5-pro"), attribute.String("tierguard.tier.name", "pro"),
		attribute.Int("tierguard.tier.index", 0), attribute.Int("tierguard.attempt", 1), attribute.String("tierguard.breaker.state", "closed"))}
)

var errFloorRefused = errors.New("benchcmp: refused")

// Do runs one request.
func (f *ProdFloor) Do(ctx context.Context, tenant, scenario, prompt string) (string, error) {
	rt := f.routes[floorRouteKey{tenant, scenario}]
	if rt == nil {
		return "", errFloorRefused
	}
	if !f.budget.Admit(rt.estTok, rt.estUSD) {
		return "", errFloorRefused
	}
	sets := f.setsOf(tenant)
	ctx, cancel := context.WithTimeout(ctx, rt.total)
	defer cancel()
	ctx, span := f.tracer.Start(ctx, "tierguard generate_content", floorReqStart...)
	span.SetAttributes(attribute.String("tierguard.operation", "generate_content"), attribute.String("tierguard.scenario", scenario))
	if len(sets.spanTenant) > 0 {
		span.SetAttributes(sets.spanTenant...)
	}
	f.inFlight.Add(1)
	start := time.Now()
	k := int(f.next.Add(1) & 1)
	var out string
	var err error
	if f.failsafe[k] != nil {
		out, err = f.failsafe[k].WithContext(ctx).GetWithExecution(func(exec failsafe.Execution[string]) (string, error) {
			f.m.accepted.Add(ctx, 1, sets.accepted)
			return f.attempt(exec.Context(), k, sets, prompt)
		})
	} else {
		out, err = f.guarded(ctx, k, sets, prompt)
	}
	end := time.Now()
	f.inFlight.Add(-1)
	f.budget.Charge(rt.estTok, rt.estUSD, ProdInputTokens, ProdOutputTokens)
	f.m.cost.Add(ctx, float64(ProdInputTokens*LedgerInputPrice+ProdOutputTokens*LedgerOutputPrice)*1e-9, sets.cost)
	f.m.requests.Add(ctx, 1, sets.request)
	d := end.Sub(start).Seconds()
	f.m.reqDuration.Record(ctx, d, sets.request)
	left := rt.total.Seconds() - d
	f.m.remaining.Record(ctx, left, sets.request)
	if f.logger.Enabled(ctx, slog.LevelDebug) {
		f.logger.LogAttrs(ctx, slog.LevelDebug, "request answered", slog.String("source", "tier"))
	}
	span.SetAttributes(attribute.String("tierguard.source", "tier"), attribute.Bool("tierguard.degraded", false),
		attribute.Int("tierguard.upstream_calls", 1), attribute.String("tierguard.tier.name", "pro"),
		attribute.Int("tierguard.tier.index", 0), attribute.Float64("tierguard.deadline.remaining", left))
	span.End()
	if err == nil {
		f.cache.Store(floorCacheKey{tenant, scenario, prompt}, out)
	}
	return out, err
}

type floorCacheKey struct{ tenant, scenario, prompt string }

// guarded runs the attempt behind the hand-written guards.
func (f *ProdFloor) guarded(ctx context.Context, k int, sets *floorSets, prompt string) (string, error) {
	if !f.slots.TryAcquire() {
		return ProdDefault, nil
	}
	defer f.slots.Release()
	f.m.accepted.Add(ctx, 1, sets.accepted)
	tok, err := f.breaker.Allow()
	if err != nil {
		return ProdDefault, nil
	}
	if !f.keys[k].Allow() {
		tok.Done(breaker.Ignored)
		return ProdDefault, nil
	}
	out, err := f.attempt(ctx, k, sets, prompt)
	if err != nil {
		tok.Done(breaker.Failure)
		return ProdDefault, nil
	}
	tok.Done(breaker.Success)
	return out, nil
}

// attempt makes the call and records it.
func (f *ProdFloor) attempt(ctx context.Context, k int, sets *floorSets, prompt string) (string, error) {
	actx, span := f.tracer.Start(ctx, "generate_content gemini-2.5-pro", floorAttStart...)
	t0 := time.Now()
	out, err := f.call(actx, "gemini-2.5-pro", []string{"key-a", "key-b"}[k], prompt)
	lat := time.Since(t0).Seconds()
	if err == nil && out == "" {
		err = errFloorRefused
	}
	class := "ok"
	if err != nil {
		class = "invalid_output"
	}
	span.SetAttributes(attribute.Float64("tierguard.deadline.remaining", ProdTotal.Seconds()), attribute.String("tierguard.class", class),
		attribute.String("tierguard.pool.member", []string{"#key-a", "#key-b"}[k]),
		attribute.Int64("gen_ai.usage.input_tokens", ProdInputTokens), attribute.Int64("gen_ai.usage.output_tokens", ProdOutputTokens))
	span.End()
	f.m.duration.Record(ctx, lat, sets.genai)
	f.m.usageIn.Add(ctx, ProdInputTokens, sets.usage)
	f.m.usageOut.Add(ctx, ProdOutputTokens, sets.usage)
	f.m.opIn.Record(ctx, ProdInputTokens, sets.genai)
	f.m.opOut.Record(ctx, ProdOutputTokens, sets.genai)
	f.m.attempts.Add(ctx, 1, sets.attempts[k])
	if f.logger.Enabled(ctx, slog.LevelDebug) {
		f.logger.LogAttrs(ctx, slog.LevelDebug, "attempt succeeded", slog.String("class", class))
	}
	return out, err
}

// Close shuts the floor's providers down.
func (f *ProdFloor) Close() error {
	_ = f.tp.Shutdown(context.Background())
	return f.mp.Shutdown(context.Background())
}
