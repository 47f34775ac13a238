package hnsw

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/tierguard/tierguard/fallback/cache"
)

// Config configures an Index. The zero value (with Dims set) is the
// configuration measured in BENCHMARKS.md.
type Config struct {
	// Dims is the vectors' dimension. Required.
	Dims int
	// M is how many neighbours a node keeps on the upper layers (twice as
	// many on the bottom layer). 0 means 16. More neighbours raise recall
	// and memory (8 bytes per neighbour and node).
	M int
	// EfConstruction is the breadth of the search that finds a new node's
	// neighbours. 0 means 64. Higher builds a better graph, more slowly.
	EfConstruction int
	// EfSearch is the breadth of a query's search on the bottom layer, at
	// least the number of neighbours asked for. 0 means 48. Higher raises
	// recall and latency.
	EfSearch int
	// Seed seeds the level draws, so that a build is reproducible. 0 means
	// a fixed default.
	Seed uint64
}

// Index is a hierarchical navigable small world graph (Malkov and
// Yashunin, 2016, arXiv:1603.09320) over unit vectors, ranked by dot
// product. It implements cache.Index: pass NewFactory's result as
// cache.SemanticConfig.NewIndex.
//
// A removed vector leaves a tombstone: the node stays in the graph, so
// that searches keep passing through it, but it is never returned, and
// the next Add takes over its slot, re-linking it to its new neighbours.
// A cache that is full evicts about one entry per insertion, so tombstones
// stay few.
//
// Add and Remove must not run concurrently with anything else; Search is
// safe for concurrent use with other Searches, as cache.Index requires.
type Index struct {
	dims, m, m0, efC, efS int
	ml                    float64
	rng                   *rand.Rand

	vecs   []float32 // slot-major, dims per slot
	ids    []uint64  // slot → id
	links0 []uint32  // slot-major, m0+1 per slot: count, then neighbours
	upper  [][]uint32
	level  []uint8
	dead   []bool
	free   []uint32
	slots  map[uint64]uint32
	entry  uint32
	top    int
	live   int

	pool sync.Pool // *search
}

// search is the scratch space of one search: kept in a pool so that a
// search in steady state allocates nothing.
type search struct {
	visit []uint32
	gen   uint32
	cand  heap // nearest first
	res   heap // farthest first (similarities negated)
	sel   []item
	live  []item
}

type item struct {
	slot uint32
	sim  float32
}

// New returns an empty Index, or an error naming every invalid field.
func New(cfg Config) (*Index, error) {
	var errs []error
	if cfg.Dims <= 0 {
		errs = append(errs, fmt.Errorf("invalid Dims %d (must be positive)", cfg.Dims))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"M", cfg.M}, {"EfConstruction", cfg.EfConstruction}, {"EfSearch", cfg.EfSearch}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("negative %s %d", f.name, f.v))
		}
	}
	if cfg.M == 1 || cfg.M > 255 {
		errs = append(errs, fmt.Errorf("invalid M %d (must be between 2 and 255)", cfg.M))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("hnsw: invalid config: %w", err)
	}
	m := cfg.M
	if m == 0 {
		m = 16
	}
	efC := cfg.EfConstruction
	if efC == 0 {
		efC = 64
	}
	efS := cfg.EfSearch
	if efS == 0 {
		efS = 48
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = 0x9E3779B97F4A7C15
	}
	x := &Index{
		dims: cfg.Dims, m: m, m0: 2 * m, efC: max(efC, m), efS: efS,
		ml: 1 / math.Log(float64(m)), rng: rand.New(rand.NewPCG(seed, seed>>1|1)),
		slots: map[uint64]uint32{}, top: -1,
	}
	x.pool.New = func() any { return &search{} }
	return x, nil
}

// NewFactory returns a cache.SemanticConfig.NewIndex that builds an Index
// for each scope with cfg (its Dims replaced by the embedding's).
func NewFactory(cfg Config) (func(dims int) cache.Index, error) {
	probe := cfg
	if probe.Dims == 0 {
		probe.Dims = 1
	}
	if _, err := New(probe); err != nil {
		return nil, err
	}
	return func(dims int) cache.Index {
		c := cfg
		c.Dims = dims
		x, _ := New(c)
		return x
	}, nil
}

// Len implements cache.Index: the vectors stored, tombstones excluded.
func (x *Index) Len() int { return x.live }

// Bytes estimates the memory the index holds, vectors included.
func (x *Index) Bytes() int {
	n := 4*cap(x.vecs) + 8*cap(x.ids) + 4*cap(x.links0) + cap(x.level) + cap(x.dead) + 4*cap(x.free)
	n += 24 * cap(x.upper)
	for _, u := range x.upper {
		n += 4 * cap(u)
	}
	// A Go map spends about 40 bytes per uint64 → uint32 entry.
	return n + 40*len(x.slots)
}

