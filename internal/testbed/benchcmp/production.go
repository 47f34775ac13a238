package benchcmp

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/cache"
	"github.com/tierguard/tierguard/fallback/pool"
	"github.com/tierguard/tierguard/fallback/ratelimit"
	"github.com/tierguard/tierguard/fallback/route"
	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/otelx"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// The production stack's settings: those of the README's "A production
// stack" section, written out.
const (
	// ProdTenant and ProdScenario are the request's tenant and scenario.
	ProdTenant   = "acme"
	ProdScenario = "support"
	// ProdTotal is the route's deadline; ProdTry each stage's TryTimeout.
	ProdTotal = 10 * time.Second
	ProdTry   = 8 * time.Second
	// ProdSlots is each stage's bulkhead; ProdCooldown its breaker's.
	ProdSlots    = 64
	ProdCooldown = 30 * time.Second
	// ProdRequests and ProdTokens are each key's quota per minute: far
	// above what a benchmark spends in a minute, so that no request waits.
	ProdRequests = 1 << 40
	ProdTokens   = 1 << 50
	// What the tier reports for each call; the estimate is made for the
	// same usage.
	ProdInputTokens  = 1000
	ProdOutputTokens = 200
	// ProdDefault is the route's default answer.
	ProdDefault = "We are busy, please retry."
)

// ProdPrompt is the request's prompt.
const ProdPrompt = "Why is the sky blue?"

// ProdPrices prices the two models of the production stack in USD per
// million tokens (gemini-2.5-pro and gemini-2.5-flash's list prices).
const ProdPrices = `{"currency": "USD", "prices": [
	{"model": "gemini-2.5-pro", "input": 1.25, "output": 10},
	{"model": "gemini-2.5-flash", "input": 0.30, "output": 2.50}]}`

// ProdTierFunc answers a production stack's call: in memory, at once,
// reporting its usage (ProdInputTokens, ProdOutputTokens) as the SDK
// adapters' tiers do.
func ProdTierFunc(ctx context.Context, _ string) (string, error) {
	fallback.Report(ctx, fallback.Reply{Usage: fallback.Usage{InputTokens: ProdInputTokens, OutputTokens: ProdOutputTokens}, HasUsage: true})
	return Work()
}

// ProdOptions varies the production stack.
type ProdOptions struct {
	// TenantLabels labels the metrics with the request's tenant
	// (otelx.KeyTenant in MetricAttributes, the ledger's metrics too) and
	// spans and log events (otelx.Options.TenantLabels).
	TenantLabels bool
	// Call makes each key's calls; nil means ProdTierFunc. The two keys
	// of each model call it alike.
	Call func(ctx context.Context, model, key, q string) (string, error)
	// Member, when set, makes each key's tier instead of Call: the
	// loopback variant's Gemini tiers over the genai SDK.
	Member func(model, name, key string) (fallback.ModelTier[string, string], error)
	// Log receives the JSON log events; nil means io.Discard.
	Log io.Writer
	// Without leaves pieces out, to read what each costs.
	Without ProdPieces
}

// ProdPieces are pieces of the production stack that ProdOptions.Without
// may leave out.
type ProdPieces uint8

const (
	// ProdCache leaves the route without a cache: nothing is written back.
	ProdCache ProdPieces = 1 << iota
	// ProdLedger leaves the ledger out: no admission, no cost, no ledger
	// metrics; the request's tenant and scenario come from
	// fallback.WithRequest.
	ProdLedger
	// ProdTraces gives otelx a no-op TracerProvider: metrics and logs only.
	ProdTraces
	// ProdOtel leaves otelx out altogether (ProdTraces implied).
	ProdOtel
)

