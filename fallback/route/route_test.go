package route_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/pool"
	"github.com/tierguard/tierguard/fallback/route"
	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/retry"
)

// tier answers with its name, or fails with its class; it counts its
// calls and records whether it was allowed to write.
type tier struct {
	name   string
	fail   classify.Class
	calls  atomic.Int64
	writes atomic.Int64
}

func (t *tier) Name() string { return t.name }

func (t *tier) Call(ctx context.Context, _ string) (string, error) {
	t.calls.Add(1)
	if route.WritesAllowed(ctx) {
		t.writes.Add(1)
	}
	if t.fail != classify.OK {
		return "", classify.Wrap(errors.New(t.name+" failed"), classify.Verdict{Class: t.fail, Reason: "scripted"})
	}
	fallback.Report(ctx, fallback.Reply{Usage: fallback.Usage{InputTokens: 1000, OutputTokens: 1000}, HasUsage: true})
	return t.name, nil
}

func cand(t *tier, model, group string) route.Candidate[string, string] {
	return route.Candidate[string, string]{Stage: fallback.Stage[string, string]{Tier: t, Model: model, Retry: retry.Policy{BaseDelay: 1, MaxDelay: 1}}, CostGroup: group}
}

func newRouter(t *testing.T, cfg route.Config[string, string]) *route.Router[string, string] {
	t.Helper()
	r, err := route.New(cfg)
	require.NoError(t, err)
	return r
}

func TestLookup(t *testing.T) {
	pro, flash, cheap := &tier{name: "pro"}, &tier{name: "flash"}, &tier{name: "cheap"}
	r := newRouter(t, route.Config[string, string]{Routes: []route.Route[string, string]{
		{Scenario: "support", Candidates: []route.Candidate[string, string]{cand(pro, "pro", ""), cand(flash, "flash", "")}},
		{Scenario: "support", Tenant: "acme", Candidates: []route.Candidate[string, string]{cand(flash, "flash", "")}},
		{Scenario: "batch_seo", Tenant: "acme", Candidates: []route.Candidate[string, string]{cand(cheap, "cheap", "batch")}},
	}})
	c, err := r.Lookup("globex", "support")
	require.NoError(t, err)
	assert.Equal(t, "pro", c.Chain.Stages()[0].Tier)
	c, err = r.Lookup("acme", "support")
	require.NoError(t, err)
	assert.Equal(t, "flash", c.Chain.Stages()[0].Tier)
	assert.Equal(t, "acme", c.Route().Tenant)

	// A scenario nobody declared is a configuration error, not a default
	// route; its text names the scenario, never the tenant.
	_, err = r.Lookup("acme", "medical")
	require.ErrorIs(t, err, route.ErrUnknownScenario)
	assert.Equal(t, `route: unknown scenario "medical"`, err.Error())
	var le *route.LookupError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, "acme", le.Tenant)
	_, err = r.Lookup("globex", "batch_seo")
	require.ErrorIs(t, err, route.ErrNoRoute)
	assert.NotContains(t, err.Error(), "globex")

	// The lookup allocates nothing.
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		if _, err := r.Lookup("acme", "support"); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Lookup("globex", "support"); err != nil {
			t.Fatal(err)
		}
	}))
}

func TestConfigErrors(t *testing.T) {
	a, b := &tier{name: "a"}, &tier{name: "b"}
	_, err := route.New(route.Config[string, string]{
		Base: fallback.Config[string, string]{Total: 1},
		Routes: []route.Route[string, string]{
			{Scenario: "", Candidates: []route.Candidate[string, string]{cand(a, "a", "")}},
			{Scenario: "risk", Fallback: route.FailClosed, Candidates: []route.Candidate[string, string]{cand(a, "a", ""), cand(b, "b", "")}},
			{Scenario: "medical", Fallback: route.FailClosed, Candidates: []route.Candidate[string, string]{cand(a, "a", "")},
				Default: func(context.Context, string) (string, bool) { return "ok", true }},
			{Scenario: "support", Candidates: []route.Candidate[string, string]{cand(a, "a", "")}},
			{Scenario: "support", Candidates: []route.Candidate[string, string]{cand(b, "b", "")}},
			{Scenario: "capped", MaxAttempts: 2, Candidates: []route.Candidate[string, string]{{Stage: cand(a, "a", "").Stage, Attempts: 2}, cand(b, "b", "")}},
			{Scenario: "empty"},
			{Scenario: "bad", Candidates: []route.Candidate[string, string]{{Stage: fallback.Stage[string, string]{}}}},
		},
	})
	require.Error(t, err)
	for _, want := range []string{
		"Base: Stages, Total, Cache and Default belong to each route",
		`Routes[0] (scenario ""): Scenario is required`,
		`Routes[1] (scenario "risk"): a FailClosed route lets only its first candidate answer; it lists 2`,
		`Routes[2] (scenario "medical"): a FailClosed route answers from no cache and no default`,
		`Routes[4] (scenario "support"): declared twice`,
		`Routes[5] (scenario "capped"): its candidates need 3 attempts at least ([2 1]), more than MaxAttempts 2`,
		`Routes[6] (scenario "empty"): at least one candidate is required`,
		`Routes[7] (scenario "bad"): `,
	} {
		assert.Contains(t, err.Error(), want)
	}
}

