package fallback_test

import (
	"context"
	"io"
	"iter"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/deadline"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/internal/testbed/reported"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// chunk is a test chunk: text and an optional finish reason.
type chunk struct {
	text   string
	finish string
}

func inspect(c chunk) fallback.ChunkInfo {
	return fallback.ChunkInfo{Text: c.text, FinishReason: c.finish}
}

// streamScript describes one scripted stream.
type streamScript struct {
	before    error         // fail before the first chunk
	chunks    []chunk       // chunks to send
	gap       time.Duration // delay before each chunk
	after     error         // fail after the chunks
	stall     bool          // after the chunks, wait for the context to end
	canceled  *atomic.Bool  // set when the stream saw its context end
	finishing bool          // mark the last chunk with STOP
}

type streamFake struct {
	name    string
	scripts []streamScript
	def     streamScript
	calls   atomic.Int64
}

func (f *streamFake) tier() fallback.StreamTier[string, chunk] {
	return fallback.StreamTierFunc(f.name, f.stream, inspect)
}

func (f *streamFake) stream(ctx context.Context, _ string) iter.Seq2[chunk, error] {
	n := int(f.calls.Add(1)) - 1
	s := f.def
	if n < len(f.scripts) {
		s = f.scripts[n]
	}
	return func(yield func(chunk, error) bool) {
		defer func() {
			if s.canceled != nil && ctx.Err() != nil {
				s.canceled.Store(true)
			}
		}()
		if s.before != nil {
			yield(chunk{}, s.before)
			return
		}
		for i, c := range s.chunks {
			if s.gap > 0 {
				select {
				case <-time.After(s.gap):
				case <-ctx.Done():
					yield(chunk{}, ctx.Err())
					return
				}
			}
			if s.finishing && i == len(s.chunks)-1 {
				c.finish = "STOP"
			}
			if !yield(c, nil) {
				return
			}
		}
		switch {
		case s.after != nil:
			yield(chunk{}, s.after)
		case s.stall:
			<-ctx.Done()
			yield(chunk{}, ctx.Err())
		}
	}
}

func words(ws ...string) []chunk {
	out := make([]chunk, len(ws))
	for i, w := range ws {
		out[i] = chunk{text: w}
	}
	return out
}

func collect(s *fallback.Stream[string, chunk]) (string, error) {
	var b strings.Builder
	for c, err := range s.Chunks() {
		if err != nil {
			return b.String(), err
		}
		b.WriteString(c.text)
	}
	return b.String(), nil
}

func newStreamChain(t *testing.T, cfg fallback.StreamConfig[string, chunk]) *fallback.StreamChain[string, chunk] {
	t.Helper()
	c, err := fallback.NewStream(cfg)
	require.NoError(t, err)
	return c
}

func TestStreamCompletes(t *testing.T) {
	pro := &streamFake{name: "pro", def: streamScript{chunks: words("a", "b", "c"), finishing: true}}
	c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: pro.tier()}}})
	s := c.Stream(context.Background(), "q")
	text, err := collect(s)
	require.NoError(t, err)
	assert.Equal(t, "abc", text)
	res := s.Result()
	assert.True(t, res.Complete)
	assert.Equal(t, "pro", res.Tier)
	assert.Equal(t, 3, res.Chunks)
	assert.Equal(t, 3, res.Bytes)
	assert.Equal(t, "STOP", res.FinishReason)
	assert.False(t, res.Degraded)

	_, err = collect(s)
	assert.ErrorContains(t, err, "ranged over once")
}

// TimeToFirstChunk is measured from the request's start whether or not an
// observer is attached (it once came out as the time since the zero
// time when none was).
func TestStreamTimeToFirstChunkWithoutObserver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pro := &streamFake{name: "pro", def: streamScript{chunks: words("a", "b"), gap: 40 * time.Millisecond, finishing: true}}
		c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: pro.tier()}}})
		s := c.Stream(context.Background(), "q")
		_, err := collect(s)
		require.NoError(t, err)
		assert.Equal(t, 40*time.Millisecond, s.Result().TimeToFirstChunk)
	})
}

func TestStream503BeforeFirstChunkFallsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pro := &streamFake{name: "pro", def: streamScript{before: classErr(classify.Transient)}}
		flash := &streamFake{name: "flash", def: streamScript{chunks: words("x", "y"), finishing: true}}
		c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{
			{Tier: pro.tier(), Retry: retry.Policy{MaxAttempts: 2}},
			{Tier: flash.tier()},
		}})
		s := c.Stream(context.Background(), "q")
		text, err := collect(s)
		require.NoError(t, err)
		assert.Equal(t, "xy", text)
		assert.Equal(t, int64(2), pro.calls.Load(), "retried before the first chunk")
		res := s.Result()
		assert.Equal(t, "flash", res.Tier)
		assert.True(t, res.Degraded)
		assert.Equal(t, 3, res.UpstreamCalls)
	})
}

