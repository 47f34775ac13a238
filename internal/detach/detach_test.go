package detach_test

import (
	"context"
	"errors"
	"iter"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tierguard/tierguard/internal/detach"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunTellsReturnPanicAndGoexit apart.
func TestRunTellsReturnPanicAndGoexit(t *testing.T) {
	for name, tc := range map[string]struct {
		fn   func()
		want func(*testing.T, detach.Outcome)
	}{
		"return": {func() {}, func(t *testing.T, o detach.Outcome) { assert.False(t, o.Ended()) }},
		"panic": {func() { panic("boom") }, func(t *testing.T, o detach.Outcome) {
			assert.True(t, o.Panicked)
			assert.Equal(t, "boom", o.Panic)
			assert.Contains(t, string(o.Stack), "detach_test.go", "the stack where it panicked")
		}},
		"goexit": {func() { runtime.Goexit() }, func(t *testing.T, o detach.Outcome) {
			assert.True(t, o.Goexit)
			assert.False(t, o.Panicked)
		}},
		"nil panic": {func() { panic(nil) }, func(t *testing.T, o detach.Outcome) { assert.True(t, o.Panicked) }},
	} {
		t.Run(name, func(t *testing.T) {
			got := make(chan detach.Outcome, 1)
			go detach.Run(tc.fn, func(o detach.Outcome) { got <- o })
			tc.want(t, <-got)
		})
	}
}

func seqOf(items ...string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		for _, it := range items {
			if !yield(it, nil) {
				return
			}
		}
	}
}

// TestReaderReadsInOrder and ends cleanly.
func TestReaderReadsInOrder(t *testing.T) {
	var c detach.Counters
	r := detach.Read(context.Background(), time.Second, &c, seqOf("a", "b"), nil)
	var got []string
	for {
		s, ok := r.Next()
		require.NoError(t, s.Err)
		require.Nil(t, s.End)
		require.False(t, s.Abandoned)
		if !ok {
			break
		}
		got = append(got, s.Value)
	}
	assert.Equal(t, []string{"a", "b"}, got)
	assert.False(t, r.Stop())
	assert.False(t, r.Stop(), "Stop twice is fine")
}

// TestReaderAbandonsWorkThatIgnoresItsContext, and the work releases what
// it kept once it returns.
func TestReaderAbandonsWorkThatIgnoresItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c detach.Counters
		unblock := make(chan struct{})
		released := false
		stuck := func(yield func(string, error) bool) { <-unblock; yield("late", nil) }
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		r := detach.Read(ctx, 100*time.Millisecond, &c, stuck, func() { released = true })
		start := time.Now()
		s, ok := r.Next()
		assert.False(t, ok)
		assert.True(t, s.Abandoned)
		assert.Equal(t, 1100*time.Millisecond, time.Since(start), "the context's end plus the grace")
		assert.Equal(t, uint64(1), c.Abandoned.Load())
		assert.Equal(t, int64(1), c.Stuck.Load())
		assert.True(t, r.Stop())
		close(unblock)
		synctest.Wait()
		assert.True(t, released)
		assert.Zero(t, c.Stuck.Load())
	})
}

// TestReaderHandsOverPanicsAndErrors: an item's error and a panic of the
// sequence reach the reader.
func TestReaderHandsOverPanicsAndErrors(t *testing.T) {
	var c detach.Counters
	boom := errors.New("boom")
	r := detach.Read(context.Background(), time.Second, &c, func(yield func(string, error) bool) {
		yield("", boom)
		panic("sequence exploded")
	}, nil)
	s, ok := r.Next()
	assert.True(t, ok)
	assert.ErrorIs(t, s.Err, boom)
	s, ok = r.Next()
	assert.False(t, ok)
	require.NotNil(t, s.End)
	assert.Equal(t, "sequence exploded", s.End.Panic)
	r.Stop()
}
