package keyed

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// shards is how many parts a Group's map is split into, so that readers
// of different keys take different locks.
const shards = 32

// Group maps keys to values made by a constructor. Keys beyond the limit, and
// keys whose construction fails, share the overflow value. Safe for
// concurrent use.
//
// The map is split in shards by a hash of the key, each behind its own
// read-write lock: a Get of an existing key takes one shard's read lock,
// so callers of different keys do not contend. Creating a value takes the
// group's lock too, which keeps watchers (OnMember) seeing each value once.
type Group[T any] struct {
	make     func(key string) (T, error)
	maxKeys  int
	overflow T
	// overflowKey names the overflow value for OnMember and Each.
	overflowKey string
	seed        maphash.Seed
	n           atomic.Int64

	mu       sync.Mutex
	watchers []*watcher[T]

	shard [shards]shard[T]
}

type shard[T any] struct {
	mu sync.RWMutex
	m  map[string]T
	// The locks of neighbouring shards are written by different readers:
	// a line apart.
	_ [64 - 24 - 8]byte
}

type watcher[T any] struct{ fn func(key string, v T) }

// New returns a group whose values are made by mk; at most maxKeys keys get
// their own value, the rest share overflow, reported under overflowKey.
func New[T any](mk func(key string) (T, error), maxKeys int, overflow T, overflowKey string) *Group[T] {
	g := &Group[T]{make: mk, maxKeys: maxKeys, overflow: overflow, overflowKey: overflowKey, seed: maphash.MakeSeed()}
	for i := range g.shard {
		g.shard[i].m = make(map[string]T)
	}
	return g
}

func (g *Group[T]) shardOf(key string) *shard[T] {
	return &g.shard[maphash.String(g.seed, key)%shards]
}

// Get returns key's value, creating it on first use.
func (g *Group[T]) Get(key string) T {
	sh := g.shardOf(key)
	sh.mu.RLock()
	v, ok := sh.m[key]
	sh.mu.RUnlock()
	if ok {
		return v
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	sh.mu.RLock()
	v, ok = sh.m[key]
	sh.mu.RUnlock()
	if ok {
		return v
	}
	if g.n.Load() >= int64(g.maxKeys) {
		return g.overflow
	}
	v, err := g.make(key)
	if err != nil {
		return g.overflow
	}
	sh.mu.Lock()
	sh.m[key] = v
	sh.mu.Unlock()
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
	for i := range g.shard {
		sh := &g.shard[i]
		sh.mu.RLock()
		for k, v := range sh.m {
			fn(k, v)
		}
		sh.mu.RUnlock()
	}
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
// group's locks.
func (g *Group[T]) Each(fn func(key string, v T)) {
	snapshot := make(map[string]T, g.n.Load())
	for i := range g.shard {
		sh := &g.shard[i]
		sh.mu.RLock()
		for k, v := range sh.m {
			snapshot[k] = v
		}
		sh.mu.RUnlock()
	}
	for k, v := range snapshot {
		fn(k, v)
	}
	fn(g.overflowKey, g.overflow)
}
