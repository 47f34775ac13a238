package bulkhead_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
)

var (
	answered  = classify.Verdict{Class: classify.OK}
	overload  = classify.Verdict{Class: classify.Transient, HTTPStatus: 503}
	quota429  = classify.Verdict{Class: classify.RateLimited, HTTPStatus: 429, RetryAfter: 2 * time.Second}
	bare429   = classify.Verdict{Class: classify.RateLimited, HTTPStatus: 429}
	rejectOut = classify.Verdict{Class: classify.InvalidOutput}
)

// adaptiveBulkhead returns an adaptive bulkhead starting at limit within
// [floor, ceiling], adjusting after every call as the peers' unit tests
// do, so that each Record below is one step of the rule.
func adaptiveBulkhead(t *testing.T, limit, floor, ceiling int) *bulkhead.Bulkhead {
	t.Helper()
	b, err := bulkhead.New(bulkhead.Config{Name: "pro", Max: limit,
		Adaptive: &bulkhead.Adaptive{Floor: floor, Ceiling: ceiling, Window: 1}})
	require.NoError(t, err)
	return b
}

// hold takes n slots of b, so that its limit binds (the peers pass the
// calls in flight to their limit's update instead).
func hold(t *testing.T, b *bulkhead.Bulkhead, n int) {
	t.Helper()
	for range n {
		require.True(t, b.TryAcquire())
	}
}

// Ported from Netflix concurrency-limits VegasLimitTest.increaseLimit and
// failsafe-go adaptivelimiter TestAdaptiveLimiter_record "should increase
// limit": fast answers while the limit binds raise it.
// https://github.com/Netflix/concurrency-limits/blob/main/concurrency-limits-core/src/test/java/com/netflix/concurrency/limits/limit/VegasLimitTest.java
// https://github.com/failsafe-go/failsafe-go/blob/main/adaptivelimiter/adaptivelimiter_test.go
func TestAdaptiveRisesOnFastAnswers(t *testing.T) {
	b := adaptiveBulkhead(t, 10, 1, 20)
	hold(t, b, 10)
	b.Record(10*time.Millisecond, bulkhead.SampleOf(answered))
	assert.Equal(t, 10, b.Limit(), "the first window only sets the baseline")
	b.Record(10*time.Millisecond, bulkhead.SampleOf(answered))
	assert.Equal(t, 13, b.Limit(), "10 + √10")
	b.Record(8*time.Millisecond, bulkhead.SampleOf(answered))
	assert.Equal(t, 16, b.Limit(), "13.16 + √13.16")
	assert.True(t, b.TryAcquire(), "the raised limit admits")
}

// Ported from Netflix VegasLimitTest.decreaseLimit and failsafe-go
// TestAdaptiveLimiter_record "should decrease limit": answers far slower
// than the baseline lower the limit, by Backoff at most.
func TestAdaptiveFallsOnSlowAnswers(t *testing.T) {
	b := adaptiveBulkhead(t, 10, 1, 20)
	b.Record(10*time.Millisecond, bulkhead.SampleOf(answered))
	b.Record(50*time.Millisecond, bulkhead.SampleOf(answered))
	assert.Equal(t, 9, b.Limit(), "5× the baseline: down by Backoff (0.9)")

	// Just past Tolerance, the fall is in proportion: 1.5/1.6 of 100.
	b = adaptiveBulkhead(t, 100, 1, 200)
	b.Record(10*time.Millisecond, bulkhead.SampleOf(answered))
	b.Record(16*time.Millisecond, bulkhead.SampleOf(answered))
	assert.Equal(t, 93, b.Limit())
}

