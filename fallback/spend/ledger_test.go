package spend_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/retry"
)

// pro costs 1.25 in / 10 out per million tokens, flash 0.3 / 2.5.
var (
	proIn, proOut     = amt("1.25"), amt("10")
	flashIn, flashOut = amt("0.3"), amt("2.5")
)

func perM(tokens int64, rate spend.Amount) spend.Amount {
	return spend.Amount(tokens * int64(rate) / 1_000_000)
}

// Cost per valid result counts every attempt, the rejected ones included,
// over the requests a tier answered: not over calls.
func TestCostPerValidResult(t *testing.T) {
	l := newLedger(t, spend.Config{Prices: testPrices(t)})
	pro := &tier{name: "pro", def: answer(1000, 100), steps: []step{malformed(2000, 500)}}
	flash := &tier{name: "flash", def: answer(1000, 200)}
	c := newChain(t, l, pro, flash)
	req := spend.Request{Tenant: "acme", Scenario: "support"}

	// Request 1: pro's answer is malformed (billed, not retried), flash answers.
	res, err := do(t, l, c, req, spend.Estimate{})
	require.NoError(t, err)
	require.Equal(t, "flash", res.Tier)
	// Request 2: pro answers.
	res, err = do(t, l, c, req, spend.Estimate{})
	require.NoError(t, err)
	require.Equal(t, "pro", res.Tier)

	rejected := perM(2000, proIn) + perM(500, proOut)
	flashAnswer := perM(1000, flashIn) + perM(200, flashOut)
	proAnswer := perM(1000, proIn) + perM(100, proOut)
	tot := l.Totals("acme")
	assert.Equal(t, int64(2), tot.Requests)
	assert.Equal(t, int64(2), tot.Valid)
	assert.Equal(t, int64(1), tot.PrimaryAnswered)
	assert.Equal(t, int64(3), tot.Calls)
	assert.Equal(t, rejected+flashAnswer+proAnswer, tot.Cost)
	assert.Equal(t, (rejected+flashAnswer+proAnswer)/2, tot.CostPerValid())
	assert.Equal(t, rejected, tot.FailedCost)
	assert.Equal(t, fallback.Usage{InputTokens: 4000, OutputTokens: 800}, tot.Usage)
	assert.InDelta(t, 0.5, tot.PrimarySuccessRate(), 1e-9)
	assert.InDelta(t, 1.0, tot.SuccessRate(), 1e-9)
	assert.InDelta(t, 1.5, tot.CallsPerSuccess(), 1e-9)
	assert.Equal(t, int64(1), tot.Degraded)
	// The malformed answer's cost is the InvalidOutput class's, and so is
	// the fallback it caused.
	inv := tot.ByClass[classify.InvalidOutput]
	assert.Equal(t, int64(1), inv.Attempts)
	assert.Equal(t, rejected, inv.Cost)
	assert.Equal(t, int64(1), inv.Fallbacks)
	assert.Equal(t, flashAnswer, inv.FallbackCost)
	// Per model: pro twice, flash once.
	require.Len(t, tot.ByModel, 2)
	assert.Equal(t, spend.ModelTotals{Model: "pro", Calls: 2, Usage: fallback.Usage{InputTokens: 3000, OutputTokens: 600}, Cost: rejected + proAnswer}, tot.ByModel[0])
	assert.Equal(t, spend.ModelTotals{Model: "flash", Calls: 1, Usage: fallback.Usage{InputTokens: 1000, OutputTokens: 200}, Cost: flashAnswer}, tot.ByModel[1])
	assert.Equal(t, tot.Cost, l.AllTotals().Cost)
	assert.Equal(t, []string{"acme"}, l.Tenants())
}

