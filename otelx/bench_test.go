package otelx_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/otelx"
)

// describedBenchTier answers at once and reports what the SDK adapters'
// tiers report: an endpoint, usage and a response.
type describedBenchTier struct{}

func (describedBenchTier) Name() string { return "pro" }
func (describedBenchTier) Call(ctx context.Context, _ string) (string, error) {
	fallback.Report(ctx, fallback.Reply{
		Usage:    fallback.Usage{InputTokens: 100, OutputTokens: 20, CacheReadInputTokens: 64, ReasoningOutputTokens: 4},
		HasUsage: true,
		Response: fallback.ResponseInfo{ID: "resp-1", Model: "gemini-2.5-pro-001", FinishReason: "STOP"},
	})
	return "ok", nil
}
func (describedBenchTier) Endpoint() fallback.Endpoint {
	return fallback.Endpoint{Provider: "gcp.gemini", Address: "generativelanguage.googleapis.com", Port: 443}
}

// benchChain is fallback's benchmark chain: one tier behind a bulkhead and a
// breaker, answering at once.
func benchChain(b *testing.B) *fallback.Chain[string, string] {
	return benchChainWith(b, fallback.Tier("pro", func(context.Context, string) (string, error) { return "ok", nil }))
}

func benchChainWith(b *testing.B, tier fallback.ModelTier[string, string]) *fallback.Chain[string, string] {
	bh, err := bulkhead.New(bulkhead.Config{Name: "pro", Max: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	br, err := breaker.New(breaker.Config{Name: "pro"})
	if err != nil {
		b.Fatal(err)
	}
	c, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{
		Tier:     tier,
		Model:    "gemini-2.5-pro",
		Provider: "gcp.gemini",
		Bulkhead: bh,
		Breaker:  br,
	}}})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

func runChain(b *testing.B, c *fallback.Chain[string, string]) {
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Do(ctx, "q"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.Do(ctx, "q"); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// BenchmarkInstrumented measures what otelx adds to a chain's success path:
// with the global providers and no SDK; with SDK metrics into a manual
// reader and tracing off (noop.TracerProvider); with SDK spans sampled and
// recorded too (no exporter); and with a logger at Info, which skips the
// Debug events of a success.
func BenchmarkInstrumented(b *testing.B) {
	b.Run("uninstrumented", func(b *testing.B) { runChain(b, benchChain(b)) })

	instrumented := func(b *testing.B, metrics, traces bool, logger *slog.Logger, tier ...fallback.ModelTier[string, string]) {
		opts := otelx.Options{Logger: logger}
		if metrics {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			defer func() { _ = mp.Shutdown(context.Background()) }()
			opts.MeterProvider = mp
			opts.TracerProvider = tracenoop.NewTracerProvider()
		}
		if traces {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
			defer func() { _ = tp.Shutdown(context.Background()) }()
			opts.TracerProvider = tp
		}
		c := benchChain(b)
		if len(tier) > 0 {
			c = benchChainWith(b, tier[0])
		}
		inst, err := otelx.Instrument(c, opts)
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = inst.Close() }()
		runChain(b, c)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// The global providers with no SDK registered.
	b.Run("global-noop", func(b *testing.B) { instrumented(b, false, false, nil) })
	b.Run("sdk-metrics", func(b *testing.B) { instrumented(b, true, false, nil) })
	b.Run("sdk-metrics-traces", func(b *testing.B) { instrumented(b, true, true, nil) })
	b.Run("sdk-metrics-traces-logger", func(b *testing.B) { instrumented(b, true, true, quiet) })
	// A tier that reports its endpoint, usage and response, as the SDK
	// adapters' do: the usage metrics and response attributes on top.
	b.Run("sdk-metrics-described", func(b *testing.B) { instrumented(b, true, false, nil, describedBenchTier{}) })
	b.Run("sdk-metrics-traces-described", func(b *testing.B) { instrumented(b, true, true, nil, describedBenchTier{}) })
}