// Ported from Netflix VegasLimitTest.noChangeIfWithinThresholds and
// failsafe-go TestAdaptiveLimiter_record "should hold limit": between
// the rise's mark and Tolerance the limit holds, binding or not.
func TestAdaptiveHoldsWithinTolerance(t *testing.T) {
	b := adaptiveBulkhead(t, 10, 1, 20)
	hold(t, b, 10)
	b.Record(time.Second, bulkhead.SampleOf(answered))
	b.Record(1300*time.Millisecond, bulkhead.SampleOf(answered))
	assert.Equal(t, 10, b.Limit())
	b.Record(1400*time.Millisecond, bulkhead.SampleOf(answered))
	assert.Equal(t, 10, b.Limit())
}

// Deliberate difference from Netflix's Vegas, which keeps the lowest
// round trip seen (VegasLimitTest picks it up from the first sample) and
// replaces it only when it probes afresh: the baseline drifts up by 1/32
// of the gap each window, so a
// model whose answers got longer for good is learnt again, and the limit
// rises again once the new latency is the norm.
func TestAdaptiveBaselineDrifts(t *testing.T) {
	b := adaptiveBulkhead(t, 10, 1, 20)
	hold(t, b, 10)
	b.Record(10*time.Millisecond, bulkhead.SampleOf(answered))
	for range 5 {
		b.Record(14*time.Millisecond, bulkhead.SampleOf(answered))
	}
	assert.Equal(t, 10, b.Limit(), "1.4× the baseline: held")
	for range 15 {
		b.Record(14*time.Millisecond, bulkhead.SampleOf(answered))
	}
	assert.Greater(t, b.Limit(), 10, "the baseline has come within 1.25× of 14 ms")
}

// Ported from Netflix AIMDLimitTest.decreaseOnDrops: an overload signal
// multiplies the limit by Backoff (30 → 27). Deliberate difference from
// failsafe-go, whose Permit.Drop releases without recording anything
// (adaptivelimiter.go, recordingPermit.Drop): a 503 or a 529 from an LLM
// API is the provider saying it is over capacity, the signal that must
// lower the limit fastest.
func TestAdaptiveFallsOnOverload(t *testing.T) {
	b := adaptiveBulkhead(t, 30, 1, 60)
	b.Record(0, bulkhead.SampleOf(overload))
	assert.Equal(t, 27, b.Limit())
	b.Record(0, bulkhead.SampleOf(classify.Verdict{Class: classify.DeadlineExhausted}))
	assert.Equal(t, 24, b.Limit(), "a call cut by its deadline is a timeout")
	b.Record(0, bulkhead.SampleOf(bare429))
	assert.Equal(t, 21, b.Limit(), "a 429 naming no delay is overload")
}

// tierguard's own: a 429 that names its delay is a quota, not a busy
// server, and an answer a validator rejected was served all the same;
// neither lowers the limit. Local refusals and 4xx count for nothing.
func TestAdaptiveIgnoresQuotaAndRejectedAnswers(t *testing.T) {
	b := adaptiveBulkhead(t, 10, 1, 20)
	b.Record(10*time.Millisecond, bulkhead.SampleOf(answered))
	for _, v := range []classify.Verdict{quota429, {Class: classify.Rejected}, {Class: classify.InvalidRequest},
		{Class: classify.Canceled}, {Class: classify.QuotaExhausted}} {
		b.Record(time.Millisecond, bulkhead.SampleOf(v))
		assert.Equal(t, 10, b.Limit(), v.Class.String())
	}
	b.Record(10*time.Millisecond, bulkhead.SampleOf(rejectOut))
	assert.Equal(t, 10, b.Limit(), "a rejected answer is a latency sample")
	b.Record(80*time.Millisecond, bulkhead.SampleOf(rejectOut))
	assert.Equal(t, 9, b.Limit(), "a slow rejected answer is a slow sample")
}

