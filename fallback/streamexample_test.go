package fallback_test

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/fallback"
)

// sdkDelta is a second SDK's chunk type.
type sdkDelta struct{ Content, Stop string }

// TextStream puts stream tiers over different SDKs, each with its own
// chunk type, in one chain: the chain streams TextChunks, the provider's
// own chunk in Source.
func ExampleTextStream() {
	primary := fallback.StreamTierFunc("gemini", func(context.Context, string) iter.Seq2[string, error] {
		return func(yield func(string, error) bool) { yield("", errOverloaded) } // down before its first chunk
	}, func(s string) fallback.ChunkInfo { return fallback.ChunkInfo{Text: s} })
	gateway := fallback.StreamTierFunc("gpt", func(context.Context, string) iter.Seq2[sdkDelta, error] {
		return func(yield func(sdkDelta, error) bool) {
			_ = yield(sdkDelta{Content: "Rayleigh "}, nil) && yield(sdkDelta{Content: "scattering.", Stop: "stop"}, nil)
		}
	}, func(d sdkDelta) fallback.ChunkInfo { return fallback.ChunkInfo{Text: d.Content, FinishReason: d.Stop} })

	chain, err := fallback.NewStream(fallback.StreamConfig[string, fallback.TextChunk]{
		Stages: []fallback.StreamStage[string, fallback.TextChunk]{
			{Tier: fallback.TextStream(primary)},
			{Tier: fallback.TextStream(gateway)},
		},
		Total: 5 * time.Second,
	})
	if err != nil {
		panic(err)
	}
	s := chain.Stream(context.Background(), "Why is the sky blue?")
	for chunk, err := range s.Chunks() {
		if err != nil {
			panic(err)
		}
		fmt.Printf("%q from a %T\n", chunk.Text, chunk.Source)
	}
	fmt.Println("answered by tier", s.Result().TierIndex)
	// Output:
	// "Rayleigh " from a fallback_test.sdkDelta
	// "scattering." from a fallback_test.sdkDelta
	// answered by tier 1
}

// A hedged first chunk: a first stream with nothing to show by the
// hedge's delay is raced by a second one (on another key of a pool, or
// here the same tier); the first to show content is the answer, and the
// other is cancelled.
func ExampleStreamChain_hedge() {
	var streams atomic.Int32 // the hedge's stream starts on a goroutine of its own
	tier := fallback.StreamTierFunc("pro", func(ctx context.Context, _ string) iter.Seq2[string, error] {
		wait := 2 * time.Second // the first stream is stuck in the slow tail
		if streams.Add(1) > 1 {
			wait = 0
		}
		return func(yield func(string, error) bool) {
			select {
			case <-time.After(wait):
				_ = yield("fast ", nil) && yield("answer", nil)
			case <-ctx.Done():
				yield("", ctx.Err())
			}
		}
	}, func(s string) fallback.ChunkInfo {
		info := fallback.ChunkInfo{Text: s}
		if strings.HasSuffix(s, "answer") {
			info.FinishReason = "STOP"
		}
		return info
	})
	chain, err := fallback.NewStream(fallback.StreamConfig[string, string]{
		Stages: []fallback.StreamStage[string, string]{{Tier: tier, Hedge: fallback.Hedge{Delay: 50 * time.Millisecond}}},
		Total:  5 * time.Second,
	})
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
	res := s.Result()
	fmt.Println()
	fmt.Println("upstream streams:", len(res.Attempts()), "answered by the hedge:", res.Attempts()[len(res.Attempts())-1].Hedge)
	// Output:
	// fast answer
	// upstream streams: 2 answered by the hedge: true
}
