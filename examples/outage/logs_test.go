package main

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/bridges/otelslog"
	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/otelx"
	"github.com/tierguard/tierguard/retry"
)

// logRecords is an OpenTelemetry log exporter that keeps what it gets.
type logRecords struct {
	mu      sync.Mutex
	records []sdklog.Record
}

func (e *logRecords) Export(_ context.Context, rs []sdklog.Record) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range rs {
		e.records = append(e.records, r.Clone())
	}
	return nil
}

func (e *logRecords) Shutdown(context.Context) error   { return nil }
func (e *logRecords) ForceFlush(context.Context) error { return nil }

func (e *logRecords) byBody() map[string]sdklog.Record {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]sdklog.Record{}
	for _, r := range e.records {
		out[r.Body().AsString()] = r
	}
	return out
}

func attrOf(r sdklog.Record, key string) (attribute.Value, bool) {
	var v attribute.Value
	found := false
	r.WalkAttributes(func(kv attribute.KeyValue) bool {
		if string(kv.Key) == key {
			v, found = kv.Value, true
			return false
		}
		return true
	})
	return v, found
}

// otelx's events through the otelslog bridge are OpenTelemetry log records
// correlated with the span each is about — an attempt's end with the
// attempt's span, the request's end with the request's — with a component
// attribute and durations as durations.
func TestLogsThroughTheOtelslogBridge(t *testing.T) {
	exp := &logRecords{}
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewSimpleProcessor(exp)))
	t.Cleanup(func() { _ = lp.Shutdown(context.Background()) })
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	pro := fallback.Tier("pro", func(context.Context, string) (string, error) {
		return "", &classify.HTTPError{Facts: classify.Facts{HTTPStatus: 503, Status: "UNAVAILABLE"}}
	})
	flash := fallback.Tier("flash", func(context.Context, string) (string, error) { return "answer", nil })
	chain, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
		{Tier: pro, Model: proModel, Provider: "gcp.gemini", Retry: retry.Policy{MaxAttempts: 1}},
		{Tier: flash, Model: flashModel, Provider: "gcp.gemini"},
	}})
	require.NoError(t, err)
	inst, err := otelx.Instrument(chain, otelx.Options{TracerProvider: tp, Logger: otelslog.NewLogger("tierguard", otelslog.WithLoggerProvider(lp))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Close() })

	_, err = chain.Do(fallback.WithRequest(context.Background(), fallback.Request{ID: "req-7"}), "q")
	require.NoError(t, err)

	var request, proAttempt sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		switch s.Name() {
		case "tierguard generate_content":
			request = s
		case "generate_content " + proModel:
			proAttempt = s
		}
	}
	require.NotNil(t, request)
	require.NotNil(t, proAttempt)

	records := exp.byBody()
	fellBack, ok := records["tier failed, falling back"]
	require.True(t, ok, "%v", records)
	assert.Equal(t, request.SpanContext().TraceID(), fellBack.TraceID())
	assert.Equal(t, proAttempt.SpanContext().SpanID(), fellBack.SpanID(), "an attempt's end is about the attempt's span")
	assert.Equal(t, otellog.SeverityWarn, fellBack.Severity())
	v, ok := attrOf(fellBack, "component")
	require.True(t, ok)
	assert.Equal(t, "tierguard", v.AsString())
	v, ok = attrOf(fellBack, "latency")
	require.True(t, ok, "latency, not latency_ms")
	assert.Equal(t, attribute.INT64, v.Type(), "a duration, in nanoseconds")
	_, ok = attrOf(fellBack, "latency_ms")
	assert.False(t, ok)

	degraded, ok := records["request answered degraded"]
	require.True(t, ok)
	assert.Equal(t, request.SpanContext().SpanID(), degraded.SpanID(), "the request's end is about the request's span")
	v, _ = attrOf(degraded, "request_id")
	assert.Equal(t, "req-7", v.AsString())
}
