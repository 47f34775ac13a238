package fallback_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/validate"
)

// callGemini stands for your SDK call (see examples/gemini for a ready tier).
func callGemini(ctx context.Context, model, prompt string) (string, error) {
	return "answer from " + model, nil
}

// The README's quick start: keep the two in sync.
func Example_quickStart() {
	pro := fallback.Tier("pro", func(ctx context.Context, q string) (string, error) {
		return callGemini(ctx, "gemini-2.5-pro", "Think step by step: "+q)
	})
	flash := fallback.Tier("flash", func(ctx context.Context, q string) (string, error) {
		return callGemini(ctx, "gemini-2.5-flash", "Answer briefly: "+q)
	})
	proBreaker, _ := breaker.New(breaker.Config{Name: "pro", Cooldown: 30 * time.Second})
	proSlots, _ := bulkhead.New(bulkhead.Config{Name: "pro", Max: 32})

	chain, err := fallback.New(fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{
			{Tier: pro, Model: "gemini-2.5-pro", Breaker: proBreaker, Bulkhead: proSlots, TryTimeout: 8 * time.Second, Validate: validate.NonEmpty()},
			{Tier: flash, Model: "gemini-2.5-flash", TryTimeout: 3 * time.Second, Validate: validate.NonEmpty()},
		},
		Total:   10 * time.Second,
		Default: func(context.Context, string) (string, bool) { return "We are busy, please retry.", true },
	})
	if err != nil {
		panic(err)
	}
	res, err := chain.Do(context.Background(), "Why is the sky blue?")
	fmt.Println(res.Value, res.Source, res.Degraded, err)
	// Output: answer from gemini-2.5-pro tier false <nil>
}
