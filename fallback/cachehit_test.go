package fallback_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/internal/testbed/reported"
	"github.com/tierguard/tierguard/retry"
)

// matchCache answers every prompt with a fixed hit label.
type matchCache[T any] struct {
	out    T
	hit    string
	gets   int
	misses bool
}

func (c *matchCache[T]) Get(context.Context, string) (T, string, bool) {
	c.gets++
	var zero T
	if c.misses {
		return zero, "", false
	}
	return c.out, c.hit, true
}

func (*matchCache[T]) Put(context.Context, string, string) {}

// TestCacheReportsItsHitLabel: the cache's own label for how it matched
// reaches the result and the events as the cache said it.
func TestCacheReportsItsHitLabel(t *testing.T) {
	cache := &matchCache[string]{out: "close enough", hit: "simplified"}
	var obs reported.Recorder
	hits := func() (local, ended []string) {
		for _, e := range reported.Of[fallback.LocalAnswer](&obs) {
			local = append(local, e.CacheHit)
		}
		for _, e := range reported.Of[fallback.RequestEnd](&obs) {
			ended = append(ended, e.CacheHit)
		}
		return local, ended
	}
	c := newChain(t, fallback.Config[string, string]{
		Stages:   []fallback.Stage[string, string]{{Tier: newFake("pro", fails(classify.Transient)), Retry: retry.Policy{MaxAttempts: 1}}},
		Cache:    cache,
		Observer: &obs,
	})
	res, err := c.Do(context.Background(), "q")
	require.NoError(t, err)
	assert.Equal(t, "close enough", res.Value)
	assert.Equal(t, fallback.SourceCache, res.Source)
	assert.Equal(t, "simplified", res.CacheHit)
	assert.Equal(t, 1, cache.gets)
	local, ended := hits()
	assert.Equal(t, []string{"simplified"}, local)
	assert.Equal(t, []string{"simplified"}, ended)

	cache.misses = true
	res, err = c.Do(context.Background(), "q")
	require.Error(t, err)
	assert.Equal(t, "", res.CacheHit)
}

func TestCacheWithoutALabel(t *testing.T) {
	c := newChain(t, fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{{Tier: newFake("pro", fails(classify.Transient)), Retry: retry.Policy{MaxAttempts: 1}}},
		Cache:  &mapCache{m: map[string]string{"q": "cached"}},
	})
	res, err := c.Do(context.Background(), "q")
	require.NoError(t, err)
	assert.Equal(t, fallback.SourceCache, res.Source)
	assert.Equal(t, "", res.CacheHit)
}

func TestStreamCacheReportsItsHitLabel(t *testing.T) {
	pro := &streamFake{name: "pro", def: streamScript{before: classErr(classify.Transient)}}
	c := newStreamChain(t, fallback.StreamConfig[string, chunk]{
		Stages: []fallback.StreamStage[string, chunk]{{Tier: pro.tier(), Retry: retry.Policy{MaxAttempts: 1}}},
		Cache:  &matchCache[chunk]{out: chunk{text: "cached", finish: "STOP"}, hit: "template"},
	})
	s := c.Stream(context.Background(), "q")
	text, err := collect(s)
	require.NoError(t, err)
	assert.Equal(t, "cached", text)
	assert.Equal(t, fallback.SourceCache, s.Result().Source)
	assert.Equal(t, "template", s.Result().CacheHit)
}

func TestSharedWaiterOutOfTimeReportsTheHitLabel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newChain(t, fallback.Config[string, string]{
			Stages: []fallback.Stage[string, string]{{Tier: newFake("pro", step{block: true}), Retry: retry.Policy{MaxAttempts: 1}}},
			Cache:  &matchCache[string]{out: "cached", hit: "exact"},
			Key:    func(in string) string { return in },
		})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		res, err := c.Do(ctx, "q")
		require.NoError(t, err)
		assert.Equal(t, fallback.SourceCache, res.Source)
		assert.Equal(t, "exact", res.CacheHit)
		synctest.Wait()
	})
}
