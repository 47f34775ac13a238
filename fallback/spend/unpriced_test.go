package spend_test

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
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
			admitted, truth, ev := spendAgainst(t, spend.Config{Prices: flashPrices(t)}, model, func(p *spend.Prices) spend.Estimate {
				return p.Estimate(model, "", flashCall)
			})
			assert.LessOrEqual(t, truth, amt("1"), "the API billed %s USD against a limit of 1", truth)
			assert.Equal(t, 88, admitted, "88 calls of 0.01125 fit in 1 USD")
			assert.Equal(t, []float64{0.7, 0.9}, ev.thresholds())
			assert.Equal(t, 1, ev.count(spend.FirstRefusal), "and the limit said so, at the 89th")
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

// A model the table does not price (here a version suffix the table does
// not list) under a cost limit: the request is refused at admission, with
// an event naming the model, instead of running free of the limit (200
// of 200 admitted, 2.25 USD against 1 USD, no event, before).
func TestUnpricedModelIsRefused(t *testing.T) {
	for _, policy := range []spend.UnpricedPolicy{spend.FailClosedUnpriced, spend.RefuseUnpriced} {
		t.Run(policy.String(), func(t *testing.T) {
			admitted, truth, ev := spendAgainst(t, spend.Config{Prices: flashPrices(t), Unpriced: policy}, "Gemini-2.5-Flash-001", func(p *spend.Prices) spend.Estimate {
				return p.Estimate("Gemini-2.5-Flash-001", "", flashCall)
			})
			assert.Zero(t, admitted)
			assert.Zero(t, truth)
			require.Equal(t, 200, ev.count(spend.Refused), "every refusal is an event")
			e := ev.all[0]
			assert.Equal(t, spend.UnpricedModel, e.Refusal)
			assert.Equal(t, spend.DailyCost, e.Meter)
			assert.Equal(t, int64(amt("1")), e.Limit)
			require.ErrorIs(t, e.Err, spend.ErrUnpriced)
			assert.NotErrorIs(t, e.Err, spend.ErrLimitReached)
			assert.Equal(t, "spend: the estimate covers a model without a price; refused under the daily cost limit", e.Err.Error())
			var le *spend.LimitError
			require.ErrorAs(t, e.Err, &le)
			assert.Equal(t, classify.InvalidRequest, le.Verdict().Class, "a configuration error: price the model")
		})
	}
	// The estimate says its cost is unknown.
	est := flashPrices(t).Estimate("gemini-2.5-flash-001 ", "", flashCall)
	assert.Equal(t, spend.Estimate{Tokens: 1350, Cost: spend.UnknownCost}, est)
	assert.True(t, est.Unpriced())
	priced := flashPrices(t).Estimate("gemini-2.5-flash", "", flashCall)
	assert.Equal(t, spend.Estimate{Tokens: 1350, Cost: amt("0.01125")}, priced)
	assert.False(t, priced.Unpriced())
}

// A tenant without a cost limit may use an unpriced model: its tokens
// count against its token limit.
func TestUnpricedModelWithoutCostLimit(t *testing.T) {
	l := newLedger(t, spend.Config{Prices: flashPrices(t), Tenants: map[string]spend.Allowance{"acme": {DailyTokens: 10_000}}})
	ev := watch(l)
	tk, err := l.Admit(context.Background(), spend.Request{Tenant: "acme"}, flashPrices(t).Estimate("gemini-9", "", flashCall))
	require.NoError(t, err)
	use := l.Use("acme")
	assert.Equal(t, int64(1350), use[spend.DailyTokens].Reserved)
	assert.Zero(t, use[spend.DailyCost].Reserved, "an unknown cost reserves nothing where nothing limits cost")
	tk.End()
	assert.Zero(t, l.Use("acme")[spend.DailyCost].Reserved)
	assert.Empty(t, ev.all)
}