// Ported from Netflix AIMDLimitTest.successOverflow and the peers' bounds:
// the limit never leaves [Floor, Ceiling].
func TestAdaptiveStaysWithinBounds(t *testing.T) {
	b := adaptiveBulkhead(t, 21, 3, 21)
	hold(t, b, 21)
	b.Record(time.Millisecond, bulkhead.SampleOf(answered))
	for range 5 {
		b.Record(time.Millisecond, bulkhead.SampleOf(answered))
		assert.Equal(t, 21, b.Limit(), "at the ceiling")
	}
	for range 50 {
		b.Record(0, bulkhead.SampleOf(overload))
		assert.GreaterOrEqual(t, b.Limit(), 3)
	}
	assert.Equal(t, 3, b.Limit(), "at the floor")
	for range 50 {
		b.Record(time.Hour, bulkhead.SampleOf(answered))
	}
	assert.Equal(t, 3, b.Limit(), "slowness never goes below the floor either")
}

// Ported from Netflix VegasLimit's application-limited guard (no change
// when fewer than half the limit are in flight) and failsafe-go's
// maxLimitFactor: fast answers raise only a limit that binds. tierguard
// asks that the slots held come within √limit of it, or that a call was
// refused or queued since the last window.
func TestAdaptiveRisesOnlyWhenItBinds(t *testing.T) {
	b := adaptiveBulkhead(t, 16, 1, 64)
	hold(t, b, 4)
	for range 5 {
		b.Record(10*time.Millisecond, bulkhead.SampleOf(answered))
	}
	assert.Equal(t, 16, b.Limit(), "4 of 16 in flight: the tier was never the limit")
	hold(t, b, 12)
	assert.False(t, b.TryAcquire())
	b.Record(10*time.Millisecond, bulkhead.SampleOf(answered))
	assert.Equal(t, 20, b.Limit(), "a refusal since the last window: it binds")
}

// The limit is enforced: after overload, the bulkhead admits exactly its
// lowered limit. On a fixed bulkhead, Record does nothing and Max slots
// stay (the test fails there by design).
func TestAdaptiveLimitIsEnforced(t *testing.T) {
	for _, adaptive := range []bool{true, false} {
		cfg := bulkhead.Config{Name: "pro", Max: 20}
		if adaptive {
			cfg.Adaptive = &bulkhead.Adaptive{Floor: 2, Ceiling: 40, Window: 1}
		}
		b, err := bulkhead.New(cfg)
		require.NoError(t, err)
		for range 5 {
			b.Record(0, bulkhead.SampleOf(overload))
		}
		admitted := 0
		for b.TryAcquire() {
			admitted++
		}
		if adaptive {
			assert.Equal(t, 11, admitted, "20 × 0.9⁵ = 11.8")
			assert.Equal(t, 11, b.Stats().Max)
			// Lowered below the slots held, the limit leaves them counted.
			for range 3 {
				b.Record(0, bulkhead.SampleOf(overload))
			}
			st := b.Stats()
			assert.Equal(t, 8, st.Max, "11.8 × 0.9³ = 8.6")
			assert.Equal(t, 11, st.InFlight)
			assert.Equal(t, uint64(11), st.Accepted)
			assert.False(t, b.TryAcquire())
		} else {
			assert.Equal(t, 20, admitted, "a fixed bulkhead ignores Record")
		}
	}
}

// A refusal's error says the limit is adaptive, and names the ceiling:
// the limit of the moment is not in an error built once.
func TestAdaptiveFullError(t *testing.T) {
	b := adaptiveBulkhead(t, 1, 1, 8)
	require.True(t, b.TryAcquire())
	err := b.Acquire(context.Background())
	require.ErrorIs(t, err, bulkhead.ErrFull)
	assert.EqualError(t, err, `tierguard: bulkhead "pro" full (adaptive limit, at most 8)`)
	b.Release()
}

// Each member of a Group learns its own limit: one key's overload does
// not lower another's.
func TestAdaptiveGroupMembersLearnApart(t *testing.T) {
	g, err := bulkhead.NewGroup(bulkhead.Config{Name: "tenant", Max: 10, Adaptive: &bulkhead.Adaptive{Floor: 1, Ceiling: 20, Window: 1}}, 8)
	require.NoError(t, err)
	a, b := g.Get("a"), g.Get("b")
	a.Record(0, bulkhead.Overload)
	assert.Equal(t, 9, a.Limit())
	assert.Equal(t, 10, b.Limit())
}

