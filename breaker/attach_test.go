package breaker_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
)

type attachKey struct{ name string }

type otherKey struct{ name string }

// Attach shares one value per key until the last holder lets go, and
// leaves the breaker's observers alone.
func TestAttachSharesAValuePerKey(t *testing.T) {
	b, err := breaker.New(breaker.Config{Name: "pro", ConsecutiveFailures: 1})
	require.NoError(t, err)
	made := 0
	newValue := func() any { made++; return &made }

	var seen []string
	remove := b.Observe(func(tr breaker.Transition) { seen = append(seen, tr.To.String()) })
	defer remove()

	v1, detach1 := b.Attach(attachKey{"a"}, newValue)
	v2, detach2 := b.Attach(attachKey{"a"}, newValue)
	assert.Same(t, v1, v2, "one value per key")
	assert.Equal(t, 1, made)
	other, detachOther := b.Attach(otherKey{"a"}, func() any { return new(int) })
	assert.NotSame(t, v1, other, "a key of another type is another key")

	b.ForceOpen()
	assert.Equal(t, []string{"open"}, seen, "observers still see transitions")

	detach1()
	detach1() // lets go once
	v3, detach3 := b.Attach(attachKey{"a"}, newValue)
	assert.Same(t, v1, v3, "still held by the second caller")
	assert.Equal(t, 1, made)
	detach2()
	detach3()
	v4, detach4 := b.Attach(attachKey{"a"}, newValue)
	defer detach4()
	assert.Equal(t, 2, made, "let go by everyone, made anew")
	_ = v4
	detachOther()

	assert.PanicsWithValue(t, "breaker: Attach key is not comparable", func() { b.Attach([]string{"a"}, newValue) })
	assert.Panics(t, func() { b.Attach(nil, newValue) })
}

// Concurrent Attach and detach calls agree on one value while any is
// held (run with -race).
func TestAttachConcurrently(t *testing.T) {
	b, err := breaker.New(breaker.Config{Name: "pro"})
	require.NoError(t, err)
	keep, detach := b.Attach(attachKey{"a"}, func() any { return new(int) })
	defer detach()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				v, d := b.Attach(attachKey{"a"}, func() any { return new(int) })
				assert.Same(t, keep, v)
				b.Observe(func(breaker.Transition) {})()
				d()
			}
		})
	}
	wg.Wait()
}
