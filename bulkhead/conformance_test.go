package bulkhead_test

// Behavioural cases translated from the bulkhead tests of
// failsafe-go/failsafe-go, resilience4j/resilience4j and App-vNext/Polly
// (its bulkhead and concurrency-limiter tests). Each test names the case it
// comes from. Where tierguard differs on purpose, the test asserts
// tierguard's behaviour and names the difference, listed in the package
// documentation ("Differences from failsafe-go, resilience4j and Polly").

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
)

var errBAM = errors.New("BAM")

// --- failsafe-go/failsafe-go, bulkhead/bulkhead_test.go ----------------------

// failsafe-go bulkhead/bulkhead_test.go TestAcquirePermit: the third
// acquisition of two slots waits until one is released, 200ms later.
func TestFailsafeAcquirePermit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBulkhead(t, 2, maxWait(time.Second, 4))
		go func() {
			time.Sleep(200 * time.Millisecond)
			b.Release()
		}()
		start := time.Now()
		ctx := context.Background()
		require.NoError(t, b.Acquire(ctx))
		require.NoError(t, b.Acquire(ctx))
		require.NoError(t, b.Acquire(ctx))
		assert.Equal(t, 200*time.Millisecond, time.Since(start))
		b.Release()
		b.Release()
	})
}

// failsafe-go bulkhead/bulkhead_test.go TestAcquirePermitWithMaxWaitTime:
// with the only slot taken, a wait of 100ms ends in ErrFull.
func TestFailsafeAcquirePermitWithMaxWaitTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBulkhead(t, 1, maxWait(100*time.Millisecond, 1))
		require.NoError(t, b.Acquire(context.Background()))
		start := time.Now()
		assert.ErrorIs(t, b.Acquire(context.Background()), bulkhead.ErrFull)
		assert.Equal(t, 100*time.Millisecond, time.Since(start))
	})
}

// failsafe-go bulkhead/bulkhead_test.go TestTryAcquirePermitAndReleasePermit.
func TestFailsafeTryAcquirePermitAndReleasePermit(t *testing.T) {
	b := newBulkhead(t, 2)
	assert.True(t, b.TryAcquire())
	assert.True(t, b.TryAcquire())
	assert.False(t, b.TryAcquire())
	b.Release()
	assert.True(t, b.TryAcquire())
	assert.False(t, b.TryAcquire())
	b.Release()
	b.Release()
	assert.True(t, b.TryAcquire())
	assert.True(t, b.TryAcquire())
	assert.False(t, b.TryAcquire())
}

// --- failsafe-go, test/bulkhead_test.go -------------------------------------

// failsafe-go test/bulkhead_test.go "should AcquirePermit after wait": a
// full bulkhead emptied 200ms later runs the call.
func TestFailsafeAcquirePermitAfterWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBulkhead(t, 2, maxWait(time.Second, 1))
		require.True(t, b.TryAcquire())
		require.True(t, b.TryAcquire())
		go func() {
			time.Sleep(200 * time.Millisecond)
			b.Release()
			b.Release()
		}()
		out, err := bulkhead.Do(context.Background(), b, func(context.Context) (string, error) { return "test", nil })
		require.NoError(t, err)
		assert.Equal(t, "test", out)
	})
}

// failsafe-go test/bulkhead_test.go "when not full".
func TestFailsafeWhenNotFull(t *testing.T) {
	b := newBulkhead(t, 2)
	out, err := bulkhead.Do(context.Background(), b, func(context.Context) (string, error) { return "test", nil })
	require.NoError(t, err)
	assert.Equal(t, "test", out)
	assert.Equal(t, bulkhead.Stats{Accepted: 1, Max: 2}, b.Stats())
}

// failsafe-go test/bulkhead_test.go "when full": ErrFull without running
// the function, counted once as full.
func TestFailsafeWhenFull(t *testing.T) {
	obs := &calls{}
	b := newBulkhead(t, 2, observed(obs))
	require.True(t, b.TryAcquire())
	require.True(t, b.TryAcquire())
	ran := false
	err := do(context.Background(), b, func(context.Context) error { ran = true; return nil })
	assert.ErrorIs(t, err, bulkhead.ErrFull)
	assert.False(t, ran)
	assert.Equal(t, uint64(1), b.Stats().Rejected)
	assert.Equal(t, []string{"pro permitted", "pro permitted", "pro rejected"}, obs.events)
}

// failsafe-go test/bulkhead_test.go "with maxWaitTime exceeded".
func TestFailsafeMaxWaitTimeExceeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBulkhead(t, 2, maxWait(20*time.Millisecond, 2))
		require.True(t, b.TryAcquire())
		require.True(t, b.TryAcquire())
		assert.ErrorIs(t, do(context.Background(), b, func(context.Context) error { return nil }), bulkhead.ErrFull)
	})
}

