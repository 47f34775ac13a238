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
