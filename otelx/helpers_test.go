package otelx_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/otelx"
)

// harness records everything an Instrumentation exports.
type harness struct {
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	logs   *syncBuffer
	logger *slog.Logger
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	h := &harness{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder(), logs: &syncBuffer{}}
	h.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	h.logger = slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		_ = h.mp.Shutdown(context.Background())
		_ = h.tp.Shutdown(context.Background())
	})
	return h
}

func (h *harness) options() otelx.Options {
	return otelx.Options{MeterProvider: h.mp, TracerProvider: h.tp, Logger: h.logger}
}

func (h *harness) collect(t testing.TB) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, h.reader.Collect(context.Background(), &rm))
	return rm
}

// metric returns the metric named name, failing if absent.
func findMetric(t testing.TB, rm metricdata.ResourceMetrics, name string) metricdata.Metrics {
	t.Helper()
	m, ok := lookupMetric(rm, name)
	require.True(t, ok, "metric %s not exported", name)
	return m
}

func lookupMetric(rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// key renders an attribute set as "k=v,k=v", sorted by key.
func key(s attribute.Set) string { return s.Encoded(attribute.DefaultEncoder()) }

// kv renders attributes the way key does.
func kv(kvs ...attribute.KeyValue) string { return key(attribute.NewSet(kvs...)) }

// ints returns an integer sum's or gauge's points by attribute set.
func ints(t testing.TB, m metricdata.Metrics) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			out[key(p.Attributes)] = p.Value
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			out[key(p.Attributes)] = p.Value
		}
	default:
		t.Fatalf("%s: not an int64 sum or gauge: %T", m.Name, m.Data)
	}
	return out
}

// nonZero drops the series that are still 0.
func nonZero(m map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// hist returns a float histogram's points by attribute set.
func hist(t testing.TB, m metricdata.Metrics) map[string]metricdata.HistogramDataPoint[float64] {
	t.Helper()
	d, ok := m.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%s: not a float64 histogram: %T", m.Name, m.Data)
	out := map[string]metricdata.HistogramDataPoint[float64]{}
	for _, p := range d.DataPoints {
		out[key(p.Attributes)] = p
	}
	return out
}

// keys returns a map's keys, sorted.
func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// logLines parses the JSON log lines.
func (h *harness) logLines(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(h.logs.String()))
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), sc.Text())
		require.Equal(t, "tierguard", m["component"], "every event names its component: %s", sc.Text())
		out = append(out, m)
	}
	return out
}

// logsWith returns the log lines whose message is msg.
func (h *harness) logsWith(t testing.TB, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range h.logLines(t) {
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// spanNamed returns the ended spans named name.
func (h *harness) spansNamed(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range h.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// spanAttrs returns a span's attributes by key.
func spanAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, a := range s.Attributes() {
		out[a.Key] = a.Value
	}
	return out
}

// tier is a scripted fake tier: each call runs the next step, or the
// default once the script is used up.
type tier struct {
	name  string
	mu    sync.Mutex
	steps []step
	def   step
	calls atomic.Int64
}

type step struct {
	out string
	err error
	// take is how long the call takes (on the synctest clock).
	take time.Duration
	fn   func(ctx context.Context) (string, error)
}

func newTier(name string, def step, steps ...step) *tier {
	return &tier{name: name, def: def, steps: steps}
}

func (f *tier) Name() string { return f.name }

func (f *tier) Call(ctx context.Context, _ string) (string, error) {
	f.calls.Add(1)
	f.mu.Lock()
	s := f.def
	if len(f.steps) > 0 {
		s, f.steps = f.steps[0], f.steps[1:]
	}
	f.mu.Unlock()
	if s.take > 0 {
		time.Sleep(s.take)
	}
	out, err := s.out, s.err
	if s.fn != nil {
		out, err = s.fn(ctx)
	}
	if out != "" {
		// Token counts derived from the answer, as an SDK adapter reports
		// them; none for a failed call without an answer.
		fallback.Report(ctx, fallback.Reply{Usage: fallback.Usage{InputTokens: 10, OutputTokens: int64(len(out))}, HasUsage: true})
	}
	return out, err
}

func ok(out string) step { return step{out: out} }

func http503() error {
	return &classify.HTTPError{Facts: classify.Facts{HTTPStatus: 503, Status: "UNAVAILABLE", Message: "overloaded"}}
}

func newBreaker(t testing.TB, cfg breaker.Config) *breaker.Breaker {
	t.Helper()
	b, err := breaker.New(cfg)
	require.NoError(t, err)
	return b
}

func newBulkhead(t testing.TB, cfg bulkhead.Config) *bulkhead.Bulkhead {
	t.Helper()
	b, err := bulkhead.New(cfg)
	require.NoError(t, err)
	return b
}

func newChain(t testing.TB, cfg fallback.Config[string, string]) *fallback.Chain[string, string] {
	t.Helper()
	c, err := fallback.New(cfg)
	require.NoError(t, err)
	return c
}

func instrument(t testing.TB, c otelx.Chain, opts otelx.Options) *otelx.Instrumentation {
	t.Helper()
	inst, err := otelx.Instrument(c, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, inst.Close()) })
	return inst
}
