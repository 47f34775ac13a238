package bulkhead

import (
	"fmt"
	"sync"
)

// OverflowKey names the bulkhead that keys beyond a Group's limit share.
const OverflowKey = "_overflow"

// Group holds one bulkhead per key — per tenant or per feature — so one
// key's load cannot take another key's slots. Bulkheads are created on
// first use with the same size and options. The number of keys is bounded:
// keys beyond the limit share one overflow bulkhead, so a flood of new keys
// cannot grow memory without bound. Group is safe for concurrent use.
type Group struct {
	prefix  string
	max     int
	maxKeys int
	opts    []Option

	mu       sync.RWMutex
	watchers []func(key string, b *Bulkhead)
	byKey    map[string]*Bulkhead
	overflow *Bulkhead
}

// NewGroup returns a group whose bulkheads, named prefix+"/"+key, have max
// slots each; at most maxKeys keys get their own bulkhead. The options are
// checked now, by building the overflow bulkhead.
func NewGroup(prefix string, max, maxKeys int, opts ...Option) (*Group, error) {
	if maxKeys <= 0 {
		return nil, fmt.Errorf("bulkhead group %q: maxKeys must be positive, got %d", prefix, maxKeys)
	}
	overflow, err := New(prefix+"/"+OverflowKey, max, opts...)
	if err != nil {
		return nil, err
	}
	return &Group{
		prefix: prefix, max: max, maxKeys: maxKeys, opts: opts,
		byKey: make(map[string]*Bulkhead), overflow: overflow,
	}, nil
}

// Get returns key's bulkhead, creating it on first use.
func (g *Group) Get(key string) *Bulkhead {
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
	b, err := New(g.prefix+"/"+key, g.max, g.opts...)
	if err != nil {
		// The same options built the overflow bulkhead in NewGroup.
		panic(err)
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
func (g *Group) OnMember(fn func(key string, b *Bulkhead)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.watchers = append(g.watchers, fn)
	for k, b := range g.byKey {
		fn(k, b)
	}
	fn(OverflowKey, g.overflow)
}

// Each calls fn for every bulkhead of the group, the overflow one included.
func (g *Group) Each(fn func(key string, b *Bulkhead)) {
	g.mu.RLock()
	keys := make(map[string]*Bulkhead, len(g.byKey))
	for k, b := range g.byKey {
		keys[k] = b
	}
	g.mu.RUnlock()
	for k, b := range keys {
		fn(k, b)
	}
	fn(OverflowKey, g.overflow)
}
