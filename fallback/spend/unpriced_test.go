package spend_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/retry"
)

// flashAPI is a fake model API that keeps its own count of the tokens
// it billed: the truth a ledger's figures are checked against.
type flashAPI struct {
	usage         fallback.Usage
	calls, tokens atomic.Int64
}

func (p *flashAPI) Name() string { return "flash" }

func (p *flashAPI) Call(ctx context.Context, _ string) (reply, error) {
	p.calls.Add(1)
	p.tokens.Add(p.usage.InputTokens + p.usage.OutputTokens)
	fallback.Report(ctx, fallback.Reply{Usage: p.usage, HasUsage: true})
	return reply{Text: `{"ok":true}`, Usage: p.usage}, nil
}

// flashPrices prices gemini-2.5-flash at 1 USD per million tokens in and
// 10 out: a call of 250 in and 1100 out costs 0.01125 USD, so that 200
// of them cost 2.25 USD.
func flashPrices(t testing.TB) *spend.Prices {
	t.Helper()
	p, err := spend.NewPrices(spend.PriceTable{Currency: "USD", Prices: []spend.Price{
		{Model: "gemini-2.5-flash", Rates: spend.Rates{Input: amt("1"), Output: amt("10")}},
	}})
	require.NoError(t, err)
	return p
}

var flashCall = fallback.Usage{InputTokens: 250, OutputTokens: 1100}

// spendAgainst runs 200 requests of tenant acme (a daily cost limit of
// 1 USD) through a one-stage chain whose stage names model, each admitted
// with est(prices), as the README does. It returns how many were
// admitted, what the API really billed, and the ledger's events.
func spendAgainst(t *testing.T, cfg spend.Config, model string, est func(*spend.Prices) spend.Estimate) (admitted int, truth spend.Amount, ev *events) {
	t.Helper()
	cfg.Tenants = map[string]spend.Allowance{"acme": {DailyCost: amt("1")}}
	l := newLedger(t, cfg)
	ev = watch(l)
	p := &flashAPI{usage: flashCall}
	c, err := fallback.New(fallback.Config[string, reply]{Stages: []fallback.Stage[string, reply]{
		{Tier: p, Model: model, Retry: retry.Policy{MaxAttempts: 1}},
	}})
	require.NoError(t, err)
	_, err = l.Attach(c)
	require.NoError(t, err)
	for range 200 {
		tk, err := l.Admit(context.Background(), spend.Request{Tenant: "acme", Scenario: "support"}, est(cfg.Prices))
		if err != nil {
			var le *spend.LimitError
			require.True(t, errors.As(err, &le), "a refusal is a *LimitError: %v", err)
			continue
		}
		admitted++
		_, err = c.Do(tk, "q")
		require.NoError(t, err)
		tk.End()
	}
	perCall, ok := flashPrices(t).Cost("gemini-2.5-flash", "", flashCall)
	require.True(t, ok)
	return admitted, spend.Amount(p.calls.Load()) * perCall, ev
}

// The case: the stage spells the priced model another way — in
// another case, with a trailing space, as a Vertex resource path. The
// ledger prices it all the same, and the 1 USD limit holds (it let 200 of
// 200 requests through, 2.25 USD, before).
func TestModelSpellingsArePriced(t *testing.T) {
	for _, model := range []string{"Gemini-2.5-Flash", "gemini-2.5-flash ", "GEMINI-2.5-FLASH", "publishers/google/models/gemini-2.5-flash", "models/gemini-2.5-flash"} {
		t.Run(model, func(t *testing.T) {
			admitted, truth, _ := spendAgainst(t, spend.Config{Prices: flashPrices(t)}, model, func(p *spend.Prices) spend.Estimate {
				return p.Estimate(model, "", flashCall)
			})
			assert.LessOrEqual(t, truth, amt("1"), "the API billed %s USD against a limit of 1", truth)
			assert.Equal(t, 88, admitted, "88 calls of 0.01125 fit in 1 USD")
		})
	}
	p := flashPrices(t)
	for _, model := range []string{"Gemini-2.5-Flash", "gemini-2.5-flash\t", " models/Gemini-2.5-Flash", "projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash"} {
		c, ok := p.Cost(model, "", flashCall)
		assert.True(t, ok, "%q is priced", model)
		assert.Equal(t, amt("0.01125"), c, model)
	}
	// A table that lists one model under two spellings lists it twice.
	_, err := spend.NewPrices(spend.PriceTable{Currency: "USD", Prices: []spend.Price{{Model: "Gemini-2.5-Flash"}, {Model: "gemini-2.5-flash "}}})
	assert.ErrorContains(t, err, `model "gemini-2.5-flash" listed twice`)
}
