package fallback_test

import (
	"context"
	"errors"
	"iter"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
			rec.Rotated(errors.New("429"), classify.Verdict{Class: classify.RateLimited, Reason: "member over its quota"}, time.Millisecond)
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
