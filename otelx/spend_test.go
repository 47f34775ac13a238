package otelx_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/otelx"
	"github.com/tierguard/tierguard/retry"
)

type billedOut struct {
	text  string
	usage fallback.Usage
}

type billedTier struct {
	name  string
	out   billedOut
	err   error
	calls int
}

func (t *billedTier) Name() string { return t.name }
func (t *billedTier) Call(ctx context.Context, _ string) (billedOut, error) {
	t.calls++
	if t.out.usage != (fallback.Usage{}) {
		fallback.Report(ctx, fallback.Reply{Usage: t.out.usage, HasUsage: true})
	}
	return t.out, t.err
}

// spendRig is a ledger with a tenant limit of 1000 tokens a day, and a
// chain pro (rejected answers, billed) → flash.
func spendRig(t *testing.T) (*spend.Ledger, *fallback.Chain[string, billedOut]) {
	t.Helper()
	prices, err := spend.NewPrices(spend.PriceTable{Currency: "USD", Prices: []spend.Price{
		{Model: "pro", Rates: spend.Rates{Input: spend.MustParseAmount("1"), Output: spend.MustParseAmount("10")}},
		{Model: "flash", Rates: spend.Rates{Input: spend.MustParseAmount("0.1"), Output: spend.MustParseAmount("1")}},
	}})
	require.NoError(t, err)
	l, err := spend.New(spend.Config{Prices: prices, Tenants: map[string]spend.Allowance{"acme-secret-tenant": {DailyTokens: 1000}}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	invalid := classify.Wrap(errors.New("bad json"), classify.Verdict{Class: classify.InvalidOutput})
	pro := &billedTier{name: "pro", out: billedOut{usage: fallback.Usage{InputTokens: 50, OutputTokens: 50}}, err: invalid}
	flash := &billedTier{name: "flash", out: billedOut{text: "ok", usage: fallback.Usage{InputTokens: 50, OutputTokens: 50}}}
	c, err := fallback.New(fallback.Config[string, billedOut]{Stages: []fallback.Stage[string, billedOut]{
		{Tier: pro, Model: "pro", Retry: retry.Policy{MaxAttempts: 1}}, {Tier: flash, Model: "flash"},
	}})
	require.NoError(t, err)
	_, err = l.Attach(c, "stable", "batch")
	require.NoError(t, err)
	return l, c
}

func runSpend(t *testing.T, l *spend.Ledger, c *fallback.Chain[string, billedOut], n int, p spend.Priority) {
	t.Helper()
	for range n {
		tk, err := l.Admit(context.Background(), spend.Request{Tenant: "acme-secret-tenant", Scenario: "support", Priority: p}, spend.Estimate{Tokens: 100})
		if err != nil {
			continue
		}
		_, err = c.Do(tk, "q")
		require.NoError(t, err)
		tk.End()
	}
}

func ledgerMetric(rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// tierguard.cost splits what a tenant paid into answers and the extra
// cost of failures and fallbacks; the budget gauges and counters follow
// the limit. No metric carries the tenant unless asked.
func TestLedgerMetrics(t *testing.T) {
	h := newHarness(t)
	l, c := spendRig(t)
	li, err := otelx.InstrumentLedger(l, otelx.Options{MeterProvider: h.mp})
	require.NoError(t, err)
	defer li.Close()
	// Each request uses 200 tokens (100 on pro, 100 on flash) and is
	// admitted with an estimate of 100.
	runSpend(t, l, c, 2, spend.Normal) // 400 tokens
	runSpend(t, l, c, 2, spend.Low)    // 800: 70% reached
	runSpend(t, l, c, 1, spend.Low)    // would reach 900 = 90%: shed
	runSpend(t, l, c, 1, spend.Normal) // 1000: 90% and the limit
	runSpend(t, l, c, 1, spend.Normal) // refused
	rm := h.collect(t)

	m, ok := ledgerMetric(rm, "tierguard.cost")
	require.True(t, ok)
	assert.Equal(t, "{USD}", m.Unit)
	sum := m.Data.(metricdata.Sum[float64])
	got := map[string]float64{}
	for _, dp := range sum.DataPoints {
		model, _ := dp.Attributes.Value("gen_ai.request.model")
		class, _ := dp.Attributes.Value("tierguard.class")
		fb, _ := dp.Attributes.Value("tierguard.fallback")
		group, _ := dp.Attributes.Value("tierguard.cost_group")
		cur, _ := dp.Attributes.Value("tierguard.currency")
		assert.Equal(t, "USD", cur.AsString())
		_, hasTenant := dp.Attributes.Value(otelx.KeyTenant)
		assert.False(t, hasTenant)
		got[model.AsString()+"/"+group.AsString()+"/"+class.AsString()+"/"+fb.String()] += dp.Value
	}
	// Five requests: pro's rejected answer (50 in at 1, 50 out at 10 per
	// million) and flash's answer (at 0.1 and 1).
	assert.InDeltaMapValues(t, map[string]float64{
		"pro/stable/invalid_output/false": 5 * 0.00055,
		"flash/batch/ok/true":             5 * 0.000055,
	}, got, 1e-12)

	m, ok = ledgerMetric(rm, "tierguard.budget.utilization")
	require.True(t, ok)
	g := m.Data.(metricdata.Gauge[float64])
	require.Len(t, g.DataPoints, 1)
	meter, _ := g.DataPoints[0].Attributes.Value("tierguard.budget.meter")
	assert.Equal(t, "daily_tokens", meter.AsString())
	assert.InDelta(t, 1.0, g.DataPoints[0].Value, 1e-9)

	m, ok = ledgerMetric(rm, "tierguard.budget.thresholds")
	require.True(t, ok)
	var thresholds []float64
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := dp.Attributes.Value("tierguard.budget.threshold")
		thresholds = append(thresholds, v.AsFloat64())
		assert.Equal(t, int64(1), dp.Value)
	}
	assert.ElementsMatch(t, []float64{0.7, 0.9, 1}, thresholds)

	m, ok = ledgerMetric(rm, "tierguard.budget.refusals")
	require.True(t, ok)
	refusals := map[string]int64{}
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := dp.Attributes.Value("tierguard.budget.refusal")
		refusals[v.AsString()] += dp.Value
	}
	assert.Equal(t, map[string]int64{"shed": 1, "limit_reached": 1}, refusals)

	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			assert.NotContains(t, attrsOf(m), "acme-secret-tenant", m.Name)
		}
	}
	require.NoError(t, li.Close())
	require.NoError(t, li.Close())
}