// The extra cost of a fallback goes to the class that made the request
// leave its first tier: a 429 storm's retries and fallbacks show under
// RateLimited, for the tenant that paid them. FallbackExtra is what the
// fallback's tokens cost beyond what they would have on the first tier.
func TestExtraFallbackCostAttributedToTheCause(t *testing.T) {
	l := newLedger(t, spend.Config{Prices: testPrices(t)})
	// pro: 429, 429 (retried once, then given up); a gpt fallback priced
	// above pro, so that the fallback costs extra.
	pro := &tier{name: "pro", def: failure(classify.RateLimited)}
	gpt := &tier{name: "gpt", def: answer(1000, 1000)}
	c, err := fallback.New(fallback.Config[string, reply]{Stages: []fallback.Stage[string, reply]{
		{Tier: pro, Model: "pro", Retry: retry.Policy{MaxAttempts: 3, BaseDelay: 1, MaxDelay: 1}},
		{Tier: gpt, Model: "gpt-4.1"},
	}})
	require.NoError(t, err)
	_, err = l.Attach(c)
	require.NoError(t, err)

	for range 3 {
		tk, err := l.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{})
		require.NoError(t, err)
		_, err = c.Do(tk, "q")
		require.NoError(t, err)
	}
	// An unrelated tenant whose primary answers.
	other := &tier{name: "pro", def: answer(10, 10)}
	c2 := newChain(t, l, other, &tier{name: "flash"})
	_, err = do(t, l, c2, spend.Request{Tenant: "globex"}, spend.Estimate{})
	require.NoError(t, err)

	gptCost := perM(1000, amt("1")) + perM(1000, amt("4")) + amt("0.001")
	sameOnPro := perM(1000, proIn) + perM(1000, proOut)
	tot := l.Totals("acme")
	rl := tot.ByClass[classify.RateLimited]
	assert.Equal(t, int64(12), tot.Calls, "three calls to pro and one to gpt per request")
	assert.Equal(t, int64(9), rl.Attempts)
	assert.Equal(t, spend.Amount(0), rl.Cost, "a 429 is not billed")
	assert.Equal(t, int64(3), rl.Fallbacks)
	assert.Equal(t, 3*gptCost, rl.FallbackCost)
	assert.Equal(t, 3*(gptCost-sameOnPro), rl.FallbackExtra)
	assert.Equal(t, tot.FallbackExtra, rl.FallbackExtra)
	assert.Equal(t, int64(3), tot.Fallbacks)
	assert.Equal(t, int64(0), l.Totals("globex").Fallbacks)
	assert.Equal(t, spend.Amount(0), l.Totals("globex").FallbackExtra)
}

// Billed failed attempts that were retried are the retry's extra cost.
func TestRetryCost(t *testing.T) {
	l := newLedger(t, spend.Config{Prices: testPrices(t)})
	// A transient failure that still returned a billed partial answer,
	// then a success on the retry.
	partial := failure(classify.Transient)
	partial.out = reply{Usage: fallback.Usage{InputTokens: 1000, OutputTokens: 10}}
	pro := &tier{name: "pro", steps: []step{partial}, def: answer(1000, 100)}
	c := newChain(t, l, pro, &tier{name: "flash"})
	res, err := do(t, l, c, spend.Request{Tenant: "acme"}, spend.Estimate{})
	require.NoError(t, err)
	require.Equal(t, 2, res.UpstreamCalls)
	partialCost := perM(1000, proIn) + perM(10, proOut)
	tot := l.Totals("acme")
	assert.Equal(t, partialCost, tot.RetryCost)
	assert.Equal(t, partialCost, tot.ByClass[classify.Transient].RetryCost)
	assert.Equal(t, int64(1), tot.PrimaryAnswered)
	assert.Equal(t, int64(0), tot.Fallbacks)
}

