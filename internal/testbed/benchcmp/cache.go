package benchcmp

import (
	"context"
	"sync"

	"github.com/tierguard/tierguard/fallback/cache"
)

// CachePrompt is the prompt whose answer the cache benchmarks look up.
const CachePrompt = "why is the sky blue?"

// TierguardCache is a tierguard cache (exact and template layers, no
// semantic layer) holding Answer for CachePrompt, written as a chain
// writes back a validated answer (Put). Close it when done.
func TierguardCache() *cache.Cache[string, string] {
	c, err := cache.New(cache.Config[string, string]{Prompt: func(q string) string { return q }})
	if err != nil {
		panic(err)
	}
	c.Put(context.Background(), CachePrompt, Answer)
	return c
}

// SyncMapCache is the floor of an exact cache: a sync.Map from the prompt
// (normalized by cache.NormalizeText, as normalize says) to its answer,
// holding Answer for CachePrompt. It has no expiry, no bound on its memory
// and no tenants.
func SyncMapCache(normalize bool) *SyncMapAnswers {
	m := &SyncMapAnswers{normalize: normalize}
	m.Put(CachePrompt, Answer)
	return m
}

// SyncMapAnswers is SyncMapCache's map.
type SyncMapAnswers struct {
	m         sync.Map
	normalize bool
}

func (m *SyncMapAnswers) key(q string) string {
	if m.normalize {
		return cache.NormalizeText(q)
	}
	return q
}

// Put stores out for q.
func (m *SyncMapAnswers) Put(q, out string) { m.m.Store(m.key(q), out) }

// Get returns q's answer.
func (m *SyncMapAnswers) Get(q string) (string, bool) {
	v, ok := m.m.Load(m.key(q))
	if !ok {
		return "", false
	}
	return v.(string), true
}