// A window is half the limit by default: the limit moves on the call that
// closes it, not before.
func TestAdaptiveWindow(t *testing.T) {
	b, err := bulkhead.New(bulkhead.Config{Name: "pro", Max: 40, Adaptive: &bulkhead.Adaptive{Floor: 1, Ceiling: 80}})
	require.NoError(t, err)
	for range 19 {
		b.Record(0, bulkhead.SampleOf(overload))
	}
	assert.Equal(t, 40, b.Limit(), "19 calls of a window of 20")
	b.Record(0, bulkhead.SampleOf(overload))
	assert.Equal(t, 36, b.Limit())
	// One overload signal in twenty calls is enough; one in twenty-one is
	// not: a provider's stray 503 is not a lack of capacity. A deliberate
	// difference from Netflix's AIMDLimit and VegasLimit, which fall on
	// any drop (AIMDLimitTest.decreaseOnDrops).
	b, err = bulkhead.New(bulkhead.Config{Name: "pro", Max: 40, Adaptive: &bulkhead.Adaptive{Floor: 1, Ceiling: 80, Window: 21}})
	require.NoError(t, err)
	for range 2 {
		for range 20 {
			b.Record(10*time.Millisecond, bulkhead.SampleOf(answered))
		}
		b.Record(0, bulkhead.SampleOf(overload))
		assert.Equal(t, 40, b.Limit(), "1 in 21")
	}
	for range 19 {
		b.Record(10*time.Millisecond, bulkhead.SampleOf(answered))
	}
	b.Record(0, bulkhead.SampleOf(overload))
	b.Record(0, bulkhead.SampleOf(overload))
	assert.Equal(t, 36, b.Limit(), "2 in 21")
}

// A raised limit hands its new slots to the queue at once.
func TestAdaptiveRiseWakesWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := bulkhead.New(bulkhead.Config{Name: "pro", Max: 1, MaxWait: time.Minute, Queue: 4,
			Adaptive: &bulkhead.Adaptive{Floor: 1, Ceiling: 8, Window: 1}})
		require.NoError(t, err)
		require.True(t, b.TryAcquire())
		got := make(chan error, 1)
		go func() { got <- b.Acquire(context.Background()) }()
		synctest.Wait()
		b.Record(10*time.Millisecond, bulkhead.SampleOf(answered))
		b.Record(10*time.Millisecond, bulkhead.SampleOf(answered))
		synctest.Wait()
		require.Equal(t, 2, b.Limit())
		select {
		case err := <-got:
			require.NoError(t, err)
		default:
			t.Fatal("the waiter still waits for a slot the limit made")
		}
		assert.Equal(t, 2, b.Stats().InFlight)
		b.Release()
		b.Release()
	})
}

// Concurrent reports keep the limit within its bounds, each window
// closed by one call.
func TestAdaptiveConcurrentRecords(t *testing.T) {
	b, err := bulkhead.New(bulkhead.Config{Name: "pro", Max: 32, Adaptive: &bulkhead.Adaptive{Floor: 4, Ceiling: 64}})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				if b.TryAcquire() {
					v := answered
					if (i+g)%7 == 0 {
						v = overload
					}
					b.Record(time.Duration(1+i%5)*time.Millisecond, bulkhead.SampleOf(v))
					b.Release()
				}
				l := b.Limit()
				assert.True(t, l >= 4 && l <= 64, "limit %d", l)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 0, b.Stats().InFlight)
}

