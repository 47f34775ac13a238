package route_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/route"
	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// billed is a fake provider's answer (its usage goes to fallback.Report).
type billed struct {
	text string
}

// provider is a fake model API: every call takes 10 ms (of the bubble's
// clock), bills perCall and answers; every second answer of a provider
// with badEvery 2 is one the validator rejects (billed all the same). It
// keeps its own count of the tokens it billed: the truth the bounds are
// checked against.
type provider struct {
	name          string
	perCall       fallback.Usage
	badEvery      int64
	calls         atomic.Int64
	input, output atomic.Int64
}

func (p *provider) Name() string { return p.name }

func (p *provider) Call(ctx context.Context, _ string) (billed, error) {
	n := p.calls.Add(1)
	time.Sleep(10 * time.Millisecond)
	p.input.Add(p.perCall.InputTokens)
	p.output.Add(p.perCall.OutputTokens)
	fallback.Report(ctx, fallback.Reply{Usage: p.perCall, HasUsage: true})
	if p.badEvery > 0 && n%p.badEvery == 0 {
		return billed{text: "not json"}, nil
	}
	return billed{text: `{"ok":true}`}, nil
}

// truth prices what the provider says it billed.
func (p *provider) truth(t *testing.T, prices *spend.Prices) spend.Amount {
	t.Helper()
	c, ok := prices.Cost(p.name, "", fallback.Usage{InputTokens: p.input.Load(), OutputTokens: p.output.Load()})
	require.True(t, ok)
	return c
}

var validBilled = validate.Field(func(b billed) string { return b.text }, validate.JSON())

// reservePrices: a call of 1000 tokens in and 1000 out costs 0.011 on
// pro and 0.0088 on flash; exact in nano-units, whichever way it is
// summed.
func reservePrices(t *testing.T) *spend.Prices {
	t.Helper()
	p, err := spend.NewPrices(spend.PriceTable{Currency: "USD", Prices: []spend.Price{
		{Model: "pro", Rates: spend.Rates{Input: spend.MustParseAmount("1"), Output: spend.MustParseAmount("10")}},
		{Model: "flash", Rates: spend.Rates{Input: spend.MustParseAmount("0.8"), Output: spend.MustParseAmount("8")}},
	}})
	require.NoError(t, err)
	return p
}

// spendAtCapacity runs 64 concurrent callers of tenant acme (a daily cost
// limit of 100 calls on pro) through a route pro → flash of two calls at
// most, where half of pro's answers are rejected and paid for again on
// flash; each caller admits with the route's estimate until refused. It
// returns what the providers billed, the limit, the route's n and c, and
// what the ledger counted.
func spendAtCapacity(t *testing.T, reserve route.Reservation) (truth, limit, perCall spend.Amount, calls int, counted spend.Amount) {
	prices := reservePrices(t)
	perCall, _ = prices.Cost("pro", "", fallback.Usage{InputTokens: 1000, OutputTokens: 1000})
	limit = 100 * perCall
	l, err := spend.New(spend.Config{Prices: prices, Tenants: map[string]spend.Allowance{"acme": {DailyCost: limit}}})
	require.NoError(t, err)
	defer l.Close()
	u := fallback.Usage{InputTokens: 1000, OutputTokens: 1000}
	pro := &provider{name: "pro", perCall: u, badEvery: 2}
	flash := &provider{name: "flash", perCall: u}
	stage := func(p *provider) fallback.Stage[string, billed] {
		return fallback.Stage[string, billed]{Tier: p, Model: p.name, Validate: validBilled, Retry: retry.Policy{BaseDelay: 1, MaxDelay: 1}}
	}
	r, err := route.New(route.Config[string, billed]{Ledger: l, Routes: []route.Route[string, billed]{{
		Scenario: "support", MaxAttempts: 2, Reserve: reserve,
		Candidates: []route.Candidate[string, billed]{{Stage: stage(pro)}, {Stage: stage(flash)}},
	}}})
	require.NoError(t, err)
	rc, err := r.Lookup("acme", "support")
	require.NoError(t, err)
	calls = rc.Calls()

	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range 1000 { // far more than the limit lets through: a ledger that stopped counting fails, not hangs
				tk, err := l.Admit(context.Background(), spend.Request{Tenant: "acme", Scenario: "support"}, rc.Estimate(u))
				if err != nil {
					if !errors.Is(err, spend.ErrLimitReached) {
						t.Error(err)
					}
					return
				}
				if _, err := rc.Do(tk, "q"); err != nil {
					t.Error(err)
				}
				tk.End()
			}
		})
	}
	wg.Wait()
	return pro.truth(t, prices) + flash.truth(t, prices), limit, perCall, calls, l.Totals("acme").Cost
}

// ReserveOne can pass the limit by what requests in flight spend beyond
// one call, and no more: at most k·(n−1)·c, k = 64 callers.
func TestReserveOneBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		truth, limit, c, n, counted := spendAtCapacity(t, route.ReserveOne)
		assert.Equal(t, 2, n)
		assert.Equal(t, truth, counted, "the ledger counted what the providers billed")
		assert.Greater(t, truth, limit, "64 requests in flight near the limit, each reserving one call and paying up to two")
		assert.LessOrEqual(t, truth, limit+spend.Amount(64*(n-1))*c, "the documented bound")
		t.Logf("reserve one: %s spent against %s (+%.2f%%), bound +%s", truth, limit, 100*float64(truth-limit)/float64(limit), spend.Amount(64*(n-1))*c)
	})
}

