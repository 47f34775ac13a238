package otelx_test

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/retry"
)

var updateInventory = flag.Bool("update", false, "rewrite testdata/attributes.golden")

// TestAttributeInventory lists every attribute key otelx emits, per metric
// and per kind of span, for a run that retries, falls back, skips an open
// tier and answers from the cache: a new attribute, or one that goes away,
// shows in review as a change to testdata/attributes.golden (go test
// ./otelx -run TestAttributeInventory -update rewrites it).
func TestAttributeInventory(t *testing.T) {
	h := newHarness(t)
	brk, err := breaker.New(breaker.Config{Name: "pro", ConsecutiveFailures: 2})
	require.NoError(t, err)
	bh, err := bulkhead.New(bulkhead.Config{Name: "flash", Max: 4})
	require.NoError(t, err)
	flaky := fallback.Tier("pro", func(context.Context, string) (string, error) {
		return "", classify.Wrap(errors.New("503"), classify.Verdict{Class: classify.Transient, HTTPStatus: 503, Status: "UNAVAILABLE"})
	})
	flashDown := false
	flash := fallback.Tier("flash", func(ctx context.Context, _ string) (string, error) {
		fallback.Report(ctx, fallback.Reply{HasUsage: true,
			Usage:    fallback.Usage{InputTokens: 10, OutputTokens: 5, CacheReadInputTokens: 2, CacheWriteInputTokens: 1, ReasoningOutputTokens: 1},
			Response: fallback.ResponseInfo{ID: "resp-1", Model: "gemini-2.5-flash-001", FinishReason: "STOP"}})
		if flashDown {
			return "", classify.Wrap(errors.New("503"), classify.Verdict{Class: classify.Transient, HTTPStatus: 503})
		}
		return "flash", nil
	})
	c := newChain(t, fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{
			{Tier: flaky, Model: "gemini-2.5-pro", Provider: "gcp.gemini", Breaker: brk, Retry: retry.Policy{MaxAttempts: 2, BaseDelay: 1, MaxDelay: 1}},
			{Tier: flash, Model: "gemini-2.5-flash", Provider: "gcp.gemini", Bulkhead: bh, Retry: retry.Policy{MaxAttempts: 1}},
		},
		Cache: cacheFunc(func(context.Context, string) (string, bool) { return "cached", true }),
	})
	instrument(t, c, h.options())
	for i := range 4 {
		flashDown = i == 3 // the last request is answered by the cache
		_, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
	}

	inv := map[string][]string{}
	add := func(name string, set attribute.Set) {
		for _, kv := range set.ToSlice() {
			if !slices.Contains(inv[name], string(kv.Key)) {
				inv[name] = append(inv[name], string(kv.Key))
			}
		}
		if _, ok := inv[name]; !ok {
			inv[name] = nil
		}
	}
	for _, sm := range h.collect(t).ScopeMetrics {
		for _, m := range sm.Metrics {
			name := "metric " + m.Name
			sets, ok := pointSets(m.Data)
			require.True(t, ok, "%s: unexpected data %T", m.Name, m.Data)
			for _, set := range sets {
				add(name, set)
			}
		}
	}
	for _, s := range h.spans.Ended() {
		kind := "span internal (request)"
		if s.SpanKind() == trace.SpanKindClient {
			kind = "span client (attempt)"
		}
		add(kind, attribute.NewSet(s.Attributes()...))
		for _, e := range s.Events() {
			add(kind+" event "+e.Name, attribute.NewSet(e.Attributes...))
		}
	}
	var b strings.Builder
	names := make([]string, 0, len(inv))
	for n := range inv {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		keys := inv[n]
		slices.Sort(keys)
		b.WriteString(n + ": " + strings.Join(keys, " ") + "\n")
	}
	golden := filepath.Join("testdata", "attributes.golden")
	if *updateInventory {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(golden, []byte(b.String()), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "run with -update to create %s", golden)
	assert.Equal(t, string(want), b.String(), "the attributes otelx emits changed: review, then run with -update")
}

// pointSets are the attribute sets of an aggregation's data points.
func pointSets(d metricdata.Aggregation) ([]attribute.Set, bool) {
	var out []attribute.Set
	switch d := d.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Sum[float64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	default:
		return nil, false
	}
	return out, true
}