func TestStreamCutAfterThreeChunksIsIncomplete(t *testing.T) {
	br := newBreaker(t, breaker.Config{Name: "pro", ConsecutiveFailures: 1})
	pro := &streamFake{name: "pro", def: streamScript{chunks: words("a", "b", "c"), after: io.ErrUnexpectedEOF}}
	flash := &streamFake{name: "flash", def: streamScript{chunks: words("z"), finishing: true}}
	c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{
		{Tier: pro.tier(), Breaker: br}, {Tier: flash.tier()},
	}})
	s := c.Stream(context.Background(), "q")
	text, err := collect(s)
	assert.Equal(t, "abc", text, "the three chunks were delivered")
	var ie *fallback.IncompleteError
	require.ErrorAs(t, err, &ie)
	assert.ErrorIs(t, err, fallback.ErrIncomplete)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Equal(t, 3, ie.Chunks)
	assert.Equal(t, 3, ie.Bytes)
	assert.Equal(t, "pro", ie.Tier)
	assert.Equal(t, classify.Transient, classify.Classify(err).Class)
	assert.Zero(t, flash.calls.Load(), "no silent switch after the commit point")
	assert.Equal(t, breaker.Open, br.State(), "a cut stream counts like any transport failure")
	assert.False(t, s.Result().Complete)
}

func TestStreamCleanCloseWithoutFinishIsIncomplete(t *testing.T) {
	pro := &streamFake{name: "pro", def: streamScript{chunks: words("a", "b")}}
	c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: pro.tier()}}})
	_, err := collect(c.Stream(context.Background(), "q"))
	require.ErrorIs(t, err, fallback.ErrNoFinishReason)
	require.ErrorIs(t, err, fallback.ErrIncomplete)
}

func TestStreamIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var canceled atomic.Bool
		pro := &streamFake{name: "pro", def: streamScript{chunks: words("a"), stall: true, canceled: &canceled}}
		c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: pro.tier(), IdleTimeout: 2 * time.Second}}})
		start := time.Now()
		_, err := collect(c.Stream(context.Background(), "q"))
		require.ErrorIs(t, err, fallback.ErrIdleTimeout)
		assert.Equal(t, 2*time.Second, time.Since(start), "the stream ends at the idle timeout")
		assert.True(t, canceled.Load(), "the upstream call was cancelled")
	})
}

func TestStreamSlowConsumerIsNotIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pro := &streamFake{name: "pro", def: streamScript{chunks: words("a", "b", "c"), finishing: true}}
		c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: pro.tier(), IdleTimeout: time.Second}}})
		for _, err := range c.Stream(context.Background(), "q").Chunks() {
			require.NoError(t, err)
			time.Sleep(5 * time.Second) // the consumer is slow, the upstream is not
		}
	})
}

func TestStreamFirstChunkTimeoutFallsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pro := &streamFake{name: "pro", def: streamScript{chunks: words("late"), gap: time.Minute}}
		flash := &streamFake{name: "flash", def: streamScript{chunks: words("quick"), finishing: true}}
		c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{
			{Tier: pro.tier(), FirstChunkTimeout: 3 * time.Second, Retry: retry.Policy{MaxAttempts: 1}},
			{Tier: flash.tier()},
		}})
		start := time.Now()
		s := c.Stream(context.Background(), "q")
		text, err := collect(s)
		require.NoError(t, err)
		assert.Equal(t, "quick", text)
		assert.Equal(t, 3*time.Second, time.Since(start))
		assert.Equal(t, classify.Transient, s.Result().Attempts()[0].Verdict.Class)
		assert.ErrorIs(t, s.Result().Attempts()[0].Err, fallback.ErrFirstChunkTimeout)
	})
}

func TestStreamTotalDeadlineBoundsTheWholeStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pro := &streamFake{name: "pro", def: streamScript{chunks: words("a", "b", "c", "d", "e", "f"), gap: time.Second, finishing: true}}
		c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: pro.tier()}}, Total: 3500 * time.Millisecond})
		start := time.Now()
		text, err := collect(c.Stream(context.Background(), "q"))
		assert.Equal(t, "abc", text)
		require.ErrorIs(t, err, fallback.ErrIncomplete)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, classify.DeadlineExhausted, classify.Classify(err).Class)
		assert.Equal(t, 3500*time.Millisecond, time.Since(start))
	})
}

func TestStreamConsumerBreakReleasesEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var canceled atomic.Bool
		bh := newBulkhead(t, "pro", 1)
		br := newBreaker(t, breaker.Config{Name: "pro", ConsecutiveFailures: 1, Cooldown: time.Second})
		tok, _ := br.Allow()
		tok.Done(breaker.Failure)
		time.Sleep(time.Second)
		synctest.Wait()
		require.Equal(t, breaker.HalfOpen, br.State())

		pro := &streamFake{name: "pro", def: streamScript{chunks: words("a", "b", "c"), stall: true, canceled: &canceled}}
		c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: pro.tier(), Bulkhead: bh, Breaker: br}}})
		for ch, err := range c.Stream(context.Background(), "q").Chunks() {
			require.NoError(t, err)
			assert.Equal(t, 1, bh.Stats().InFlight, "the slot is held while streaming")
			_, perr := br.Allow()
			assert.ErrorIs(t, perr, breaker.ErrOpen, "the probe is held while streaming")
			if ch.text == "b" {
				break
			}
		}
		synctest.Wait()
		assert.True(t, canceled.Load(), "breaking out cancels the upstream request")
		assert.Zero(t, bh.Stats().InFlight)
		probe, err := br.Allow()
		require.NoError(t, err, "the probe slot is free again")
		probe.Done(breaker.Ignored)
		assert.Equal(t, breaker.HalfOpen, br.State(), "a consumer's break decides nothing")
	})
}

func TestStreamValidationAtTheEnd(t *testing.T) {
	br := newBreaker(t, breaker.Config{Name: "pro", ConsecutiveFailures: 1})
	pro := &streamFake{name: "pro", def: streamScript{chunks: words(`{"a":`, ` oops`), finishing: true}}
	c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: pro.tier(), Breaker: br, Validate: validate.JSON()}}})
	s := c.Stream(context.Background(), "q")
	text, err := collect(s)
	assert.Equal(t, `{"a": oops`, text, "the caller saw the text before learning it failed")
	var ve *validate.Error
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, breaker.Closed, br.State(), "invalid output does not count against the breaker")
	assert.False(t, s.Result().Complete)
}

func TestStreamContinuation(t *testing.T) {
	pro := &streamFake{name: "pro", def: streamScript{chunks: words("The sky ", "is "), after: io.ErrUnexpectedEOF}}
	flash := &streamFake{name: "flash", def: streamScript{chunks: words("blue."), finishing: true}}
	var partial string
	c := newStreamChain(t, fallback.StreamConfig[string, chunk]{
		Stages: []fallback.StreamStage[string, chunk]{{Tier: pro.tier()}, {Tier: flash.tier()}},
		Continue: func(in, p string) (string, bool) {
			partial = p
			return in + "\ncontinue after: " + p, true
		},
	})
	s := c.Stream(context.Background(), "q")
	text, err := collect(s)
	require.NoError(t, err)
	assert.Equal(t, "The sky is blue.", text)
	assert.Equal(t, "The sky is ", partial)
	res := s.Result()
	assert.True(t, res.Continued)
	assert.True(t, res.Complete)
	assert.Equal(t, "flash", res.Tier)
	assert.Equal(t, 3, res.Chunks)
}

func TestStreamAllTiersFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pro := &streamFake{name: "pro", def: streamScript{before: classErr(classify.Auth)}}
		c := newStreamChain(t, fallback.StreamConfig[string, chunk]{
			Stages:  []fallback.StreamStage[string, chunk]{{Tier: pro.tier()}, {Tier: (&streamFake{name: "flash"}).tier()}},
			Default: func(context.Context, string) (chunk, bool) { return chunk{text: "default", finish: "STOP"}, true },
		})
		_, err := collect(c.Stream(context.Background(), "q"))
		var fe *fallback.Error
		require.ErrorAs(t, err, &fe)
		assert.True(t, fe.FailedClosed, "auth fails closed: no default")

		empty := &streamFake{name: "pro", def: streamScript{before: classErr(classify.Transient)}}
		c = newStreamChain(t, fallback.StreamConfig[string, chunk]{
			Stages:  []fallback.StreamStage[string, chunk]{{Tier: empty.tier(), Retry: retry.Policy{MaxAttempts: 1}}},
			Default: func(context.Context, string) (chunk, bool) { return chunk{text: "default", finish: "STOP"}, true },
		})
		s := c.Stream(context.Background(), "q")
		text, err := collect(s)
		require.NoError(t, err)
		assert.Equal(t, "default", text)
		assert.Equal(t, fallback.SourceDefault, s.Result().Source)
	})
}

func TestStreamEmptyAndBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pro := &streamFake{name: "pro", def: streamScript{}}
		c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: pro.tier()}}})
		_, err := collect(c.Stream(context.Background(), "q"))
		assert.ErrorIs(t, err, fallback.ErrEmptyStream)

		c = newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: pro.tier(), MinAttempt: time.Second}}})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		calls := pro.calls.Load()
		_, err = collect(c.Stream(ctx, "q"))
		assert.ErrorIs(t, err, deadline.ErrExhausted)
		assert.Equal(t, calls, pro.calls.Load())
	})
}