// MaxAttempts caps the calls of a request over every candidate: with
// both tiers failing, a route of three attempts makes three calls, two to
// the first candidate and one to the fallback.
func TestMaxAttempts(t *testing.T) {
	pro, flash := &tier{name: "pro", fail: classify.Transient}, &tier{name: "flash", fail: classify.Transient}
	r := newRouter(t, route.Config[string, string]{Routes: []route.Route[string, string]{
		{Scenario: "support", MaxAttempts: 3, Candidates: []route.Candidate[string, string]{cand(pro, "pro", ""), cand(flash, "flash", "")}},
	}})
	res, err := r.Do(fallback.WithRequest(context.Background(), fallback.Request{Tenant: "acme", Scenario: "support"}), "q")
	require.Error(t, err)
	assert.Equal(t, 3, res.UpstreamCalls)
	assert.Equal(t, int64(2), pro.calls.Load())
	assert.Equal(t, int64(1), flash.calls.Load())
}

// A FailClosed route answers from its first candidate or not at all.
func TestFailClosed(t *testing.T) {
	model := &tier{name: "risk-model", fail: classify.Transient}
	r := newRouter(t, route.Config[string, string]{Routes: []route.Route[string, string]{
		{Scenario: "risk", Fallback: route.FailClosed, MaxAttempts: 1, Candidates: []route.Candidate[string, string]{cand(model, "risk-model", "")}},
	}})
	res, err := r.Do(fallback.WithRequest(context.Background(), fallback.Request{Tenant: "acme", Scenario: "risk"}), "q")
	require.Error(t, err)
	var fe *fallback.Error
	require.ErrorAs(t, err, &fe)
	assert.False(t, res.Degraded)
	assert.Equal(t, int64(1), model.calls.Load())
}

// A read-only fallback cannot write, the answer says it came from one,
// and a degraded answer is marked for the user when the route asks.
func TestReadOnlyFallbackAndDegraded(t *testing.T) {
	pro, flash := &tier{name: "pro", fail: classify.RateLimited}, &tier{name: "flash"}
	r := newRouter(t, route.Config[string, string]{Routes: []route.Route[string, string]{
		{Scenario: "support", MarkDegraded: true, ReadOnlyFallback: true, MaxAttempts: 2,
			Candidates: []route.Candidate[string, string]{cand(pro, "pro", ""), cand(flash, "flash", "")}},
		{Scenario: "draft", Candidates: []route.Candidate[string, string]{cand(pro, "pro", ""), cand(flash, "flash", "")}},
	}})
	res, err := r.Do(fallback.WithRequest(context.Background(), fallback.Request{Tenant: "acme", Scenario: "support"}), "q")
	require.NoError(t, err)
	assert.Equal(t, "flash", res.Value)
	assert.True(t, res.Degraded && res.ShowDegraded && res.ReadOnly)
	assert.Equal(t, int64(1), pro.writes.Load(), "the first candidate may write")
	assert.Equal(t, int64(0), flash.writes.Load(), "the fallback may not")

	res, err = r.Do(fallback.WithRequest(context.Background(), fallback.Request{Tenant: "acme", Scenario: "draft"}), "q")
	require.NoError(t, err)
	assert.True(t, res.Degraded)
	assert.False(t, res.ShowDegraded || res.ReadOnly)
	assert.Equal(t, int64(1), flash.writes.Load(), "the draft route's fallback may write")
}

// recordingLedger returns a ledger that prices pro and flash, half price
// in the batch group, and the records of the requests it ends.
func recordingLedger(t *testing.T) (*spend.Ledger, *[]spend.Record) {
	t.Helper()
	prices, err := spend.NewPrices(spend.PriceTable{Currency: "USD", CostGroups: map[string]float64{"batch": 0.5}, Prices: []spend.Price{
		{Model: "pro", Rates: spend.Rates{Input: spend.MustParseAmount("1"), Output: spend.MustParseAmount("10")}},
		{Model: "flash", Rates: spend.Rates{Input: spend.MustParseAmount("0.1"), Output: spend.MustParseAmount("1")}},
	}})
	require.NoError(t, err)
	l, err := spend.New(spend.Config{Prices: prices})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	recs := new([]spend.Record)
	l.ObserveRecords(func(r *spend.Record) {
		c := *r
		c.Attempts()
		*recs = append(*recs, c)
	})
	return l, recs
}

