package chaos_test

import (
	"context"
	"iter"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/chaos"
)

// instant is a tier that answers at once without allocating.
type instant struct{}

func (instant) Name() string                                      { return "pro" }
func (instant) Call(_ context.Context, in string) (string, error) { return in, nil }

// instantStream streams two chunks without allocating per call beyond its
// iterator.
type instantStream struct{}

func (instantStream) Name() string { return "pro" }
func (instantStream) Inspect(c chunk) fallback.ChunkInfo {
	return fallback.ChunkInfo{Text: c.text, FinishReason: c.finish}
}

var twoChunks iter.Seq2[chunk, error] = func(yield func(chunk, error) bool) {
	if yield(chunk{text: "a"}, nil) {
		yield(chunk{text: "b", finish: "STOP"}, nil)
	}
}

func (instantStream) Stream(context.Context, string) iter.Seq2[chunk, error] { return twoChunks }

// Off, a wrapped call allocates nothing and costs what the tier costs
// plus one atomic load: the wrapper adds no allocation to the tier, nor to
// the chain's allocation-free success path.
func TestOffAllocatesNothing(t *testing.T) {
	var sw chaos.Switch
	ctx := context.Background()
	tier := chaos.Tier[string, string](instant{}, &sw)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _, _ = tier.Call(ctx, "q") }))

	// Ranging over a stream costs the range's own allocations; the
	// wrapper adds none.
	st := chaos.StreamTier[string, chunk](instantStream{}, &sw)
	read := func(t fallback.StreamTier[string, chunk]) func() {
		return func() {
			for range t.Stream(ctx, "q") {
			}
		}
	}
	assert.Equal(t, testing.AllocsPerRun(1000, read(instantStream{})), testing.AllocsPerRun(1000, read(st)))

	chain, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: tier}}})
	require.NoError(t, err)
	bare, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: instant{}}}})
	require.NoError(t, err)
	wantChain := testing.AllocsPerRun(1000, func() { _, _ = bare.Do(ctx, "q") })
	assert.Equal(t, wantChain, testing.AllocsPerRun(1000, func() { _, _ = chain.Do(ctx, "q") }))
	assert.Zero(t, wantChain)

	// A drill that ended leaves the switch off again.
	require.NoError(t, sw.Start(chaos.Drill{For: time.Hour, Rules: []chaos.Rule{{Fault: boom, Rate: 1, Tier: "other"}}}))
	sw.Stop()
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _, _ = tier.Call(ctx, "q") }))
}

// BenchmarkTier measures a call of a tier bare, wrapped with the switch
// off, and wrapped during a drill whose rules do not match it.
func BenchmarkTier(b *testing.B) {
	ctx := context.Background()
	var off, on chaos.Switch
	require.NoError(b, on.Start(chaos.Drill{For: time.Hour, Rules: []chaos.Rule{{Fault: boom, Rate: 1, Tier: "other"}}}))
	defer on.Stop()
	for _, c := range []struct {
		name string
		tier fallback.ModelTier[string, string]
	}{
		{"impl=bare", instant{}},
		{"impl=off", chaos.Tier[string, string](instant{}, &off)},
		{"impl=on-unmatched", chaos.Tier[string, string](instant{}, &on)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = c.tier.Call(ctx, "q")
			}
		})
	}
}

// BenchmarkChain measures the chain's success path over a bare tier and
// over the same tier wrapped, switch off.
func BenchmarkChain(b *testing.B) {
	ctx := context.Background()
	var off chaos.Switch
	for _, c := range []struct {
		name string
		tier fallback.ModelTier[string, string]
	}{
		{"impl=bare", instant{}},
		{"impl=off", chaos.Tier[string, string](instant{}, &off)},
	} {
		b.Run(c.name, func(b *testing.B) {
			chain, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: c.tier}}})
			require.NoError(b, err)
			b.ReportAllocs()
			for b.Loop() {
				_, _ = chain.Do(ctx, "q")
			}
		})
	}
}

// BenchmarkStream measures starting and reading a two-chunk stream, bare
// and wrapped with the switch off.
func BenchmarkStream(b *testing.B) {
	ctx := context.Background()
	var off chaos.Switch
	for _, c := range []struct {
		name string
		tier fallback.StreamTier[string, chunk]
	}{
		{"impl=bare", instantStream{}},
		{"impl=off", chaos.StreamTier[string, chunk](instantStream{}, &off)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for range c.tier.Stream(ctx, "q") {
				}
			}
		})
	}
}
