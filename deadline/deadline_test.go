package deadline_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/deadline"
)

func TestBudgetTakesTheEarlierDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()

		b := deadline.New(ctx, 3*time.Second)
		d, ok := b.Deadline()
		require.True(t, ok)
		assert.Equal(t, start.Add(3*time.Second), d, "the chain total is earlier")

		b = deadline.New(ctx, 30*time.Second)
		d, _ = b.Deadline()
		assert.Equal(t, start.Add(10*time.Second), d, "the context deadline is earlier")

		b = deadline.New(context.Background(), 0)
		_, ok = b.Deadline()
		assert.False(t, ok)
		assert.Equal(t, deadline.Unlimited, b.Remaining())

		b = deadline.New(ctx, 0)
		time.Sleep(4 * time.Second)
		assert.Equal(t, 6*time.Second, b.Remaining())
	})
}

func TestAttemptLeavesTheReserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b := deadline.New(ctx, 0)

		actx, acancel, err := b.Attempt(ctx, deadline.Try{Reserve: 4 * time.Second})
		require.NoError(t, err)
		defer acancel()
		d, _ := actx.Deadline()
		assert.Equal(t, start.Add(6*time.Second), d)

		actx2, acancel2, err := b.Attempt(ctx, deadline.Try{Cap: 2 * time.Second, Reserve: 4 * time.Second})
		require.NoError(t, err)
		defer acancel2()
		d, _ = actx2.Deadline()
		assert.Equal(t, start.Add(2*time.Second), d, "the per-try cap is shorter")

		// A slow attempt ends at the reserve, not at the request deadline.
		<-actx.Done()
		assert.Equal(t, start.Add(6*time.Second), time.Now())
		assert.NoError(t, ctx.Err(), "the request still has its reserve")
	})
}

func TestAttemptReusesTheContextWhenItBinds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b := deadline.New(ctx, 0)
		actx, acancel, err := b.Attempt(ctx, deadline.Try{Cap: time.Minute})
		require.NoError(t, err)
		acancel()
		assert.Equal(t, ctx, actx, "no new context when the request's deadline binds")

		actx, acancel, err = deadline.New(context.Background(), 0).Attempt(ctx, deadline.Try{})
		require.NoError(t, err)
		acancel()
		assert.Equal(t, ctx, actx)

		// With a chain total, the context does not end at the budget: the
		// attempt needs one that does.
		b = deadline.New(context.Background(), 5*time.Second)
		actx, acancel, err = b.Attempt(context.Background(), deadline.Try{})
		require.NoError(t, err)
		defer acancel()
		_, has := actx.Deadline()
		assert.True(t, has)
	})
}

func TestAttemptWithoutBudgetHonoursCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		b := deadline.New(context.Background(), 0)
		actx, acancel, err := b.Attempt(context.Background(), deadline.Try{Cap: time.Second, Reserve: time.Hour})
		require.NoError(t, err)
		defer acancel()
		d, ok := actx.Deadline()
		require.True(t, ok)
		assert.Equal(t, start.Add(time.Second), d)
	})
}

func TestAttemptRefusesBelowMinUseful(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		b := deadline.New(ctx, 0)
		try := deadline.Try{Reserve: 700 * time.Millisecond, MinUseful: 200 * time.Millisecond}

		_, acancel, err := b.Attempt(ctx, try)
		require.NoError(t, err, "300ms left after the reserve")
		acancel()

		time.Sleep(150 * time.Millisecond)
		actx, _, err := b.Attempt(ctx, try)
		require.Error(t, err, "150ms left after the reserve")
		assert.Nil(t, actx)
		assert.ErrorIs(t, err, deadline.ErrExhausted)
		var ee *deadline.ExhaustedError
		require.ErrorAs(t, err, &ee)
		assert.Equal(t, 850*time.Millisecond, ee.Remaining)
		assert.Equal(t, classify.DeadlineExhausted, classify.Classify(err).Class)

		time.Sleep(time.Second)
		_, _, err = b.Attempt(ctx, deadline.Try{})
		assert.ErrorIs(t, err, deadline.ErrExhausted, "nothing left at all")
	})
}

func TestExhaustedWrapsCause(t *testing.T) {
	cause := errors.New("503 from pro")
	err := &deadline.ExhaustedError{Cause: cause}
	assert.ErrorIs(t, err, deadline.ErrExhausted)
	assert.ErrorIs(t, err, cause)
	assert.Contains(t, err.Error(), "503 from pro")
	var ee *deadline.ExhaustedError
	require.ErrorAs(t, err, &ee)
	assert.Zero(t, ee.Remaining, "negative remaining is reported as zero")
	assert.Equal(t, deadline.ErrExhausted.Error(), (&deadline.ExhaustedError{}).Error())
}

func TestAttemptAllocatesNothingWhenContextBinds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	b := deadline.New(ctx, 0)
	allocs := testing.AllocsPerRun(100, func() {
		actx, acancel, err := b.Attempt(ctx, deadline.Try{MinUseful: time.Millisecond})
		if err != nil || actx != ctx {
			t.Fatal("unexpected attempt context")
		}
		acancel()
	})
	assert.Zero(t, allocs)
}

func BenchmarkAttempt(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	b.Run("context-binds", func(b *testing.B) {
		budget := deadline.New(ctx, 0)
		b.ReportAllocs()
		for b.Loop() {
			_, c, _ := budget.Attempt(ctx, deadline.Try{})
			c()
		}
	})
	b.Run("no-deadline", func(b *testing.B) {
		budget := deadline.New(context.Background(), 0)
		b.ReportAllocs()
		for b.Loop() {
			_, c, _ := budget.Attempt(context.Background(), deadline.Try{})
			c()
		}
	})
	b.Run("per-try-cap", func(b *testing.B) {
		budget := deadline.New(ctx, 0)
		b.ReportAllocs()
		for b.Loop() {
			_, c, _ := budget.Attempt(ctx, deadline.Try{Cap: time.Second})
			c()
		}
	})
}
