package keyed_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/tierguard/tierguard/internal/keyed"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestGroup(t *testing.T) {
	made := 0
	g := keyed.New(func(key string) (string, error) {
		if key == "bad" {
			return "", errors.New("cannot make")
		}
		made++
		return "v:" + key, nil
	}, 2, "overflow", "_overflow")
	assert.Equal(t, "v:a", g.Get("a"))
	assert.Equal(t, "v:a", g.Get("a"))
	assert.Equal(t, "overflow", g.Get("bad"), "a failed construction falls back to the overflow value")
	assert.Equal(t, "v:b", g.Get("b"))
	assert.Equal(t, "overflow", g.Get("c"), "keys past the limit share the overflow value")
	assert.Equal(t, 2, made)

	var seen []string
	g.OnMember(func(k, v string) { seen = append(seen, k+"="+v) })
	assert.ElementsMatch(t, []string{"a=v:a", "b=v:b", "_overflow=overflow"}, seen)

	var each []string
	g.Each(func(k, _ string) { each = append(each, k) })
	assert.ElementsMatch(t, []string{"a", "b", "_overflow"}, each)
}

func TestGroupConcurrentGet(t *testing.T) {
	g := keyed.New(func(key string) (*int, error) { n := len(key); return &n, nil }, 100, nil, "_overflow")
	var wg sync.WaitGroup
	got := make([]*int, 32)
	for i := range got {
		wg.Go(func() { got[i] = g.Get(fmt.Sprint("k", i%4)) })
	}
	wg.Wait()
	for i := range got {
		assert.Same(t, got[i%4], got[i], "one value per key")
	}
}

func TestName(t *testing.T) {
	assert.Equal(t, "pro/acme", keyed.Name("pro", "acme", true))
	hidden := keyed.Name("pro", "acme", false)
	assert.Equal(t, "pro/#"+keyed.Hash("acme"), hidden)
	assert.NotContains(t, hidden, "acme")
	assert.Len(t, keyed.Hash("acme"), 12)
	// sha256("acme") begins with these bytes: the hash is stable across
	// processes and releases.
	assert.Equal(t, "822b33ad87c1", keyed.Hash("acme"))
	assert.NotEqual(t, keyed.Hash("acme"), keyed.Hash("acme2"))
}

// TestGroupGrowsUnderReaders: readers of existing keys keep finding the
// same values while other keys are created and the table grows under
// them many times over, and every key gets exactly one value.
func TestGroupGrowsUnderReaders(t *testing.T) {
	const keys = 5000
	var made sync.Map
	g := keyed.New(func(key string) (*string, error) {
		v := new(string)
		*v = key
		if _, dup := made.LoadOrStore(key, v); dup {
			t.Errorf("%s made twice", key)
		}
		return v, nil
	}, keys, nil, "_overflow")
	first := g.Get("k0")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if v := g.Get("k0"); v != first {
					t.Errorf("k0 changed value")
					return
				}
			}
		})
	}
	var writers sync.WaitGroup
	for w := range 4 {
		writers.Go(func() {
			for i := w; i < keys; i += 4 {
				k := fmt.Sprint("k", i)
				if v := g.Get(k); v == nil || *v != k {
					t.Errorf("Get(%s) = %v", k, v)
				}
			}
		})
	}
	writers.Wait()
	close(stop)
	wg.Wait()
	n := 0
	g.Each(func(k string, v *string) {
		if k != "_overflow" {
			n++
			assert.Equal(t, k, *v)
		}
	})
	assert.Equal(t, keys, n)
	assert.Nil(t, g.Get("one too many"), "the overflow value")
}
