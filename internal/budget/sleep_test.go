package budget_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tierguard/tierguard/internal/budget"
)

// TestSleep: Sleep waits its duration, no longer than its context, and a
// non-positive duration only reports the context.
func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		assert.NoError(t, budget.Sleep(context.Background(), time.Second))
		assert.Equal(t, time.Second, time.Since(start))

		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start = time.Now()
		assert.ErrorIs(t, budget.Sleep(ctx, time.Hour), context.DeadlineExceeded)
		assert.Equal(t, 300*time.Millisecond, time.Since(start), "the context ended first")

		assert.NoError(t, budget.Sleep(context.Background(), 0))
		assert.ErrorIs(t, budget.Sleep(ctx, -time.Second), context.DeadlineExceeded, "an ended context, even for no wait")
	})
}
