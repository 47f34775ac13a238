package pool_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/pool"
)

// A pool of two API keys behind one tier: a 429 on one key moves the
// request to the other before the next tier, and the trail names the key
// by a hash, never the key.
func ExampleNew() {
	limited := fallback.Tier("pro", func(context.Context, string) (string, error) {
		return "", classify.Wrap(errors.New("429"), classify.Verdict{Class: classify.RateLimited, HTTPStatus: 429})
	})
	healthy := fallback.Tier("pro", func(context.Context, string) (string, error) { return "answer", nil })
	keys, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
		{Key: "AIza-first-key", Tier: limited},
		{Key: "AIza-second-key", Tier: healthy},
	}, Sticky: func(string) string { return "conversation-1" }})
	if err != nil {
		panic(err)
	}
	chain, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
		{Tier: keys}, {Tier: fallback.Tier("flash", func(context.Context, string) (string, error) { return "flash", nil })},
	}})
	if err != nil {
		panic(err)
	}
	res, _ := chain.Do(context.Background(), "q")
	fmt.Println(res.Value, res.Tier, res.UpstreamCalls)
	for _, a := range res.Attempts() {
		fmt.Println(a.Verdict.Class, len(a.Member) == 13 && a.Member[0] == '#')
	}
	// Output:
	// answer pro 2
	// rate_limited true
	// ok true
}
