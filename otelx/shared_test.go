package otelx_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/otelx"
	"github.com/tierguard/tierguard/retry"
)

// sharedChains are a unary chain and a stream chain whose first tier
// shares one breaker and one bulkhead, as a service serving both ways
// builds them.
type sharedChains struct {
	br     *breaker.Breaker
	bh     *bulkhead.Bulkhead
	unary  *fallback.Chain[string, string]
	stream *fallback.StreamChain[string, chunk]
}

func newSharedChains(t *testing.T) *sharedChains {
	t.Helper()
	s := &sharedChains{
		br: newBreaker(t, breaker.Config{Name: "pro", ConsecutiveFailures: 1, Cooldown: time.Minute}),
		bh: newBulkhead(t, bulkhead.Config{Name: "pro", Max: 1, MaxWait: 50 * time.Millisecond, Queue: 4}),
	}
	s.unary = newChain(t, twoTiers(
		fallback.Stage[string, string]{Tier: newTier("pro", step{err: http503()}), Breaker: s.br, Bulkhead: s.bh},
		fallback.Stage[string, string]{Tier: newTier("flash", ok("flash"))},
	))
	var err error
	s.stream, err = fallback.NewStream(fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{
		{Tier: streamTier("pro", 0, []chunk{{text: "a", finish: "STOP"}}, nil), Model: "gemini-2.5-pro", Provider: "gcp.gemini",
			Breaker: s.br, Bulkhead: s.bh, Retry: retry.Policy{MaxAttempts: 1}},
	}})
	require.NoError(t, err)
	return s
}

// trip fails one unary request on pro: its breaker opens.
func (s *sharedChains) trip(t *testing.T) {
	t.Helper()
	res, err := s.unary.Do(context.Background(), "q")
	require.NoError(t, err)
	require.Equal(t, "flash", res.Tier)
	require.Equal(t, breaker.Open, s.br.State())
}

// trips returns the closed → open count of pro's breaker.
func trips(t *testing.T, h *harness) int64 {
	t.Helper()
	return ints(t, findMetric(t, h.collect(t), otelx.MetricBreakerTransitions))[kv(otelx.AttrBreaker.String("pro"),
		otelx.AttrBreakerFrom.String("closed"), otelx.AttrBreakerTo.String("open"))]
}

// Two chains on one breaker, each instrumented as the README shows: a
// trip is one transition in the metrics and one log record, as with one
// Instrumentation attached to both.
func TestSharedBreakerCountsEachTransitionOnce(t *testing.T) {
	t.Run("instrumented separately", func(t *testing.T) {
		h := newHarness(t)
		s := newSharedChains(t)
		instrument(t, s.unary, h.options())
		instrument(t, s.stream, h.options())
		s.trip(t)
		assert.Equal(t, int64(1), trips(t, h))
		assert.Len(t, h.logsWith(t, "circuit open"), 1)
	})
	t.Run("one Instrumentation attached twice", func(t *testing.T) {
		h := newHarness(t)
		s := newSharedChains(t)
		inst := instrument(t, s.unary, h.options())
		inst.Attach(s.stream)
		inst.Attach(s.unary)
		s.trip(t)
		assert.Equal(t, int64(1), trips(t, h))
		assert.Len(t, h.logsWith(t, "circuit open"), 1)
	})
	t.Run("watched by hand as well", func(t *testing.T) {
		h := newHarness(t)
		s := newSharedChains(t)
		instrument(t, s.unary, h.options())
		other, err := otelx.New(h.options())
		require.NoError(t, err)
		defer other.Close()
		other.WatchBreaker(s.br)
		other.WatchBreaker(s.br)
		s.trip(t)
		assert.Equal(t, int64(1), trips(t, h))
		assert.Len(t, h.logsWith(t, "circuit open"), 1)
	})
	t.Run("a MeterProvider each", func(t *testing.T) {
		a, b := newHarness(t), newHarness(t)
		s := newSharedChains(t)
		instrument(t, s.unary, a.options())
		instrument(t, s.stream, b.options())
		s.trip(t)
		assert.Equal(t, int64(1), trips(t, a))
		assert.Equal(t, int64(1), trips(t, b))
		assert.Len(t, a.logsWith(t, "circuit open"), 1, "each its own log")
		assert.Len(t, b.logsWith(t, "circuit open"), 1)
	})
	t.Run("one MeterProvider, two logs", func(t *testing.T) {
		h, other := newHarness(t), newHarness(t)
		s := newSharedChains(t)
		instrument(t, s.unary, h.options())
		opts := h.options()
		opts.Logger = other.logger
		instrument(t, s.stream, opts)
		s.trip(t)
		assert.Equal(t, int64(1), trips(t, h))
		assert.Len(t, h.logsWith(t, "circuit open"), 1, "each handler gets the record once")
		assert.Len(t, other.logsWith(t, "circuit open"), 1)
	})
	t.Run("the second logs when the first does not", func(t *testing.T) {
		h := newHarness(t)
		s := newSharedChains(t)
		opts := h.options()
		opts.Logger = nil
		instrument(t, s.unary, opts)
		instrument(t, s.stream, h.options())
		s.trip(t)
		assert.Equal(t, int64(1), trips(t, h))
		assert.Len(t, h.logsWith(t, "circuit open"), 1)
	})
}

