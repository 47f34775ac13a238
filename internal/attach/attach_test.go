package attach_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/tierguard/tierguard/internal/attach"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type key struct{ name string }

// Holders of one key share one value, made once; it goes with the last
// holder, and a later Attach makes a new one. Letting go twice lets go
// once.
func TestValueIsSharedUntilTheLastLetsGo(t *testing.T) {
	var s attach.Set
	made := 0
	newValue := func() any { made++; return &made }
	v1, d1 := s.Attach("test", key{"a"}, newValue)
	v2, d2 := s.Attach("test", key{"a"}, newValue)
	_, d3 := s.Attach("test", key{"b"}, newValue)
	assert.Same(t, v1, v2)
	assert.Equal(t, 2, made)
	assert.Equal(t, 2, s.Len())
	d1()
	d1()
	assert.Equal(t, 2, s.Len(), "a second detach by one holder does not count")
	d2()
	assert.Equal(t, 1, s.Len())
	d3()
	assert.Zero(t, s.Len())
	_, d4 := s.Attach("test", key{"a"}, newValue)
	assert.Equal(t, 3, made, "a key let go of is made anew")
	d4()
}

func TestUncomparableKeyPanics(t *testing.T) {
	var s attach.Set
	assert.PanicsWithValue(t, "guard: Attach key is not comparable", func() { s.Attach("guard", []int{1}, func() any { return 1 }) })
	assert.PanicsWithValue(t, "guard: Attach key is not comparable", func() { s.Attach("guard", nil, func() any { return 1 }) })
}

// Concurrent holders of one key all get the value made once.
func TestConcurrentHoldersShareOneValue(t *testing.T) {
	var s attach.Set
	var mu sync.Mutex
	made := 0
	var wg sync.WaitGroup
	values := make([]any, 64)
	detaches := make([]func(), 64)
	for i := range 64 {
		wg.Go(func() {
			values[i], detaches[i] = s.Attach("test", key{"a"}, func() any { mu.Lock(); made++; mu.Unlock(); return new(int) })
		})
	}
	wg.Wait()
	assert.Equal(t, 1, made)
	for i := range values {
		assert.Same(t, values[0], values[i])
		detaches[i]()
	}
	assert.Zero(t, s.Len())
}
