package fallback_test

import (
	"context"
	"errors"
	"iter"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/internal/testbed/reported"
	"github.com/tierguard/tierguard/retry"
)

// A stream's chunks reach the consumer as the tier yields them, on the
// consumer's own goroutine: the tier sees the consumer's pace, with no
// chunk read ahead.
func TestStreamChunksArePushedAsTheTierYields(t *testing.T) {
	var yielded int
	tier := fallback.StreamTierFunc("pro", func(context.Context, string) iter.Seq2[chunk, error] {
		return func(yield func(chunk, error) bool) {
			for i, w := range []string{"a", "b", "c"} {
				yielded++
				c := chunk{text: w}
				if i == 2 {
					c.finish = "STOP"
				}
				if !yield(c, nil) {
					return
				}
			}
		}
	}, inspect)
	c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: tier}}})
	var seen []int
	for _, err := range c.Stream(context.Background(), "q").Chunks() {
		require.NoError(t, err)
		seen = append(seen, yielded)
	}
	assert.Equal(t, []int{1, 2, 3}, seen, "each chunk is handed over before the tier makes the next")
}

// A stream tier that spreads its calls over members reports them as a
// pool does: the member call that failed before the stream committed is
// on the trail before the answer, and the answer, its first chunk and its
// end name the member that streamed it, numbered after the rotation.
func TestStreamReportsItsMembersAndRotations(t *testing.T) {
	tier := fallback.StreamTierFunc("pool", func(ctx context.Context, _ string) iter.Seq2[chunk, error] {
		return func(yield func(chunk, error) bool) {
			rec := fallback.RecordOf(ctx)
			rec.Member("#a")
			ctx = rec.Rotated(ctx, errors.New("429"), classify.Verdict{Class: classify.RateLimited, Reason: "member over its quota"}, time.Millisecond)
			rec.Member("#b")
			for _, c := range []chunk{{text: "o"}, {text: "k", finish: "STOP"}} {
				if !yield(c, nil) {
					return
				}
			}
		}
	}, inspect)
	rec := &reported.Recorder{}
	c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: tier}}, Observer: rec})
	s := c.Stream(context.Background(), "q")
	text, err := collect(s)
	require.NoError(t, err)
	assert.Equal(t, "ok", text)
	res := s.Result()
	assert.Equal(t, 2, res.UpstreamCalls)
	trail := res.Attempts()
	require.Len(t, trail, 2)
	assert.Equal(t, "#a", trail[0].Member)
	assert.Equal(t, classify.RateLimited, trail[0].Verdict.Class)
	assert.Equal(t, 1, trail[0].N)
	assert.Equal(t, "#b", trail[1].Member)
	assert.Equal(t, classify.OK, trail[1].Verdict.Class)
	assert.Equal(t, 2, trail[1].N)

	first := reported.Of[fallback.FirstChunk](rec)
	require.Len(t, first, 1)
	assert.Equal(t, "#b", first[0].Member)
	assert.Equal(t, 2, first[0].Attempt)
	ends := reported.Of[fallback.AttemptEnd](rec)
	require.Len(t, ends, 2)
	assert.Equal(t, "#a", ends[0].Member)
	assert.Equal(t, "#b", ends[1].Member)
	assert.Equal(t, 2, ends[1].Attempt)
	assert.Equal(t, 2, ends[1].Chunks)
}

// The request let through at the end of a tier's cool-down is its probe
// only until its stream commits: while it streams, other requests reach
// the tier.
func TestStreamProbeEndsAtTheCommitPoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tooFast := classify.Wrap(errors.New("429"), classify.Verdict{Class: classify.RateLimited, HTTPStatus: 429, RetryAfter: time.Second})
		pro := &streamFake{name: "pro", scripts: []streamScript{
			{before: tooFast},
			{chunks: words("a", "b"), gap: 100 * time.Millisecond, finishing: true},
			{chunks: words("x"), finishing: true},
		}}
		c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{
			Tier: pro.tier(), Retry: retry.Policy{MaxAttempts: 1},
		}}})
		_, err := collect(c.Stream(context.Background(), "q"))
		require.Error(t, err)
		time.Sleep(time.Second + time.Millisecond)

		var during fallback.StreamResult
		var duringText string
		probe := c.Stream(context.Background(), "q")
		for ch, err := range probe.Chunks() {
			require.NoError(t, err)
			if ch.text == "a" {
				other := c.Stream(context.Background(), "q")
				duringText, err = collect(other)
				require.NoError(t, err)
				during = other.Result()
			}
		}
		assert.True(t, probe.Result().Complete)
		assert.Equal(t, "x", duringText, "a request during the probe's stream reaches the tier")
		assert.Equal(t, "pro", during.Tier)
		assert.Equal(t, int64(3), pro.calls.Load())
	})
}