// Production is the stack a service runs, as the README's "A production
// stack" section builds it: a ledger admitting each request against its
// tenant's limits with the route's estimate; a router picking the route by
// tenant and scenario; on the route, gemini-2.5-pro behind a pool of two
// keys (each with its own rate limit), a bulkhead, a breaker, retries, the
// NonEmpty validator and a TryTimeout, then gemini-2.5-flash the same way,
// a cache that writes back every validated answer, and a default; otelx
// with the OpenTelemetry SDK's MeterProvider (a manual reader) and
// TracerProvider (a batch span processor whose exporter drops the spans)
// and a JSON slog handler at Info, and the ledger's own metrics.
type Production struct {
	Router *route.Router[string, string]
	Ledger *spend.Ledger
	Cache  *cache.Cache[string, string]
	Reader *sdkmetric.ManualReader
	// Spans counts the spans the exporter was handed.
	Spans *SpanCounter

	noLedger bool
	inst     *otelx.Instrumentation
	ledgerIn *otelx.LedgerInstrumentation
	mp       *sdkmetric.MeterProvider
	tp       *sdktrace.TracerProvider
}

// NewProduction builds the production stack.
func NewProduction(o ProdOptions) (*Production, error) {
	if o.Call == nil {
		o.Call = func(ctx context.Context, _, _, q string) (string, error) { return ProdTierFunc(ctx, q) }
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	p := &Production{Spans: &SpanCounter{}, noLedger: o.Without&ProdLedger != 0}
	prices, err := spend.ParsePrices([]byte(ProdPrices))
	if err != nil {
		return nil, err
	}
	if p.Ledger, err = spend.New(spend.Config{Prices: prices, Tenants: map[string]spend.Allowance{
		ProdTenant: {DailyCost: spend.Amount(1 << 62), MonthlyCost: spend.Amount(1 << 62)},
	}}); err != nil {
		return nil, err
	}
	if p.Cache, err = cache.New(cache.Config[string, string]{Prompt: func(q string) string { return q }}); err != nil {
		return nil, err
	}
	if o.Member == nil {
		call := o.Call
		o.Member = func(model, name, key string) (fallback.ModelTier[string, string], error) {
			return fallback.Tier(name, func(ctx context.Context, q string) (string, error) { return call(ctx, model, key, q) }), nil
		}
	}
	pro, err := prodStage("gemini-2.5-pro", "pro", o.Member)
	if err != nil {
		return nil, err
	}
	flash, err := prodStage("gemini-2.5-flash", "flash", o.Member)
	if err != nil {
		return nil, err
	}
	ledger := p.Ledger
	if p.noLedger {
		ledger = nil
	}
	if p.Router, err = route.New(route.Config[string, string]{Ledger: ledger, Routes: []route.Route[string, string]{{
		Scenario: ProdScenario, Total: ProdTotal, MaxAttempts: 4, MarkDegraded: true,
		Candidates: []route.Candidate[string, string]{{Stage: pro, CostGroup: "stable"}, {Stage: flash, CostGroup: "stable"}},
		Cache:      p.routeCache(o.Without),
		Default:    func(context.Context, string) (string, bool) { return ProdDefault, true },
	}}}); err != nil {
		return nil, err
	}
	var reader *sdkmetric.ManualReader
	p.mp, reader = SDKMeterProvider()
	p.Reader = reader
	p.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(p.Spans))
	if o.Without&ProdOtel != 0 {
		return p, nil
	}
	var tp trace.TracerProvider = p.tp
	if o.Without&ProdTraces != 0 {
		tp = tracenoop.NewTracerProvider()
	}
	opts := otelx.Options{MeterProvider: p.mp, TracerProvider: tp,
		Logger: slog.New(slog.NewJSONHandler(o.Log, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	if o.TenantLabels {
		opts.MetricAttributes = []attribute.Key{otelx.KeyTenant}
		opts.TenantLabels = true
	}
	if p.inst, err = otelx.InstrumentRouter(p.Router, opts); err != nil {
		return nil, err
	}
	if !p.noLedger {
		if p.ledgerIn, err = otelx.InstrumentLedger(p.Ledger, opts); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// routeCache is the route's cache, unless without leaves it out.
func (p *Production) routeCache(without ProdPieces) fallback.Cache[string, string] {
	if without&ProdCache != 0 {
		return nil
	}
	return p.Cache
}

// prodStage is one model's stage: a pool of two keys, each with its own
// rate limit, behind a bulkhead, a breaker and retries, with a TryTimeout
// and the NonEmpty validator.
func prodStage(model, name string, member func(model, name, key string) (fallback.ModelTier[string, string], error)) (fallback.Stage[string, string], error) {
	var members []pool.Member[string, string]
	for _, key := range []string{"key-a", "key-b"} {
		lim, err := ratelimit.New(ratelimit.Config{Name: name, Requests: ProdRequests, Tokens: ProdTokens})
		if err != nil {
			return fallback.Stage[string, string]{}, err
		}
		t, err := member(model, name, key)
		if err != nil {
			return fallback.Stage[string, string]{}, err
		}
		members = append(members, pool.Member[string, string]{Key: name + "-" + key, Limiter: lim, Tier: t})
	}
	keys, err := pool.New(pool.Config[string, string]{Name: name, Members: members})
	if err != nil {
		return fallback.Stage[string, string]{}, err
	}
	br, err := breaker.New(breaker.Config{Name: name, Cooldown: ProdCooldown})
	if err != nil {
		return fallback.Stage[string, string]{}, err
	}
	bh, err := bulkhead.New(bulkhead.Config{Name: name, Max: ProdSlots})
	if err != nil {
		return fallback.Stage[string, string]{}, err
	}
	return fallback.Stage[string, string]{Tier: keys, Model: model, Provider: "gcp.gemini",
		Bulkhead: bh, Breaker: br, Retry: retry.Policy{MaxAttempts: 2}, TryTimeout: ProdTry,
		Validate: validate.NonEmpty(), Tokens: func(q string) int64 { return int64(len(q)/4 + ProdOutputTokens) }}, nil
}

// ProdUsage is the usage a route's estimate is made for.
var ProdUsage = fallback.Usage{InputTokens: ProdInputTokens, OutputTokens: ProdOutputTokens}

// Do runs one request as a service's handler does: the route of the
// request's tenant and scenario, the ledger's admission with the route's
// estimate, the route's chain, the ticket's end.
func (p *Production) Do(ctx context.Context, req spend.Request, prompt string) (string, error) {
	rc, err := p.Router.Lookup(req.Tenant, req.Scenario)
	if err != nil {
		return "", err
	}
	if p.noLedger {
		res, err := rc.Do(fallback.WithRequest(ctx, fallback.Request{ID: req.ID, Tenant: req.Tenant, Scenario: req.Scenario}), prompt)
		return res.Value, err
	}
	t, err := p.Ledger.Admit(ctx, req, rc.Estimate(ProdUsage))
	if err != nil {
		return "", err
	}
	defer t.End()
	res, err := rc.Do(t, prompt)
	return res.Value, err
}

// Close shuts the stack down.
func (p *Production) Close() error {
	if p.inst != nil {
		p.inst.Close()
	}
	if p.ledgerIn != nil {
		p.ledgerIn.Close()
	}
	p.Cache.Close()
	err := p.Ledger.Close()
	_ = p.tp.Shutdown(context.Background())
	_ = p.mp.Shutdown(context.Background())
	return err
}

// SpanCounter is a span exporter that counts the spans it is handed and
// drops them: the cost of the batch span processor without an export's.
type SpanCounter struct {
	n atomic.Int64
}

// ExportSpans counts spans.
func (c *SpanCounter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	c.n.Add(int64(len(spans)))
	return nil
}

// Shutdown does nothing.
func (c *SpanCounter) Shutdown(context.Context) error { return nil }

// Count returns the spans exported so far.
func (c *SpanCounter) Count() int64 { return c.n.Load() }