// The README's pattern — Admit with an estimate — refuses before use
// reaches the limit: the limit's threshold is counted only when use
// reaches it (spend.ThresholdReached means what it says; the first
// refusal is spend.FirstRefusal), and the refusals, which an alert on
// the limit binding watches, keep their meter.
func TestLedgerMetricsThresholdsAreUse(t *testing.T) {
	h := newHarness(t)
	l, c := spendRig(t)
	li, err := otelx.InstrumentLedger(l, otelx.Options{MeterProvider: h.mp})
	require.NoError(t, err)
	defer li.Close()
	// Each request uses 200 tokens and is admitted with an estimate of
	// 250: after four (800 tokens) the fifth would pass the limit.
	for range 6 {
		tk, err := l.Admit(context.Background(), spend.Request{Tenant: "acme-secret-tenant", Scenario: "support"}, spend.Estimate{Tokens: 250})
		if err != nil {
			require.ErrorIs(t, err, spend.ErrLimitReached)
			continue
		}
		_, err = c.Do(tk, "q")
		require.NoError(t, err)
		tk.End()
	}
	rm := h.collect(t)
	m, ok := ledgerMetric(rm, "tierguard.budget.thresholds")
	require.True(t, ok)
	thresholds := map[float64]int64{}
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := dp.Attributes.Value("tierguard.budget.threshold")
		meter, _ := dp.Attributes.Value("tierguard.budget.meter")
		assert.Equal(t, "daily_tokens", meter.AsString())
		thresholds[v.AsFloat64()] += dp.Value
	}
	assert.Equal(t, map[float64]int64{0.7: 1}, thresholds, "80% used: 0.7; the limit was never reached")

	m, ok = ledgerMetric(rm, "tierguard.budget.refusals")
	require.True(t, ok)
	dps := m.Data.(metricdata.Sum[int64]).DataPoints
	require.Len(t, dps, 1)
	assert.Equal(t, int64(2), dps[0].Value)
	meter, _ := dps[0].Attributes.Value("tierguard.budget.meter")
	assert.Equal(t, "daily_tokens", meter.AsString())
	refusal, _ := dps[0].Attributes.Value("tierguard.budget.refusal")
	assert.Equal(t, "limit_reached", refusal.AsString())
}

