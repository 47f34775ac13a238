package route_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/route"
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