func TestStreamPanicReleasesGuards(t *testing.T) {
	bh := newBulkhead(t, "pro", 1)
	boom := fallback.StreamTierFunc("pro", func(context.Context, string) iter.Seq2[chunk, error] {
		return func(yield func(chunk, error) bool) {
			yield(chunk{text: "a"}, nil)
			panic("tier exploded")
		}
	}, inspect)
	c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: boom, Bulkhead: bh}}})
	assert.Panics(t, func() { _, _ = collect(c.Stream(context.Background(), "q")) })
	assert.Zero(t, bh.Stats().InFlight)
}

func TestStreamObserverEvents(t *testing.T) {
	var obs reported.Recorder
	pro := &streamFake{name: "pro", def: streamScript{chunks: words("a", "b"), after: io.ErrUnexpectedEOF}}
	c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: pro.tier()}}, Observer: &obs})
	_, err := collect(c.Stream(context.Background(), "q"))
	require.Error(t, err)
	assert.Equal(t, []string{"request_started", "attempt_started", "first_chunk_received", "chunk_received", "attempt_ended", "request_ended"}, obs.Names(),
		"the second chunk is timed on its own")
	ended := reported.Of[fallback.AttemptEnd](&obs)
	require.Len(t, ended, 1)
	assert.True(t, ended[0].Incomplete)
	assert.Equal(t, 2, ended[0].Chunks)
}

func TestStreamInvalidConfig(t *testing.T) {
	_, err := fallback.NewStream(fallback.StreamConfig[string, chunk]{})
	assert.ErrorContains(t, err, "at least one stage")
	_, err = fallback.NewStream(fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{}}})
	assert.ErrorContains(t, err, "Tier is required")
	_, err = fallback.NewStream(fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: (&streamFake{name: "a"}).tier(), IdleTimeout: -1}}})
	assert.ErrorContains(t, err, "negative IdleTimeout")
}

// TestStreamFirstChunkAtTheTimeoutFallsBack: a first chunk that arrives as
// the first-chunk timer fires is a timeout, not an incomplete stream.
func TestStreamFirstChunkAtTheTimeoutFallsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		late := fallback.StreamTierFunc("pro", func(ctx context.Context, _ string) iter.Seq2[chunk, error] {
			return func(yield func(chunk, error) bool) {
				<-ctx.Done() // the chunk arrives exactly as the timer fires
				if !yield(chunk{text: "a"}, nil) {
					return
				}
				yield(chunk{}, ctx.Err())
			}
		}, inspect)
		flash := &streamFake{name: "flash", def: streamScript{chunks: words("quick"), finishing: true}}
		c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{
			{Tier: late, FirstChunkTimeout: 100 * time.Millisecond, Retry: retry.Policy{MaxAttempts: 1}},
			{Tier: flash.tier()},
		}})
		s := c.Stream(context.Background(), "q")
		text, err := collect(s)
		require.NoError(t, err)
		assert.Equal(t, "quick", text)
		assert.ErrorIs(t, s.Result().Attempts()[0].Err, fallback.ErrFirstChunkTimeout)
	})
}

// usageTier reports its stream's usage as the stream ends, as the SDK
// adapters do with the usage of the last chunk.
type usageTier struct {
	fallback.StreamTier[string, chunk]
}

func (u usageTier) Stream(ctx context.Context, in string) iter.Seq2[chunk, error] {
	return func(yield func(chunk, error) bool) {
		defer fallback.Report(ctx, fallback.Reply{Usage: fallback.Usage{InputTokens: 7, OutputTokens: 3}, HasUsage: true})
		for c, err := range u.StreamTier.Stream(ctx, in) {
			if !yield(c, err) {
				return
			}
		}
	}
}

func TestStreamReportsUsageAndDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var obs reported.Recorder
		pro := &streamFake{name: "pro", def: streamScript{chunks: words("a", "b"), finishing: true}}
		c := newStreamChain(t, fallback.StreamConfig[string, chunk]{
			Stages: []fallback.StreamStage[string, chunk]{{Tier: usageTier{pro.tier()}}}, Observer: &obs, Total: 5 * time.Second,
		})
		s := c.Stream(context.Background(), "q")
		_, has := s.Result().Deadline()
		assert.False(t, has, "no deadline before the iteration starts the Total")
		_, err := collect(s)
		require.NoError(t, err)
		ended := reported.Of[fallback.AttemptEnd](&obs)
		require.Len(t, ended, 1)
		require.True(t, ended[0].Reply.HasUsage)
		assert.Equal(t, fallback.Usage{InputTokens: 7, OutputTokens: 3}, ended[0].Reply.Usage)
		d, has := s.Result().Deadline()
		require.True(t, has)
		assert.Equal(t, 5*time.Second, time.Until(d))
	})
}
