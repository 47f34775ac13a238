package route_test

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/route"
	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/retry"
)

// Three scenarios: customer support falls back to a read-only Flash and
// says so; batch work takes the cheap group; risk decisions fail closed.
func ExampleNew() {
	overloaded := classify.Wrap(errors.New("503"), classify.Verdict{Class: classify.Transient})
	pro := fallback.Tier("pro", func(context.Context, string) (string, error) { return "", overloaded })
	flash := fallback.Tier("flash", func(ctx context.Context, q string) (string, error) {
		if route.WritesAllowed(ctx) {
			return "refund issued", nil
		}
		return "a person will confirm your refund", nil
	})
	fast := retry.Policy{BaseDelay: 1, MaxDelay: 1}
	stage := func(t fallback.ModelTier[string, string], model string) fallback.Stage[string, string] {
		return fallback.Stage[string, string]{Tier: t, Model: model, Retry: fast}
	}
	router, err := route.New(route.Config[string, string]{Routes: []route.Route[string, string]{
		{Scenario: "support", MaxAttempts: 3, MarkDegraded: true, ReadOnlyFallback: true, Candidates: []route.Candidate[string, string]{
			{Stage: stage(pro, "gemini-2.5-pro"), CostGroup: "stable"},
			{Stage: stage(flash, "gemini-2.5-flash"), CostGroup: "stable"},
		}},
		{Scenario: "batch_seo", Candidates: []route.Candidate[string, string]{{Stage: stage(flash, "gemini-2.5-flash"), CostGroup: "batch"}}},
		{Scenario: "risk", Fallback: route.FailClosed, MaxAttempts: 1, Candidates: []route.Candidate[string, string]{{Stage: stage(pro, "gemini-2.5-pro")}}},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	res, _ := router.Do(fallback.WithRequest(ctx, fallback.Request{Tenant: "acme", Scenario: "support"}), "refund order 42")
	fmt.Printf("support: %q from %s, show degraded: %v, calls: %d\n", res.Value, res.Tier, res.ShowDegraded, res.UpstreamCalls)
	_, err = router.Do(fallback.WithRequest(ctx, fallback.Request{Tenant: "acme", Scenario: "risk"}), "approve this loan?")
	fmt.Println("risk:", errors.Is(err, overloaded))
	_, err = router.Do(fallback.WithRequest(ctx, fallback.Request{Tenant: "acme", Scenario: "medicl"}), "dose?")
	fmt.Println(err)
	// Output:
	// support: "a person will confirm your refund" from flash, show degraded: true, calls: 3
	// risk: true
	// route: unknown scenario "medicl"
}

// What a route's estimate reserves: one call on its dearest candidate,
// or every call the route may make.
func ExampleReservation() {
	prices, _ := spend.ParsePrices([]byte(`{"currency": "USD", "prices": [
		{"model": "gemini-2.5-pro", "input": 1.25, "output": 10}, {"model": "gemini-2.5-flash", "input": 0.30, "output": 2.50}]}`))
	ledger, _ := spend.New(spend.Config{Prices: prices})
	defer ledger.Close()
	answer := func(context.Context, string) (string, error) { return "ok", nil }
	candidates := []route.Candidate[string, string]{
		{Stage: fallback.Stage[string, string]{Tier: fallback.Tier("pro", answer), Model: "gemini-2.5-pro"}},
		{Stage: fallback.Stage[string, string]{Tier: fallback.Tier("flash", answer), Model: "gemini-2.5-flash"}},
	}
	router, err := route.New(route.Config[string, string]{Ledger: ledger, Routes: []route.Route[string, string]{
		{Scenario: "chat", MaxAttempts: 3, Candidates: candidates},
		{Scenario: "billing", MaxAttempts: 3, Reserve: route.ReserveWorstCase, Candidates: candidates},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	u := fallback.Usage{InputTokens: 1000, OutputTokens: 500}
	for _, scenario := range []string{"chat", "billing"} {
		rc, _ := router.Lookup("acme", scenario)
		est := rc.Estimate(u)
		fmt.Printf("%s: %s, %d calls at most, reserves %d tokens and %s USD\n", scenario, rc.Route().Reserve, rc.Calls(), est.Tokens, est.Cost)
	}
	// Output:
	// chat: reserve_one, 3 calls at most, reserves 1500 tokens and 0.00625 USD
	// billing: reserve_worst_case, 3 calls at most, reserves 4500 tokens and 0.01875 USD
}

// Streams routed by tenant and scenario: support falls back to a
// read-only Flash and says so, one tenant has a support route of its own,
// and risk decisions fail closed, with no other model to stand in.
func ExampleNewStream() {
	type piece struct {
		text string
		last bool
	}
	inspect := func(p piece) fallback.ChunkInfo {
		info := fallback.ChunkInfo{Text: p.text}
		if p.last {
			info.FinishReason = "STOP"
		}
		return info
	}
	words := func(text ...string) iter.Seq2[piece, error] {
		return func(yield func(piece, error) bool) {
			for i, w := range text {
				if !yield(piece{text: w, last: i == len(text)-1}, nil) {
					return
				}
			}
		}
	}
	overloaded := classify.Wrap(errors.New("503"), classify.Verdict{Class: classify.Transient})
	pro := fallback.StreamTierFunc("pro", func(context.Context, string) iter.Seq2[piece, error] {
		return func(yield func(piece, error) bool) { yield(piece{}, overloaded) }
	}, inspect)
	flash := fallback.StreamTierFunc("flash", func(ctx context.Context, _ string) iter.Seq2[piece, error] {
		if route.WritesAllowed(ctx) {
			return words("refund ", "issued")
		}
		return words("a person ", "will confirm ", "your refund")
	}, inspect)
	fast := retry.Policy{BaseDelay: 1, MaxDelay: 1}
	stage := func(t fallback.StreamTier[string, piece], model string) fallback.StreamStage[string, piece] {
		return fallback.StreamStage[string, piece]{Tier: t, Model: model, Retry: fast}
	}
	router, err := route.NewStream(route.StreamConfig[string, piece]{Routes: []route.StreamRoute[string, piece]{
		{Scenario: "support", MaxAttempts: 3, MarkDegraded: true, ReadOnlyFallback: true, Candidates: []route.StreamCandidate[string, piece]{
			{Stage: stage(pro, "gemini-2.5-pro"), CostGroup: "stable"},
			{Stage: stage(flash, "gemini-2.5-flash"), CostGroup: "stable"},
		}},
		{Scenario: "support", Tenant: "globex", Candidates: []route.StreamCandidate[string, piece]{{Stage: stage(flash, "gemini-2.5-flash"), CostGroup: "batch"}}},
		{Scenario: "risk", Fallback: route.FailClosed, MaxAttempts: 1, Candidates: []route.StreamCandidate[string, piece]{{Stage: stage(pro, "gemini-2.5-pro")}}},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, req := range []fallback.Request{{Tenant: "acme", Scenario: "support"}, {Tenant: "globex", Scenario: "support"}, {Tenant: "acme", Scenario: "risk"}, {Tenant: "acme", Scenario: "medicl"}} {
		s, err := router.Stream(fallback.WithRequest(context.Background(), req), "refund order 42")
		if err != nil {
			fmt.Println(err) // before anything was sent
			continue
		}
		text := ""
		for p, err := range s.Chunks() {
			if err != nil {
				fmt.Printf("%s %s: failed after %d chunks, overloaded: %v\n", req.Tenant, req.Scenario, s.Result().Chunks, errors.Is(err, overloaded))
				break
			}
			text += p.text
		}
		if res := s.Result(); res.Complete {
			fmt.Printf("%s %s: %q from %s, show degraded: %v, read-only: %v\n", req.Tenant, req.Scenario, text, res.Tier, res.ShowDegraded, res.ReadOnly)
		}
	}
	// Output:
	// acme support: "a person will confirm your refund" from flash, show degraded: true, read-only: true
	// globex support: "refund issued" from flash, show degraded: false, read-only: false
	// acme risk: failed after 0 chunks, overloaded: true
	// route: unknown scenario "medicl"
}