func (x *Index) vec(s uint32) []float32 {
	o := int(s) * x.dims
	return x.vecs[o : o+x.dims : o+x.dims]
}

// links returns slot s's neighbours on layer l, and the whole backing list
// (count first on layer 0).
func (x *Index) links(s uint32, l int) []uint32 {
	if l == 0 {
		o := int(s) * (x.m0 + 1)
		return x.links0[o+1 : o+1+int(x.links0[o])]
	}
	return x.upper[s][(l-1)*(x.m+1)+1 : (l-1)*(x.m+1)+1+int(x.upper[s][(l-1)*(x.m+1)])]
}

func (x *Index) setLinks(s uint32, l int, ns []item) {
	var list []uint32
	if l == 0 {
		o := int(s) * (x.m0 + 1)
		list = x.links0[o : o+x.m0+1]
	} else {
		o := (l - 1) * (x.m + 1)
		list = x.upper[s][o : o+x.m+1]
	}
	list[0] = uint32(len(ns))
	for i, n := range ns {
		list[i+1] = n.slot
	}
}

func (x *Index) maxLinks(l int) int {
	if l == 0 {
		return x.m0
	}
	return x.m
}

// Add implements cache.Index. A vector of the wrong dimension is ignored.
func (x *Index) Add(id uint64, vec []float32) {
	if len(vec) != x.dims {
		return
	}
	if s, ok := x.slots[id]; ok {
		// Same id, new vector: re-link it as a new node would be.
		copy(x.vec(s), vec)
		x.link(s, int(x.level[s]))
		return
	}
	var s uint32
	var lvl int
	if n := len(x.free); n > 0 {
		s, x.free = x.free[n-1], x.free[:n-1]
		lvl = int(x.level[s])
		copy(x.vec(s), vec)
		x.ids[s], x.dead[s] = id, false
	} else {
		s = uint32(len(x.ids))
		lvl = min(int(-math.Log(1-x.rng.Float64())*x.ml), 32)
		x.vecs = append(x.vecs, vec...)
		x.ids = append(x.ids, id)
		x.links0 = append(x.links0, make([]uint32, x.m0+1)...)
		x.level = append(x.level, uint8(lvl))
		x.dead = append(x.dead, false)
		var up []uint32
		if lvl > 0 {
			up = make([]uint32, lvl*(x.m+1))
		}
		x.upper = append(x.upper, up)
	}
	x.slots[id] = s
	x.live++
	if x.top < 0 {
		x.entry, x.top = s, lvl
		return
	}
	x.link(s, lvl)
	if lvl > x.top {
		x.entry, x.top = s, lvl
	}
}

// link connects slot s, of level lvl, to its nearest nodes on every layer
// it is on, and them to it.
func (x *Index) link(s uint32, lvl int) {
	q := x.vec(s)
	sr := x.get()
	defer x.pool.Put(sr)
	ep := item{slot: x.entry, sim: cache.Dot(q, x.vec(x.entry))}
	for l := x.top; l > lvl; l-- {
		ep = x.greedy(q, ep, l)
	}
	for l := min(lvl, x.top); l >= 0; l-- {
		found := x.layer(sr, q, ep, x.efC, l, s)
		ep = found[0]
		// Tombstones stay on the way, not among a new node's neighbours
		// (unless nothing else was found).
		live := sr.live[:0]
		for _, f := range found {
			if !x.dead[f.slot] {
				live = append(live, f)
			}
		}
		if len(live) == 0 {
			live = append(live, found...)
		}
		sr.live = live
		sel := x.heuristic(sr.sel[:0], q, live, x.m)
		sr.sel = sel
		x.setLinks(s, l, sel)
		for _, n := range sel {
			x.connect(n.slot, s, l)
		}
	}
}

// connect adds s to n's neighbours on layer l; a full list is pruned
// with the same diversity heuristic as a new node's, which keeps the
// links that lead out of a cluster (simply dropping the least similar
// neighbour leaves clusters as islands, and recall collapses on
// clustered data).
func (x *Index) connect(n, s uint32, l int) {
	var list []uint32
	if l == 0 {
		o := int(n) * (x.m0 + 1)
		list = x.links0[o : o+x.m0+1]
	} else {
		o := (l - 1) * (x.m + 1)
		list = x.upper[n][o : o+x.m+1]
	}
	cur := list[1 : 1+list[0]]
	for _, c := range cur {
		if c == s {
			return
		}
	}
	limit := x.maxLinks(l)
	if len(cur) < limit {
		list[0]++
		list[list[0]] = s
		return
	}
	nv := x.vec(n)
	cands := make([]item, 0, len(cur)+1)
	for _, c := range cur {
		cands = append(cands, item{slot: c, sim: cache.Dot(nv, x.vec(c))})
	}
	cands = append(cands, item{slot: s, sim: cache.Dot(nv, x.vec(s))})
	sortItems(cands)
	x.setLinks(n, l, x.heuristic(make([]item, 0, limit), nv, cands, limit))
}

