package spend_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/spend"
)

// TestEventsWithoutReply: the chain's events always point to a Reply, but
// an event made by hand may have none. The ledger reads it as a call that
// reported nothing: the request is counted, no usage and no cost.
func TestEventsWithoutReply(t *testing.T) {
	l, err := spend.New(spend.Config{Prices: testPrices(t), Tenants: map[string]spend.Allowance{
		"acme": {DailyTokens: 1 << 40, DailyCost: 1 << 40},
	}})
	require.NoError(t, err)
	o := l.Observer()
	chain := &fallback.ChainInfo{Stages: []fallback.StageInfo{{Tier: "pro", Model: "pro"}}}
	st := &chain.Stages[0]
	var tk spend.Ticket
	require.NoError(t, l.AdmitInto(&tk, context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{Tokens: 10, Cost: 10}))
	o.RequestStarted(&tk, fallback.RequestStart{Chain: chain})
	o.AttemptStarted(&tk, fallback.AttemptStart{Stage: st, Model: "pro", Attempt: 1})
	o.AttemptEnded(&tk, fallback.AttemptEnd{Stage: st, Model: "pro", Attempt: 1})
	o.RequestEnded(&tk, fallback.RequestEnd{Chain: chain, Stage: st, Answered: true, UpstreamCalls: 1})
	o.LateReplyReceived(&tk, fallback.LateReply{Stage: st, Model: "pro", Attempt: 1})
	o.AttemptEnded(&tk, fallback.AttemptEnd{Stage: st, Model: "pro", Attempt: 2})
	tk.End()
	got := l.Totals("acme")
	assert.Equal(t, int64(1), got.Requests)
	assert.Equal(t, int64(1), got.Answered)
	assert.Equal(t, fallback.Usage{}, got.Usage)
	assert.Zero(t, got.Cost)
	assert.Zero(t, got.Unpriced)
}
