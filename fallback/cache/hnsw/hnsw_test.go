package hnsw_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback/cache"
	"github.com/tierguard/tierguard/fallback/cache/hnsw"
)

// corpus is a set of unit vectors grouped around topics, as the embeddings
// of a service's prompts are, and queries that are near-duplicates of
// stored vectors (a paraphrase moves an embedding a little).
type corpus struct {
	dims    int
	vecs    [][]float32
	queries [][]float32
}

func newCorpus(seed uint64, n, dims, topics, queries int, spread, noise float64) *corpus {
	r := rand.New(rand.NewPCG(seed, 1))
	centres := make([][]float32, topics)
	for i := range centres {
		centres[i] = randomUnit(r, dims, nil, 0)
	}
	c := &corpus{dims: dims}
	for range n {
		c.vecs = append(c.vecs, randomUnit(r, dims, centres[r.IntN(topics)], spread))
	}
	for range queries {
		c.queries = append(c.queries, randomUnit(r, dims, c.vecs[r.IntN(n)], noise))
	}
	return c
}

// newLatentCorpus models the structure of text embeddings: their
// intrinsic dimension is far below the nominal one, so the vectors are
// drawn in a latent space of latent dimensions — topics nested in broad
// themes — mapped to dims dimensions by a fixed random matrix, plus a
// little isotropic noise. Queries are near-duplicates of stored vectors,
// as a paraphrase's embedding is.
func newLatentCorpus(seed uint64, n, dims, latent, queries int) *corpus {
	r := rand.New(rand.NewPCG(seed, 2))
	proj := make([][]float32, latent)
	for i := range proj {
		proj[i] = randomUnit(r, dims, nil, 0)
	}
	themes := make([][]float32, 64)
	for i := range themes {
		themes[i] = randomUnit(r, latent, nil, 0)
	}
	topics := make([][]float32, max(1, n/20))
	for i := range topics {
		topics[i] = randomUnit(r, latent, themes[r.IntN(len(themes))], 0.15)
	}
	embed := func(z []float32, noise float64) []float32 {
		v := make([]float32, dims)
		for i, zi := range z {
			for j, p := range proj[i] {
				v[j] += zi * p
			}
		}
		return randomUnit(r, dims, v, noise)
	}
	c := &corpus{dims: dims}
	var zs [][]float32
	for range n {
		z := randomUnit(r, latent, topics[r.IntN(len(topics))], 0.1)
		zs = append(zs, z)
		c.vecs = append(c.vecs, embed(z, 0.005))
	}
	for range queries {
		c.queries = append(c.queries, embed(randomUnit(r, latent, zs[r.IntN(n)], 0.03), 0.005))
	}
	return c
}

// randomUnit is around + a Gaussian of standard deviation sd per
// coordinate (a uniform direction when around is nil), normalised.
func randomUnit(r *rand.Rand, dims int, around []float32, sd float64) []float32 {
	v := make([]float32, dims)
	var ss float64
	for i := range v {
		x := r.NormFloat64()
		if around != nil {
			x = float64(around[i]) + sd*x
		}
		v[i] = float32(x)
		ss += x * x
	}
	inv := 1 / math.Sqrt(ss)
	for i := range v {
		v[i] = float32(float64(v[i]) * inv)
	}
	return v
}

// recall is the share of queries whose best match in idx is the exact
// best match.
func recall(t testing.TB, idx cache.Index, exact *cache.Exact, queries [][]float32) float64 {
	t.Helper()
	hits := 0
	var got, want []cache.Neighbor
	for _, q := range queries {
		got = idx.Search(q, 1, got[:0])
		want = exact.Search(q, 1, want[:0])
		require.Len(t, want, 1)
		if len(got) == 1 && got[0].ID == want[0].ID {
			hits++
		}
	}
	return float64(hits) / float64(len(queries))
}

func build(t testing.TB, cfg hnsw.Config, c *corpus) (*hnsw.Index, *cache.Exact) {
	t.Helper()
	cfg.Dims = c.dims
	idx, err := hnsw.New(cfg)
	require.NoError(t, err)
	exact := cache.NewExact(c.dims)
	for i, v := range c.vecs {
		idx.Add(uint64(i), v)
		exact.Add(uint64(i), v)
	}
	return idx, exact
}

func TestRecallAgainstExactSearch(t *testing.T) {
	c := newCorpus(1, 2000, 64, 40, 300, 0.08, 0.02)
	idx, exact := build(t, hnsw.Config{}, c)
	assert.Equal(t, 2000, idx.Len())
	assert.GreaterOrEqual(t, recall(t, idx, exact, c.queries), 0.98)
}

func TestRecallOnUniformVectors(t *testing.T) {
	// No topics: the hardest case for a graph index.
	c := newCorpus(2, 2000, 64, 2000, 300, 1, 0.02)
	idx, exact := build(t, hnsw.Config{}, c)
	assert.GreaterOrEqual(t, recall(t, idx, exact, c.queries), 0.95)
}

