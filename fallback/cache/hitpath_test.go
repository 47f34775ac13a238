package cache_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/cache"
)

// TestTTLHoldsWhileHitsKeepComing: exact hits spare themselves the clock
// while hits keep coming, yet an entry is served until its TTL and not a
// nanosecond longer, whether the last hit came a tick, a millisecond or a
// nanosecond before.
func TestTTLHoldsWhileHitsKeepComing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCache(t, cache.Config[string, string]{TTL: time.Second})
		c.Put(bg, "q", "a")
		start := time.Now()
		for time.Since(start) < time.Second-3*time.Millisecond {
			_, hit, ok := c.Get(bg, "q")
			require.True(t, ok, "at %v", time.Since(start))
			assert.Equal(t, cache.HitExact, hit)
			time.Sleep(time.Millisecond)
		}
		time.Sleep(time.Second - time.Since(start) - time.Nanosecond)
		_, _, ok := c.Get(bg, "q")
		assert.True(t, ok, "a nanosecond before its TTL")
		time.Sleep(time.Nanosecond)
		_, _, ok = c.Get(bg, "q")
		assert.False(t, ok, "at its TTL")

		// Long idle: the clock stopped, and the first hit reads the real one.
		c.Put(bg, "r", "b")
		time.Sleep(time.Second - time.Nanosecond)
		_, _, ok = c.Get(bg, "r")
		assert.True(t, ok)
		time.Sleep(time.Nanosecond)
		_, _, ok = c.Get(bg, "r")
		assert.False(t, ok)
		assert.Equal(t, uint64(2), c.Stats().Misses)
	})
}

// TestHitPathKeepsScopesApart: the lock-free lookup matches the scope as
// well as the prompt, and an unnormalised prompt still finds its entry.
func TestHitPathKeepsScopesApart(t *testing.T) {
	c := newCache(t, cache.Config[string, string]{})
	acme := fallback.WithRequest(bg, fallback.Request{Tenant: "acme", Scenario: "caption"})
	globex := fallback.WithRequest(bg, fallback.Request{Tenant: "globex", Scenario: "caption"})
	swapped := fallback.WithRequest(bg, fallback.Request{Tenant: "caption", Scenario: "acme"})
	c.Put(acme, "what is rag?", "acme's answer")
	out, hit, ok := c.Get(acme, "what is rag?")
	require.True(t, ok)
	assert.Equal(t, "acme's answer", out)
	assert.Equal(t, cache.HitExact, hit)
	out, _, ok = c.Get(acme, "  What is   RAG?\n")
	require.True(t, ok, "normalised before the lookup")
	assert.Equal(t, "acme's answer", out)
	for _, ctx := range []context.Context{globex, swapped, bg} {
		_, _, ok = c.Get(ctx, "what is rag?")
		assert.False(t, ok, "another scope")
	}
}

// TestHitPathUnderWrites: lock-free hits race with writes that replace,
// evict and expire entries and grow the index; every hit is the answer
// written for that prompt.
func TestHitPathUnderWrites(t *testing.T) {
	c := newCache(t, cache.Config[string, string]{MaxBytes: 256 << 10})
	const prompts = 500
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := range 2 {
		wg.Go(func() {
			for i := r; ; i += 7 {
				select {
				case <-stop:
					return
				default:
				}
				p := fmt.Sprint("prompt ", i%prompts)
				if out, _, ok := c.Get(bg, p); ok && !strings.HasPrefix(out, p+":") {
					t.Errorf("Get(%q) = %q", p, out)
					return
				}
			}
		})
	}
	for round := range 3 {
		for i := range prompts {
			p := fmt.Sprint("prompt ", i)
			c.Put(bg, p, fmt.Sprint(p, ":", round, strings.Repeat(".", 100)))
		}
	}
	close(stop)
	wg.Wait()
	for i := range prompts {
		p := fmt.Sprint("prompt ", i)
		if out, _, ok := c.Get(bg, p); ok {
			assert.True(t, strings.HasPrefix(out, p+":2"), "%q: %q", p, out)
		}
	}
}