// With a ledger, every route's chain is attached with its candidates'
// cost groups; the tenant and scenario come from the ticket; a route's
// estimate holds for its dearest candidate.
func TestLedger(t *testing.T) {
	l, recs := recordingLedger(t)
	pro, flash := &tier{name: "pro", fail: classify.RateLimited}, &tier{name: "flash"}
	r := newRouter(t, route.Config[string, string]{Ledger: l, Routes: []route.Route[string, string]{
		{Scenario: "batch_seo", MaxAttempts: 2, Candidates: []route.Candidate[string, string]{cand(pro, "pro", "batch"), cand(flash, "flash", "batch")}},
	}})
	tk, err := l.Admit(context.Background(), spend.Request{Tenant: "acme", Scenario: "batch_seo"}, spend.Estimate{})
	require.NoError(t, err)
	res, err := r.Do(tk, "q")
	require.NoError(t, err)
	assert.Equal(t, "flash", res.Value)
	require.Len(t, *recs, 1)
	a := (*recs)[0].Attempts()
	require.Len(t, a, 2)
	assert.Equal(t, "batch", a[1].CostGroup)
	assert.Equal(t, spend.MustParseAmount("0.00055"), a[1].Cost, "flash at half price: 1000 in at 0.05, 1000 out at 0.5")
	assert.Equal(t, classify.RateLimited, (*recs)[0].Cause)

	c, err := r.Lookup("acme", "batch_seo")
	require.NoError(t, err)
	est := c.Estimate(fallback.Usage{InputTokens: 1000, OutputTokens: 1000})
	assert.Equal(t, spend.Estimate{Tokens: 2000, Cost: spend.MustParseAmount("0.0055")}, est, "pro's batch price, the dearer")

	// A request that names no scenario has no route to take.
	_, err = r.Do(context.Background(), "q")
	assert.ErrorContains(t, err, `unknown scenario ""`)
}

// A route with a candidate the ledger cannot price: its estimate says so,
// and a tenant with a cost limit is refused the request rather than let
// it spend outside its limit.
func TestEstimateOfAnUnpricedCandidate(t *testing.T) {
	prices, err := spend.NewPrices(spend.PriceTable{Currency: "USD", Prices: []spend.Price{
		{Model: "pro", Rates: spend.Rates{Input: spend.MustParseAmount("1"), Output: spend.MustParseAmount("10")}},
	}})
	require.NoError(t, err)
	l, err := spend.New(spend.Config{Prices: prices, Tenants: map[string]spend.Allowance{"acme": {DailyCost: spend.MustParseAmount("5")}}})
	require.NoError(t, err)
	defer l.Close()
	r := newRouter(t, route.Config[string, string]{Ledger: l, Routes: []route.Route[string, string]{
		{Scenario: "support", MaxAttempts: 2, Candidates: []route.Candidate[string, string]{cand(&tier{name: "pro"}, "pro", ""), cand(&tier{name: "flash"}, "Flash-002", "")}},
	}})
	c, err := r.Lookup("acme", "support")
	require.NoError(t, err)
	est := c.Estimate(fallback.Usage{InputTokens: 1000, OutputTokens: 1000})
	assert.Equal(t, spend.Estimate{Tokens: 2000, Cost: spend.UnknownCost}, est, "flash-002 has no price: the cost is unknown")
	assert.True(t, est.Unpriced())
	_, err = l.Admit(context.Background(), spend.Request{Tenant: "acme", Scenario: "support"}, est)
	require.ErrorIs(t, err, spend.ErrUnpriced)
}

func BenchmarkLookup(b *testing.B) {
	r, err := route.New(route.Config[string, string]{Routes: []route.Route[string, string]{
		{Scenario: "support", Candidates: []route.Candidate[string, string]{cand(&tier{name: "pro"}, "pro", "")}},
		{Scenario: "support", Tenant: "acme", Candidates: []route.Candidate[string, string]{cand(&tier{name: "flash"}, "flash", "")}},
		{Scenario: "batch", Candidates: []route.Candidate[string, string]{cand(&tier{name: "lite"}, "lite", "")}},
	}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Lookup("globex", "batch"); err != nil {
			b.Fatal(err)
		}
	}
}

// A read-only fallback still shows the chain what it wraps: a pool's
// members' breakers, which otelx watches with the stage.
func TestReadOnlyFallbackUnwraps(t *testing.T) {
	b, err := breaker.New(breaker.Config{Name: "flash-key-a"})
	require.NoError(t, err)
	keys, err := pool.New(pool.Config[string, string]{Name: "flash", Members: []pool.Member[string, string]{{Key: "key-a", Tier: &tier{name: "flash"}, Breaker: b}}})
	require.NoError(t, err)
	r := newRouter(t, route.Config[string, string]{Routes: []route.Route[string, string]{
		{Scenario: "support", ReadOnlyFallback: true, Candidates: []route.Candidate[string, string]{
			cand(&tier{name: "pro"}, "pro", ""), {Stage: fallback.Stage[string, string]{Tier: keys, Model: "flash"}}}},
	}})
	assert.Equal(t, []*breaker.Breaker{b}, r.Chains()[0].Stages()[1].MemberBreakers)
}
