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

// matchCache answers every prompt with a fixed hit kind.
type matchCache[T any] struct {
	out    T
	hit    fallback.CacheHit
	gets   int
	misses bool
}

func (c *matchCache[T]) Get(ctx context.Context, in string) (T, bool) {
	c.gets++
	out, _, ok := c.Match(ctx, in)
	return out, ok
}

func (c *matchCache[T]) Match(context.Context, string) (T, fallback.CacheHit, bool) {
	var zero T
	if c.misses {
		return zero, fallback.CacheHitUnknown, false
	}
	return c.out, c.hit, true
}

func TestCacheHitString(t *testing.T) {
	for h, want := range map[fallback.CacheHit]string{
		fallback.CacheHitUnknown: "unknown", fallback.CacheHitExact: "exact", fallback.CacheHitTemplate: "template",
		fallback.CacheHitSemantic: "semantic", fallback.CacheHitSimplified: "simplified", 99: "invalid_cache_hit",
	} {
		assert.Equal(t, want, h.String())
	}
}

func TestCacheMatcherReportsTheHitKind(t *testing.T) {
	cache := &matchCache[string]{out: "close enough", hit: fallback.CacheHitSimplified}
	var obs reported.Recorder
	hits := func() (local, ended []fallback.CacheHit) {
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
	assert.Equal(t, fallback.CacheHitSimplified, res.CacheHit)
	assert.Zero(t, cache.gets, "Match replaces Get")
	local, ended := hits()
	assert.Equal(t, []fallback.CacheHit{fallback.CacheHitSimplified}, local)
	assert.Equal(t, []fallback.CacheHit{fallback.CacheHitSimplified}, ended)

	cache.misses = true
	res, err = c.Do(context.Background(), "q")
	require.Error(t, err)
	assert.Equal(t, fallback.CacheHitUnknown, res.CacheHit)
}

func TestPlainCacheHitIsUnknown(t *testing.T) {
	c := newChain(t, fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{{Tier: newFake("pro", fails(classify.Transient)), Retry: retry.Policy{MaxAttempts: 1}}},
		Cache:  &mapCache{m: map[string]string{"q": "cached"}},
	})
	res, err := c.Do(context.Background(), "q")
	require.NoError(t, err)
	assert.Equal(t, fallback.SourceCache, res.Source)
	assert.Equal(t, fallback.CacheHitUnknown, res.CacheHit)
}

func TestStreamCacheMatcherReportsTheHitKind(t *testing.T) {
	pro := &streamFake{name: "pro", def: streamScript{before: classErr(classify.Transient)}}
	c := newStreamChain(t, fallback.StreamConfig[string, chunk]{
		Stages: []fallback.StreamStage[string, chunk]{{Tier: pro.tier(), Retry: retry.Policy{MaxAttempts: 1}}},
		Cache:  &matchCache[chunk]{out: chunk{text: "cached", finish: "STOP"}, hit: fallback.CacheHitTemplate},
	})
	s := c.Stream(context.Background(), "q")
	text, err := collect(s)
	require.NoError(t, err)
	assert.Equal(t, "cached", text)
	assert.Equal(t, fallback.SourceCache, s.Result().Source)
	assert.Equal(t, fallback.CacheHitTemplate, s.Result().CacheHit)
}

func TestSharedWaiterOutOfTimeReportsTheHitKind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newChain(t, fallback.Config[string, string]{
			Stages: []fallback.Stage[string, string]{{Tier: newFake("pro", step{block: true}), Retry: retry.Policy{MaxAttempts: 1}}},
			Cache:  &matchCache[string]{out: "cached", hit: fallback.CacheHitExact},
			Key:    func(in string) string { return in },
		})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		res, err := c.Do(ctx, "q")
		require.NoError(t, err)
		assert.Equal(t, fallback.SourceCache, res.Source)
		assert.Equal(t, fallback.CacheHitExact, res.CacheHit)
		synctest.Wait()
	})
}
