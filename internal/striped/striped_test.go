package striped_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/tierguard/tierguard/internal/striped"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCounterSumsEveryAddition: additions from many goroutines at once,
// whichever stripes they land on, all count.
func TestCounterSumsEveryAddition(t *testing.T) {
	var c striped.Counter
	assert.Zero(t, c.Load())
	const goroutines, each = 64, 1000
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				c.Add(1)
			}
		})
	}
	wg.Wait()
	c.Add(5)
	assert.Equal(t, uint64(goroutines*each+5), c.Load())
}

// TestAddAllocatesNothing: not even under the race detector, whose pools
// drop some of what they are given, or after a collection emptied them.
func TestAddAllocatesNothing(t *testing.T) {
	var c striped.Counter
	c.Add(1)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { c.Add(1) }))
	runtime.GC()
	runtime.GC()
	assert.Zero(t, testing.AllocsPerRun(1, func() { c.Add(1) }))
}

// TestCounterKeepsItsStripesApart: a line of padding, then a line per
// stripe.
func TestCounterKeepsItsStripesApart(t *testing.T) {
	assert.Equal(t, uintptr(9*64), unsafe.Sizeof(striped.Counter{}))
}

// BenchmarkCounterAdd is Counter.Add against one shared atomic word
// (one-word), serially and from every processor at once.
func BenchmarkCounterAdd(b *testing.B) {
	var c striped.Counter
	var word atomic.Uint64
	for _, impl := range []struct {
		name string
		add  func()
	}{{"striped", func() { c.Add(1) }}, {"one-word", func() { word.Add(1) }}} {
		b.Run("mode=serial/impl="+impl.name, func(b *testing.B) {
			for b.Loop() {
				impl.add()
			}
		})
		b.Run("mode=parallel/impl="+impl.name, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					impl.add()
				}
			})
		})
	}
}
