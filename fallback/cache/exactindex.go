package cache

import (
	"hash/maphash"
	"sync/atomic"
)

// exactIndex finds an entry by scope and key without a lock, for the hit
// path of the exact layer: a chained hash table whose writers hold the
// cache's write lock, and whose readers follow atomic pointers only.
//
// A writer links a node in at the head of its chain, and unlinks one by
// pointing its predecessor past it, leaving the node's own link as it
// was: a reader standing on a node just unlinked still walks on to every
// node after it. Growing builds new chains of new nodes and publishes
// them whole; a reader of the old table sees it as it was when it
// loaded it. A reader thus sees every entry present throughout its
// lookup, and may see one removed meanwhile, as a lookup an instant
// earlier would have.
type exactIndex[Out any] struct {
	seed maphash.Seed
	// empty is the hash of an empty scope part, which most scopes have.
	empty uint64
	tab   atomic.Pointer[exactTable[Out]]
	// n counts the entries, under the cache's write lock.
	n int
}

type exactTable[Out any] struct {
	chains []atomic.Pointer[exactNode[Out]]
	mask   uint64
}

type exactNode[Out any] struct {
	h    uint64
	e    *entry[Out]
	next atomic.Pointer[exactNode[Out]]
}

// minChains is an empty cache's table.
const minChains = 16

func newExactIndex[Out any]() *exactIndex[Out] {
	x := &exactIndex[Out]{seed: maphash.MakeSeed()}
	x.empty = maphash.String(x.seed, "")
	x.tab.Store(newExactTable[Out](minChains))
	return x
}

func newExactTable[Out any](n int) *exactTable[Out] {
	return &exactTable[Out]{chains: make([]atomic.Pointer[exactNode[Out]], n), mask: uint64(n - 1)}
}

// hash mixes the hashes of the scope's parts into the key's: each part is
// hashed apart, so no two scopes and keys share their bytes.
func (x *exactIndex[Out]) hash(sc Scope, key string) uint64 {
	h := maphash.String(x.seed, key)
	t, s := x.empty, x.empty
	if sc.Tenant != "" {
		t = maphash.String(x.seed, sc.Tenant)
	}
	if sc.Scenario != "" {
		s = maphash.String(x.seed, sc.Scenario)
	}
	// Odd multipliers, so that swapping tenant and scenario moves the hash.
	return h ^ (t * 0x9e3779b97f4a7c15) ^ (s * 0xc2b2ae3d27d4eb4f)
}

// find returns the entry of key in scope sc, or nil.
func (x *exactIndex[Out]) find(sc Scope, key string) *entry[Out] {
	h := x.hash(sc, key)
	t := x.tab.Load()
	for n := t.chains[h&t.mask].Load(); n != nil; n = n.next.Load() {
		if n.h == h && n.e.key == key && n.e.scope == sc {
			return n.e
		}
	}
	return nil
}

// add indexes e, whose key is not indexed in its scope. The cache's write
// lock must be held.
func (x *exactIndex[Out]) add(e *entry[Out]) {
	t := x.tab.Load()
	if x.n >= len(t.chains) {
		t = x.grow(t)
	}
	n := &exactNode[Out]{h: x.hash(e.scope, e.key), e: e}
	head := &t.chains[n.h&t.mask]
	n.next.Store(head.Load())
	head.Store(n)
	x.n++
}

// remove unindexes e, if it is indexed. The cache's write lock must be
// held.
func (x *exactIndex[Out]) remove(e *entry[Out]) {
	t := x.tab.Load()
	h := x.hash(e.scope, e.key)
	link := &t.chains[h&t.mask]
	for n := link.Load(); n != nil; n = link.Load() {
		if n.e == e {
			link.Store(n.next.Load())
			x.n--
			return
		}
		link = &n.next
	}
}

// grow publishes a table twice t's size, of new nodes, and returns it.
func (x *exactIndex[Out]) grow(t *exactTable[Out]) *exactTable[Out] {
	nt := newExactTable[Out](2 * len(t.chains))
	for i := range t.chains {
		for n := t.chains[i].Load(); n != nil; n = n.next.Load() {
			m := &exactNode[Out]{h: n.h, e: n.e}
			head := &nt.chains[m.h&nt.mask]
			m.next.Store(head.Load())
			head.Store(m)
		}
	}
	x.tab.Store(nt)
	return nt
}
