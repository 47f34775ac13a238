package fallback_test

import (
	"context"
	"errors"
	"iter"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
)

// raceTier streams "<name>-<n> done" for its n-th stream (from 1), its
// first chunk with content after delay(n); each stream reports usage
// of 10 input tokens and n output tokens once it starts, billed whether
// or not it is read to its end. Before the text it sends a chunk without
// content, which a chain holds back until the stream commits.
type raceTier struct {
	name    string
	delay   func(n int64) time.Duration
	fail    func(n int64) error
	streams atomic.Int64
	// canceled counts streams that saw their context end before their end.
	canceled atomic.Int64
}

func (f *raceTier) tier() fallback.StreamTier[string, chunk] {
	return fallback.StreamTierFunc(f.name, f.stream, inspect)
}

func (f *raceTier) stream(ctx context.Context, _ string) iter.Seq2[chunk, error] {
	return func(yield func(chunk, error) bool) {
		n := f.streams.Add(1)
		fallback.Report(ctx, fallback.Reply{HasUsage: true, Usage: fallback.Usage{InputTokens: 10, OutputTokens: n}})
		if !yield(chunk{text: " "}, nil) {
			return
		}
		if f.fail != nil {
			if err := f.fail(n); err != nil {
				yield(chunk{}, err)
				return
			}
		}
		select {
		case <-time.After(f.delay(n)):
		case <-ctx.Done():
			f.canceled.Add(1)
			yield(chunk{}, ctx.Err())
			return
		}
		for _, c := range []chunk{{text: f.name + "-" + itoa(n)}, {text: " done", finish: "STOP"}} {
			if !yield(c, nil) {
				return
			}
		}
	}
}

func itoa(n int64) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// usageCounter counts what observers are told of: upstream calls (an
// AttemptEnd each, and a LateReply's Calls) and output tokens.
type usageCounter struct {
	fallback.NopObserver
	ends, late, output, hedgeEnds atomic.Int64
}

func (c *usageCounter) AttemptEnded(_ context.Context, e fallback.AttemptEnd) {
	c.ends.Add(1)
	if e.Hedge {
		c.hedgeEnds.Add(1)
	}
	if e.Reply != nil && e.Reply.HasUsage {
		c.output.Add(e.Reply.Usage.OutputTokens)
	}
}

func (c *usageCounter) LateReplyReceived(_ context.Context, e fallback.LateReply) {
	c.late.Add(int64(e.Calls))
	if e.Reply != nil && e.Reply.HasUsage {
		c.output.Add(e.Reply.Usage.OutputTokens)
	}
}

func hedgedStreamChain(t *testing.T, tier fallback.StreamTier[string, chunk], h fallback.Hedge, obs fallback.Observer) *fallback.StreamChain[string, chunk] {
	return newStreamChain(t, fallback.StreamConfig[string, chunk]{Total: 10 * time.Second, Observer: obs,
		Stages: []fallback.StreamStage[string, chunk]{{Tier: tier, Hedge: h}}})
}