// failsafe-go test/bulkhead_test.go "with short maxWaitTime": a wait of
// 1ns still takes a free slot.
func TestFailsafeShortMaxWaitTime(t *testing.T) {
	b := newBulkhead(t, 1, maxWait(time.Nanosecond, 1))
	assert.NoError(t, do(context.Background(), b, func(context.Context) error { return nil }))
}

// --- resilience4j/resilience4j, resilience4j-bulkhead/.../internal/SemaphoreBulkheadTest.java

// resilience4j SemaphoreBulkheadTest shouldReturnTheCorrectName.
func TestR4jBulkheadName(t *testing.T) {
	b, err := bulkhead.New(bulkhead.Config{Name: "test-platform", Max: 2})
	require.NoError(t, err)
	assert.Equal(t, "test-platform", b.Name())
}

// resilience4j SemaphoreBulkheadTest
// shouldHandleBasicBulkheadOperationsInBothThreadModes: two permits, a
// refusal, two completions, a permit again, and the events in that order.
func TestR4jBasicBulkheadOperations(t *testing.T) {
	obs := &calls{}
	b := newBulkhead(t, 2, observed(obs))
	available := func() int { s := b.Stats(); return s.Max - s.InFlight }
	assert.True(t, b.TryAcquire())
	assert.True(t, b.TryAcquire())
	assert.Zero(t, available())
	assert.False(t, b.TryAcquire())
	b.Release()
	assert.Equal(t, 1, available())
	b.Release()
	assert.Equal(t, 2, available())
	assert.True(t, b.TryAcquire())
	assert.Equal(t, []string{"pro permitted", "pro permitted", "pro rejected", "pro finished", "pro finished", "pro permitted"}, obs.events)
	b.Release()
}

// resilience4j SemaphoreBulkheadTest testZeroMaxConcurrentCalls and
// testCreateWithDefaults. Difference: a bulkhead has at least one slot and
// no default size; resilience4j accepts 0 and refuses every call (package
// doc, at least one slot).
func TestR4jZeroMaxConcurrentCalls(t *testing.T) {
	_, err := bulkhead.New(bulkhead.Config{Name: "test", Max: 0})
	assert.ErrorContains(t, err, "Max must be positive")
}

// resilience4j SemaphoreBulkheadTest
// shouldHandleTimeoutBehaviorConsistentlyInBothThreadModes: with the slot
// held, a 50ms wait is refused after 50ms.
func TestR4jTimeoutBehavior(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBulkhead(t, 1, maxWait(50*time.Millisecond, 1))
		require.True(t, b.TryAcquire())
		done := make(chan time.Duration)
		go func() {
			start := time.Now()
			assert.ErrorIs(t, b.Acquire(context.Background()), bulkhead.ErrFull)
			done <- time.Since(start)
		}()
		assert.Equal(t, 50*time.Millisecond, <-done)
	})
}

// resilience4j SemaphoreBulkheadTest testTryEnterWithInterruptDuringTimeout
// and testAcquireWithInterruptDuringTimeout: a waiter interrupted (its
// context canceled) gives up at once, long before its 2s wait, with the
// context's error.
func TestR4jInterruptDuringWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBulkhead(t, 1, maxWait(2*time.Second, 1))
		require.True(t, b.TryAcquire())
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		start := time.Now()
		go func() { done <- b.Acquire(ctx) }()
		synctest.Wait()
		assert.Equal(t, 1, b.Stats().Waiting)
		time.Sleep(time.Second)
		cancel()
		err := <-done
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, time.Second, time.Since(start))
		assert.Equal(t, bulkhead.Stats{Accepted: 1, Rejected: 1, InFlight: 1, Max: 1}, b.Stats())
	})
}

// resilience4j SemaphoreBulkheadTest testEntryTimeout: with the permit
// consumed, entering within 10ms fails.
func TestR4jEntryTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBulkhead(t, 1, maxWait(10*time.Millisecond, 1))
		require.True(t, b.TryAcquire())
		assert.ErrorIs(t, b.Acquire(context.Background()), bulkhead.ErrFull)
	})
}

// resilience4j SemaphoreBulkheadTest changePermissionsInIdleState and
// changeWaitTimeInIdleState. Difference: a bulkhead's size and wait are
// fixed when it is made (package doc, fixed size); a new configuration is a
// new bulkhead.
func TestR4jChangeConfig(t *testing.T) {
	b := newBulkhead(t, 3, maxWait(5*time.Second, 1))
	assert.Equal(t, 3, b.Config().Max)
	assert.Equal(t, 5*time.Second, b.Config().MaxWait)
	bigger := newBulkhead(t, 5, maxWait(3*time.Second, 1))
	assert.Equal(t, 5, bigger.Config().Max)
	assert.Equal(t, 3*time.Second, bigger.Config().MaxWait)
	assert.Equal(t, 3, b.Config().Max)
}

