package cache_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/cache"
)

// fixed is a deterministic embedder: each text has a fixed vector; an
// unknown text is an error, so that a test notices a prompt it did not
// plan for. It counts its calls, and can be made to fail or hang.
type fixed struct {
	mu      sync.Mutex
	vecs    map[string][]float32
	calls   atomic.Int64
	fail    atomic.Bool
	hang    atomic.Bool // wait for the context to end
	ignore  atomic.Bool // with hang: wait for release, whatever the context
	release chan struct{}
}

var errEmbedderDown = errors.New("embedder down")

func newFixed(vecs map[string][]float32) *fixed {
	return &fixed{vecs: vecs, release: make(chan struct{})}
}

func (f *fixed) Embed(ctx context.Context, text string) (cache.Embedding, error) {
	f.calls.Add(1)
	switch {
	case f.hang.Load() && f.ignore.Load():
		<-f.release
		return cache.Embedding{}, errEmbedderDown
	case f.hang.Load():
		<-ctx.Done()
		return cache.Embedding{}, ctx.Err()
	case f.fail.Load():
		return cache.Embedding{}, classifiedDown
	}
	f.mu.Lock()
	v, ok := f.vecs[text]
	f.mu.Unlock()
	if !ok {
		return cache.Embedding{}, errors.New("fixed embedder: no vector for " + text)
	}
	return cache.Embedding{Vector: v, Model: "fixed-embed", Usage: fallback.Usage{InputTokens: int64(len(text))}, HasUsage: true}, nil
}

// classifiedDown is a 503: a failure the breaker counts.
var classifiedDown = classifyTransient(errEmbedderDown)

// at returns a unit vector of dims dimensions whose cosine similarity to
// axis(0) is sim.
func at(sim float32, dims int) []float32 {
	v := make([]float32, dims)
	v[0] = sim
	v[1] = float32(math.Sqrt(1 - float64(sim)*float64(sim)))
	return v
}

func axis(i, dims int) []float32 {
	v := make([]float32, dims)
	v[i] = 1
	return v
}

func newCache[Out any](t *testing.T, cfg cache.Config[string, Out]) *cache.Cache[string, Out] {
	t.Helper()
	if cfg.Prompt == nil {
		cfg.Prompt = func(in string) string { return in }
	}
	c, err := cache.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

// settle waits until the cache's goroutine has embedded every written
// prompt it was given (outside a synctest bubble).
func settle(t *testing.T, c interface{ Stats() cache.Stats }, embedded uint64) {
	t.Helper()
	require.Eventually(t, func() bool {
		s := c.Stats()
		return s.Embedded+s.EmbedFailures+s.EmbedSkipped >= embedded
	}, 5e9, 1e6)
}

type usageLog struct {
	mu  sync.Mutex
	got []cache.EmbeddingUsage
	ten []string
}

func (u *usageLog) RecordEmbedding(ctx context.Context, e cache.EmbeddingUsage) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.got = append(u.got, e)
	u.ten = append(u.ten, fallback.RequestFrom(ctx).Tenant)
}

func (u *usageLog) all() ([]cache.EmbeddingUsage, []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]cache.EmbeddingUsage(nil), u.got...), append([]string(nil), u.ten...)
}
