package otelx_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/otelx"
)

// outcomeSets are the tierguard.requests sets twoTiers's chain starts at
// 0, with labels added: an answer from each tier, the cache or the
// default, a failure of each class but OK.
func outcomeSets(labels ...attribute.KeyValue) []string {
	with := func(kvs ...attribute.KeyValue) string {
		return kv(append(append([]attribute.KeyValue{opAttr}, kvs...), labels...)...)
	}
	out := []string{
		with(otelx.AttrSource.String("tier"), proTier, otelx.AttrDegraded.Bool(false)),
		with(otelx.AttrSource.String("tier"), flashTier, otelx.AttrDegraded.Bool(true)),
		with(otelx.AttrSource.String("cache"), otelx.AttrDegraded.Bool(true)),
		with(otelx.AttrSource.String("default"), otelx.AttrDegraded.Bool(true)),
	}
	for _, c := range classify.Classes() {
		if c != classify.OK {
			out = append(out, with(otelx.AttrSource.String("error"), otelx.AttrDegraded.Bool(false), otelx.AttrErrorType.String(c.String())))
		}
	}
	return out
}

// Declared tenants have every outcome at 0 before their first request,
// as the unlabelled series do; their first request moves one of them to
// 1 and makes no new series. A tenant not declared starts at its first
// count.
func TestKnownLabelsStartAtZero(t *testing.T) {
	h := newHarness(t)
	opts := h.options()
	opts.MetricAttributes = []attribute.Key{otelx.KeyTenant}
	opts.KnownLabels = []attribute.KeyValue{otelx.KeyTenant.String("acme"), otelx.KeyTenant.String("globex"), otelx.KeyTenant.String("acme")}
	c := newChain(t, twoTiers(
		fallback.Stage[string, string]{Tier: newTier("pro", ok("pro"))},
		fallback.Stage[string, string]{Tier: newTier("flash", ok("flash"))},
	))
	instrument(t, c, opts)

	requests := func() map[string]int64 {
		t.Helper()
		return ints(t, findMetric(t, h.collect(t), otelx.MetricRequests))
	}
	want := map[string]int64{}
	for _, labels := range [][]attribute.KeyValue{nil, {otelx.KeyTenant.String("acme")}, {otelx.KeyTenant.String("globex")}} {
		for _, k := range outcomeSets(labels...) {
			want[k] = 0
		}
	}
	require.Equal(t, want, requests(), "every outcome of every declared tenant, and of none, at 0")

	ask := func(tenant string) {
		t.Helper()
		_, err := c.Do(fallback.WithRequest(context.Background(), fallback.Request{Tenant: tenant}), "q")
		require.NoError(t, err)
	}
	ask("acme")
	acme := kv(opAttr, otelx.AttrSource.String("tier"), proTier, otelx.AttrDegraded.Bool(false), otelx.KeyTenant.String("acme"))
	want[acme] = 1
	assert.Equal(t, want, requests(), "the first request moves its declared series from 0 to 1")

	ask("initech")
	got := requests()
	assert.Equal(t, int64(1), got[kv(opAttr, otelx.AttrSource.String("tier"), proTier, otelx.AttrDegraded.Bool(false), otelx.KeyTenant.String("initech"))],
		"a tenant not declared starts at its first count")
	assert.Len(t, got, len(want)+1)
}

// Values of several keys are declared in every combination, one value of
// each, whatever their type; a request carrying them counts in the
// declared series.
func TestKnownLabelsCombine(t *testing.T) {
	h := newHarness(t)
	region := attribute.Key("region")
	shard := attribute.Key("shard")
	opts := h.options()
	opts.MetricAttributes = []attribute.Key{otelx.KeyScenario, region, shard}
	opts.KnownLabels = []attribute.KeyValue{
		region.String("eu"), otelx.KeyScenario.String("support"), region.String("us"), shard.Int(1), otelx.KeyScenario.String("billing"),
	}
	c := newChain(t, twoTiers(
		fallback.Stage[string, string]{Tier: newTier("pro", ok("pro"))},
		fallback.Stage[string, string]{Tier: newTier("flash", ok("flash"))},
	))
	instrument(t, c, opts)
	before := ints(t, findMetric(t, h.collect(t), otelx.MetricRequests))
	assert.Len(t, before, len(outcomeSets())*(1+2*2*1))
	for _, scenario := range []string{"support", "billing"} {
		for _, r := range []string{"eu", "us"} {
			for _, k := range outcomeSets(otelx.KeyScenario.String(scenario), region.String(r), shard.Int(1)) {
				assert.Contains(t, before, k)
			}
		}
	}

	ctx := otelx.WithAttributes(fallback.WithRequest(context.Background(), fallback.Request{Scenario: "billing"}), shard.Int(1), region.String("us"))
	_, err := c.Do(ctx, "q")
	require.NoError(t, err)
	after := ints(t, findMetric(t, h.collect(t), otelx.MetricRequests))
	assert.Len(t, after, len(before), "no new series")
	assert.Equal(t, int64(1), after[kv(opAttr, otelx.AttrSource.String("tier"), proTier, otelx.AttrDegraded.Bool(false),
		otelx.KeyScenario.String("billing"), region.String("us"), shard.Int(1))])
}

// Declaring values is no opt-in: a key MetricAttributes does not list is
// refused, as is a cross product too large to start at 0.
func TestKnownLabelsRefused(t *testing.T) {
	h := newHarness(t)
	opts := h.options()
	opts.KnownLabels = []attribute.KeyValue{otelx.KeyTenant.String("acme")}
	_, err := otelx.New(opts)
	require.ErrorContains(t, err, "KnownLabels declares tierguard.tenant, which MetricAttributes does not list")

	opts.MetricAttributes = []attribute.Key{otelx.KeyTenant, otelx.KeyScenario}
	opts.KnownLabels = nil
	for n := range 100 {
		opts.KnownLabels = append(opts.KnownLabels, otelx.KeyTenant.String(fmt.Sprint("t", n)), otelx.KeyScenario.String(fmt.Sprint("s", n)))
	}
	_, err = otelx.New(opts)
	require.ErrorContains(t, err, "KnownLabels makes more than 2000 label sets")
}
