package subscribers_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tierguard/tierguard/internal/subscribers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestAddLoadRemove(t *testing.T) {
	var l subscribers.List[func() int]
	assert.Nil(t, l.Load(), "empty")
	one := func() int { return 1 }
	removeA := l.Add(one)
	removeB := l.Add(one) // the same function twice: two subscriptions
	l.Add(func() int { return 3 })
	got := func() (out []int) {
		for _, f := range l.Load() {
			out = append(out, f())
		}
		return out
	}
	assert.Equal(t, []int{1, 1, 3}, got(), "in the order added")
	removeA()
	removeA() // a second call changes nothing
	assert.Equal(t, []int{1, 3}, got())
	before := l.Load()
	removeB()
	assert.Equal(t, []int{3}, got())
	assert.Len(t, before, 2, "a loaded slice is never modified")
}

func TestEmptyAgainIsNil(t *testing.T) {
	var l subscribers.List[func()]
	remove := l.Add(func() {})
	remove()
	assert.Nil(t, l.Load(), "no subscribers: nil, so a nil check is enough")
}

func TestConcurrentAddAndLoad(t *testing.T) {
	var l subscribers.List[func()]
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				remove := l.Add(func() {})
				for _, f := range l.Load() {
					f()
				}
				remove()
			}
		})
	}
	wg.Wait()
	assert.Nil(t, l.Load())
}

func TestLoadAllocatesNothing(t *testing.T) {
	var l subscribers.List[func()]
	l.Add(func() {})
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = l.Load() }))
}

func TestJoinedPublishesOneValueOfTheSubscribers(t *testing.T) {
	j := subscribers.Joined[string]{Join: func(fns []string) string { return strings.Join(fns, "+") }}
	_, ok := j.Load()
	assert.False(t, ok)
	removeA := j.Add("a")
	removeB := j.Add("b")
	got, ok := j.Load()
	require.True(t, ok)
	assert.Equal(t, "a+b", got)
	removeA()
	removeA()
	got, _ = j.Load()
	assert.Equal(t, "b", got)
	removeB()
	_, ok = j.Load()
	assert.False(t, ok)
}

func TestJoinedConcurrentChangesEndAtTheLastState(t *testing.T) {
	j := subscribers.Joined[int]{Join: func(fns []int) int { return len(fns) }}
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			rm := j.Add(1)
			if _, ok := j.Load(); !ok {
				t.Error("a subscriber was added, and none is published")
			}
			rm()
		})
	}
	wg.Wait()
	_, ok := j.Load()
	assert.False(t, ok)
	keep := j.Add(1)
	defer keep()
	n, _ := j.Load()
	assert.Equal(t, 1, n)
}
