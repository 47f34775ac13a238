package pool_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync/atomic"

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

// The stream side of a pool of two keys: a 429 on one key before it sent
// any content moves the stream to the other, which the consumer alone
// hears from; the trail shows both calls, each on its own key's hash.
func ExampleStreams() {
	unary := fallback.Tier("pro", func(context.Context, string) (string, error) { return "answer", nil })
	keys, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
		{Key: "AIza-first-key", Tier: unary},
		{Key: "AIza-second-key", Tier: unary},
	}, Sticky: func(string) string { return "conversation-1" }})
	if err != nil {
		panic(err)
	}
	// Whichever key is asked first is over its rate limit.
	var calls atomic.Int32
	stream := func(ctx context.Context, _ string) iter.Seq2[string, error] {
		return func(yield func(string, error) bool) {
			if calls.Add(1) == 1 {
				yield("", classify.Wrap(errors.New("429"), classify.Verdict{Class: classify.RateLimited, HTTPStatus: 429}))
				return
			}
			for _, c := range []string{"Hello", ", world"} {
				if !yield(c, nil) {
					return
				}
			}
		}
	}
	inspect := func(c string) fallback.ChunkInfo {
		info := fallback.ChunkInfo{Text: c}
		if c == ", world" {
			info.FinishReason = "STOP"
		}
		return info
	}
	streams, err := pool.Streams(keys, []pool.StreamMember[string, string]{
		{Key: "AIza-second-key", Tier: fallback.StreamTierFunc("pro", stream, inspect)},
		{Key: "AIza-first-key", Tier: fallback.StreamTierFunc("pro", stream, inspect)},
	})
	if err != nil {
		panic(err)
	}
	chain, err := fallback.NewStream(fallback.StreamConfig[string, string]{Stages: []fallback.StreamStage[string, string]{{Tier: streams}}})
	if err != nil {
		panic(err)
	}
	s := chain.Stream(context.Background(), "q")
	for chunk, err := range s.Chunks() {
		if err != nil {
			panic(err)
		}
		fmt.Print(chunk)
	}
	fmt.Println()
	res := s.Result()
	fmt.Println(res.Complete, res.UpstreamCalls)
	for _, a := range res.Attempts() {
		fmt.Println(a.Verdict.Class, len(a.Member) == 13 && a.Member[0] == '#')
	}
	// Output:
	// Hello, world
	// true 2
	// rate_limited true
	// ok true
}
