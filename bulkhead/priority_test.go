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
)

func prio(p bulkhead.Priority) context.Context {
	return bulkhead.WithPriority(context.Background(), p)
}

// fill takes slots at priority p until refused, and returns how many.
func fill(b *bulkhead.Bulkhead, p bulkhead.Priority) int {
	n := 0
	for b.Acquire(prio(p)) == nil {
		n++
	}
	return n
}

// With a Reserve, each priority leaves a share to those above it: lower
// priorities are refused first, and the last share is Critical's alone.
// Without one (the second case) every priority fills the whole bulkhead,
// first come first served: the test fails there by design.
func TestPriorityLowerRefusedFirst(t *testing.T) {
	b, err := bulkhead.New(bulkhead.Config{Name: "pro", Max: 10, Reserve: 0.1})
	require.NoError(t, err)
	assert.Equal(t, 7, fill(b, bulkhead.Sheddable), "10 less three shares")
	assert.Equal(t, 1, fill(b, bulkhead.Batch))
	assert.Equal(t, 1, fill(b, bulkhead.Interactive))
	assert.Equal(t, 1, fill(b, bulkhead.Critical))
	assert.False(t, b.TryAcquire())
	assert.Equal(t, uint64(5), b.Stats().Rejected)
	assert.Equal(t, [4]uint64{1, 2, 1, 1}, b.Stats().RejectedAt, "critical, interactive (TryAcquire's too), batch, sheddable")
	for range 10 {
		b.Release()
	}

	plain, err := bulkhead.New(bulkhead.Config{Name: "pro", Max: 10})
	require.NoError(t, err)
	assert.Equal(t, 10, fill(plain, bulkhead.Sheddable), "no reserve: priorities change nothing")
	assert.Equal(t, 0, fill(plain, bulkhead.Critical))
}

// The shares follow an adaptive limit: a limit lowered by overload takes
// slots from the lowest priorities first.
func TestPrioritySharesFollowTheLimit(t *testing.T) {
	b, err := bulkhead.New(bulkhead.Config{Name: "pro", Max: 20, Reserve: 0.1,
		Adaptive: &bulkhead.Adaptive{Floor: 2, Ceiling: 40, Window: 1}})
	require.NoError(t, err)
	for range 4 {
		b.Record(0, bulkhead.SampleOf(overload))
	}
	require.Equal(t, 13, b.Limit())
	assert.Equal(t, 7, fill(b, bulkhead.Sheddable), "13 less three shares of 2")
	assert.Equal(t, 2, fill(b, bulkhead.Batch))
	assert.Equal(t, 2, fill(b, bulkhead.Interactive))
	assert.Equal(t, 2, fill(b, bulkhead.Critical))
	for range 13 {
		b.Release()
	}
}

// Waiters are served highest priority first, each in arrival order
// within its priority; a plain bulkhead's queue is first in, first out.
func TestPriorityQueueOrder(t *testing.T) {
	for _, reserve := range []float64{0.1, 0} {
		synctest.Test(t, func(t *testing.T) {
			b, err := bulkhead.New(bulkhead.Config{Name: "pro", Max: 1, MaxWait: time.Minute, Queue: 8, Reserve: reserve})
			require.NoError(t, err)
			require.NoError(t, b.Acquire(prio(bulkhead.Critical)))
			order := make(chan string, 5)
			var wg sync.WaitGroup
			for _, w := range []struct {
				name string
				p    bulkhead.Priority
			}{{"batch", bulkhead.Batch}, {"shed", bulkhead.Sheddable}, {"interactive1", bulkhead.Interactive},
				{"critical", bulkhead.Critical}, {"interactive2", bulkhead.Interactive}} {
				wg.Go(func() {
					if b.Acquire(prio(w.p)) == nil {
						order <- w.name
						time.Sleep(time.Second)
						b.Release()
					}
				})
				synctest.Wait()
			}
			b.Release()
			var got []string
			for range 5 {
				got = append(got, <-order)
			}
			wg.Wait()
			if reserve > 0 {
				assert.Equal(t, []string{"critical", "interactive1", "interactive2", "batch", "shed"}, got)
			} else {
				assert.Equal(t, []string{"batch", "shed", "interactive1", "critical", "interactive2"}, got)
			}
		})
	}
}

