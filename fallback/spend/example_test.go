package spend_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/cache"
	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/retry"
)

// A tenant with a daily budget, a chain whose primary is rate-limited,
// and the ledger's answer to "what did the 429s cost this tenant?".
func ExampleLedger_Admit() {
	prices, _ := spend.ParsePrices([]byte(`{
		"currency": "USD", "note": "example prices",
		"prices": [
			{"model": "pro",   "input": 1.25, "output": 10},
			{"model": "flash", "input": 0.30, "output": 2.50}
		]}`))
	ledger, _ := spend.New(spend.Config{
		Prices:  prices,
		Tenants: map[string]spend.Allowance{"acme": {DailyCost: spend.MustParseAmount("0.01")}},
	})
	defer ledger.Close()

	rateLimited := classify.Wrap(errors.New("429"), classify.Verdict{Class: classify.RateLimited})
	pro := fallback.Tier("pro", func(context.Context, string) (reply, error) { return reply{}, rateLimited })
	flash := usageTier{fallback.Tier("flash", func(context.Context, string) (reply, error) {
		return reply{Text: "ok", Usage: fallback.Usage{InputTokens: 1000, OutputTokens: 500}}, nil
	})}
	chain, _ := fallback.New(fallback.Config[string, reply]{Stages: []fallback.Stage[string, reply]{
		{Tier: pro, Model: "pro", Retry: retry.Policy{MaxAttempts: 1}}, {Tier: flash, Model: "flash"},
	}})
	ledger.Attach(chain)

	for i := range 10 {
		ticket, err := ledger.Admit(context.Background(), spend.Request{Tenant: "acme", Scenario: "support"},
			spend.Estimate{Cost: spend.MustParseAmount("0.002")})
		var refused *spend.LimitError
		if errors.As(err, &refused) {
			fmt.Printf("request %d refused: %s, %s/%s USD, resets at %s UTC\n", i+1, refused.Meter,
				spend.Amount(refused.Used), spend.Amount(refused.Limit), refused.ResetAt.Format("15:04"))
			break
		}
		chain.Do(ticket, "Where is my order?")
		ticket.End()
	}
	t := ledger.Totals("acme")
	rl := t.ByClass[classify.RateLimited]
	fmt.Printf("spent %s USD on %d answers, %s per valid result\n", t.Cost, t.Valid, t.CostPerValid())
	fmt.Printf("429s sent %d requests to flash: %s USD, %s USD less than pro would have cost\n", rl.Fallbacks, rl.FallbackCost, -rl.FallbackExtra)
	// Output:
	// request 7 refused: daily_cost, 0.0093/0.01 USD, resets at 00:00 UTC
	// spent 0.0093 USD on 6 answers, 0.00155 per valid result
	// 429s sent 6 requests to flash: 0.0093 USD, 0.0282 USD less than pro would have cost
}

// usageTier reports the usage of a reply.
type usageTier struct {
	fallback.ModelTier[string, reply]
}

func (u usageTier) Call(ctx context.Context, in string) (reply, error) {
	r, err := u.ModelTier.Call(ctx, in)
	if r.Usage != (fallback.Usage{}) {
		fallback.Report(ctx, fallback.Reply{Usage: r.Usage, HasUsage: true})
	}
	return r, err
}

