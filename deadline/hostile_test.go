package deadline_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/deadline"
)

// TestFitsNeverOverflows: a wait or a minimum useful time near the largest
// Duration must not wrap around into "it fits". Found by the chaos soak: a
// verdict with a retry-after of math.MaxInt64 (an SDK adapter's, or a
// custom classifier's) had the chain sleep to the deadline instead of
// falling back at once.
func TestFitsNeverOverflows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	b := deadline.New(ctx, 0)
	assert.False(t, b.Fits(math.MaxInt64, deadline.Try{}))
	assert.False(t, b.Fits(math.MaxInt64-1, deadline.Try{MinUseful: 2}))
	assert.False(t, b.Fits(time.Hour, deadline.Try{MinUseful: math.MaxInt64}))
	assert.False(t, b.Fits(0, deadline.Try{Reserve: math.MaxInt64}))
	assert.True(t, b.Fits(-time.Hour, deadline.Try{}), "a negative wait is no wait")
	assert.True(t, deadline.New(context.Background(), 0).Fits(math.MaxInt64, deadline.Try{MinUseful: math.MaxInt64}), "no deadline: everything fits")
}

// TestAttemptRefusesPastTheDeadlineWhateverTheReserve: a reserve near the
// largest Duration must not wrap a spent budget around into time left.
func TestAttemptRefusesPastTheDeadlineWhateverTheReserve(t *testing.T) {
	past, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	b := deadline.New(past, 0)
	for _, reserve := range []time.Duration{0, time.Second, math.MaxInt64, math.MaxInt64 - 1, math.MinInt64} {
		_, _, err := b.Attempt(past, deadline.Try{Reserve: reserve})
		assert.ErrorIs(t, err, deadline.ErrExhausted, "reserve %v", reserve)
		assert.False(t, b.Fits(0, deadline.Try{Reserve: reserve}), "reserve %v", reserve)
	}
}

// TestExtremeDurations: totals, caps and reserves at the ends of the
// Duration range give a budget that behaves.
func TestExtremeDurations(t *testing.T) {
	b := deadline.New(context.Background(), math.MaxInt64)
	d, ok := b.Deadline()
	require.True(t, ok)
	assert.True(t, d.After(time.Now().Add(100*365*24*time.Hour)), "a huge total is far away, not in the past")
	assert.Positive(t, b.Remaining())
	ctx, cancel, err := b.Attempt(context.Background(), deadline.Try{Cap: math.MaxInt64, MinUseful: time.Nanosecond})
	require.NoError(t, err)
	assert.NoError(t, ctx.Err())
	cancel()

	b = deadline.New(context.Background(), math.MinInt64)
	assert.Equal(t, deadline.Unlimited, b.Remaining(), "a negative total is no total")

	short := deadline.New(context.Background(), time.Nanosecond)
	time.Sleep(time.Millisecond)
	assert.Negative(t, short.Remaining())
	_, _, err = short.Attempt(context.Background(), deadline.Try{MinUseful: math.MinInt64})
	assert.ErrorIs(t, err, deadline.ErrExhausted, "nothing is left, whatever MinUseful says")
}
