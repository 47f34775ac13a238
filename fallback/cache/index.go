package cache

import (
	"errors"
	"math"
	"slices"
)

// Neighbor is one result of an Index search.
type Neighbor struct {
	// ID is the entry's id.
	ID uint64
	// Similarity is the cosine similarity to the query, in [-1, 1].
	Similarity float32
}

// Index finds the stored vectors nearest to a query. The cache keeps one
// Index per scope (tenant and scenario), and hands it unit-length vectors
// of one dimension, so that the dot product is the cosine similarity.
//
// The cache serialises Add and Remove; Search may run concurrently with
// other Searches, never with Add or Remove.
type Index interface {
	// Add stores vec under id, replacing the vector id had. The index may
	// keep vec: the cache never modifies it afterwards.
	Add(id uint64, vec []float32)
	// Remove drops id; removing an unknown id does nothing.
	Remove(id uint64)
	// Search appends to dst at most k neighbours of q, the most similar
	// first, and returns the extended slice.
	Search(q []float32, k int, dst []Neighbor) []Neighbor
	// Len is the number of vectors stored.
	Len() int
}

// Exact is an Index that compares the query with every stored vector: exact
// results, no memory beyond the vectors, and a cost linear in the number
// of entries (about 0.25 ms per 1,000 vectors of 768 dimensions on one
// server core, BENCHMARKS.md). It is the default; for scopes of many
// thousands of entries use an approximate index (package hnsw).
type Exact struct {
	dims int
	ids  []uint64
	vecs []float32
	pos  map[uint64]int
}

// NewExact returns an empty exact index for vectors of dims dimensions.
func NewExact(dims int) *Exact {
	return &Exact{dims: dims, pos: map[uint64]int{}}
}

// Add implements Index.
func (x *Exact) Add(id uint64, vec []float32) {
	if len(vec) != x.dims {
		return
	}
	if i, ok := x.pos[id]; ok {
		copy(x.vecs[i*x.dims:(i+1)*x.dims], vec)
		return
	}
	x.pos[id] = len(x.ids)
	x.ids = append(x.ids, id)
	x.vecs = append(x.vecs, vec...)
}

// Remove implements Index: the last vector takes the removed one's place.
func (x *Exact) Remove(id uint64) {
	i, ok := x.pos[id]
	if !ok {
		return
	}
	last := len(x.ids) - 1
	if i != last {
		x.ids[i] = x.ids[last]
		copy(x.vecs[i*x.dims:(i+1)*x.dims], x.vecs[last*x.dims:])
		x.pos[x.ids[i]] = i
	}
	x.ids = x.ids[:last]
	x.vecs = x.vecs[:last*x.dims]
	delete(x.pos, id)
}

// Len implements Index.
func (x *Exact) Len() int { return len(x.ids) }

// Search implements Index.
func (x *Exact) Search(q []float32, k int, dst []Neighbor) []Neighbor {
	if k <= 0 || len(q) != x.dims || len(x.ids) == 0 {
		return dst
	}
	base := len(dst)
	for i, id := range x.ids {
		s := Dot(q, x.vecs[i*x.dims:(i+1)*x.dims])
		n := len(dst) - base
		if n == k && s <= dst[len(dst)-1].Similarity {
			continue
		}
		if n < k {
			dst = append(dst, Neighbor{})
			n++
		}
		// Insertion into the short sorted tail: k is small.
		j := base + n - 1
		for j > base && dst[j-1].Similarity < s {
			dst[j] = dst[j-1]
			j--
		}
		dst[j] = Neighbor{ID: id, Similarity: s}
	}
	return dst
}

// Dot returns the dot product of a and b, which must have the same length:
// the cosine similarity of unit vectors.
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	// Eight independent sums keep the floating-point units busy.
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		aa, bb := a[i:i+8:i+8], b[i:i+8:i+8]
		s0 += aa[0] * bb[0]
		s1 += aa[1] * bb[1]
		s2 += aa[2] * bb[2]
		s3 += aa[3] * bb[3]
		s4 += aa[4] * bb[4]
		s5 += aa[5] * bb[5]
		s6 += aa[6] * bb[6]
		s7 += aa[7] * bb[7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}

// errZeroVector is returned for a vector that cannot be normalised.
var errZeroVector = errors.New("cache: the embedding is a zero or non-finite vector")

// unit returns v scaled to unit length, or v itself when it already is
// (embedding APIs usually return unit vectors), and an error for a zero or
// non-finite vector. A scaled copy is made: v may belong to the caller.
func unit(v []float32) ([]float32, error) {
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	if ss == 0 || math.IsNaN(ss) || math.IsInf(ss, 0) {
		return nil, errZeroVector
	}
	if math.Abs(ss-1) < 1e-6 {
		return v, nil
	}
	inv := 1 / math.Sqrt(ss)
	out := slices.Clone(v)
	for i := range out {
		out[i] = float32(float64(out[i]) * inv)
	}
	return out, nil
}
