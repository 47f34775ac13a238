package cache_test

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/cache"
)

// A TTL whose expiry a nanosecond clock cannot hold is refused, naming
// the field; the longest TTL accepted serves its entries.
func TestTTLTooLongIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, ttl := range []time.Duration{math.MaxInt64, 250 * 365 * 24 * time.Hour, cache.MaxTTL + 1} {
			c, err := cache.New(cache.Config[string, string]{Prompt: func(s string) string { return s }, TTL: ttl})
			if err == nil {
				// What it did before: accepted, then every entry read as
				// expired.
				c.Put(bg, "q", "a")
				_, _, ok := c.Get(bg, "q")
				assert.True(t, ok, "TTL %v accepted: its entries must be served", ttl)
				require.NoError(t, c.Close())
			}
			require.Error(t, err, "TTL %v", ttl)
			assert.ErrorContains(t, err, "TTL")
		}
		c := newCache(t, cache.Config[string, string]{TTL: cache.MaxTTL})
		c.Put(bg, "q", "a")
		time.Sleep(cache.MaxTTL - time.Nanosecond)
		_, _, ok := c.Get(bg, "q")
		assert.True(t, ok, "served until MaxTTL")
		time.Sleep(time.Nanosecond)
		_, _, ok = c.Get(bg, "q")
		assert.False(t, ok)
	})
}

// Entry ids are injective in the scope and the key: a NUL byte in a
// tenant or scenario cannot make two entries one.
func TestEntryIDsDoNotCollideOnNUL(t *testing.T) {
	c := newCache(t, cache.Config[string, string]{})
	a := fallback.WithRequest(bg, fallback.Request{Tenant: "a\x00b", Scenario: "c"})
	b := fallback.WithRequest(bg, fallback.Request{Tenant: "a", Scenario: "b\x00c"})
	c.Put(a, "q", "for a")
	c.Put(b, "q", "for b")
	assert.Equal(t, 2, c.Stats().Entries, "two scopes, two entries")
	for _, s := range []struct {
		ctx  context.Context
		want string
	}{{a, "for a"}, {b, "for b"}} {
		out, _, ok := c.Get(s.ctx, "q")
		require.True(t, ok)
		assert.Equal(t, s.want, out)
	}
	found, err := c.Invalidate(a, "q")
	require.NoError(t, err)
	assert.True(t, found)
	_, _, ok := c.Get(b, "q")
	assert.True(t, ok, "invalidating one scope's entry leaves the other's")
	assert.Equal(t, 1, c.Stats().Entries)
	assert.Equal(t, uint64(1), c.Stats().Invalidated)

	// The key cannot borrow from the scenario either.
	c.Put(fallback.WithRequest(bg, fallback.Request{Tenant: "t", Scenario: "s\x00q"}), "r", "1")
	c.Put(fallback.WithRequest(bg, fallback.Request{Tenant: "t", Scenario: "s"}), "q\x00r", "2")
	assert.Equal(t, 3, c.Stats().Entries)
}

// observedStore hands the cache the changes a test makes up.
type observedStore struct{ fn func(cache.Change) }

func (s *observedStore) Save(context.Context, *cache.Record) error        { return nil }
func (s *observedStore) Invalidate(context.Context, cache.Selector) error { return nil }
func (s *observedStore) Observe(fn func(cache.Change)) (remove func())    { s.fn = fn; return func() {} }

// A shared record whose expiry is beyond what nanoseconds hold is served
// for the cache's own TTL, not dropped as long expired.
func TestSharedRecordFarInTheFuture(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &observedStore{}
		c := newCache(t, cache.Config[string, string]{Store: st, TTL: time.Hour})
		st.fn(cache.Change{Saved: []*cache.Record{{ID: 1, Key: "q", Answer: []byte(`"a"`), Expires: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)}}})
		out, _, ok := c.Get(bg, "q")
		require.True(t, ok)
		assert.Equal(t, "a", out)
		time.Sleep(time.Hour)
		_, _, ok = c.Get(bg, "q")
		assert.False(t, ok, "the cache's TTL bounds a shared record")
	})
}
