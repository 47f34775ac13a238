package breaker

import (
	"fmt"
	"sync"
)

// OverflowKey names the breaker that keys beyond a Group's limit share.
const OverflowKey = "_overflow"

// Group holds one breaker per key — typically model × endpoint — created on
// first use from the same Config, each named cfg.Name+"/"+key. The number of
// keys is bounded: keys beyond the limit share one overflow breaker, so a
// flood of distinct keys cannot grow memory without bound. Group is safe for
// concurrent use.
type Group struct {
	cfg     Config
	maxKeys int

	mu       sync.RWMutex
	watchers []func(key string, b *Breaker)
	byKey    map[string]*Breaker
	overflow *Breaker
}

// NewGroup returns a group of breakers configured by cfg; at most maxKeys
// keys get their own breaker. The config is validated now.
func NewGroup(cfg Config, maxKeys int) (*Group, error) {
	if maxKeys <= 0 {
		return nil, fmt.Errorf("breaker group %q: maxKeys must be positive, got %d", cfg.Name, maxKeys)
	}
	overflow, err := New(keyed(cfg, OverflowKey))
	if err != nil {
		return nil, err
	}
	return &Group{cfg: cfg, maxKeys: maxKeys, byKey: make(map[string]*Breaker), overflow: overflow}, nil
}

func keyed(cfg Config, key string) Config {
	cfg.Name = cfg.Name + "/" + key
	return cfg
}

// Get returns key's breaker, creating it on first use.
func (g *Group) Get(key string) *Breaker {
	g.mu.RLock()
	b, ok := g.byKey[key]
	g.mu.RUnlock()
	if ok {
		return b
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if b, ok := g.byKey[key]; ok {
		return b
	}
	if len(g.byKey) >= g.maxKeys {
		return g.overflow
	}
	b, err := New(keyed(g.cfg, key))
	if err != nil {
		// The config was validated by NewGroup; only a Store's Join can
		// fail here, and a store must fail open: use the overflow breaker
		// rather than refuse the call.
		return g.overflow
	}
	g.byKey[key] = b
	for _, w := range g.watchers {
		w(key, b)
	}
	return b
}

// OnMember calls fn for every member of the group — now, and for each one
// created later, as it is created (under the group's lock: fn must not call
// back into the group). Instrumentation uses it to watch members as they
// appear.
func (g *Group) OnMember(fn func(key string, b *Breaker)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.watchers = append(g.watchers, fn)
	for k, b := range g.byKey {
		fn(k, b)
	}
	fn(OverflowKey, g.overflow)
}

// Each calls fn for every breaker of the group, the overflow one included.
func (g *Group) Each(fn func(key string, b *Breaker)) {
	g.mu.RLock()
	snapshot := make(map[string]*Breaker, len(g.byKey))
	for k, b := range g.byKey {
		snapshot[k] = b
	}
	g.mu.RUnlock()
	for k, b := range snapshot {
		fn(k, b)
	}
	fn(OverflowKey, g.overflow)
}