func TestAdaptiveConfigChecked(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  bulkhead.Config
	}{
		{"floor above max", bulkhead.Config{Max: 4, Adaptive: &bulkhead.Adaptive{Floor: 5, Ceiling: 8}}},
		{"ceiling below max", bulkhead.Config{Max: 4, Adaptive: &bulkhead.Adaptive{Floor: 1, Ceiling: 3}}},
		{"zero floor", bulkhead.Config{Max: 4, Adaptive: &bulkhead.Adaptive{Ceiling: 8}}},
		{"tolerance", bulkhead.Config{Max: 4, Adaptive: &bulkhead.Adaptive{Floor: 1, Ceiling: 8, Tolerance: 0.9}}},
		{"backoff", bulkhead.Config{Max: 4, Adaptive: &bulkhead.Adaptive{Floor: 1, Ceiling: 8, Backoff: 1}}},
		{"window", bulkhead.Config{Max: 4, Adaptive: &bulkhead.Adaptive{Floor: 1, Ceiling: 8, Window: -1}}},
		{"reserve", bulkhead.Config{Max: 4, Reserve: 0.5}},
	} {
		_, err := bulkhead.New(c.cfg)
		assert.Error(t, err, c.name)
	}
}

func TestAdaptiveAllocatesNothing(t *testing.T) {
	b := adaptiveBulkhead(t, 8, 1, 16)
	ctx := context.Background()
	b.Record(time.Millisecond, bulkhead.SampleOf(answered)) // makes the learning state
	allocs := testing.AllocsPerRun(200, func() {
		if b.Acquire(ctx) == nil {
			b.Record(time.Millisecond, bulkhead.SampleOf(answered))
			b.Release()
		}
	})
	assert.Zero(t, allocs)
}

// BenchmarkAdaptiveAcquireRelease is BenchmarkAcquireRelease on an
// adaptive bulkhead, each pair reporting its call as the chain does.
func BenchmarkAdaptiveAcquireRelease(b *testing.B) {
	bh, _ := bulkhead.New(bulkhead.Config{Name: "bench", Max: 1 << 20,
		Adaptive: &bulkhead.Adaptive{Floor: 1 << 20, Ceiling: 1 << 21}})
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if bh.Acquire(ctx) == nil {
				bh.Record(time.Millisecond, bulkhead.SampleOf(answered))
				bh.Release()
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if bh.Acquire(ctx) == nil {
					bh.Record(time.Millisecond, bulkhead.SampleOf(answered))
					bh.Release()
				}
			}
		})
	})
}

// edgeBulkhead returns an adaptive bulkhead of limit 30 whose limit binds
// (every slot held), with a baseline of 10 ms, after one overload window
// at 30: the memory of the edge is set at 30, the limit at 27.
func edgeBulkhead(t *testing.T) *bulkhead.Bulkhead {
	t.Helper()
	b := adaptiveBulkhead(t, 30, 1, 60)
	hold(t, b, 30)
	b.Record(10*time.Millisecond, bulkhead.SampleOf(answered))
	require.Equal(t, 30, b.Limit())
	b.Record(0, bulkhead.SampleOf(overload))
	require.Equal(t, 27, b.Limit())
	return b
}

// tierguard's own, after TCP CUBIC's W_max (RFC 9438, section 4.6): where
// the tier refused is remembered, and the limit stays Backoff² below it,
// fast answers or not. Without the memory, fast answers while it binds
// would raise the limit by √limit each window (27 → 32 → 38 …) back to
// the edge. Netflix's and failsafe-go's limits have no such memory.
func TestAdaptiveRemembersTheEdge(t *testing.T) {
	b := edgeBulkhead(t)
	for range 40 {
		b.Record(10*time.Millisecond, bulkhead.SampleOf(answered))
		require.Equal(t, 24, b.Limit(), "at most 30 × 0.9² = 24.3")
	}
}