// TestStreamFirstChunkAllocations: a guarded stream read to its first
// chunk allocates three things more than ranging over the tier itself:
// the Stream, its Chunks sequence (none when the range statement calls
// Chunks itself, where the compiler inlines it), and the function that
// takes the tier's chunks — nothing per chunk, and no coroutine.
func TestStreamFirstChunkAllocations(t *testing.T) {
	tier := fallback.StreamTierFunc("pro", func(context.Context, string) iter.Seq2[chunk, error] {
		return func(yield func(chunk, error) bool) {
			for _, c := range [...]chunk{{text: "o"}, {text: "k"}, {text: ".", finish: "STOP"}} {
				if !yield(c, nil) {
					return
				}
			}
		}
	}, inspect)
	c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{
		Tier: tier, Breaker: newBreaker(t, breaker.Config{Name: "pro"}), Bulkhead: newBulkhead(t, "pro", 8),
	}}})
	read := func(seq func() iter.Seq2[chunk, error], want int) float64 {
		return testing.AllocsPerRun(200, func() {
			n := 0
			for _, err := range seq() {
				if err != nil || n+1 == want {
					break
				}
				n++
			}
		})
	}
	chained := func() iter.Seq2[chunk, error] { return c.Stream(context.Background(), "q").Chunks() }
	direct := func() iter.Seq2[chunk, error] { return tier.Stream(context.Background(), "q") }
	first := read(chained, 1)
	assert.LessOrEqual(t, first-read(direct, 1), 3.0)
	assert.Equal(t, first, read(chained, 3), "later chunks allocate nothing")
}

// TestFallingThroughEveryTierAllocatesNothing: answering on the last of
// eight tiers, each before it skipped (its breaker open), allocates
// nothing, and the trail reads as if each skip were held in full, in
// order. A ninth tier's skip no longer fits the marks and spills the
// trail once.
func TestFallingThroughEveryTierAllocatesNothing(t *testing.T) {
	chain := func(n int) *fallback.Chain[string, string] {
		stages := make([]fallback.Stage[string, string], n)
		for i := range stages {
			name := "t" + strconv.Itoa(i)
			stages[i] = fallback.Stage[string, string]{Tier: newFake(name, ok("x")), Breaker: newBreaker(t, breaker.Config{Name: name})}
			if i < len(stages)-1 {
				stages[i].Breaker.ForceOpen()
			}
		}
		return newChain(t, fallback.Config[string, string]{Stages: stages})
	}
	c := chain(8)
	res, err := c.Do(context.Background(), "q")
	require.NoError(t, err)
	trail := res.Attempts()
	require.Len(t, trail, 8)
	for i, a := range trail[:7] {
		assert.Equal(t, "t"+strconv.Itoa(i), a.Tier)
		assert.Equal(t, i, a.TierIndex)
		assert.Equal(t, fallback.SkipOpen, a.Skip)
		assert.Equal(t, classify.Rejected, a.Verdict.Class)
		assert.Equal(t, "circuit open", a.Verdict.Reason)
		assert.ErrorIs(t, a.Err, breaker.ErrOpen)
	}
	assert.Equal(t, "t7", trail[7].Tier)
	assert.Equal(t, 1, trail[7].N)
	assert.Equal(t, fallback.NotSkipped, trail[7].Skip)
	assert.Zero(t, testing.AllocsPerRun(200, func() { _, _ = c.Do(context.Background(), "q") }))

	nine := chain(9)
	res, err = nine.Do(context.Background(), "q")
	require.NoError(t, err)
	require.Len(t, res.Attempts(), 9)
	assert.Equal(t, "t7", res.Attempts()[7].Tier)
	assert.Equal(t, fallback.SkipOpen, res.Attempts()[7].Skip)
	assert.Equal(t, "t8", res.Attempts()[8].Tier)
	assert.Equal(t, 1.0, testing.AllocsPerRun(200, func() { _, _ = nine.Do(context.Background(), "q") }))
}

