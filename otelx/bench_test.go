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

// benchChain is fallback's benchmark chain: one tier behind a bulkhead and a
// breaker, answering at once.
func benchChain(b *testing.B) *fallback.Chain[string, string] {
	bh, err := bulkhead.New(bulkhead.Config{Name: "pro", Max: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	br, err := breaker.New(breaker.Config{Name: "pro"})
	if err != nil {
		b.Fatal(err)
	}
	c, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{
		Tier:     fallback.Tier("pro", func(context.Context, string) (string, error) { return "ok", nil }),
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

	instrumented := func(b *testing.B, metrics, traces bool, logger *slog.Logger) {
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
}