// heuristic picks up to m of cands (sorted most similar first) as
// neighbours of q: a candidate is kept only when it is closer to q than to
// every neighbour already kept, which keeps links pointing in different
// directions (the paper's Algorithm 4). Slots left over fill the list
// when the diverse picks are too few.
func (x *Index) heuristic(sel []item, q []float32, cands []item, m int) []item {
	if len(cands) <= m {
		return append(sel, cands...)
	}
	var skipped []item
	for _, c := range cands {
		if len(sel) == m {
			break
		}
		cv := x.vec(c.slot)
		keep := true
		for _, s := range sel {
			if cache.Dot(cv, x.vec(s.slot)) > c.sim {
				keep = false
				break
			}
		}
		if keep {
			sel = append(sel, c)
		} else {
			skipped = append(skipped, c)
		}
	}
	for _, c := range skipped {
		if len(sel) == m {
			break
		}
		sel = append(sel, c)
	}
	return sel
}

// greedy walks layer l from ep to the node most similar to q.
func (x *Index) greedy(q []float32, ep item, l int) item {
	for changed := true; changed; {
		changed = false
		for _, n := range x.links(ep.slot, l) {
			if s := cache.Dot(q, x.vec(n)); s > ep.sim {
				ep, changed = item{slot: n, sim: s}, true
			}
		}
	}
	return ep
}

func (x *Index) get() *search {
	sr := x.pool.Get().(*search)
	if len(sr.visit) < len(x.ids) {
		sr.visit = make([]uint32, len(x.ids)+len(x.ids)/4+16)
		sr.gen = 0
	}
	sr.gen++
	if sr.gen == 0 {
		clear(sr.visit)
		sr.gen = 1
	}
	return sr
}

// layer is the paper's SEARCH-LAYER: the ef nodes most similar to q on
// layer l reachable from ep, most similar first. skip is left out of the
// results (the node being linked).
func (x *Index) layer(sr *search, q []float32, ep item, ef, l int, skip uint32) []item {
	sr.cand.reset()
	sr.res.reset()
	sr.visit[ep.slot] = sr.gen
	sr.cand.push(ep.slot, ep.sim)
	if ep.slot != skip {
		sr.res.push(ep.slot, -ep.sim)
	}
	for sr.cand.len() > 0 {
		c := sr.cand.pop()
		if sr.res.len() >= ef && c.sim < -sr.res.top().sim {
			break
		}
		for _, n := range x.links(c.slot, l) {
			if sr.visit[n] == sr.gen {
				continue
			}
			sr.visit[n] = sr.gen
			s := cache.Dot(q, x.vec(n))
			if sr.res.len() < ef || s > -sr.res.top().sim {
				sr.cand.push(n, s)
				if n != skip {
					sr.res.push(n, -s)
					if sr.res.len() > ef {
						sr.res.pop()
					}
				}
			}
		}
	}
	out := sr.res.drainDescending()
	if len(out) == 0 {
		// Only the node being linked was reachable: start from the entry.
		out = append(out, ep)
	}
	return out
}

// Remove implements cache.Index: the node becomes a tombstone.
func (x *Index) Remove(id uint64) {
	s, ok := x.slots[id]
	if !ok {
		return
	}
	delete(x.slots, id)
	x.dead[s] = true
	x.free = append(x.free, s)
	x.live--
	if x.live == 0 {
		// Nothing left to find: start afresh, reusing no slot.
		x.vecs, x.ids, x.links0, x.upper, x.level, x.dead, x.free = x.vecs[:0], x.ids[:0], x.links0[:0], x.upper[:0], x.level[:0], x.dead[:0], x.free[:0]
		x.top = -1
	}
}

// Search implements cache.Index.
func (x *Index) Search(q []float32, k int, dst []cache.Neighbor) []cache.Neighbor {
	if k <= 0 || len(q) != x.dims || x.top < 0 {
		return dst
	}
	sr := x.get()
	defer x.pool.Put(sr)
	ep := item{slot: x.entry, sim: cache.Dot(q, x.vec(x.entry))}
	for l := x.top; l > 0; l-- {
		ep = x.greedy(q, ep, l)
	}
	found := x.layer(sr, q, ep, max(x.efS, k)+min(len(x.free), x.efS), 0, math.MaxUint32)
	for _, f := range found {
		if x.dead[f.slot] {
			continue
		}
		dst = append(dst, cache.Neighbor{ID: x.ids[f.slot], Similarity: f.sim})
		if k--; k == 0 {
			break
		}
	}
	return dst
}
