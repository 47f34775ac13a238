package hnsw_test

import (
	"flag"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/tierguard/tierguard/fallback/cache"
	"github.com/tierguard/tierguard/fallback/cache/hnsw"
)

// large adds the 100,000-entry measurements (a build of about a minute):
// make bench-cache-index.
var large = flag.Bool("hnsw.large", false, "also measure at 100,000 entries")

// benchDims is the dimension measured: gemini-embedding-001 and OpenAI's
// text-embedding-3 models both serve 768-dimension embeddings.
const benchDims = 768

type built struct {
	name     string
	c        *corpus
	idx      *hnsw.Index
	exact    *cache.Exact
	build    time.Duration
	heap     int64
	vecBytes int64
}

var (
	builtMu sync.Mutex
	builts  = map[string]*built{}
)

// corpora are the data sets measured: "latent" models text embeddings
// (a low intrinsic dimension, see newLatentCorpus); "scattered" puts n/20
// tight clusters at random directions of the full 768 dimensions, a worst
// case no real embedding model produces, measured at 10,000 entries only.
var corpora = map[string]func(n int) *corpus{
	"latent":    func(n int) *corpus { return newLatentCorpus(42, n, benchDims, 32, 1000) },
	"scattered": func(n int) *corpus { return newCorpus(42, n, benchDims, n/20, 1000, 0.05, 0.01) },
}

// buildOnce builds, once per data set, size and test binary, an index
// and measures the build.
func buildOnce(b *testing.B, data string, n int) *built {
	builtMu.Lock()
	defer builtMu.Unlock()
	key := fmt.Sprint(data, n)
	if x := builts[key]; x != nil {
		return x
	}
	c := corpora[data](n)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	idx, err := hnsw.New(hnsw.Config{Dims: benchDims})
	if err != nil {
		b.Fatal(err)
	}
	for i, v := range c.vecs {
		idx.Add(uint64(i), v)
	}
	took := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	exact := cache.NewExact(benchDims)
	for i, v := range c.vecs {
		exact.Add(uint64(i), v)
	}
	x := &built{name: data, c: c, idx: idx, exact: exact, build: took, heap: int64(after.HeapAlloc) - int64(before.HeapAlloc), vecBytes: int64(n * benchDims * 4)}
	builts[key] = x
	return x
}

func sizes(b *testing.B) []int {
	if *large {
		return []int{10_000, 100_000}
	}
	if testing.Short() {
		return nil
	}
	return []int{10_000}
}

// BenchmarkSearch measures a top-1 lookup; it reports the recall@1 against
// exact search over 1,000 near-duplicate queries, the build time and the
// index's memory per entry beyond the vectors.
func BenchmarkSearch(b *testing.B) {
	for _, n := range sizes(b) {
		for _, data := range []string{"latent", "scattered"} {
			if data == "scattered" && n > 10_000 {
				continue
			}
			x := buildOnce(b, data, n)
			b.Run(fmt.Sprintf("data=%s/index=hnsw/n=%d", data, n), func(b *testing.B) {
				var dst []cache.Neighbor
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					dst = x.idx.Search(x.c.queries[i%len(x.c.queries)], 1, dst[:0])
				}
				b.ReportMetric(recall(b, x.idx, x.exact, x.c.queries), "recall@1")
				b.ReportMetric(float64(x.build.Microseconds())/float64(n), "build-µs/entry")
				b.ReportMetric(float64(x.heap-x.vecBytes)/float64(n), "heap-B/entry-beyond-vectors")
				b.ReportMetric(float64(x.idx.Bytes())/float64(n), "index-B/entry")
			})
			if data != "latent" {
				continue
			}
			b.Run(fmt.Sprintf("data=%s/index=exact/n=%d", data, n), func(b *testing.B) {
				var dst []cache.Neighbor
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					dst = x.exact.Search(x.c.queries[i%len(x.c.queries)], 1, dst[:0])
				}
			})
		}
	}
}
