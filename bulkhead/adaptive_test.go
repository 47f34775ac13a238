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