// ReserveWorstCase never passes the limit. Before, the only reservation
// was one call, and the same run spent past it.
func TestReserveWorstCaseBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		truth, limit, _, n, counted := spendAtCapacity(t, route.ReserveWorstCase)
		assert.Equal(t, 2, n)
		assert.Equal(t, truth, counted, "the ledger counted what the providers billed")
		assert.LessOrEqual(t, truth, limit, "never past the limit")
		assert.Greater(t, truth, limit*9/10, "and the limit is still used: the rest of a reservation goes back")
		t.Logf("reserve worst case: %s spent against %s", truth, limit)
	})
}

// What each mode reserves, and how many calls a route may make.
func TestReservationEstimates(t *testing.T) {
	prices := reservePrices(t)
	l, err := spend.New(spend.Config{Prices: prices})
	require.NoError(t, err)
	defer l.Close()
	pro, flash := &tier{name: "pro"}, &tier{name: "flash"}
	hedged := cand(pro, "pro", "")
	hedged.Stage.Hedge = fallback.Hedge{Delay: time.Second}
	invalid := cand(pro, "pro", "")
	invalid.Stage.InvalidOutputRetries = 2
	defaults := cand(flash, "flash", "")
	defaults.Stage.Retry.MaxAttempts = 0
	r := newRouter(t, route.Config[string, string]{Ledger: l, Routes: []route.Route[string, string]{
		{Scenario: "one", MaxAttempts: 3, Candidates: []route.Candidate[string, string]{cand(pro, "pro", ""), cand(flash, "flash", "")}},
		{Scenario: "worst", MaxAttempts: 3, Reserve: route.ReserveWorstCase, Candidates: []route.Candidate[string, string]{cand(pro, "pro", ""), cand(flash, "flash", "")}},
		{Scenario: "defaults", Reserve: route.ReserveWorstCase, Candidates: []route.Candidate[string, string]{defaults}},
		{Scenario: "hedged", MaxAttempts: 2, Reserve: route.ReserveWorstCase, Candidates: []route.Candidate[string, string]{hedged, cand(flash, "flash", "")}},
		{Scenario: "invalid", MaxAttempts: 2, Reserve: route.ReserveWorstCase, Candidates: []route.Candidate[string, string]{invalid, cand(flash, "flash", "")}},
	}})
	u := fallback.Usage{InputTokens: 1000, OutputTokens: 1000}
	one := spend.Estimate{Tokens: 2000, Cost: spend.MustParseAmount("0.011")}
	for _, tc := range []struct {
		scenario string
		calls    int
		est      spend.Estimate
	}{
		{"one", 3, one},
		{"worst", 3, spend.Estimate{Tokens: 3 * 2000, Cost: 3 * one.Cost}},
		{"defaults", 3, spend.Estimate{Tokens: 3 * 2000, Cost: 3 * spend.MustParseAmount("0.0088")}}, // retry's default: 3 attempts
		{"hedged", 3, spend.Estimate{Tokens: 3 * 2000, Cost: 3 * one.Cost}},                          // pro's one attempt and its hedge, flash's one
		{"invalid", 4, spend.Estimate{Tokens: 4 * 2000, Cost: 4 * one.Cost}},                         // pro's one attempt and two invalid retries, flash's one
	} {
		c, err := r.Lookup("acme", tc.scenario)
		require.NoError(t, err)
		assert.Equal(t, tc.calls, c.Calls(), tc.scenario)
		assert.Equal(t, tc.est, c.Estimate(u), tc.scenario)
	}

	// A worst case needs a bound; an unknown cost stays unknown.
	unbounded := cand(pro, "pro", "")
	unbounded.Stage.Retry.MaxAttempts = -1
	_, err = route.New(route.Config[string, string]{Routes: []route.Route[string, string]{
		{Scenario: "forever", Reserve: route.ReserveWorstCase, Candidates: []route.Candidate[string, string]{unbounded}},
		{Scenario: "odd", Reserve: route.Reservation(7), Candidates: []route.Candidate[string, string]{cand(pro, "pro", "")}},
	}})
	require.Error(t, err)
	assert.ErrorContains(t, err, `Routes[0] (scenario "forever"): Reserve: ReserveWorstCase needs a bounded number of calls`)
	assert.ErrorContains(t, err, `Routes[1] (scenario "odd"): Reserve: unknown reservation 7`)
	r = newRouter(t, route.Config[string, string]{Ledger: l, Routes: []route.Route[string, string]{
		{Scenario: "unpriced", MaxAttempts: 2, Reserve: route.ReserveWorstCase, Candidates: []route.Candidate[string, string]{cand(pro, "pro", ""), cand(flash, "flash-9", "")}},
	}})
	c, err := r.Lookup("acme", "unpriced")
	require.NoError(t, err)
	assert.Equal(t, spend.Estimate{Tokens: 4000, Cost: spend.UnknownCost}, c.Estimate(u))
	assert.Equal(t, "reserve_worst_case", route.ReserveWorstCase.String())
}
