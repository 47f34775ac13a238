package spend_test

import (
	"context"
	"testing"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/spend"
)

// benchChain is one tier that answers at once with its usage.
func benchChain(b *testing.B) *fallback.Chain[string, reply] {
	pro := &tier{name: "pro", def: answer(1000, 200)}
	c, err := fallback.New(fallback.Config[string, reply]{Stages: []fallback.Stage[string, reply]{{Tier: fastTier{pro.def.out}, Model: "pro"}}})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// fastTier answers without a lock, so that the benchmark measures the
// chain and the ledger.
type fastTier struct{ out reply }

func (fastTier) Name() string { return "pro" }
func (f fastTier) Call(ctx context.Context, _ string) (reply, error) {
	fallback.Report(ctx, fallback.Reply{Usage: f.out.Usage, HasUsage: true})
	return f.out, nil
}

func benchLedger(b *testing.B) *spend.Ledger {
	l, err := spend.New(spend.Config{Prices: testPrices(b), Tenants: map[string]spend.Allowance{
		"acme": {DailyTokens: 1 << 62, DailyCost: 1 << 62, MonthlyTokens: 1 << 62, MonthlyCost: 1 << 62},
	}})
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// BenchmarkChain is the chain alone, for reference.
func BenchmarkChain(b *testing.B) {
	c := benchChain(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Do(ctx, "q"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkChainWithLedger adds the ingress guard (four limits checked,
// the estimate reserved) and the ledger (every event recorded, the
// request priced, reconciled and committed), with a Ticket reused as a
// server's per-request state would be.
func BenchmarkChainWithLedger(b *testing.B) {
	c := benchChain(b)
	l := benchLedger(b)
	if _, err := l.Attach(c); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	req := spend.Request{Tenant: "acme", Scenario: "support"}
	est := spend.Estimate{Tokens: 1200, Cost: 1000}
	var tk spend.Ticket
	b.ReportAllocs()
	for b.Loop() {
		if err := l.AdmitInto(&tk, ctx, req, est); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Do(&tk, "q"); err != nil {
			b.Fatal(err)
		}
		tk.End()
	}
	if got := l.Totals("acme").Requests; got < int64(b.N) {
		b.Fatalf("%d requests recorded", got)
	}
}

// BenchmarkChainWithLedgerAdmit is the same with Admit, which allocates
// the Ticket.
func BenchmarkChainWithLedgerAdmit(b *testing.B) {
	c := benchChain(b)
	l := benchLedger(b)
	if _, err := l.Attach(c); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	req := spend.Request{Tenant: "acme", Scenario: "support"}
	est := spend.Estimate{Tokens: 1200, Cost: 1000}
	b.ReportAllocs()
	for b.Loop() {
		tk, err := l.Admit(ctx, req, est)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Do(tk, "q"); err != nil {
			b.Fatal(err)
		}
		tk.End()
	}
}

// BenchmarkChainWithLedgerParallel runs the ledger from every core, one
// tenant: the account's lock is shared.
func BenchmarkChainWithLedgerParallel(b *testing.B) {
	c := benchChain(b)
	l := benchLedger(b)
	if _, err := l.Attach(c); err != nil {
		b.Fatal(err)
	}
	req := spend.Request{Tenant: "acme", Scenario: "support"}
	est := spend.Estimate{Tokens: 1200, Cost: 1000}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		var tk spend.Ticket
		for pb.Next() {
			if err := l.AdmitInto(&tk, ctx, req, est); err != nil {
				b.Error(err)
				return
			}
			if _, err := c.Do(&tk, "q"); err != nil {
				b.Error(err)
				return
			}
			tk.End()
		}
	})
}

// BenchmarkChainWithNoopObserver is the chain with an observer that does
// nothing: what observing a chain costs before the ledger does anything.
func BenchmarkChainWithNoopObserver(b *testing.B) {
	c := benchChain(b)
	c.Observe(fallback.NopObserver{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Do(ctx, "q"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLedger is the ledger's own work per request, without a chain:
// the admission (four limits checked, the estimate reserved), the four
// events of a first-try success (two ignored, one attempt priced and
// recorded, the end: reconciliation, thresholds, totals) and End.
func BenchmarkLedger(b *testing.B) {
	l := benchLedger(b)
	o := l.Observer()
	ctx := context.Background()
	req := spend.Request{Tenant: "acme", Scenario: "support"}
	est := spend.Estimate{Tokens: 1200, Cost: 1000}
	chain := &fallback.ChainInfo{Stages: []fallback.StageInfo{{Tier: "pro", Model: "pro"}}}
	st := &chain.Stages[0]
	start := fallback.RequestStart{Chain: chain}
	attempt := fallback.AttemptStart{Stage: st, Model: "pro", Attempt: 1}
	ended := fallback.AttemptEnd{Stage: st, Model: "pro", Attempt: 1, Reply: &fallback.Reply{Usage: fallback.Usage{InputTokens: 1000, OutputTokens: 200}, HasUsage: true}}
	end := fallback.RequestEnd{Chain: chain, Stage: st, Answered: true, UpstreamCalls: 1}
	var tk spend.Ticket
	b.ReportAllocs()
	for b.Loop() {
		if err := l.AdmitInto(&tk, ctx, req, est); err != nil {
			b.Fatal(err)
		}
		o.RequestStarted(&tk, start)
		o.AttemptStarted(&tk, attempt)
		o.AttemptEnded(&tk, ended)
		o.RequestEnded(&tk, end)
		tk.End()
	}
	if got := l.Totals("acme"); got.Valid < int64(b.N) || got.Cost == 0 {
		b.Fatalf("%d valid requests recorded, cost %v", got.Valid, got.Cost)
	}
}

// BenchmarkLedgerNoLimits is BenchmarkLedger for a tenant without limits.
func BenchmarkLedgerNoLimits(b *testing.B) {
	l := newLedgerB(b, spend.Config{Prices: testPrices(b)})
	o := l.Observer()
	ctx := context.Background()
	req := spend.Request{Tenant: "acme"}
	chain := &fallback.ChainInfo{Stages: []fallback.StageInfo{{Tier: "pro", Model: "pro"}}}
	st := &chain.Stages[0]
	ended := fallback.AttemptEnd{Stage: st, Model: "pro", Attempt: 1, Reply: &fallback.Reply{Usage: fallback.Usage{InputTokens: 1000, OutputTokens: 200}, HasUsage: true}}
	end := fallback.RequestEnd{Chain: chain, Stage: st, Answered: true, UpstreamCalls: 1}
	var tk spend.Ticket
	b.ReportAllocs()
	for b.Loop() {
		if err := l.AdmitInto(&tk, ctx, req, spend.Estimate{}); err != nil {
			b.Fatal(err)
		}
		o.AttemptEnded(&tk, ended)
		o.RequestEnded(&tk, end)
		tk.End()
	}
}

func newLedgerB(b *testing.B, cfg spend.Config) *spend.Ledger {
	l, err := spend.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	return l
}