// A skipped first tier attributes the fallback to the skip's reason.
func TestSkipCause(t *testing.T) {
	l := newLedger(t, spend.Config{Prices: testPrices(t)})
	pro := &tier{name: "pro", def: failure(classify.QuotaExhausted)}
	flash := &tier{name: "flash", def: answer(100, 100)}
	c := newChain(t, l, pro, flash)
	for range 2 {
		_, err := do(t, l, c, spend.Request{Tenant: "acme"}, spend.Estimate{})
		require.NoError(t, err)
	}
	assert.Equal(t, 1, pro.Calls(), "the quota parks pro")
	q := l.Totals("acme").ByClass[classify.QuotaExhausted]
	assert.Equal(t, int64(2), q.Fallbacks, "the 429 and the skip of the parked tier")
}

// Records carry every attempt, priced, and the request's identity, also
// past the attempts a Ticket holds inline.
func TestRecords(t *testing.T) {
	l := newLedger(t, spend.Config{Prices: testPrices(t)})
	var got []spend.Record
	remove := l.ObserveRecords(func(r *spend.Record) {
		c := *r
		c.Attempts() // a copy keeps its attempts
		got = append(got, c)
	})
	defer remove()
	fast := retry.Policy{MaxAttempts: 3, BaseDelay: 1, MaxDelay: 1}
	c, err := fallback.New(fallback.Config[string, reply]{Stages: []fallback.Stage[string, reply]{
		{Tier: &tier{name: "pro", steps: []step{malformed(10, 10)}}, Model: "pro", Validate: validJSON},
		{Tier: &tier{name: "lite", def: failure(classify.Transient)}, Model: "lite", Retry: fast},
		{Tier: &tier{name: "flash", def: answer(100, 100)}, Model: "flash"},
	}})
	require.NoError(t, err)
	_, err = l.Attach(c, "", "", "batch")
	require.NoError(t, err)
	tk, err := l.Admit(context.Background(), spend.Request{ID: "r-1", Tenant: "acme", Scenario: "batch_seo", Feature: "titles"}, spend.Estimate{Tokens: 500})
	require.NoError(t, err)
	_, err = c.Do(tk, "q")
	require.NoError(t, err)
	tk.End() // idempotent: the chain's end closed the ticket

	require.Len(t, got, 1)
	r := got[0]
	assert.Equal(t, "r-1", r.Request.ID)
	assert.Equal(t, "batch_seo", r.Request.Scenario)
	assert.Equal(t, "titles", r.Request.Feature)
	assert.True(t, r.Answered && r.Valid && r.Degraded && r.Ended)
	assert.Equal(t, "flash", r.Tier)
	assert.Equal(t, 2, r.TierIndex)
	assert.Equal(t, classify.InvalidOutput, r.Cause)
	assert.Equal(t, int64(500), r.Estimate.Tokens)
	assert.Equal(t, 5, r.Calls)
	a := tk.Record().Attempts()
	require.Len(t, a, 5)
	assert.Equal(t, spend.AttemptCost{Tier: "pro", Model: "pro", N: 1, Class: classify.InvalidOutput,
		Usage: fallback.Usage{InputTokens: 10, OutputTokens: 10}, Billed: true, Priced: true, Cost: perM(10, proIn) + perM(10, proOut)}, withoutPrice(a[0]))
	for i := 1; i <= 3; i++ {
		assert.Equal(t, "lite", a[i].Tier)
		assert.Equal(t, i, a[i].N)
		assert.Equal(t, i < 3, a[i].Retried)
		assert.False(t, a[i].Billed)
	}
	assert.Equal(t, "batch", a[4].CostGroup)
	assert.Equal(t, perM(100, amt("0.1"))+perM(100, amt("1")), a[4].Cost, "flash in the batch group has its own price")
	assert.Equal(t, a[0].Cost+a[4].Cost, r.Cost)
	assert.Equal(t, int64(0), l.Totals("acme").Unpriced, "lite has no price, but it billed nothing")
}

