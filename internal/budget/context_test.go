package budget_test

import (
	"context"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tierguard/tierguard/internal/budget"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type key struct{}

// TestContextEndsAtItsDeadline: Done closes and Err says DeadlineExceeded
// at the deadline, whether or not Done was asked for first.
func TestContextEndsAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent := context.WithValue(context.Background(), key{}, "v")
		c := budget.NewContext(parent, time.Now().Add(time.Second))
		d, ok := c.Deadline()
		assert.True(t, ok)
		assert.Equal(t, time.Now().Add(time.Second), d)
		assert.Equal(t, "v", c.Value(key{}))
		assert.NoError(t, c.Err())
		start := time.Now()
		<-c.Done()
		assert.Equal(t, time.Second, time.Since(start))
		assert.ErrorIs(t, c.Err(), context.DeadlineExceeded)
		assert.True(t, c.Expired())

		lazy := budget.NewContext(context.Background(), time.Now().Add(time.Second))
		time.Sleep(2 * time.Second)
		assert.ErrorIs(t, lazy.Err(), context.DeadlineExceeded, "the clock decides even with no timer armed")
		select {
		case <-lazy.Done():
		default:
			t.Fatal("Done must be closed once Err is not nil")
		}
	})
}

// TestContextFollowsItsParent: the parent's cancel reaches the context, and
// contexts derived from it, armed or not.
func TestContextFollowsItsParent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		c := budget.NewContext(parent, time.Now().Add(time.Hour))
		child, cancelChild := context.WithCancel(c)
		defer cancelChild()
		cancel()
		<-child.Done()
		assert.ErrorIs(t, c.Err(), context.Canceled)
		assert.ErrorIs(t, child.Err(), context.Canceled)
		assert.False(t, c.Expired())

		parent2, cancel2 := context.WithCancel(context.Background())
		unarmed := budget.NewContext(parent2, time.Now().Add(time.Hour))
		cancel2()
		assert.ErrorIs(t, unarmed.Err(), context.Canceled, "Err reads the parent even before Done")
	})
}

// TestCancelReleasesEverything: Cancel ends the context, stops its timer
// and unlinks it from the parent; AfterFunc callbacks run once.
func TestCancelReleasesEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		defer cancel()
		c := budget.NewContext(parent, time.Now().Add(time.Hour))
		ran := make(chan struct{}, 2)
		c.AfterFunc(func() { ran <- struct{}{} })
		stopped := c.AfterFunc(func() { ran <- struct{}{} })
		assert.True(t, stopped(), "stopped before the context ended")
		assert.False(t, stopped())
		c.Cancel()
		<-ran
		synctest.Wait()
		assert.Len(t, ran, 0, "the stopped callback never runs")
		assert.ErrorIs(t, c.Err(), context.Canceled)
		assert.False(t, c.Expired())
		c.Cancel()

		late := false
		c.AfterFunc(func() { late = true })
		synctest.Wait()
		assert.True(t, late, "a callback registered after the end runs at once")
	})
}

// TestDerivedContextsNeedNoGoroutine: net/http derives a context per
// request; deriving from a Context must not start a goroutine per derived
// context (the context package uses its AfterFunc).
func TestDerivedContextsNeedNoGoroutine(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := budget.NewContext(parent, time.Now().Add(time.Hour))
	before := runtime.NumGoroutine()
	var cancels []context.CancelFunc
	for range 100 {
		_, cf := context.WithCancel(c)
		cancels = append(cancels, cf)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), before+1)
	for _, cf := range cancels {
		cf()
	}
	c.Cancel()
}

// TestUnarmedContextAllocatesOnce: creating a context and cancelling it
// without anyone waiting on it costs its own allocation only.
func TestUnarmedContextAllocatesOnce(t *testing.T) {
	d := time.Now().Add(time.Hour)
	allocs := testing.AllocsPerRun(100, func() {
		c := budget.NewContext(context.Background(), d)
		_ = c.Err()
		c.Cancel()
	})
	assert.Equal(t, 1.0, allocs)
}

func TestBudgetWindowAndContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := budget.New(context.Background(), 10*time.Second)
		rem := b.Remaining()
		per, ok := b.Window(rem, budget.Try{Cap: 3 * time.Second, Reserve: time.Second})
		require.True(t, ok)
		assert.Equal(t, 3*time.Second, per)
		per, ok = b.Window(rem, budget.Try{Reserve: 4 * time.Second})
		require.True(t, ok)
		assert.Equal(t, 6*time.Second, per)
		_, ok = b.Window(rem, budget.Try{Reserve: 9950 * time.Millisecond, MinUseful: 100 * time.Millisecond})
		assert.False(t, ok)

		ctx, c := b.Context(context.Background(), per, rem)
		require.NotNil(t, c)
		dl, _ := ctx.Deadline()
		assert.Equal(t, time.Now().Add(6*time.Second), dl)
		c.Cancel()

		parent, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		bound := budget.New(parent, 0)
		r := bound.Remaining()
		per, _ = bound.Window(r, budget.Try{})
		ctx, c = bound.Context(parent, per, r)
		assert.Nil(t, c, "an attempt that runs to the context's own deadline needs no context")
		assert.Equal(t, parent, ctx)

		none := budget.New(context.Background(), 0)
		per, ok = none.Window(none.Remaining(), budget.Try{})
		assert.True(t, ok)
		assert.Equal(t, budget.Unlimited, per)
		assert.True(t, none.Fits(time.Hour, budget.Try{Reserve: time.Hour}))
		assert.False(t, none.Over())
	})
}

// Fits: after the wait, an attempt of at least MinUseful must fit before
// the deadline minus the reserve; without a deadline everything fits.
func TestFits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b := budget.New(ctx, 0)
		try := budget.Try{Reserve: 3 * time.Second, MinUseful: time.Second}
		assert.True(t, b.Fits(6*time.Second, try))
		assert.False(t, b.Fits(6*time.Second+1, try))
		assert.True(t, budget.New(context.Background(), 0).Fits(time.Hour, try))
	})
}