// --- resilience4j, resilience4j-bulkhead/.../bulkhead/BulkheadTest.java -------

// resilience4j BulkheadTest shouldDecorateSupplierAndReturnWithSuccess and
// shouldExecuteSupplierAndReturnWithSuccess: the value comes back and the
// slot is free again.
func TestR4jDecorateSupplierWithSuccess(t *testing.T) {
	b := newBulkhead(t, 1)
	calls := 0
	out, err := bulkhead.Do(context.Background(), b, func(context.Context) (string, error) { calls++; return "Hello world", nil })
	require.NoError(t, err)
	assert.Equal(t, "Hello world", out)
	assert.Equal(t, 1, calls)
	assert.Zero(t, b.Stats().InFlight)
}

// resilience4j BulkheadTest shouldDecorateSupplierAndReturnWithException
// (and the callable, runnable, consumer and function variants): the error
// comes back and the slot is free again.
func TestR4jDecorateSupplierWithException(t *testing.T) {
	b := newBulkhead(t, 1)
	calls := 0
	err := do(context.Background(), b, func(context.Context) error { calls++; return errBAM })
	assert.ErrorIs(t, err, errBAM)
	assert.Equal(t, 1, calls)
	assert.Zero(t, b.Stats().InFlight)
}

// resilience4j BulkheadTest shouldReturnFailureWithBulkheadFullException:
// the refusal names the bulkhead.
func TestR4jBulkheadFullException(t *testing.T) {
	b, err := bulkhead.New(bulkhead.Config{Name: "test", Max: 2})
	require.NoError(t, err)
	require.True(t, b.TryAcquire())
	require.True(t, b.TryAcquire())
	err = do(context.Background(), b, func(context.Context) error { return errBAM })
	var fe *bulkhead.FullError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, b.Name(), fe.Name)
	assert.Equal(t, 2, fe.Max)
}

// resilience4j BulkheadTest shouldReturnFailureWithRuntimeException: with a
// slot free, the function runs and its own error comes back.
func TestR4jBulkheadRuntimeException(t *testing.T) {
	b := newBulkhead(t, 2)
	require.True(t, b.TryAcquire())
	assert.ErrorIs(t, do(context.Background(), b, func(context.Context) error { return errBAM }), errBAM)
	assert.Equal(t, 1, b.Stats().Max-b.Stats().InFlight)
}

// --- App-vNext/Polly, test/Polly.Specs/Bulkhead/BulkheadSpecs.cs ------------

// Polly BulkheadSpecs Should_throw_when_maxParallelization_less_or_equal_to_zero
// (and ..._and_no_maxQueuingActions).
func TestPollyMaxParallelizationNotPositive(t *testing.T) {
	for _, n := range []int{0, -1} {
		_, err := bulkhead.New(bulkhead.Config{Name: "x", Max: n})
		assert.ErrorContains(t, err, "Max must be positive")
		_, err = bulkhead.New(bulkhead.Config{Name: "x", Max: n, MaxWait: time.Second, Queue: 1})
		assert.ErrorContains(t, err, "Max must be positive")
	}
}

// Polly BulkheadSpecs Should_throw_when_maxQueuedActions_less_than_zero.
// Difference: a queue of 0 is refused too — without a queue, leave out
// WithMaxWait and the bulkhead fails fast (package doc, both bounds).
func TestPollyMaxQueuedActionsNegative(t *testing.T) {
	for _, q := range []int{-1, 0} {
		_, err := bulkhead.New(bulkhead.Config{Name: "x", Max: 1, MaxWait: time.Second, Queue: q})
		assert.ErrorContains(t, err, "Queue must be positive")
	}
}

// Polly BulkheadSpecs Should_not_throw_when_maxQueuingActions_is_int_MaxValue.
func TestPollyMaxQueuingActionsMaxValue(t *testing.T) {
	_, err := bulkhead.New(bulkhead.Config{Name: "x", Max: 1, MaxWait: time.Second, Queue: math.MaxInt})
	assert.NoError(t, err)
}

// Polly BulkheadSpecs Should_call_onBulkheadRejected_with_passed_context:
// the rejection handler is called, and told which bulkhead refused.
func TestPollyOnBulkheadRejected(t *testing.T) {
	obs := &calls{}
	b := newBulkhead(t, 1, observed(obs))
	require.True(t, b.TryAcquire())
	assert.ErrorIs(t, b.Acquire(context.Background()), bulkhead.ErrFull)
	assert.Equal(t, []string{"pro permitted", "pro rejected"}, obs.events)
}