// A first stream with no content by the hedge's delay is raced by a
// second on the same tier; the second sends content first and is the
// answer, alone: the consumer never sees the first's chunks, and the
// first is cancelled. Both are upstream calls, on the trail and to
// observers, and both streams' usage is told once.
func TestStreamHedgeWinsTheFirstChunkRace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &raceTier{name: "pro", delay: func(n int64) time.Duration { return []time.Duration{0, 5 * time.Second, 10 * time.Millisecond}[n] }}
		obs := &usageCounter{}
		c := hedgedStreamChain(t, f.tier(), fallback.Hedge{Delay: 100 * time.Millisecond}, obs)
		start := time.Now()
		s := c.Stream(t.Context(), "q")
		text, err := collect(s)
		require.NoError(t, err)
		assert.Equal(t, " pro-2 done", text, "the hedge's stream alone, its held-back chunk first")
		res := s.Result()
		assert.Equal(t, 110*time.Millisecond, res.TimeToFirstChunk, "the hedge's delay, then its own first chunk")
		assert.Less(t, time.Since(start), time.Second)
		assert.True(t, res.Complete)
		assert.Equal(t, 2, res.UpstreamCalls)
		require.Len(t, res.Attempts(), 2)
		assert.False(t, res.Attempts()[0].Hedge)
		assert.Equal(t, classify.Canceled, res.Attempts()[0].Verdict.Class, "the first stream lost the race")
		assert.True(t, res.Attempts()[1].Hedge)
		assert.Equal(t, classify.OK, res.Attempts()[1].Verdict.Class)
		synctest.Wait()
		assert.EqualValues(t, 2, f.streams.Load())
		assert.EqualValues(t, 1, f.canceled.Load(), "the loser is cancelled")
		assert.EqualValues(t, 2, obs.ends.Load()+obs.late.Load(), "each upstream call told once")
		assert.EqualValues(t, 1, obs.hedgeEnds.Load())
		assert.EqualValues(t, 1+2, obs.output.Load(), "both streams' usage, once each")
	})
}

// A first stream that sends content before the delay is never hedged; one
// that sends it after the hedge started wins, and the hedge is cancelled.
func TestStreamHedgeFirstStreamWins(t *testing.T) {
	for name, tc := range map[string]struct {
		first      time.Duration
		wantCalls  int
		wantStream int64
	}{
		"before the delay": {first: 50 * time.Millisecond, wantCalls: 1, wantStream: 1},
		"after the hedge":  {first: 150 * time.Millisecond, wantCalls: 2, wantStream: 2},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &raceTier{name: "pro", delay: func(n int64) time.Duration {
					if n == 1 {
						return tc.first
					}
					return time.Second
				}}
				obs := &usageCounter{}
				c := hedgedStreamChain(t, f.tier(), fallback.Hedge{Delay: 100 * time.Millisecond}, obs)
				s := c.Stream(t.Context(), "q")
				text, err := collect(s)
				require.NoError(t, err)
				assert.Equal(t, " pro-1 done", text)
				res := s.Result()
				// A hedge still streaming when the race ended settles its
				// call when it returns (a LateReply), not in UpstreamCalls.
				assert.LessOrEqual(t, res.UpstreamCalls, tc.wantCalls)
				assert.Len(t, res.Attempts(), tc.wantCalls, "the hedge that lost is on the trail")
				synctest.Wait()
				assert.Equal(t, tc.wantStream, f.streams.Load())
				assert.EqualValues(t, tc.wantCalls, obs.ends.Load()+obs.late.Load())
				assert.EqualValues(t, res.Attempts()[len(res.Attempts())-1].Verdict.Class, classify.OK)
				assert.False(t, res.Attempts()[len(res.Attempts())-1].Hedge)
			})
		})
	}
}

// A first stream that fails before its content while the hedge runs
// leaves the race to the hedge, which answers.
func TestStreamHedgeAnswersAfterTheFirstFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		unavailable := classify.Wrap(errors.New("503"), classify.Verdict{Class: classify.Transient, HTTPStatus: 503, Reason: "scripted"})
		f := &raceTier{name: "pro", delay: func(n int64) time.Duration {
			return []time.Duration{0, 200 * time.Millisecond, 300 * time.Millisecond}[n]
		}}
		f.fail = func(n int64) error {
			if n == 1 {
				time.Sleep(150 * time.Millisecond)
				return unavailable
			}
			return nil
		}
		c := hedgedStreamChain(t, f.tier(), fallback.Hedge{Delay: 100 * time.Millisecond}, nil)
		s := c.Stream(t.Context(), "q")
		text, err := collect(s)
		require.NoError(t, err)
		assert.Equal(t, " pro-2 done", text)
		res := s.Result()
		assert.Equal(t, 2, res.UpstreamCalls)
		require.Len(t, res.Attempts(), 2)
		assert.Equal(t, classify.Transient, res.Attempts()[0].Verdict.Class, "the first stream's failure stands on the trail")
		assert.True(t, res.Attempts()[1].Hedge)
	})
}

