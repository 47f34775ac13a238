package pool_test

import (
	"context"
	"iter"
	"testing"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/pool"
)

// BenchmarkStreamPool reads a three-chunk stream to its end through a
// StreamChain: from the bare tier, and from a pool of two members with the
// same tier; pool-alone reads the pool without a chain.
func BenchmarkStreamPool(b *testing.B) {
	tier := fallback.StreamTierFunc("pro", func(context.Context, string) iter.Seq2[string, error] {
		return func(yield func(string, error) bool) {
			for _, c := range [...]string{"o", "k", "."} {
				if !yield(c, nil) {
					return
				}
			}
		}
	}, func(c string) fallback.ChunkInfo {
		info := fallback.ChunkInfo{Text: c}
		if c == "." {
			info.FinishReason = "STOP"
		}
		return info
	})
	keys, err := pool.NewStream(pool.StreamConfig[string, string]{Name: "pro", Members: []pool.StreamMember[string, string]{
		{Key: "key-a", Tier: tier}, {Key: "key-b", Tier: tier},
	}})
	if err != nil {
		b.Fatal(err)
	}
	newChain := func(t fallback.StreamTier[string, string]) *fallback.StreamChain[string, string] {
		c, err := fallback.NewStream(fallback.StreamConfig[string, string]{Stages: []fallback.StreamStage[string, string]{{Tier: t}}})
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	read := func(b *testing.B, seq iter.Seq2[string, error]) {
		n := 0
		for _, err := range seq {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 3 {
			b.Fatalf("%d chunks", n)
		}
	}
	ctx := context.Background()
	for _, run := range []struct {
		name  string
		chain *fallback.StreamChain[string, string]
	}{{"bare", newChain(tier)}, {"pool", newChain(keys)}} {
		b.Run(run.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				read(b, run.chain.Stream(ctx, "q").Chunks())
			}
		})
	}
	b.Run("pool-alone", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			read(b, keys.Stream(ctx, "q"))
		}
	})
}
