package keyed

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// Group maps keys to values made by a constructor. Keys beyond the limit, and
// keys whose construction fails, share the overflow value. Safe for
// concurrent use.
//
// A Get of an existing key is a hash and a probe of an open-addressed
// table: no lock and no write, so callers of one hot key (a big tenant) do
// not contend. The table only grows — a group never forgets a key — so a
// reader needs no more than an atomic load per slot: a slot, once filled,
// never changes, and a table, once replaced by a larger one, stays valid
// for whoever still reads it (a key it lacks sends the reader to the
// lock, which finds it in the new one). An idle key costs its node (the
// key's header and the value) and one or two slots: a fraction of what a
// sync.Map holds per key. Creating a value takes the group's lock, which
// keeps watchers (OnMember) seeing each value once.
type Group[T any] struct {
	make     func(key string) (T, error)
	maxKeys  int
	overflow T
	// overflowKey names the overflow value for OnMember and Each.
	overflowKey string
	seed        maphash.Seed
	tab         atomic.Pointer[table[T]]

	mu sync.Mutex
	// n counts the keys in tab.
	n        int
	watchers []*watcher[T]
}

// table is a power-of-two array of slots, at most three quarters full, so
// that every probe sequence meets an empty slot.
type table[T any] struct {
	slots []atomic.Pointer[node[T]]
	mask  uint64
}

type node[T any] struct {
	key string
	v   T
}

// minSlots is a new group's table: room for six keys before it grows.
const minSlots = 8

type watcher[T any] struct{ fn func(key string, v T) }

// New returns a group whose values are made by mk; at most maxKeys keys get
// their own value, the rest share overflow, reported under overflowKey.
func New[T any](mk func(key string) (T, error), maxKeys int, overflow T, overflowKey string) *Group[T] {
	g := &Group[T]{make: mk, maxKeys: maxKeys, overflow: overflow, overflowKey: overflowKey, seed: maphash.MakeSeed()}
	g.tab.Store(newTable[T](minSlots))
	return g
}

func newTable[T any](size int) *table[T] {
	return &table[T]{slots: make([]atomic.Pointer[node[T]], size), mask: uint64(size - 1)}
}

// find returns the node of key, whose hash is h, or nil.
func (t *table[T]) find(h uint64, key string) *node[T] {
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		n := t.slots[i].Load()
		if n == nil || n.key == key {
			return n
		}
	}
}

// put stores n, whose hash is h, in the first empty slot of its probe
// sequence. The group's lock must be held.
func (t *table[T]) put(h uint64, n *node[T]) {
	i := h & t.mask
	for t.slots[i].Load() != nil {
		i = (i + 1) & t.mask
	}
	t.slots[i].Store(n)
}

// Get returns key's value, creating it on first use.
func (g *Group[T]) Get(key string) T {
	h := maphash.String(g.seed, key)
	if n := g.tab.Load().find(h, key); n != nil {
		return n.v
	}
	return g.create(h, key)
}

// create is Get of a key the table lacked when Get looked.
func (g *Group[T]) create(h uint64, key string) T {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.tab.Load()
	if n := t.find(h, key); n != nil {
		return n.v
	}
	if g.n >= g.maxKeys {
		return g.overflow
	}
	v, err := g.make(key)
	if err != nil {
		return g.overflow
	}
	if (g.n+1)*4 > len(t.slots)*3 {
		t = g.grow(t)
	}
	t.put(h, &node[T]{key: key, v: v})
	g.n++
	for _, w := range g.watchers {
		w.fn(key, v)
	}
	return v
}

// grow publishes a table twice t's size holding t's nodes, and returns
// it. Readers still probing t find what they look for there, or take the
// lock and find it in the new one. The group's lock must be held.
func (g *Group[T]) grow(t *table[T]) *table[T] {
	nt := newTable[T](2 * len(t.slots))
	for i := range t.slots {
		if n := t.slots[i].Load(); n != nil {
			nt.put(maphash.String(g.seed, n.key), n)
		}
	}
	g.tab.Store(nt)
	return nt
}

// each calls fn for every key's value in t, in no particular order.
func (t *table[T]) each(fn func(key string, v T)) {
	for i := range t.slots {
		if n := t.slots[i].Load(); n != nil {
			fn(n.key, n.v)
		}
	}
}

// OnMember calls fn for every value — now, and for each one created later,
// as it is created (under the group's lock: fn must not call back into the
// group) — until the returned function is called.
func (g *Group[T]) OnMember(fn func(key string, v T)) (remove func()) {
	w := &watcher[T]{fn}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.watchers = append(g.watchers, w)
	g.tab.Load().each(fn)
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
	g.tab.Load().each(fn)
	fn(g.overflowKey, g.overflow)
}