// Closing one of two Instrumentations hands the breaker to the other;
// closing both unsubscribes, and watching again subscribes anew.
func TestSharedBreakerAfterClose(t *testing.T) {
	h := newHarness(t)
	s := newSharedChains(t)
	first, err := otelx.Instrument(s.unary, h.options())
	require.NoError(t, err)
	second, err := otelx.Instrument(s.stream, h.options())
	require.NoError(t, err)

	require.NoError(t, first.Close())
	s.trip(t)
	assert.Equal(t, int64(1), trips(t, h), "counted by the one still open")
	assert.Len(t, h.logsWith(t, "circuit open"), 1)

	require.NoError(t, second.Close())
	s.br.Reset()
	s.br.ForceOpen()
	assert.Equal(t, int64(1), trips(t, h), "nobody watches")
	assert.Empty(t, h.logsWith(t, "circuit closed"))

	third := instrument(t, s.unary, h.options())
	s.br.Reset()
	assert.Len(t, h.logsWith(t, "circuit closed"), 1, "watched again")
	unwatch := third.WatchBreaker(s.br)
	unwatch()
	s.br.ForceOpen()
	assert.Len(t, h.logsWith(t, "circuit open"), 1, "unwatched")
}

// A bulkhead shared by two chains instrumented separately: its figures
// and queue waits are exported once, not once per Instrumentation.
func TestSharedBulkheadReportsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		s := newSharedChains(t)
		instrument(t, s.unary, h.options())
		instrument(t, s.stream, h.options())

		require.True(t, s.bh.TryAcquire())
		go func() {
			time.Sleep(20 * time.Millisecond)
			s.bh.Release()
		}()
		n, err := drain(s.stream.Stream(context.Background(), "q"))
		require.NoError(t, err)
		require.Equal(t, 1, n)

		rm := h.collect(t)
		name := kv(otelx.AttrBulkhead.String("pro"))
		assert.Equal(t, map[string]int64{name: 2}, ints(t, findMetric(t, rm, otelx.MetricBulkheadAccepted)), "the test's slot and the stream's")
		assert.Equal(t, map[string]int64{name: 1}, ints(t, findMetric(t, rm, otelx.MetricBulkheadLimit)))
		waits := hist(t, findMetric(t, rm, otelx.MetricBulkheadQueueWait))
		assert.Equal(t, uint64(1), waits[kv(otelx.AttrBulkhead.String("pro"), otelx.AttrAcquired.Bool(true))].Count)
		assert.Len(t, h.logsWith(t, "bulkhead wait"), 1)
		assert.Equal(t, map[string]int64{kv(otelx.AttrBreaker.String("pro")): 0}, ints(t, findMetric(t, rm, otelx.MetricBreakerState)))
	})
}

// An Instrumentation on a MeterProvider of a type that cannot be compared
// is on its own: it counts what it watches, as before.
func TestUncomparableMeterProvider(t *testing.T) {
	h := newHarness(t)
	s := newSharedChains(t)
	mp := uncomparable{MeterProvider: h.mp}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	instrument(t, s.unary, otelx.Options{MeterProvider: mp, TracerProvider: tracenoop.NewTracerProvider(), Logger: quiet})
	s.trip(t)
	assert.Equal(t, int64(1), trips(t, h))
}

// uncomparable is a MeterProvider that == cannot compare.
type uncomparable struct {
	*sdkmetric.MeterProvider
	_ []int
}
