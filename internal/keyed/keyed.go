package keyed

import (
	"sync"
	"sync/atomic"
)

// Group maps keys to values made by a constructor. Keys beyond the limit, and
// keys whose construction fails, share the overflow value. Safe for
// concurrent use.
//
// A Get of an existing key is a sync.Map load: no lock and no write, so
// callers of one hot key (a big tenant) do not contend. Creating a value
// takes the group's lock, which keeps watchers (OnMember) seeing each
// value once.
type Group[T any] struct {
	make     func(key string) (T, error)
	maxKeys  int
	overflow T
	// overflowKey names the overflow value for OnMember and Each.
	overflowKey string
	byKey       sync.Map // string → T
	n           atomic.Int64

	mu       sync.Mutex
	watchers []*watcher[T]
}

type watcher[T any] struct{ fn func(key string, v T) }

// New returns a group whose values are made by mk; at most maxKeys keys get
// their own value, the rest share overflow, reported under overflowKey.
func New[T any](mk func(key string) (T, error), maxKeys int, overflow T, overflowKey string) *Group[T] {
	return &Group[T]{make: mk, maxKeys: maxKeys, overflow: overflow, overflowKey: overflowKey}
}

// Get returns key's value, creating it on first use.
func (g *Group[T]) Get(key string) T {
	if v, ok := g.byKey.Load(key); ok {
		return v.(T)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if v, ok := g.byKey.Load(key); ok {
		return v.(T)
	}
	if g.n.Load() >= int64(g.maxKeys) {
		return g.overflow
	}
	v, err := g.make(key)
	if err != nil {
		return g.overflow
	}
	g.byKey.Store(key, v)
	g.n.Add(1)
	for _, w := range g.watchers {
		w.fn(key, v)
	}
	return v
}

// OnMember calls fn for every value — now, and for each one created later,
// as it is created (under the group's lock: fn must not call back into the
// group) — until the returned function is called.
func (g *Group[T]) OnMember(fn func(key string, v T)) (remove func()) {
	w := &watcher[T]{fn}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.watchers = append(g.watchers, w)
	g.byKey.Range(func(k, v any) bool {
		fn(k.(string), v.(T))
		return true
	})
	fn(g.overflowKey, g.overflow)
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		for i, x := range g.watchers {
			if x == w {
				g.watchers = append(g.watchers[:i:i], g.watchers[i+1:]...)
				return
			}
		}
	}
}

// Each calls fn for every value, the overflow one included, outside the
// group's lock.
func (g *Group[T]) Each(fn func(key string, v T)) {
	g.byKey.Range(func(k, v any) bool {
		fn(k.(string), v.(T))
		return true
	})
	fn(g.overflowKey, g.overflow)
}
