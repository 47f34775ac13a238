package otelx_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/otelx"
	"github.com/tierguard/tierguard/retry"
)

// The primary model is down; the fallback answers. One Instrument call
// makes the decision visible: the metrics count a degraded answer, the log
// explains it.
func ExampleInstrument() {
	// A manual reader stands in for your exporter (Prometheus, OTLP).
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	// Time and durations are dropped so that the output is stable.
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			switch a.Key {
			case slog.TimeKey, "latency":
				return slog.Attr{}
			}
			return a
		},
	}))

	pro := fallback.Tier("pro", func(context.Context, string) (string, error) {
		return "", &classify.HTTPError{Facts: classify.Facts{HTTPStatus: 503, Status: "UNAVAILABLE"}}
	})
	flash := fallback.Tier("flash", func(context.Context, string) (string, error) {
		return "A circuit breaker stops calls to a failing dependency.", nil
	})
	chain, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
		{Tier: pro, Model: "gemini-2.5-pro", Provider: "gcp.gemini", Retry: retry.Policy{MaxAttempts: 1}},
		{Tier: flash, Model: "gemini-2.5-flash", Provider: "gcp.gemini"},
	}})
	if err != nil {
		panic(err)
	}
	inst, err := otelx.Instrument(chain, otelx.Options{MeterProvider: mp, Logger: logger})
	if err != nil {
		panic(err)
	}
	defer func() { _ = inst.Close() }()

	ctx := fallback.WithRequest(context.Background(), fallback.Request{ID: "req-42"})
	res, err := chain.Do(ctx, "What is a circuit breaker?")
	if err != nil {
		panic(err)
	}
	fmt.Println("answered by", res.Tier, "degraded:", res.Degraded)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	var lines []string
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok && (m.Name == "tierguard.attempts" || m.Name == "tierguard.requests") {
			for _, p := range sum.DataPoints {
				if p.Value == 0 {
					continue // the answers the chain could have given, counted from 0
				}
				lines = append(lines, fmt.Sprintf("%s{%s} %d", m.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value))
			}
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// level=WARN msg="tier failed, falling back" component=tierguard operation=generate_content request_id=req-42 tier=pro tier_index=0 model=gemini-2.5-pro provider=gcp.gemini attempt=1 class=transient http_status=503 status=UNAVAILABLE reason="server error" retryable=true retry=false stop="attempts exhausted" route=next_tier
	// level=WARN msg="request answered degraded" component=tierguard operation=generate_content request_id=req-42 source=tier tier=flash tier_index=1 degraded=true upstream_calls=2
	// answered by flash degraded: true
	// tierguard.attempts{gen_ai.operation.name=generate_content,tierguard.class=ok,tierguard.tier.name=flash} 1
	// tierguard.attempts{gen_ai.operation.name=generate_content,tierguard.class=transient,tierguard.tier.name=pro} 1
	// tierguard.requests{gen_ai.operation.name=generate_content,tierguard.degraded=true,tierguard.source=tier,tierguard.tier.name=flash} 1
}

// Tenants known up front start at 0: a Prometheus rate or increase counts
// their first requests too. Declaring them is no opt-in of its own: the
// tenant label is on metrics because MetricAttributes lists it.
func ExampleOptions_knownLabels() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()

	pro := fallback.Tier("pro", func(context.Context, string) (string, error) { return "answer", nil })
	chain, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: pro}}})
	if err != nil {
		panic(err)
	}
	inst, err := otelx.Instrument(chain, otelx.Options{
		MeterProvider:    mp,
		MetricAttributes: []attribute.Key{otelx.KeyTenant},
		KnownLabels:      []attribute.KeyValue{otelx.KeyTenant.String("acme"), otelx.KeyTenant.String("globex")},
	})
	if err != nil {
		panic(err)
	}
	defer func() { _ = inst.Close() }()

	answers := func() {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			panic(err)
		}
		for _, m := range rm.ScopeMetrics[0].Metrics {
			if m.Name != "tierguard.requests" {
				continue
			}
			var lines []string
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				tenant, labelled := p.Attributes.Value(otelx.KeyTenant)
				if source, _ := p.Attributes.Value("tierguard.source"); labelled && source.AsString() == "tier" {
					lines = append(lines, fmt.Sprintf("%s answered by pro: %d", tenant.AsString(), p.Value))
				}
			}
			sort.Strings(lines)
			fmt.Println(lines)
		}
	}
	answers()
	ctx := fallback.WithRequest(context.Background(), fallback.Request{Tenant: "acme"})
	if _, err := chain.Do(ctx, "q"); err != nil {
		panic(err)
	}
	answers()
	// Output:
	// [acme answered by pro: 0 globex answered by pro: 0]
	// [acme answered by pro: 1 globex answered by pro: 0]
}
