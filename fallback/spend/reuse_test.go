package spend_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/spend"
)

// A Ticket reused with AdmitInto starts each request afresh: nothing of
// the previous request (its attempts, spilled or inline, its tier, its
// figures, its identity) reaches the next one's Record or totals.
func TestTicketReuseStartsAfresh(t *testing.T) {
	l := newLedger(t, spend.Config{Prices: testPrices(t)})
	pro := &tier{name: "pro", steps: []step{failure(classify.Transient), failure(classify.Transient)}, def: answer(10, 10)}
	flash := &tier{name: "flash", def: answer(100, 100)}
	c := newChain(t, l, pro, flash)
	var tk spend.Ticket

	// Three attempts, past the ticket's inline room for its last ones.
	require.NoError(t, l.AdmitInto(&tk, context.Background(), spend.Request{ID: "r-1", Tenant: "acme", Scenario: "support", Feature: "chat", Priority: spend.Low}, spend.Estimate{Tokens: 10}))
	_, err := c.Do(&tk, "q")
	require.NoError(t, err)
	tk.End()
	first := tk.Record()
	assert.Len(t, first.Attempts(), 3)
	assert.Equal(t, "flash", first.Tier)
	assert.Equal(t, spend.Request{ID: "r-1", Tenant: "acme", Scenario: "support", Feature: "chat", Priority: spend.Low}, first.Request)

	// The next request never reaches the chain: End closes it.
	require.NoError(t, l.AdmitInto(&tk, context.Background(), spend.Request{Tenant: "globex"}, spend.Estimate{}))
	assert.Equal(t, fallback.Request{Tenant: "globex"}, fallback.RequestFrom(&tk))
	tk.End()
	second := tk.Record()
	assert.Equal(t, spend.Record{Request: spend.Request{Tenant: "globex"}, TierIndex: -1}, withoutAttempts(second))
	assert.Empty(t, second.Attempts())

	// And one answered at once, inline.
	require.NoError(t, l.AdmitInto(&tk, context.Background(), spend.Request{Tenant: "globex"}, spend.Estimate{}))
	_, err = c.Do(&tk, "q")
	require.NoError(t, err)
	third := tk.Record()
	require.Len(t, third.Attempts(), 1)
	assert.Equal(t, "pro", third.Tier)
	assert.Equal(t, 0, third.TierIndex)
	assert.Equal(t, classify.OK, third.Cause)
	assert.Zero(t, third.FailedCost+third.FallbackCost)

	g := l.Totals("globex")
	assert.Equal(t, int64(2), g.Requests)
	assert.Equal(t, int64(1), g.Calls)
	assert.Equal(t, int64(1), g.Failed, "the request End closed")
	assert.Equal(t, int64(3), l.Totals("acme").Calls)
}

// withoutAttempts is r without its attempts, for comparison.
func withoutAttempts(r spend.Record) spend.Record {
	return spend.Record{Request: r.Request, Estimate: r.Estimate, Ended: r.Ended, Answered: r.Answered, Valid: r.Valid,
		Degraded: r.Degraded, Source: r.Source, Tier: r.Tier, TierIndex: r.TierIndex, Calls: r.Calls, Usage: r.Usage, Cost: r.Cost,
		FailedCost: r.FailedCost, RetryCost: r.RetryCost, FallbackCost: r.FallbackCost, FallbackExtra: r.FallbackExtra, Cause: r.Cause}
}

// The Record ObserveRecords hands out is reused, as its doc says: a
// request whose Record is observed allocates no more than one that is
// not, and each function sees its own request's figures.
func TestObservedRecordIsReused(t *testing.T) {
	l := newLedger(t, spend.Config{Prices: testPrices(t)})
	c := newChain(t, l, &tier{name: "pro", def: answer(10, 10)}, &tier{name: "flash", def: answer(100, 100)})
	var tk spend.Ticket
	run := func(tenant string) {
		if err := l.AdmitInto(&tk, context.Background(), spend.Request{Tenant: tenant}, spend.Estimate{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Do(&tk, "q"); err != nil {
			t.Fatal(err)
		}
		tk.End()
	}
	run("warm")
	unobserved := testing.AllocsPerRun(50, func() { run("acme") })
	var seen []string
	var calls int
	remove := l.ObserveRecords(func(r *spend.Record) {
		seen = append(seen[:0], r.Request.Tenant)
		calls += r.Calls
	})
	defer remove()
	run("globex")
	assert.Equal(t, []string{"globex"}, seen)
	observed := testing.AllocsPerRun(50, func() { run("acme") })
	assert.Equal(t, []string{"acme"}, seen)
	assert.Equal(t, 52, calls, "one call per request")
	assert.Equal(t, unobserved, observed)
}

// A ticket's request carries the slot priority its caller's context set,
// the one bulkheads read through the ticket.
func TestTicketCarriesTheSlotPriority(t *testing.T) {
	l := newLedger(t, spend.Config{Prices: testPrices(t)})
	ctx := fallback.WithRequest(context.Background(), fallback.Request{Priority: bulkhead.Batch})
	tk, err := l.Admit(ctx, spend.Request{Tenant: "acme", Scenario: "support"}, spend.Estimate{})
	require.NoError(t, err)
	defer tk.End()
	assert.Equal(t, fallback.Request{Tenant: "acme", Scenario: "support", Priority: bulkhead.Batch}, fallback.RequestFrom(tk))
	assert.Equal(t, bulkhead.Batch, bulkhead.PriorityFrom(tk))
	plain, err := l.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{})
	require.NoError(t, err)
	defer plain.End()
	assert.Equal(t, bulkhead.Interactive, fallback.RequestFrom(plain).Priority)
}