// Polly test/Polly.Specs/Bulkhead/BulkheadSpecsBase.cs
// Should_control_executions_per_specification, over the scenarios of
// BulkheadScenarios.cs: never more than maxParallelization executing or
// maxQueuingActions queued, the rest rejected; canceling a queued action
// frees its place in the queue, canceling an executing one frees its slot
// for the first queued.
func TestPollyControlExecutionsPerSpecification(t *testing.T) {
	for _, sc := range []struct {
		parallel, queue, load          int
		cancelQueuing, cancelExecuting bool
	}{
		{5, 0, 3, false, false},
		{20, 0, 3, false, true},
		{3, 0, 4, false, false},
		{3, 1, 5, false, false},
		{6, 3, 9, true, true},
		{5, 3, 8, false, false},
		{6, 3, 9, true, true}, // listed twice in BulkheadScenarios.cs, under two descriptions
		{1, 6, 5, true, true},
	} {
		name := strconv.Itoa(sc.parallel) + "x" + strconv.Itoa(sc.queue) + "/" + strconv.Itoa(sc.load)
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var opts []option
				if sc.queue > 0 {
					opts = append(opts, maxWait(time.Hour, sc.queue))
				}
				b := newBulkhead(t, sc.parallel, opts...)
				release := make(chan struct{})
				cancels := make([]context.CancelFunc, sc.load)
				errs := make([]error, sc.load)
				var wg sync.WaitGroup
				for i := range sc.load {
					ctx, cancel := context.WithCancel(context.Background())
					cancels[i] = cancel
					wg.Go(func() {
						errs[i] = do(ctx, b, func(ctx context.Context) error {
							select {
							case <-release:
							case <-ctx.Done():
							}
							return nil
						})
					})
					synctest.Wait() // in order: the first ones execute, then the queue fills
				}
				executing := min(sc.load, sc.parallel)
				queued := min(max(sc.load-sc.parallel, 0), sc.queue)
				rejected := sc.load - executing - queued
				check := func(what string) {
					t.Helper()
					s := b.Stats()
					assert.Equal(t, executing, s.InFlight, "%s: executing", what)
					assert.Equal(t, queued, s.Waiting, "%s: queued", what)
					assert.Equal(t, uint64(rejected), s.Rejected, "%s: rejected", what)
				}
				check("loaded")
				if sc.cancelQueuing && queued > 0 {
					cancels[sc.parallel]() // the first queued
					synctest.Wait()
					queued--
					rejected++
					check("a queued action canceled")
				}
				if sc.cancelExecuting {
					cancels[0]()
					synctest.Wait()
					if queued > 0 {
						queued-- // its slot goes to the first queued
					} else {
						executing--
					}
					check("an executing action canceled")
				}
				close(release)
				wg.Wait()
				s := b.Stats()
				assert.Zero(t, s.InFlight)
				assert.Zero(t, s.Waiting)
				assert.Equal(t, uint64(sc.load), s.Accepted+s.Rejected)
				for i, err := range errs {
					if err != nil {
						assert.True(t, errors.Is(err, bulkhead.ErrFull) || errors.Is(err, context.Canceled), "action %d: %v", i, err)
					}
				}
				for _, cancel := range cancels {
					cancel()
				}
			})
		})
	}
}

// --- App-vNext/Polly, test/Polly.RateLimiting.Tests/RateLimiterResilienceStrategyTests.cs

// Polly RateLimiterResilienceStrategyTests Execute_HappyPath: the lease is
// acquired and given back.
func TestPollyConcurrencyLimiterHappyPath(t *testing.T) {
	obs := &calls{}
	b := newBulkhead(t, 1, observed(obs))
	require.NoError(t, do(context.Background(), b, func(context.Context) error { return nil }))
	assert.Equal(t, []string{"pro permitted", "pro finished"}, obs.events)
	assert.Zero(t, b.Stats().InFlight)
}

// Polly RateLimiterResilienceStrategyTests Execute_LeaseRejected: the
// rejection is a dedicated error, reported to the rejection handler.
// Difference: it carries no retry-after; it classifies as a local refusal
// (package doc, no retry-after).
func TestPollyConcurrencyLimiterLeaseRejected(t *testing.T) {
	obs := &calls{}
	b := newBulkhead(t, 1, observed(obs))
	require.True(t, b.TryAcquire())
	err := do(context.Background(), b, func(context.Context) error { return nil })
	var fe *bulkhead.FullError
	require.ErrorAs(t, err, &fe)
	v := classify.Classify(err)
	assert.Equal(t, classify.Rejected, v.Class)
	assert.Zero(t, v.RetryAfter)
	assert.Equal(t, "pro rejected", obs.events[len(obs.events)-1])
	b.Release()
}