// Prices with a cost group and a long-context rate.
func ExampleParsePrices() {
	prices, err := spend.ParsePrices([]byte(`{
		"currency": "USD", "as_of": "example", "cost_groups": {"batch": 0.5},
		"prices": [{"model": "gemini-2.5-pro", "input": 1.25, "cached_input": 0.125, "output": 10,
		            "long_context_above": 200000, "long_context": {"input": 2.5, "cached_input": 0.25, "output": 15}}]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	u := fallback.Usage{InputTokens: 10_000, CacheReadInputTokens: 8_000, OutputTokens: 1_000, ReasoningOutputTokens: 600}
	list, _ := prices.Cost("gemini-2.5-pro", "", u)
	batch, _ := prices.Cost("gemini-2.5-pro", "batch", u)
	long, _ := prices.Cost("gemini-2.5-pro", "", fallback.Usage{InputTokens: 300_000})
	fmt.Println(list, batch, long)
	// Output: 0.0135 0.00675 0.75
}

// A tenant with a cost limit is refused a request for a model the table
// does not price — here a version it does not list — rather than let it
// spend outside its limit; another spelling of a priced model is priced.
func ExamplePrices_Estimate() {
	prices, _ := spend.ParsePrices([]byte(`{"currency": "USD", "prices": [{"model": "gemini-2.5-flash", "input": 0.30, "output": 2.50}]}`))
	ledger, _ := spend.New(spend.Config{Prices: prices, Tenants: map[string]spend.Allowance{"acme": {DailyCost: spend.MustParseAmount("5")}}})
	defer ledger.Close()
	u := fallback.Usage{InputTokens: 1000, OutputTokens: 500}
	for _, model := range []string{"models/Gemini-2.5-Flash", "gemini-2.5-flash-001"} {
		est := prices.Estimate(model, "", u)
		_, err := ledger.Admit(context.Background(), spend.Request{Tenant: "acme"}, est)
		fmt.Printf("%s: unpriced %v, admitted %v", model, est.Unpriced(), err == nil)
		if errors.Is(err, spend.ErrUnpriced) {
			fmt.Printf(" (%v)", err)
		} else {
			fmt.Printf(", %s USD reserved", est.Cost)
		}
		fmt.Println()
	}
	// Output:
	// models/Gemini-2.5-Flash: unpriced false, admitted true, 0.00155 USD reserved
	// gemini-2.5-flash-001: unpriced true, admitted false (spend: the estimate covers a model without a price; refused under the daily cost limit)
}

// The ledger as the cache's usage recorder: the semantic layer's
// embedding calls — a written answer's, on the cache's goroutine, and a
// lookup's — are billed to the request's tenant, at the embedding model's
// input price, and count against its limits.
func ExampleLedger_RecordEmbedding() {
	prices, _ := spend.ParsePrices([]byte(`{"currency": "USD", "prices": [
		{"model": "text-embedding-3-small", "input": 0.02, "output": 0}]}`))
	ledger, _ := spend.New(spend.Config{Prices: prices, Tenants: map[string]spend.Allowance{"acme": {DailyTokens: 1_000_000}}})
	defer ledger.Close()

	// An embedder that reports its usage, as those of fallback/oaicompat
	// and fallback/gemini do: here every text means the same thing.
	embedder := cache.EmbedderFunc(func(_ context.Context, text string) (cache.Embedding, error) {
		return cache.Embedding{Vector: []float32{1, 0}, Model: "text-embedding-3-small",
			Usage: fallback.Usage{InputTokens: int64(len(strings.Fields(text)))}, HasUsage: true}, nil
	})
	answers, _ := cache.New(cache.Config[string, string]{
		Prompt:   func(q string) string { return q },
		Semantic: cache.SemanticConfig{Embedder: embedder, Usage: ledger},
	})
	defer answers.Close()

	req := spend.Request{Tenant: "acme", Scenario: "support"}
	tk := ledger.Begin(context.Background(), req)
	answers.Put(tk, "where is my order", "It ships tomorrow.")
	tk.End()
	for answers.Stats().Embedded == 0 { // the written answer is embedded in the background
		time.Sleep(time.Millisecond)
	}
	tk = ledger.Begin(context.Background(), req)
	answer, hit, _ := answers.Get(tk, "when will my order arrive")
	tk.End()

	em := ledger.Totals("acme").Embeddings
	fmt.Printf("%s answer: %s\n", hit, answer)
	fmt.Printf("%d embedding calls, %d tokens, %s USD; daily tokens used: %d\n",
		em.Calls, em.Usage.InputTokens, em.Cost, ledger.Use("acme")[spend.DailyTokens].Used)
	// Output:
	// semantic answer: It ships tomorrow.
	// 2 embedding calls, 9 tokens, 0.00000018 USD; daily tokens used: 9
}
