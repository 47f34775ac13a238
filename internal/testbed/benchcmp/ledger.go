package benchcmp

import (
	"context"
	"sync/atomic"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/spend"
)

// The ledger benchmarks' request: a tenant with four limits (tokens and
// cost, per day and per month) far above what a benchmark spends, an
// estimate reserved at admission, and a tier that reports its usage.
const (
	LedgerTenant = "acme"
	// The estimate reserved at admission.
	LedgerEstimateTokens = 1200
	// What the tier reports.
	LedgerInputTokens  = 1000
	LedgerOutputTokens = 200
	// The model's price per token, in nano-units of its currency
	// ($1.25 and $10 per million tokens).
	LedgerInputPrice  = 1250
	LedgerOutputPrice = 10000
	// Every limit: far above what a benchmark spends.
	LedgerLimit = 1 << 62
)

// LedgerEstimateCost is the estimate's cost: its tokens at the output
// price.
const LedgerEstimateCost = LedgerEstimateTokens * LedgerOutputPrice

// TierguardLedger is a spend ledger pricing model "pro" and limiting
// LedgerTenant's tokens and cost per day and per month.
func TierguardLedger() *spend.Ledger {
	prices, err := spend.NewPrices(spend.PriceTable{Currency: "USD", Prices: []spend.Price{
		{Model: "pro", Rates: spend.Rates{Input: LedgerInputPrice * 1_000_000 * spend.Nano, Output: LedgerOutputPrice * 1_000_000 * spend.Nano}},
	}})
	if err != nil {
		panic(err)
	}
	l, err := spend.New(spend.Config{Prices: prices, Tenants: map[string]spend.Allowance{
		LedgerTenant: {DailyTokens: LedgerLimit, MonthlyTokens: LedgerLimit, DailyCost: LedgerLimit, MonthlyCost: LedgerLimit},
	}})
	if err != nil {
		panic(err)
	}
	return l
}

// LedgerChain is a one-tier chain (model "pro", no guards) whose tier
// answers at once and reports its usage (fallback.Report), as the SDK
// adapters' tiers do.
func LedgerChain() *fallback.Chain[string, string] {
	c, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{
		Tier: fallback.Tier("pro", func(ctx context.Context, _ string) (string, error) {
			fallback.Report(ctx, fallback.Reply{Usage: fallback.Usage{InputTokens: LedgerInputTokens, OutputTokens: LedgerOutputTokens}, HasUsage: true})
			return Work()
		}),
		Model: "pro",
	}}})
	if err != nil {
		panic(err)
	}
	return c
}

// LedgerChainObserved is LedgerChain with an observer that does nothing
// (fallback.NopObserver): what observing the chain costs before any
// observer does anything — its clock reads, its events, the call record
// that carries what the tier reports. The ledger is fed by the chain's
// events, so this is the floor under it that is the chain's, not the
// ledger's.
func LedgerChainObserved() *fallback.Chain[string, string] {
	c := LedgerChain()
	c.Observe(fallback.NopObserver{})
	return c
}

// HandRolledBudget is the floor of a budget check: one tenant's four
// meters (tokens and cost, per day and per month), each an atomic counter
// against its limit. Admit adds the estimate to every meter and takes it
// back if one goes over; Charge replaces the estimate with what was used.
// It has no periods (nothing resets at midnight), no prices table, no
// thresholds, no tenants and no record of the request.
type HandRolledBudget struct {
	used  [4]atomic.Int64
	limit [4]int64
}

// NewHandRolledBudget returns a budget of LedgerLimit on every meter.
func NewHandRolledBudget() *HandRolledBudget {
	b := &HandRolledBudget{}
	for i := range b.limit {
		b.limit[i] = LedgerLimit
	}
	return b
}

// meters lays tokens and cost out as the meters are: day and month tokens,
// day and month cost.
func meters(tokens, cost int64) [4]int64 { return [4]int64{tokens, tokens, cost, cost} }

// Admit reserves an estimate of tokens and cost, or reserves nothing and
// reports false when a meter would go over its limit.
func (b *HandRolledBudget) Admit(tokens, cost int64) bool {
	add := meters(tokens, cost)
	for i := range b.used {
		if b.used[i].Add(add[i]) > b.limit[i] {
			for j := 0; j <= i; j++ {
				b.used[j].Add(-add[j])
			}
			return false
		}
	}
	return true
}

// Charge replaces an admitted estimate with the usage the call reported,
// priced.
func (b *HandRolledBudget) Charge(estTokens, estCost, in, out int64) {
	d := meters(in+out-estTokens, in*LedgerInputPrice+out*LedgerOutputPrice-estCost)
	for i := range b.used {
		b.used[i].Add(d[i])
	}
}

// Used returns the day's tokens and cost.
func (b *HandRolledBudget) Used() (tokens, cost int64) { return b.used[0].Load(), b.used[2].Load() }
