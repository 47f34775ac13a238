package fallback_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// errOverloaded stands for a 503 from the primary model.
var errOverloaded = classify.Wrap(errors.New("503 UNAVAILABLE"), classify.Verdict{Class: classify.Transient, HTTPStatus: 503})

func Example() {
	pro := fallback.Tier("pro", func(ctx context.Context, q string) (string, error) {
		return "", errOverloaded // the primary is down
	})
	flash := fallback.Tier("flash", func(ctx context.Context, q string) (string, error) {
		return "a short answer to " + q, nil
	})
	proBreaker, err := breaker.New(breaker.Config{Name: "pro"})
	if err != nil {
		panic(err)
	}

	chain, err := fallback.New(fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{
			{Tier: pro, Breaker: proBreaker, TryTimeout: 2 * time.Second,
				Retry: retry.Policy{MaxAttempts: 2, BaseDelay: 10 * time.Millisecond}},
			{Tier: flash, Validate: validate.NonEmpty()},
		},
		Total:   5 * time.Second,
		Default: func(context.Context, string) (string, bool) { return "Please try again later.", true },
	})
	if err != nil {
		panic(err)
	}

	res, err := chain.Do(context.Background(), "why is the sky blue?")
	fmt.Println(res.Value, err)
	fmt.Println("tier:", res.Tier, "degraded:", res.Degraded, "upstream calls:", res.UpstreamCalls)
	for _, a := range res.Attempts() {
		fmt.Println(" ", a.Tier, a.N, a.Verdict.Class)
	}
	// Output:
	// a short answer to why is the sky blue? <nil>
	// tier: flash degraded: true upstream calls: 3
	//   pro 1 transient
	//   pro 2 transient
	//   flash 1 ok
}
