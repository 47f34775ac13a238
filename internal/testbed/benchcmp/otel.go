package benchcmp

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/otelx"
)

// SDKMeterProvider is an OpenTelemetry SDK meter provider that collects
// into a manual reader (no exporter, nothing collected unless asked).
// Shut it down when done.
func SDKMeterProvider() (*sdkmetric.MeterProvider, *sdkmetric.ManualReader) {
	r := sdkmetric.NewManualReader()
	return sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)), r
}

// OtelChain is a one-tier chain (bulkhead, breaker, retry; model and
// provider named, as otelx labels them) instrumented by otelx with mp's
// metrics and tracing off; with mp nil it is not instrumented, the
// reference otelx's cost is read against. Close the Instrumentation when
// done (nil when not instrumented).
func OtelChain(mp metric.MeterProvider) (*fallback.Chain[string, string], *otelx.Instrumentation) {
	c, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{
		Tier: Tier("pro", Work), Model: "gemini-2.5-pro", Provider: "gcp.gemini",
		Bulkhead: TierguardBulkhead(), Breaker: TierguardBreaker(false), Retry: TierguardRetry(),
	}}})
	if err != nil {
		panic(err)
	}
	if mp == nil {
		return c, nil
	}
	inst, err := otelx.Instrument(c, otelx.Options{MeterProvider: mp, TracerProvider: tracenoop.NewTracerProvider()})
	if err != nil {
		panic(err)
	}
	return c, inst
}

// The seconds histograms' bucket boundaries: those of the OpenTelemetry
// GenAI semantic conventions for gen_ai.client.inference.duration.
var otelSecondsBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}

// OtelFloor is the floor of a request's metrics: by hand, what otelx
// records for a request answered by its first tier on the first attempt
// when the tier reports no usage and the request has no deadline —
// tierguard.active_requests, gen_ai.client.inference.duration,
// tierguard.attempts, tierguard.requests and tierguard.request.duration —
// on the same instruments (names, kinds, units, bucket boundaries) with
// attribute sets of the same keys, built once. Like otelx, it counts the
// requests in flight with two atomic additions read by an observable
// up-down counter at collection, not two measurements. It reads the clock
// twice per request and records the one duration as both the attempt's
// and the request's; it has no guards, classes, sources or fallbacks to
// tell apart. Run it around the same chain, unobserved (OtelChain(nil)),
// so that both sides pay the chain's own work and the difference is the
// instrumentation's.
type OtelFloor struct {
	inFlight    atomic.Int64
	active      metric.Int64ObservableUpDownCounter
	duration    metric.Float64Histogram
	attempts    metric.Int64Counter
	requests    metric.Int64Counter
	reqDuration metric.Float64Histogram

	// The options of each measurement, built once: a variadic option
	// passed as one value would allocate its slice on every call.
	attemptAdd, requestAdd []metric.AddOption
	genaiRec, requestRec   []metric.RecordOption
}

// NewOtelFloor creates the floor's instruments on mp.
func NewOtelFloor(mp metric.MeterProvider) (*OtelFloor, error) {
	m := mp.Meter("benchcmp-otel-floor")
	f := &OtelFloor{}
	op := attribute.String("gen_ai.operation.name", "generate_content")
	tier := attribute.String("tierguard.tier.name", "pro")
	set := func(kv ...attribute.KeyValue) metric.MeasurementOption {
		return metric.WithAttributeSet(attribute.NewSet(kv...))
	}
	active := metric.WithAttributeSet(attribute.NewSet(op))
	var errs [5]error
	f.active, errs[0] = m.Int64ObservableUpDownCounter("tierguard.active_requests", metric.WithUnit("{request}"),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(f.inFlight.Load(), active)
			return nil
		}))
	f.duration, errs[1] = m.Float64Histogram("gen_ai.client.inference.duration", metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(otelSecondsBuckets...))
	f.attempts, errs[2] = m.Int64Counter("tierguard.attempts", metric.WithUnit("{attempt}"))
	f.requests, errs[3] = m.Int64Counter("tierguard.requests", metric.WithUnit("{request}"))
	f.reqDuration, errs[4] = m.Float64Histogram("tierguard.request.duration", metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(otelSecondsBuckets...))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	genai := set(op, attribute.String("gen_ai.provider.name", "gcp.gemini"), attribute.String("gen_ai.request.model", "gemini-2.5-pro"), tier)
	attempt := set(op, tier, attribute.String("tierguard.class", "ok"))
	request := set(op, tier, attribute.String("tierguard.source", "tier"), attribute.Bool("tierguard.degraded", false))
	f.attemptAdd = []metric.AddOption{attempt}
	f.requestAdd = []metric.AddOption{request}
	f.genaiRec = []metric.RecordOption{genai}
	f.requestRec = []metric.RecordOption{request}
	return f, nil
}

// Do runs fn once and records what otelx records for it.
func (f *OtelFloor) Do(ctx context.Context, fn func() (string, error)) (string, error) {
	f.inFlight.Add(1)
	start := time.Now()
	v, err := fn()
	d := time.Since(start).Seconds()
	f.duration.Record(ctx, d, f.genaiRec...)
	f.attempts.Add(ctx, 1, f.attemptAdd...)
	f.requests.Add(ctx, 1, f.requestAdd...)
	f.reqDuration.Record(ctx, d, f.requestRec...)
	f.inFlight.Add(-1)
	return v, err
}

// Unobserved returns fn for OtelFloor.Do: one request of c, the chain
// OtelChain(nil) returns.
func Unobserved(ctx context.Context, c *fallback.Chain[string, string]) func() (string, error) {
	return func() (string, error) {
		res, err := c.Do(ctx, "q")
		return res.Value, err
	}
}