// A consumer that panics inside its loop — which now runs inside the
// tier's sequence — unwinds through the tier (whose deferred clean-up
// runs), frees the stage's slot and probe, ends the request for
// observers, and the panic reaches the consumer's caller.
func TestStreamConsumerPanicUnwindsThroughTheTier(t *testing.T) {
	bh := newBulkhead(t, "pro", 1)
	var cleaned atomic.Bool
	tier := fallback.StreamTierFunc("pro", func(context.Context, string) iter.Seq2[chunk, error] {
		return func(yield func(chunk, error) bool) {
			defer cleaned.Store(true)
			for _, c := range []chunk{{text: "a"}, {text: "b", finish: "STOP"}} {
				if !yield(c, nil) {
					return
				}
			}
		}
	}, inspect)
	rec := &reported.Recorder{}
	c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: tier, Bulkhead: bh}}, Observer: rec})
	assert.PanicsWithValue(t, "consumer exploded", func() {
		for range c.Stream(context.Background(), "q").Chunks() {
			panic("consumer exploded")
		}
	})
	assert.True(t, cleaned.Load())
	assert.Zero(t, bh.Stats().InFlight)
	ends := reported.Of[fallback.RequestEnd](rec)
	require.Len(t, ends, 1)
	assert.False(t, ends[0].Answered)
}

// With AbandonAfter the tier runs on a goroutine of its own and hands its
// chunks over one at a time: a stream read to its end completes, and a
// consumer that breaks out cancels the tier and frees the slot.
func TestDetachedStreamCompletesAndStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var canceled atomic.Bool
		bh := newBulkhead(t, "pro", 1)
		pro := &streamFake{name: "pro", scripts: []streamScript{
			{chunks: words("a", "b", "c"), finishing: true},
			{chunks: words("a", "b", "c"), stall: true, canceled: &canceled},
		}}
		c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: pro.tier(), Bulkhead: bh}},
			AbandonAfter: time.Second})
		s := c.Stream(context.Background(), "q")
		text, err := collect(s)
		require.NoError(t, err)
		assert.Equal(t, "abc", text)
		assert.True(t, s.Result().Complete)

		for ch, err := range c.Stream(context.Background(), "q").Chunks() {
			require.NoError(t, err)
			if ch.text == "b" {
				break
			}
		}
		synctest.Wait()
		assert.True(t, canceled.Load(), "breaking out cancels the tier")
		assert.Zero(t, bh.Stats().InFlight)
		assert.Zero(t, c.Stats().Stuck)
	})
}

// TestTrailKeepsSkipsAndCallsInOrder: skips held as marks and calls held
// in full read back in the order they happened, with a retry's wait.
func TestTrailKeepsSkipsAndCallsInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		open := func(name string) *breaker.Breaker {
			b := newBreaker(t, breaker.Config{Name: name})
			b.ForceOpen()
			return b
		}
		once := retry.Policy{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: newFake("a", fails(classify.Transient)), Retry: once},
			{Tier: newFake("b", ok("x")), Breaker: open("b")},
			{Tier: newFake("c", fails(classify.Transient)), Retry: retry.Policy{MaxAttempts: 1}},
			{Tier: newFake("d", ok("x")), Breaker: open("d")},
			{Tier: newFake("e", ok("x"))},
		}})
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		type entry struct {
			tier string
			n    int
			skip fallback.Skip
		}
		var got []entry
		for _, a := range res.Attempts() {
			got = append(got, entry{a.Tier, a.N, a.Skip})
		}
		assert.Equal(t, []entry{{"a", 1, fallback.NotSkipped}, {"a", 2, fallback.NotSkipped}, {"b", 0, fallback.SkipOpen},
			{"c", 1, fallback.NotSkipped}, {"d", 0, fallback.SkipOpen}, {"e", 1, fallback.NotSkipped}}, got)
		assert.Positive(t, res.Attempts()[0].Wait, "the retry's wait stays on its entry")
		assert.Equal(t, 4, res.UpstreamCalls)
	})
}
