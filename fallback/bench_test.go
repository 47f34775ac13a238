package fallback_test

import (
	"context"
	"iter"
	"strconv"
	"testing"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/ratelimit"
)

func okTier(name string) fallback.ModelTier[string, string] {
	return fallback.Tier(name, func(context.Context, string) (string, error) { return "ok", nil })
}

// guardedStage is a stage with every guard: bulkhead, breaker, retry.
func guardedStage(tb testing.TB, tier fallback.ModelTier[string, string]) fallback.Stage[string, string] {
	bh, err := bulkhead.New(bulkhead.Config{Name: tier.Name(), Max: 1 << 20})
	if err != nil {
		tb.Fatal(err)
	}
	br, err := breaker.New(breaker.Config{Name: tier.Name()})
	if err != nil {
		tb.Fatal(err)
	}
	return fallback.Stage[string, string]{Tier: tier, Bulkhead: bh, Breaker: br}
}

func benchChain(b *testing.B, c *fallback.Chain[string, string], ctx context.Context) {
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Do(ctx, "q"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.Do(ctx, "q"); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

func BenchmarkChain(b *testing.B) {
	withDeadline, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()

	success, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{guardedStage(b, okTier("pro"))}})
	if err != nil {
		b.Fatal(err)
	}
	open := guardedStage(b, okTier("pro"))
	open.Breaker.ForceOpen()
	fellBack, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{open, guardedStage(b, okTier("flash"))}})
	if err != nil {
		b.Fatal(err)
	}
	quick := guardedStage(b, okTier("pro"))
	quick.TryTimeout = 8 * time.Second
	quickFlash := guardedStage(b, okTier("flash"))
	quickFlash.TryTimeout = 3 * time.Second
	// The README's quick start: Total and a TryTimeout on every stage.
	quickStart, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{quick, quickFlash}, Total: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	limited := guardedStage(b, okTier("pro"))
	lim, err := ratelimit.New(ratelimit.Config{Name: "pro", Requests: 1 << 30, Tokens: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	limited.Tier, limited.Tokens = ratelimit.Tier(limited.Tier, ratelimit.TierConfig[string]{Limiter: lim}), func(q string) int64 { return int64(len(q)) }
	rateLimited, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{limited}})
	if err != nil {
		b.Fatal(err)
	}
	quickObserved, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{quick, quickFlash}, Total: 10 * time.Second,
		Observer: fallback.NopObserver{}})
	if err != nil {
		b.Fatal(err)
	}
	observed, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{guardedStage(b, okTier("pro"))},
		Observer: fallback.NopObserver{}})
	if err != nil {
		b.Fatal(err)
	}
	reporting, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{guardedStage(b, fallback.Tier("pro",
		func(ctx context.Context, _ string) (string, error) {
			fallback.Report(ctx, fallback.Reply{Usage: fallback.Usage{InputTokens: 12, OutputTokens: 3}, HasUsage: true})
			return "ok", nil
		}))}, Observer: fallback.NopObserver{}})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("success", func(b *testing.B) { benchChain(b, success, context.Background()) })
	// The same with an observer that does nothing: what the events cost.
	b.Run("success-observed", func(b *testing.B) { benchChain(b, observed, context.Background()) })
	// Observed, with a tier that reports its response's usage, as the SDK
	// adapters' tiers do: the reply's own allocation.
	b.Run("success-observed-reporting", func(b *testing.B) { benchChain(b, reporting, context.Background()) })
	// The same, with a limiter of requests and tokens on the tier.
	b.Run("success-ratelimit", func(b *testing.B) { benchChain(b, rateLimited, context.Background()) })
	b.Run("success-quickstart", func(b *testing.B) { benchChain(b, quickStart, context.Background()) })
	// The quick start with an observer that does nothing.
	b.Run("success-quickstart-observed", func(b *testing.B) { benchChain(b, quickObserved, context.Background()) })
	b.Run("success-deadline", func(b *testing.B) { benchChain(b, success, withDeadline) })
	b.Run("fallback", func(b *testing.B) { benchChain(b, fellBack, context.Background()) })
	b.Run("fallback-deadline", func(b *testing.B) { benchChain(b, fellBack, withDeadline) })
}

// BenchmarkStream reads a three-chunk stream through a guarded stage to
// its first chunk (first) or to its end (all).
func BenchmarkStream(b *testing.B) {
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
	g := guardedStage(b, okTier("pro"))
	c, err := fallback.NewStream(fallback.StreamConfig[string, string]{Stages: []fallback.StreamStage[string, string]{{
		Tier: tier, Bulkhead: g.Bulkhead, Breaker: g.Breaker,
	}}})
	if err != nil {
		b.Fatal(err)
	}
	for _, read := range []struct {
		name string
		want int
	}{{"first", 1}, {"all", 3}} {
		b.Run(read.name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				n := 0
				for _, err := range c.Stream(ctx, "q").Chunks() {
					if err != nil {
						b.Fatal(err)
					}
					if n++; n == read.want {
						break
					}
				}
			}
		})
	}
}

// BenchmarkFallThrough answers on the last of n tiers, each before it
// skipped at once (its breaker open).
func BenchmarkFallThrough(b *testing.B) {
	for _, n := range []int{1, 2, 4, 8} {
		stages := make([]fallback.Stage[string, string], n)
		for i := range stages {
			stages[i] = guardedStage(b, okTier("t"+strconv.Itoa(i)))
			if i < n-1 {
				stages[i].Breaker.ForceOpen()
			}
		}
		c, err := fallback.New(fallback.Config[string, string]{Stages: stages})
		if err != nil {
			b.Fatal(err)
		}
		b.Run("tiers="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Do(context.Background(), "q"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// recordSink keeps BenchmarkObservedPathFloor's records on the heap.
var recordSink *fallback.Record

// BenchmarkObservedPathFloor is what an observed request answered on its
// first attempt cannot do without, whoever observes it: three readings
// of the monotonic clock (the request's start, the call's start and its
// end, which is also the request's) and the call's record, which carries
// what the call reports through whatever wraps the tier. Chain's
// success-observed less success, less this, is the events and the
// bookkeeping around them.
func BenchmarkObservedPathFloor(b *testing.B) {
	epoch := time.Now()
	b.ReportAllocs()
	var sum time.Duration
	for b.Loop() {
		start := time.Since(epoch)
		recordSink = new(fallback.Record)
		t0 := time.Since(epoch)
		end := time.Since(epoch)
		sum += end - t0 + end - start
	}
	if sum < 0 {
		b.Fatal("the monotonic clock went back")
	}
}
