package bulkhead

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRefusingHint: an add that finds no free slot sets the hint, after
// which refusals read state without writing it; the next release clears
// the hint, and the fast path adds at once again.
func TestRefusingHint(t *testing.T) {
	b, err := New(Config{Name: "b", Max: 1})
	require.NoError(t, err)
	require.True(t, b.TryAcquire())
	assert.Zero(t, b.flags.Load(), "a grant sets nothing")

	assert.False(t, b.TryAcquire(), "the add that finds the bulkhead full")
	assert.Equal(t, int64(refusingFlag), b.flags.Load())
	s := b.state.Load()
	for range 3 {
		assert.False(t, b.TryAcquire())
		require.ErrorIs(t, b.Acquire(context.Background()), ErrFull)
	}
	assert.Equal(t, s, b.state.Load(), "refusals under the hint write nothing to state")

	b.Release()
	assert.Zero(t, b.flags.Load(), "a release frees a slot and clears the hint")
	require.True(t, b.TryAcquire())
	b.Release()
	assert.Equal(t, Stats{Accepted: 2, Rejected: 7, Max: 1}, b.Stats())
}

// TestStaleRefusingHint: the hint set by an add undone after the slot it
// raced for was freed only sends acquisitions the careful way, which
// grants a free slot; the next release clears it.
func TestStaleRefusingHint(t *testing.T) {
	b, err := New(Config{Name: "b", Max: 2})
	require.NoError(t, err)
	b.flags.Or(refusingFlag)
	require.True(t, b.TryAcquire())
	require.NoError(t, b.Acquire(context.Background()))
	assert.False(t, b.TryAcquire())
	b.Release()
	assert.Zero(t, b.flags.Load())
	b.Release()
	assert.Equal(t, Stats{Accepted: 2, Rejected: 1, Max: 2}, b.Stats())
}

// TestObservedFlag: the observed bit is set while any observer is, and
// leaves the count of waiters and the hint alone.
func TestObservedFlag(t *testing.T) {
	b, err := New(Config{Name: "b", Max: 1})
	require.NoError(t, err)
	var mu sync.Mutex
	var kinds []EventKind
	record := func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		kinds = append(kinds, e.Kind)
	}
	removeA, removeB := b.Observe(record), b.Observe(func(Event) {})
	assert.Equal(t, int64(observedFlag), b.flags.Load())

	require.True(t, b.TryAcquire())
	assert.False(t, b.TryAcquire(), "careful take: no add, so no hint")
	assert.Equal(t, int64(observedFlag), b.flags.Load())
	b.Release()
	assert.Equal(t, []EventKind{Permitted, Rejected, Finished}, kinds)

	removeA()
	assert.Equal(t, int64(observedFlag), b.flags.Load(), "one observer left")
	removeB()
	assert.Zero(t, b.flags.Load())
	require.True(t, b.TryAcquire())
	b.Release()
	assert.Len(t, kinds, 3, "a removed observer hears nothing")
}

// TestWaitingCountInFlags: queued acquisitions count above the two bits,
// the observed bit and the hint beside them change nothing in the count,
// and a newcomer defers to the queue whatever the bits say.
func TestWaitingCountInFlags(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := New(Config{Name: "b", Max: 1, MaxWait: time.Second, Queue: 3})
		require.NoError(t, err)
		ctx := context.Background()
		require.NoError(t, b.Acquire(ctx))
		remove := b.Observe(func(Event) {})

		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				if assert.NoError(t, b.Acquire(ctx)) {
					time.Sleep(10 * time.Millisecond)
					b.Release()
				}
			})
		}
		synctest.Wait()
		assert.Equal(t, int64(3), b.flags.Load()>>waitingShift)
		assert.Equal(t, int64(observedFlag), b.flags.Load()&(waitingOne-1))
		assert.Equal(t, 3, b.Stats().Waiting)

		remove()
		assert.Equal(t, int64(3), b.flags.Load()>>waitingShift)
		assert.Zero(t, b.flags.Load()&(waitingOne-1))
		require.ErrorIs(t, b.Acquire(ctx), ErrFull, "the queue is full")
		assert.Equal(t, int64(3), b.flags.Load()>>waitingShift, "a newcomer turned away leaves the count as it was")

		b.Release() // to the first waiter
		synctest.Wait()
		assert.Equal(t, int64(2), b.flags.Load()>>waitingShift)
		assert.False(t, b.TryAcquire(), "a newcomer must not pass the queue")

		wg.Wait()
		assert.Zero(t, b.flags.Load(), "the queue empty, the last release freed a slot")
		assert.Equal(t, Stats{Accepted: 4, Rejected: 2, Max: 1}, b.Stats())
	})
}
