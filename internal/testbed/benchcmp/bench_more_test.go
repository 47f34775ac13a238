package benchcmp

import (
	"context"
	"testing"
)

// BenchmarkQuickStart is the README's quick start on its success path
// (pro answers), as the README prints it (TierguardQuickStart), against the
// same guards by hand (QuickStartFloor) and failsafe-go's equivalent
// (FailsafeQuick).
func BenchmarkQuickStart(b *testing.B) {
	bench(b, func() []contender {
		tg := TierguardQuickStart(QuickFuncs{})
		floor := NewQuickStartFloor(QuickFuncs{})
		fs := NewFailsafeQuick(QuickFuncs{})
		ctx := context.Background()
		return []contender{
			{"tierguard", func() bool {
				res, err := tg.Do(ctx, "q")
				return err == nil && res.Value == Answer
			}},
			{"floor", func() bool { return ok(floor.Do(ctx, "q")) }},
			{"failsafe", func() bool { return ok(fs.Get()) }},
		}
	})
}

// BenchmarkStream reads a three-chunk stream to its first chunk
// (read=first) or to its end (read=all): through a StreamChain (bulkhead,
// breaker, retry, commit at the first chunk with content), through
// failsafe-go around iter.Pull2 (FailsafeStream), and ranging over the
// tier's sequence directly.
func BenchmarkStream(b *testing.B) {
	for _, read := range []struct {
		name string
		want int
	}{{"first", 1}, {"all", 3}} {
		b.Run("read="+read.name, func(b *testing.B) {
			bench(b, func() []contender {
				tier := StreamTier()
				chain := TierguardStreamChain()
				fs := NewFailsafeStream(StreamTier())
				ctx := context.Background()
				count := func(seq func(func(string, error) bool)) bool {
					n := 0
					for _, err := range seq {
						if err != nil {
							return false
						}
						if n++; n == read.want {
							break
						}
					}
					return n == read.want
				}
				return []contender{
					{"direct", func() bool { return count(tier.Stream(ctx, "q")) }},
					{"tierguard", func() bool { return count(chain.Stream(ctx, "q").Chunks()) }},
					{"failsafe", func() bool { return count(fs.Stream(ctx, "q")) }},
				}
			})
		})
	}
}