// A waiter is bounded by its own context: a batch call whose deadline
// comes first gives up while an interactive one behind it gets the slot.
func TestPriorityWaitBoundedByDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := bulkhead.New(bulkhead.Config{Name: "pro", Max: 2, MaxWait: time.Minute, Queue: 8, Reserve: 0.2})
		require.NoError(t, err)
		require.NoError(t, b.Acquire(prio(bulkhead.Critical)))
		require.NoError(t, b.Acquire(prio(bulkhead.Critical)))
		ctx, cancel := context.WithTimeout(prio(bulkhead.Batch), 2*time.Second)
		defer cancel()
		batch := make(chan error, 1)
		go func() { batch <- b.Acquire(ctx) }()
		inter := make(chan error, 1)
		go func() { inter <- b.Acquire(prio(bulkhead.Interactive)) }()
		time.Sleep(3 * time.Second)
		require.ErrorIs(t, <-batch, context.DeadlineExceeded)
		b.Release()
		b.Release() // Interactive may fill all but Critical's share: 1 of 2
		require.NoError(t, <-inter)
		assert.Equal(t, 1, b.Stats().InFlight)
		b.Release()
	})
}

func TestPriorityFromContext(t *testing.T) {
	assert.Equal(t, bulkhead.Interactive, bulkhead.PriorityFrom(context.Background()))
	assert.Equal(t, bulkhead.Batch, bulkhead.PriorityFrom(prio(bulkhead.Batch)))
	assert.Equal(t, bulkhead.Sheddable, bulkhead.PriorityFrom(prio(bulkhead.Priority(9))), "unknown ranks last")
	assert.Equal(t, bulkhead.Sheddable, bulkhead.PriorityFrom(prio(bulkhead.Priority(-5))))
	for _, p := range bulkhead.Priorities {
		assert.NotEqual(t, "invalid", p.String())
	}
}

// Callers of every priority acquiring, waiting, reporting and releasing
// at once, while the limit moves: every acquisition is counted once, as
// accepted or refused, the refusals by priority add up, and every slot
// comes back.
func TestPriorityAdaptiveUnderLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := bulkhead.New(bulkhead.Config{Name: "pro", Max: 8, MaxWait: 3 * time.Millisecond, Queue: 4, Reserve: 0.2,
			Adaptive: &bulkhead.Adaptive{Floor: 2, Ceiling: 16}})
		require.NoError(t, err)
		var wg sync.WaitGroup
		const callers, calls = 12, 200
		for g := range callers {
			wg.Go(func() {
				ctx := prio(bulkhead.Priorities[g%len(bulkhead.Priorities)])
				for i := range calls {
					if b.Acquire(ctx) != nil {
						continue
					}
					time.Sleep(time.Duration(1+i%3) * time.Millisecond)
					s := bulkhead.Latency
					if (g+i)%9 == 0 {
						s = bulkhead.Overload
					}
					b.Record(time.Duration(1+i%3)*time.Millisecond, s)
					b.Release()
				}
			})
		}
		wg.Wait()
		st := b.Stats()
		assert.Equal(t, uint64(callers*calls), st.Accepted+st.Rejected)
		assert.Positive(t, st.Rejected)
		assert.Greater(t, st.RejectedAt[3], st.RejectedAt[0], "sheddable refused more than critical")
		var byPriority uint64
		for _, n := range st.RejectedAt {
			byPriority += n
		}
		assert.Equal(t, st.Rejected, byPriority)
		assert.Zero(t, st.InFlight)
		assert.Zero(t, st.Waiting)
		assert.True(t, b.Limit() >= 2 && b.Limit() <= 16)
	})
}
