package budget_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tierguard/tierguard/internal/budget"
)

// NewLeft's figure is the time left as of the reading New made: the
// total, or what the context's earlier deadline leaves; none when New
// read no clock.
func TestNewLeftIsTheTimeLeftAtItsReading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, left, ok := budget.NewLeft(context.Background(), 10*time.Second)
		assert.True(t, ok)
		assert.Equal(t, 10*time.Second, left)
		assert.Equal(t, b.Remaining(), left, "no time passes in the bubble")

		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		b, left, ok = budget.NewLeft(ctx, 10*time.Second)
		assert.True(t, ok)
		assert.Equal(t, 3*time.Second, left, "the context's deadline is the earlier")
		d, _ := b.Deadline()
		cd, _ := ctx.Deadline()
		assert.Equal(t, cd, d)

		_, _, ok = budget.NewLeft(ctx, 0)
		assert.False(t, ok, "no total: New read no clock, and says no figure")

		b, left, ok = budget.NewLeft(context.Background(), 0)
		assert.True(t, ok)
		assert.Equal(t, budget.Unlimited, left)
		assert.False(t, b.Limited())
	})
}

// TestNewLeftAtTakesTheReadingGiven: the budget's deadline and the time
// left are counted from the reading the caller made, and a context's
// earlier deadline still wins.
func TestNewLeftAtTakesTheReadingGiven(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		then := time.Now().Add(-time.Second)
		b, left, ok := budget.NewLeftAt(context.Background(), 5*time.Second, then)
		assert.True(t, ok)
		assert.Equal(t, 5*time.Second, left)
		d, limited := b.Deadline()
		assert.True(t, limited)
		assert.Equal(t, then.Add(5*time.Second), d)
		assert.Equal(t, 4*time.Second, b.Remaining())

		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		b, left, _ = budget.NewLeftAt(ctx, 5*time.Second, then)
		assert.Equal(t, 3*time.Second, left, "the context's deadline, counted from the reading")
		assert.Equal(t, 2*time.Second, b.Remaining())
	})
}