// A request refused for a model without a price counts under its cost
// meter.
func TestLedgerMetricsUnpricedRefusal(t *testing.T) {
	h := newHarness(t)
	prices, err := spend.NewPrices(spend.PriceTable{Currency: "USD", Prices: []spend.Price{{Model: "pro", Rates: spend.Rates{Input: 1, Output: 1}}}})
	require.NoError(t, err)
	l, err := spend.New(spend.Config{Prices: prices, Tenants: map[string]spend.Allowance{"acme-secret-tenant": {MonthlyCost: spend.Unit}}})
	require.NoError(t, err)
	defer l.Close()
	li, err := otelx.InstrumentLedger(l, otelx.Options{MeterProvider: h.mp})
	require.NoError(t, err)
	defer li.Close()
	_, err = l.Admit(context.Background(), spend.Request{Tenant: "acme-secret-tenant"}, prices.Estimate("pro-002", "", fallback.Usage{InputTokens: 10}))
	require.ErrorIs(t, err, spend.ErrUnpriced)
	m, ok := ledgerMetric(h.collect(t), "tierguard.budget.refusals")
	require.True(t, ok)
	dps := m.Data.(metricdata.Sum[int64]).DataPoints
	require.Len(t, dps, 1)
	meter, _ := dps[0].Attributes.Value("tierguard.budget.meter")
	assert.Equal(t, "monthly_cost", meter.AsString())
	refusal, _ := dps[0].Attributes.Value("tierguard.budget.refusal")
	assert.Equal(t, "unpriced_model", refusal.AsString())
	assert.NotContains(t, attrsOf(m), "acme-secret-tenant")
}

// With KeyTenant listed, every ledger metric carries the tenant.
func TestLedgerMetricsTenantOptIn(t *testing.T) {
	h := newHarness(t)
	l, c := spendRig(t)
	li, err := otelx.InstrumentLedger(l, otelx.Options{MeterProvider: h.mp, MetricAttributes: []attribute.Key{otelx.KeyTenant, otelx.KeyScenario}})
	require.NoError(t, err)
	defer li.Close()
	runSpend(t, l, c, 4, spend.Normal)
	rm := h.collect(t)
	for _, name := range []string{"tierguard.cost", "tierguard.budget.utilization", "tierguard.budget.thresholds"} {
		m, ok := ledgerMetric(rm, name)
		require.True(t, ok, name)
		assert.Contains(t, attrsOf(m), "acme-secret-tenant", name)
	}
	m, _ := ledgerMetric(rm, "tierguard.cost")
	assert.Contains(t, attrsOf(m), "support")
	_, err = otelx.InstrumentLedger(nil, otelx.Options{})
	assert.Error(t, err)
}

// attrsOf lists every attribute value of a metric's data points.
func attrsOf(m metricdata.Metrics) []string {
	var out []string
	add := func(s attribute.Set) {
		for _, kv := range s.ToSlice() {
			out = append(out, kv.Value.String())
		}
	}
	switch d := m.Data.(type) {
	case metricdata.Sum[float64]:
		for _, dp := range d.DataPoints {
			add(dp.Attributes)
		}
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			add(dp.Attributes)
		}
	case metricdata.Gauge[float64]:
		for _, dp := range d.DataPoints {
			add(dp.Attributes)
		}
	}
	return out
}

// tierguard.cost names a model in the one normal form prices use: stages
// that spell the same model differently add to one series.
func TestLedgerMetricsNormaliseModelIDs(t *testing.T) {
	h := newHarness(t)
	prices, err := spend.NewPrices(spend.PriceTable{Currency: "USD", Prices: []spend.Price{
		{Model: "flash", Rates: spend.Rates{Input: spend.MustParseAmount("0.1"), Output: spend.MustParseAmount("1")}},
	}})
	require.NoError(t, err)
	l, err := spend.New(spend.Config{Prices: prices})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	li, err := otelx.InstrumentLedger(l, otelx.Options{MeterProvider: h.mp})
	require.NoError(t, err)
	defer li.Close()
	for _, model := range []string{"flash", " FLASH ", "models/flash"} {
		tier := &billedTier{name: "flash", out: billedOut{text: "ok", usage: fallback.Usage{InputTokens: 10, OutputTokens: 10}}}
		c, err := fallback.New(fallback.Config[string, billedOut]{Stages: []fallback.Stage[string, billedOut]{{Tier: tier, Model: model}}})
		require.NoError(t, err)
		_, err = l.Attach(c)
		require.NoError(t, err)
		tk, err := l.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{})
		require.NoError(t, err)
		_, err = c.Do(tk, "q")
		require.NoError(t, err)
		tk.End()
	}
	m, ok := ledgerMetric(h.collect(t), "tierguard.cost")
	require.True(t, ok)
	models := map[string]bool{}
	for _, dp := range m.Data.(metricdata.Sum[float64]).DataPoints {
		model, _ := dp.Attributes.Value("gen_ai.request.model")
		models[model.AsString()] = true
	}
	assert.Equal(t, map[string]bool{"flash": true}, models)
}