// withoutPrice clears the unexported price index, for comparison.
func withoutPrice(a spend.AttemptCost) spend.AttemptCost {
	return spend.AttemptCost{Tier: a.Tier, TierIndex: a.TierIndex, Model: a.Model, CostGroup: a.CostGroup, N: a.N, Class: a.Class,
		Retried: a.Retried, Usage: a.Usage, Billed: a.Billed, Priced: a.Priced, Cost: a.Cost}
}

// Once 429s open the first tier's breaker, the requests that skip it are
// still the 429s' fallbacks: a skip past an open breaker is attributed to
// the last failure seen on its model.
func TestOpenBreakerSkipsKeepTheirCause(t *testing.T) {
	l := newLedger(t, spend.Config{Prices: testPrices(t)})
	br, err := breaker.New(breaker.Config{Name: "pro", ConsecutiveFailures: 2, Cooldown: time.Hour})
	require.NoError(t, err)
	defer br.Reset()
	pro := &tier{name: "pro", def: failure(classify.RateLimited)}
	c, err := fallback.New(fallback.Config[string, reply]{Stages: []fallback.Stage[string, reply]{
		{Tier: pro, Model: "pro", Breaker: br, Retry: retry.Policy{MaxAttempts: 1}},
		{Tier: &tier{name: "flash", def: answer(10, 10)}, Model: "flash"},
	}})
	require.NoError(t, err)
	_, err = l.Attach(c)
	require.NoError(t, err)
	for range 5 {
		_, err := do(t, l, c, spend.Request{Tenant: "acme"}, spend.Estimate{})
		require.NoError(t, err)
	}
	assert.Equal(t, 2, pro.Calls(), "the breaker opened after two 429s")
	tot := l.Totals("acme")
	assert.Equal(t, int64(5), tot.ByClass[classify.RateLimited].Fallbacks)
	assert.Equal(t, int64(0), tot.ByClass[classify.Rejected].Fallbacks)
}

// TestJoinedRequestsAreRecorded: requests that join a shared execution
// (Config.Key) are requests of their own for the ledger: answered, valid,
// at no cost of their own; the one execution is billed once, to the
// request that started it.
func TestJoinedRequestsAreRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLedger(t, spend.Config{Prices: testPrices(t)})
		release := make(chan struct{})
		var calls atomic.Int64
		pro := fallback.Tier("pro", func(context.Context, string) (reply, error) {
			calls.Add(1)
			<-release
			return answer(1000, 100).out, nil
		})
		c, err := fallback.New(fallback.Config[string, reply]{
			Stages: []fallback.Stage[string, reply]{{Tier: usageOf{pro}, Model: "pro", Validate: validJSON}},
			Key:    func(in string) string { return in },
		})
		require.NoError(t, err)
		_, err = l.Attach(c)
		require.NoError(t, err)

		const n = 3
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				tk := l.Begin(context.Background(), spend.Request{Tenant: "acme"})
				defer tk.End()
				res, err := c.Do(tk, "q")
				assert.NoError(t, err)
				assert.Equal(t, "pro", res.Tier)
			})
			synctest.Wait() // the first starts the execution, the others join it
		}
		close(release)
		wg.Wait()

		tot := l.Totals("acme")
		assert.Equal(t, int64(1), calls.Load(), "one execution")
		assert.Equal(t, int64(n), tot.Requests)
		assert.Equal(t, int64(n), tot.Valid, "every caller got a valid answer")
		assert.Zero(t, tot.Failed)
		assert.Equal(t, int64(1), tot.Calls, "billed once")
		assert.Equal(t, perM(1000, proIn)+perM(100, proOut), tot.Cost)
	})
}

// usageOf makes a tier report its replies' usage.
type usageOf struct {
	fallback.ModelTier[string, reply]
}

func (u usageOf) Call(ctx context.Context, in string) (reply, error) {
	r, err := u.ModelTier.Call(ctx, in)
	if r.Usage != (fallback.Usage{}) {
		fallback.Report(ctx, fallback.Reply{Usage: r.Usage, HasUsage: true})
	}
	return r, err
}
