package cache_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"runtime"
	"testing"

	"github.com/tierguard/tierguard/fallback/cache"
)

// BenchmarkMatch measures a lookup of each kind in a cache of 1,000
// entries of one scope, with 768-dimension embeddings. The embedder
// answers from memory, so the semantic figures are the cache's own cost
// on top of an embedding call (tens to hundreds of milliseconds against
// a real API).
func BenchmarkMatch(b *testing.B) {
	const n, dims = 1000, 768
	r := rand.New(rand.NewPCG(1, 2))
	vecs := map[string][]float32{}
	prompts := make([]string, n)
	for i := range prompts {
		prompts[i] = fmt.Sprintf("tell me about topic %c%c%c please", 'a'+i%26, 'a'+i/26%26, 'a'+i/676)
		vecs[prompts[i]] = randomVec(r, dims)
	}
	paraphrase := "could you explain that topic, please"
	vecs[paraphrase] = vecs[prompts[n/2]]
	emb := cache.EmbedderFunc(func(_ context.Context, text string) (cache.Embedding, error) {
		return cache.Embedding{Vector: vecs[text]}, nil
	})
	c, err := cache.New(cache.Config[string, string]{
		Prompt:   func(s string) string { return s },
		Semantic: cache.SemanticConfig{Embedder: emb, Queue: 2 * n},
		Template: cache.TemplateConfig[string]{Slots: []cache.Slot{{Name: "order", Pattern: regexp.MustCompile(`\border \d+`), Free: true}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for _, p := range prompts {
		c.Put(context.Background(), p, "an answer of a hundred bytes or so, as a short model answer would be; padded to size.")
	}
	c.Put(context.Background(), "status of order 1234", "shipped")
	for c.Stats().Embedded < n {
		runtime.Gosched()
	}
	for _, tc := range []struct {
		kind, query string
		want        string
	}{
		{"exact", prompts[7], cache.HitExact},
		{"exact-unnormalised", "  Tell me about topic HAA   please", cache.HitExact},
		{"template", "status of order 5678", cache.HitTemplate},
		{"semantic", paraphrase, cache.HitSemantic},
	} {
		b.Run("kind="+tc.kind, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, hit, _ := c.Get(context.Background(), tc.query); hit != tc.want {
					b.Fatalf("%q: %v, want %v", tc.query, hit, tc.want)
				}
			}
		})
	}
}

// BenchmarkPut measures writing an answer (without the embedding, made on
// the cache's goroutine).
func BenchmarkPut(b *testing.B) {
	c, err := cache.New(cache.Config[string, string]{Prompt: func(s string) string { return s }, MaxBytes: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	prompts := make([]string, 4096)
	for i := range prompts {
		prompts[i] = fmt.Sprintf("tell me about topic %d please", i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c.Put(context.Background(), prompts[i%len(prompts)], "an answer")
	}
}

func randomVec(r *rand.Rand, dims int) []float32 {
	v := make([]float32, dims)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	u, _ := unitForTest(v)
	return u
}

func unitForTest(v []float32) ([]float32, bool) {
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	if ss == 0 {
		return nil, false
	}
	inv := float32(1 / math.Sqrt(ss))
	for i := range v {
		v[i] *= inv
	}
	return v, true
}