// An estimate that names no model (written by hand) lets a request for an
// unpriced model through once; by default the tenant's cost limit then
// fails closed — its spending is no longer known — with an event, until
// the period ends.
func TestUnpricedUsageFailsClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		admitted, truth, ev := spendAgainst(t, spend.Config{Prices: flashPrices(t)}, "gemini-2.5-flash-001", func(*spend.Prices) spend.Estimate {
			return spend.Estimate{Tokens: 1350}
		})
		assert.Equal(t, 1, admitted, "the first request, whose estimate named no model, ran")
		assert.Equal(t, amt("0.01125"), truth)
		assert.Equal(t, 199, ev.count(spend.Refused))
		require.Equal(t, 1, ev.count(spend.UnpricedUsage), "reported once, when first seen")
		u := ev.all[0]
		assert.Equal(t, spend.UnpricedUsage, u.Kind)
		assert.Equal(t, "acme", u.Tenant)
		assert.Equal(t, spend.DailyCost, u.Meter)
		midnight := time.Date(2000, 1, 2, 0, 0, 0, 0, time.UTC)
		assert.Equal(t, midnight, u.ResetAt)
		r := ev.all[1]
		assert.Equal(t, spend.Refused, r.Kind)
		assert.Equal(t, spend.UnpricedModel, r.Refusal)
		require.ErrorIs(t, r.Err, spend.ErrUnpriced)
		assert.Equal(t, "spend: daily cost limit failing closed: a model without a price was billed (resets 2000-01-02T00:00:00Z)", r.Err.Error())
		var le *spend.LimitError
		require.ErrorAs(t, r.Err, &le)
		assert.Equal(t, midnight, le.ResetAt)
		v := le.Verdict()
		assert.Equal(t, classify.QuotaExhausted, v.Class)
		assert.Equal(t, 24*time.Hour, v.RetryAfter)
		assert.NotContains(t, v.Reason+r.Err.Error(), "acme")
	})
}

// The limit fails closed until its period ends; a monthly limit until
// the month ends.
func TestUnpricedFailClosedUntilTheReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLedger(t, spend.Config{Prices: flashPrices(t), Tenants: map[string]spend.Allowance{
			"daily": {DailyCost: amt("1")}, "monthly": {MonthlyCost: amt("10")},
		}})
		ev := watch(l)
		c, err := fallback.New(fallback.Config[string, reply]{Stages: []fallback.Stage[string, reply]{
			{Tier: &flashAPI{usage: flashCall}, Model: "gemini-9", Retry: retry.Policy{MaxAttempts: 1}},
		}})
		require.NoError(t, err)
		_, err = l.Attach(c)
		require.NoError(t, err)
		run := func(tenant string) error {
			tk, err := l.Admit(context.Background(), spend.Request{Tenant: tenant}, spend.Estimate{Tokens: 1350})
			if err != nil {
				return err
			}
			defer tk.End()
			_, err = c.Do(tk, "q")
			return err
		}
		for _, tenant := range []string{"daily", "monthly"} {
			require.NoError(t, run(tenant))
			require.ErrorIs(t, run(tenant), spend.ErrUnpriced, tenant)
		}
		time.Sleep(24*time.Hour + time.Millisecond) // past the ledger's midnight timer
		require.NoError(t, run("daily"), "a new day: the daily limit is open again")
		err = run("monthly")
		require.ErrorIs(t, err, spend.ErrUnpriced)
		var le *spend.LimitError
		require.ErrorAs(t, err, &le)
		assert.Equal(t, spend.MonthlyCost, le.Meter)
		assert.Equal(t, time.Date(2000, 2, 1, 0, 0, 0, 0, time.UTC), le.ResetAt)
		// Today's call on the daily tenant is found when the ledger next
		// looks at the tenant: here Use.
		assert.Equal(t, 2, ev.count(spend.UnpricedUsage))
		l.Use("daily")
		assert.Equal(t, 3, ev.count(spend.UnpricedUsage))
		require.ErrorIs(t, run("daily"), spend.ErrUnpriced, "closed again for the new day")
	})
}

// With RefuseUnpriced, a call billed anyway is reported and the tenant
// goes on; its tokens count.
func TestUnpricedUsageRefusePolicy(t *testing.T) {
	admitted, truth, ev := spendAgainst(t, spend.Config{Prices: flashPrices(t), Unpriced: spend.RefuseUnpriced}, "gemini-2.5-flash-001", func(*spend.Prices) spend.Estimate {
		return spend.Estimate{Tokens: 1350}
	})
	assert.Equal(t, 200, admitted)
	assert.Equal(t, 200*amt("0.01125"), truth, "the cost the policy accepts not to know")
	assert.Equal(t, 199, ev.count(spend.UnpricedUsage), "each admission found the previous request's call")
	assert.Zero(t, ev.count(spend.Refused))
}

// An estimate so large that adding it to the meter would overflow is
// refused at the limit (it wrapped around and was admitted before).
func TestHugeEstimateIsRefused(t *testing.T) {
	l := newLedger(t, spend.Config{Prices: flashPrices(t), Tenants: map[string]spend.Allowance{"acme": {DailyCost: amt("1"), DailyTokens: 1 << 40}}})
	tk, err := l.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{Cost: amt("0.5"), Tokens: 1})
	require.NoError(t, err)
	defer tk.End()
	_, err = l.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{Cost: spend.UnknownCost - 1})
	require.ErrorIs(t, err, spend.ErrLimitReached)
	_, err = l.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{Tokens: math.MaxInt64})
	require.ErrorIs(t, err, spend.ErrLimitReached)
}