func TestRecallSurvivesChurn(t *testing.T) {
	// A full cache evicts as it inserts: remove and add the same number,
	// twice over the index's size.
	c := newCorpus(3, 4000, 64, 40, 1, 0.08, 0.02)
	idx, err := hnsw.New(hnsw.Config{Dims: 64})
	require.NoError(t, err)
	exact := cache.NewExact(64)
	const size = 1000
	for i := range size {
		idx.Add(uint64(i), c.vecs[i])
		exact.Add(uint64(i), c.vecs[i])
	}
	for i := size; i < len(c.vecs); i++ {
		old := uint64(i - size)
		idx.Remove(old)
		exact.Remove(old)
		idx.Add(uint64(i), c.vecs[i])
		exact.Add(uint64(i), c.vecs[i])
	}
	assert.Equal(t, size, idx.Len())
	r := rand.New(rand.NewPCG(9, 9))
	var queries [][]float32
	for range 300 {
		queries = append(queries, randomUnit(r, 64, c.vecs[len(c.vecs)-1-r.IntN(size)], 0.02))
	}
	assert.GreaterOrEqual(t, recall(t, idx, exact, queries), 0.97)
}

func TestRemovedVectorsAreNeverReturned(t *testing.T) {
	c := newCorpus(4, 500, 32, 10, 0, 0.1, 0)
	idx, _ := build(t, hnsw.Config{}, c)
	for i := 0; i < 500; i += 2 {
		idx.Remove(uint64(i))
	}
	idx.Remove(12345) // unknown: nothing happens
	assert.Equal(t, 250, idx.Len())
	for i, v := range c.vecs {
		got := idx.Search(v, 5, nil)
		require.NotEmpty(t, got)
		for _, n := range got {
			assert.Equal(t, uint64(1), n.ID%2, "removed id %d returned", n.ID)
		}
		if i%2 == 1 {
			assert.Equal(t, uint64(i), got[0].ID, "a stored vector finds itself")
			assert.InDelta(t, 1, got[0].Similarity, 1e-5)
		}
	}
	for i := 1; i < 500; i += 2 {
		idx.Remove(uint64(i))
	}
	assert.Zero(t, idx.Len())
	assert.Empty(t, idx.Search(c.vecs[0], 1, nil))
	idx.Add(7, c.vecs[7])
	assert.Equal(t, []cache.Neighbor{{ID: 7, Similarity: idx.Search(c.vecs[7], 1, nil)[0].Similarity}}, idx.Search(c.vecs[7], 3, nil))
}

func TestReAddMovesTheVector(t *testing.T) {
	c := newCorpus(5, 300, 16, 5, 0, 0.2, 0)
	idx, _ := build(t, hnsw.Config{}, c)
	idx.Add(0, c.vecs[299])
	assert.Equal(t, 300, idx.Len())
	got := idx.Search(c.vecs[299], 2, nil)
	require.Len(t, got, 2)
	assert.ElementsMatch(t, []uint64{0, 299}, []uint64{got[0].ID, got[1].ID})
}

func TestWrongDimensionsAreIgnored(t *testing.T) {
	idx, err := hnsw.New(hnsw.Config{Dims: 3})
	require.NoError(t, err)
	idx.Add(1, []float32{1, 0})
	assert.Zero(t, idx.Len())
	idx.Add(1, []float32{1, 0, 0})
	assert.Empty(t, idx.Search([]float32{1, 0}, 1, nil))
	assert.Len(t, idx.Search([]float32{1, 0, 0}, 0, nil), 0)
}

func TestConfigErrorsNameEveryField(t *testing.T) {
	_, err := hnsw.New(hnsw.Config{M: -1, EfConstruction: -2, EfSearch: -3})
	require.Error(t, err)
	for _, f := range []string{"Dims", "negative M", "EfConstruction", "EfSearch"} {
		assert.Contains(t, err.Error(), f)
	}
	_, err = hnsw.NewFactory(hnsw.Config{M: 1})
	require.ErrorContains(t, err, "M 1")
	f, err := hnsw.NewFactory(hnsw.Config{})
	require.NoError(t, err)
	idx := f(4)
	idx.Add(1, []float32{0, 1, 0, 0})
	assert.Equal(t, 1, idx.Len())
}

func TestConcurrentSearches(t *testing.T) {
	c := newCorpus(6, 2000, 32, 20, 64, 0.1, 0.02)
	idx, exact := build(t, hnsw.Config{}, c)
	want := recall(t, idx, exact, c.queries)
	done := make(chan float64, 4)
	for range 4 {
		go func() { done <- recall(t, idx, exact, c.queries) }()
	}
	for range 4 {
		assert.Equal(t, want, <-done, "searches share no state")
	}
}