// A window's refusals may answer calls let in under the limit before it:
// the edge is the higher of the two. Here the limit fell from 40 to 36
// on slow answers, then a window of overload came: the edge is 40, not
// 36, and the limit may hold 40 × 0.81 = 32.4 (29 were it 36).
func TestAdaptiveEdgeIsTheLimitTheRefusedCallsMet(t *testing.T) {
	b := adaptiveBulkhead(t, 40, 1, 80)
	hold(t, b, 40)
	b.Record(10*time.Millisecond, bulkhead.SampleOf(answered))
	b.Record(16*time.Millisecond, bulkhead.SampleOf(answered))
	require.Equal(t, 37, b.Limit(), "1.6× the baseline: 40 × 1.5/1.6")
	b.Record(0, bulkhead.SampleOf(overload))
	require.Equal(t, 33, b.Limit(), "37.5 × 0.9")
	b.Record(10*time.Millisecond, bulkhead.SampleOf(answered))
	assert.Equal(t, 32, b.Limit(), "40 × 0.81: the edge is the limit before, 40")
}

// settleUnderTheEdge reports the windows after a refusal that drain and
// teach the latency under the memory: 14 ms, 1.4× the baseline, where the
// rule holds the limit.
func settleUnderTheEdge(b *bulkhead.Bulkhead) {
	for range 4 + 8 {
		b.Record(14*time.Millisecond, bulkhead.SampleOf(answered))
	}
}

// tierguard's own: the memory goes when answers come faster than they
// did under it, by a CUSUM of speed-ups — one window 40 % faster or a run
// of smaller ones, not one window a tenth faster — and the limit returns
// to one Backoff below where it stood before the refusals (30 × 0.9).
func TestAdaptiveEdgeGoesWhenTheTierIsFastAgain(t *testing.T) {
	t.Run("one much faster window", func(t *testing.T) {
		b := edgeBulkhead(t)
		settleUnderTheEdge(b)
		require.Equal(t, 24, b.Limit())
		b.Record(7*time.Millisecond, bulkhead.SampleOf(answered))
		assert.Equal(t, 27, b.Limit(), "twice as fast: the capacity came back")
		b.Record(7*time.Millisecond, bulkhead.SampleOf(answered))
		assert.Equal(t, 32, b.Limit(), "and the limit rises past the old edge")
	})
	t.Run("one slightly faster window is noise", func(t *testing.T) {
		b := edgeBulkhead(t)
		settleUnderTheEdge(b)
		b.Record(12600*time.Microsecond, bulkhead.SampleOf(answered))
		b.Record(14*time.Millisecond, bulkhead.SampleOf(answered))
		for range 20 {
			b.Record(14*time.Millisecond, bulkhead.SampleOf(answered))
			require.Equal(t, 24, b.Limit())
		}
	})
	t.Run("a run of faster windows", func(t *testing.T) {
		b := edgeBulkhead(t)
		settleUnderTheEdge(b)
		for range 2 {
			b.Record(11200*time.Microsecond, bulkhead.SampleOf(answered)) // 20 % faster: 0.15 each
			require.Equal(t, 24, b.Limit())
		}
		b.Record(11200*time.Microsecond, bulkhead.SampleOf(answered))
		assert.Equal(t, 27, b.Limit(), "the third: 0.45 of evidence")
	})
	t.Run("the draining windows teach, they do not count", func(t *testing.T) {
		b := edgeBulkhead(t)
		// Calls let in above the edge drain: answers get faster window
		// by window, and the latency under the memory is learnt from
		// where they stop.
		for _, ms := range []int{40, 30, 22, 17, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14} {
			b.Record(time.Duration(ms)*time.Millisecond, bulkhead.SampleOf(answered))
		}
		for range 10 {
			b.Record(14*time.Millisecond, bulkhead.SampleOf(answered))
			require.Equal(t, 24, b.Limit())
		}
	})
}

// After 128 windows of answers without a sign of recovery, the memory
// lapses and the limit probes the edge again, rising by √limit.
func TestAdaptiveEdgeLapses(t *testing.T) {
	b := edgeBulkhead(t)
	for range 127 {
		b.Record(10*time.Millisecond, bulkhead.SampleOf(answered))
	}
	require.Equal(t, 24, b.Limit())
	b.Record(10*time.Millisecond, bulkhead.SampleOf(answered))
	assert.Equal(t, 29, b.Limit(), "24.3 + √24.3, the memory gone")
}
