// Package hnsw is an approximate nearest-neighbour index for the semantic
// cache of package cache: a hierarchical navigable small world graph over
// unit vectors, with no dependency beyond the standard library.
//
// The exact index (cache.Exact, the default) compares a query with every
// entry of its scope, which costs tens of milliseconds at 100,000 entries
// of 768 dimensions; this index answers in about half a millisecond there,
// with a recall@1 of 0.999 against exact search (BENCHMARKS.md has the
// figures, the data and the command). Use it when a single tenant's scope holds many thousands of
// entries:
//
//	newIndex, err := hnsw.NewFactory(hnsw.Config{})
//	...
//	cache.New(cache.Config[In, Out]{..., Semantic: cache.SemanticConfig{
//		Embedder: emb, NewIndex: newIndex,
//	}})
//
// Why not a library: of the pure-Go HNSW implementations the Go module
// proxy serves, github.com/coder/hnsw v0.6.1 (its latest release) reached
// a recall@1 of 0.15 to 0.26 against exact search on 10,000 vectors
// whatever its parameters — its min-heap's Max and PopLast return the wrong
// element and its search stops at the first layer step that does not
// improve the best result (the heap fix, coder/hnsw#20, was merged after
// that release; the search fixes were still proposals, #21 and #22) — and
// a search that passes through a deleted node may panic (coder/hnsw#13,
// #15), while the cache deletes on every eviction. The other candidates
// looked up (fogfish/hnsw, TFMV/hnsw, Bithack/go-hnsw) were not served;
// chromem-go searches exhaustively, as cache.Exact does.
package hnsw
