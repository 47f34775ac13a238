package bulkhead_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/bulkhead"
)

// hammer runs goroutines goroutines, each making rounds acquisitions of b
// with acquire and releasing what it got, and returns the most slots
// it saw held at once and how many acquisitions got one.
func hammer(b *bulkhead.Bulkhead, goroutines, rounds int, acquire func(i int) bool) (most, granted int64) {
	var held atomic.Int64
	var grants atomic.Int64
	var peak atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range rounds {
				if !acquire(g + i) {
					continue
				}
				grants.Add(1)
				n := held.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				if i%8 == 0 {
					runtime.Gosched() // hold the slot across a switch now and then
				}
				held.Add(-1)
				b.Release()
			}
		})
	}
	wg.Wait()
	return peak.Load(), grants.Load()
}

// TestContendedAcquisitionsNeverPassMax: an acquisition that finds the
// bulkhead full counts a slot for an instant before it undoes its add;
// however many goroutines race for the last slots, no more than Max hold
// one at once, and the figures add up once they are done.
func TestContendedAcquisitionsNeverPassMax(t *testing.T) {
	const goroutines, rounds = 64, 2000
	for _, max := range []int{1, 2} {
		b := newBulkhead(t, max)
		most, granted := hammer(b, goroutines, rounds, func(int) bool { return b.TryAcquire() })
		assert.LessOrEqual(t, most, int64(max), "Max %d", max)
		assert.Positive(t, granted)
		assert.Equal(t, bulkhead.Stats{Accepted: uint64(granted), Rejected: uint64(goroutines*rounds) - uint64(granted), Max: max}, b.Stats(), "Max %d", max)
	}
}

// TestStatsNeverShowPastMax: Stats taken while acquisitions race for the
// last slot never shows more slots in flight than Max, though state
// counts, for an instant, the adds about to be undone.
func TestStatsNeverShowPastMax(t *testing.T) {
	b := newBulkhead(t, 1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if s := b.Stats(); s.InFlight > 1 {
				t.Errorf("Stats = %+v, past Max", s)
				return
			}
		}
	})
	hammer(b, 16, 2000, func(int) bool { return b.TryAcquire() })
	close(stop)
	wg.Wait()
}

// TestUndoneAddsNeverStrandAWaiter: fail-fast acquisitions racing with
// queued ones make the count of slots overshoot for an instant, and a
// Release then may find no slot to hand to the queue. Whoever undoes the
// overshoot hands the slot over instead: with a queue long enough for
// every goroutine and a wait far longer than the test, every queued
// acquisition gets a slot.
func TestUndoneAddsNeverStrandAWaiter(t *testing.T) {
	const goroutines, rounds = 64, 500
	for _, max := range []int{1, 2} {
		b := newBulkhead(t, max, maxWait(time.Minute, goroutines))
		ctx := context.Background()
		var queuedFailed atomic.Int64
		most, _ := hammer(b, goroutines, rounds, func(i int) bool {
			if i%2 == 0 {
				return b.TryAcquire()
			}
			if err := b.Acquire(ctx); err != nil {
				queuedFailed.Add(1)
				return false
			}
			return true
		})
		assert.LessOrEqual(t, most, int64(max), "Max %d", max)
		assert.Zero(t, queuedFailed.Load(), "Max %d: a queued acquisition was refused", max)
		s := b.Stats()
		assert.Zero(t, s.InFlight)
		assert.Zero(t, s.Waiting)
		assert.Equal(t, uint64(goroutines*rounds), s.Accepted+s.Rejected, "Max %d", max)
	}
}

// TestQueuedWaitEndsAtDeadlineWhileOthersRace: a queued acquisition
// whose context ends first gives up at the deadline, never later, while
// fail-fast acquisitions keep trying the full bulkhead; the slot it did
// not get goes to the next waiter.
func TestQueuedWaitEndsAtDeadlineWhileOthersRace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBulkhead(t, 1, maxWait(time.Second, 2))
		require.NoError(t, b.Acquire(context.Background()))

		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		var wg sync.WaitGroup
		var early, late error
		var earlyAt, lateAt time.Duration
		start := time.Now()
		wg.Go(func() { early = b.Acquire(ctx); earlyAt = time.Since(start) })
		synctest.Wait()
		wg.Go(func() {
			late = b.Acquire(context.Background())
			lateAt = time.Since(start)
			if late == nil {
				b.Release()
			}
		})
		synctest.Wait()
		for range 10 {
			assert.False(t, b.TryAcquire(), "a newcomer must not pass the queue")
		}
		time.Sleep(300 * time.Millisecond)
		b.Release()
		wg.Wait()

		require.ErrorIs(t, early, context.DeadlineExceeded)
		assert.Equal(t, 200*time.Millisecond, earlyAt)
		require.NoError(t, late)
		assert.Equal(t, 300*time.Millisecond, lateAt)
		assert.Equal(t, bulkhead.Stats{Accepted: 2, Rejected: 11, Max: 1}, b.Stats())
	})
}
