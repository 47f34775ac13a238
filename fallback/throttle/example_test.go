package throttle_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/throttle"
	"github.com/tierguard/tierguard/retry"
)

// A tier that answers 503 gets fewer calls: after its refusals, the
// throttle turns calls away locally and the next tier answers, the skip
// on the trail as "throttled".
func ExampleTier() {
	th, err := throttle.New(throttle.Config{Rand: func() float64 { return 0.5 }}) // a fixed draw, for the example
	if err != nil {
		panic(err)
	}
	pro := fallback.Tier("pro", func(context.Context, string) (string, error) {
		return "", classify.Wrap(errors.New("503"), classify.Verdict{Class: classify.Transient, HTTPStatus: 503})
	})
	flash := fallback.Tier("flash", func(context.Context, string) (string, error) { return "flash answer", nil })
	chain, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
		{Tier: throttle.Tier(pro, th), Retry: retry.Policy{MaxAttempts: 1}},
		{Tier: flash},
	}})
	if err != nil {
		panic(err)
	}
	for range 3 {
		res, _ := chain.Do(context.Background(), "q")
		fmt.Println(res.Value, res.Attempts()[0].Skip)
	}
	fmt.Printf("%.2f\n", th.Stats().Probability)
	// Output:
	// flash answer not_skipped
	// flash answer not_skipped
	// flash answer throttled
	// 0.75
}

// Feed reports a chain's calls to its stages' bulkheads: an adaptive one
// learns its limit from them.
func ExampleFeed() {
	b, err := bulkhead.New(bulkhead.Config{Name: "pro", Max: 20,
		Adaptive: &bulkhead.Adaptive{Floor: 2, Ceiling: 40, Window: 1}})
	if err != nil {
		panic(err)
	}
	pro := fallback.Tier("pro", func(context.Context, string) (string, error) {
		return "", classify.Wrap(errors.New("503"), classify.Verdict{Class: classify.Transient, HTTPStatus: 503})
	})
	flash := fallback.Tier("flash", func(context.Context, string) (string, error) { return "flash answer", nil })
	chain, err := fallback.New(fallback.Config[string, string]{
		Stages:   []fallback.Stage[string, string]{{Tier: pro, Bulkhead: b, Retry: retry.Policy{MaxAttempts: 1}}, {Tier: flash}},
		Observer: throttle.Feed(),
	})
	if err != nil {
		panic(err)
	}
	_, _ = chain.Do(context.Background(), "q")
	fmt.Println(b.Limit())
	// Output:
	// 18
}