// A consumer that stops reading the hedge's stream cancels it, and every
// stream and guard is released.
func TestStreamHedgeConsumerStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &raceTier{name: "pro", delay: func(n int64) time.Duration { return []time.Duration{0, 5 * time.Second, 10 * time.Millisecond}[n] }}
		bh := newBulkhead(t, "pro", 4)
		c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Total: 10 * time.Second,
			Stages: []fallback.StreamStage[string, chunk]{{Tier: f.tier(), Bulkhead: bh, Hedge: fallback.Hedge{Delay: 100 * time.Millisecond}}}})
		s := c.Stream(t.Context(), "q")
		for ch, err := range s.Chunks() {
			require.NoError(t, err)
			if ch.text != " " {
				break
			}
		}
		synctest.Wait()
		assert.Equal(t, 0, bh.Stats().InFlight, "the first stream's slot and the hedge's are back")
		assert.Equal(t, classify.Canceled, s.Result().Attempts()[len(s.Result().Attempts())-1].Verdict.Class)
	})
}

// A same-tier hedge takes a bulkhead slot of its own, without waiting:
// with none free, no hedge starts and the first stream is waited for.
func TestStreamHedgeNeedsASlotOfItsOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &raceTier{name: "pro", delay: func(int64) time.Duration { return 500 * time.Millisecond }}
		c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Total: 10 * time.Second,
			Stages: []fallback.StreamStage[string, chunk]{{Tier: f.tier(), Bulkhead: newBulkhead(t, "pro", 1), Hedge: fallback.Hedge{Delay: 100 * time.Millisecond}}}})
		s := c.Stream(t.Context(), "q")
		text, err := collect(s)
		require.NoError(t, err)
		assert.Equal(t, " pro-1 done", text)
		assert.Equal(t, 1, s.Result().UpstreamCalls)
	})
}

// Under 64 concurrent streams with a slow tail (one first chunk in ten at
// 5× the median), hedging stays within its budget — at most MaxExtra more
// streams than attempts, plus its bank of 20 — and observers are told of
// every stream the tier started, and of its usage, exactly once.
func TestStreamHedgeCountsUnderLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &raceTier{name: "pro", delay: func(n int64) time.Duration {
			if n%10 == 0 {
				return 500 * time.Millisecond
			}
			return 100 * time.Millisecond
		}}
		obs := &usageCounter{}
		c := hedgedStreamChain(t, f.tier(), fallback.Hedge{Delay: 100 * time.Millisecond, Quantile: 0.9}, obs)
		const callers, each = 64, 10
		var answered, upstream atomic.Int64
		done := make(chan struct{})
		for range callers {
			go func() {
				defer func() { done <- struct{}{} }()
				for range each {
					s := c.Stream(context.Background(), "q")
					if _, err := collect(s); err == nil {
						answered.Add(1)
					}
					upstream.Add(int64(s.Result().UpstreamCalls))
				}
			}()
		}
		for range callers {
			<-done
		}
		synctest.Wait()
		assert.EqualValues(t, callers*each, answered.Load())
		streams := f.streams.Load()
		assert.LessOrEqual(t, streams, int64(callers*each+callers*each/10+20), "hedges within MaxExtra and the bank")
		assert.Greater(t, streams, int64(callers*each), "the slow tail was hedged")
		assert.Equal(t, streams, obs.ends.Load()+obs.late.Load(), "every stream told once")
		assert.LessOrEqual(t, upstream.Load(), streams)
		want := streams * (streams + 1) / 2
		assert.Equal(t, want, obs.output.Load(), "every stream's usage told once")
	})
}
