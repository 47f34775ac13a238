package spend_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/cache"
	"github.com/tierguard/tierguard/fallback/spend"
)

// embedModel is priced at $0.02 per million input tokens: 20 nano-units a
// token, so that every call's cost is exact and the fake can add it up
// on its own.
const (
	embedModel        = "text-embedding-3-small"
	embedNanoPerToken = 20
)

func embedPrices(t testing.TB) *spend.Prices {
	t.Helper()
	p, err := spend.NewPrices(spend.PriceTable{Currency: "USD", Prices: []spend.Price{
		{Model: "pro", Rates: spend.Rates{Input: amt("1.25"), Output: amt("10")}},
		{Model: embedModel, Rates: spend.Rates{Input: amt("0.02")}},
	}})
	require.NoError(t, err)
	return p
}

// countingEmbedder is a fake embedding API that keeps its own bill: per
// tenant (read from the request's context, as a provider bills its API
// key), the calls it answered and the tokens it reported.
type countingEmbedder struct {
	mu     sync.Mutex
	calls  map[string]int64
	tokens map[string]int64
}

func newCountingEmbedder() *countingEmbedder {
	return &countingEmbedder{calls: map[string]int64{}, tokens: map[string]int64{}}
}

func (f *countingEmbedder) Embed(ctx context.Context, text string) (cache.Embedding, error) {
	tokens := int64(len(text)) // a token per byte: any count will do, as long as the fake keeps it
	tenant := fallback.RequestFrom(ctx).Tenant
	f.mu.Lock()
	f.calls[tenant]++
	f.tokens[tenant] += tokens
	f.mu.Unlock()
	h := fnv.New64a()
	_, _ = h.Write([]byte(text))
	v := h.Sum64()
	vec := make([]float32, 8)
	for i := range vec {
		vec[i] = float32(v>>(8*i)&0xff) + 1
	}
	return cache.Embedding{Vector: vec, Model: embedModel, Usage: fallback.Usage{InputTokens: tokens}, HasUsage: true}, nil
}

func (f *countingEmbedder) bill(tenant string) (calls, tokens int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[tenant], f.tokens[tenant]
}

// A cache whose semantic layer reports to the ledger, written and read by
// 64 concurrent requests of two tenants: the ledger bills each tenant
// exactly the embedder's own count of calls, tokens and cost — written
// answers' embeddings on the cache's goroutine and lookups' on the
// requests' — and their limits count them.
func TestRecordEmbeddingThroughCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLedger(t, spend.Config{Prices: embedPrices(t), Tenants: map[string]spend.Allowance{
			"acme":   {DailyTokens: 1 << 40, MonthlyCost: spend.Unit},
			"globex": {},
		}})
		emb := newCountingEmbedder()
		c, err := cache.New(cache.Config[string, string]{
			Prompt:   func(s string) string { return s },
			Template: cache.TemplateConfig[string]{Disabled: true},
			Semantic: cache.SemanticConfig{Embedder: emb, Usage: l},
		})
		require.NoError(t, err)
		defer func() { require.NoError(t, c.Close()) }()
		var got sync.Map // tenant -> *[]spend.Embedding, from ObserveEmbeddings
		var obsMu sync.Mutex
		defer l.ObserveEmbeddings(func(e *spend.Embedding) {
			obsMu.Lock()
			defer obsMu.Unlock()
			v, _ := got.LoadOrStore(e.Request.Tenant, new([]spend.Embedding))
			*v.(*[]spend.Embedding) = append(*v.(*[]spend.Embedding), *e)
		})()

		const callers = 64
		tenants := [2]string{"acme", "globex"}
		// Each phase runs callers requests at once: the first writes an
		// answer each; the second looks a question up in the scopes the
		// first filled (embedded on the requests' goroutines) while writing
		// another answer (embedded on the cache's).
		phase := func(lookup bool) {
			var wg sync.WaitGroup
			for i := range callers {
				wg.Go(func() {
					tk, err := l.Admit(context.Background(), spend.Request{Tenant: tenants[i%2], Scenario: "support"}, spend.Estimate{})
					if !assert.NoError(t, err) {
						return
					}
					defer tk.End()
					if lookup {
						c.Get(tk, fmt.Sprintf("another question %c", 'a'+i))
					}
					c.Put(tk, fmt.Sprintf("question %c of phase %t", 'a'+i, lookup), "answer")
				})
			}
			wg.Wait()
			synctest.Wait() // the cache's goroutine has embedded every written answer
		}
		phase(false)
		phase(true)

		var all int64
		for _, tenant := range tenants {
			calls, tokens := emb.bill(tenant)
			require.Equal(t, int64(3*callers/2), calls, "every written answer and every lookup is embedded")
			all += calls
			tot := l.Totals(tenant)
			em := tot.Embeddings
			assert.Equal(t, calls, em.Calls, tenant)
			assert.Equal(t, tokens, em.Usage.InputTokens, tenant)
			assert.Equal(t, spend.Amount(tokens*embedNanoPerToken), em.Cost, tenant)
			assert.Zero(t, em.Unpriced+em.Estimated+tot.Unpriced, tenant)
			// The tenant's figures include them, and they are no upstream calls.
			assert.Equal(t, tokens, tot.Usage.InputTokens, tenant)
			assert.Equal(t, em.Cost, tot.Cost, tenant)
			assert.Zero(t, tot.Calls, tenant)
			assert.Equal(t, int64(callers), tot.Requests, tenant)
			// The model's row has them.
			require.Len(t, tot.ByModel, 1, tenant)
			assert.Equal(t, spend.ModelTotals{Model: embedModel, Calls: calls, Usage: em.Usage, Cost: em.Cost}, tot.ByModel[0], tenant)
			// So do the subscribers, with the request's scenario.
			v, ok := got.Load(tenant)
			require.True(t, ok, tenant)
			seen := *v.(*[]spend.Embedding)
			assert.Len(t, seen, int(calls), tenant)
			var sum, lookups int64
			for _, e := range seen {
				if e.Lookup {
					lookups++
				}
				assert.Equal(t, "support", e.Request.Scenario)
				assert.True(t, e.Priced)
				sum += e.Usage.InputTokens
			}
			assert.Equal(t, tokens, sum, tenant)
			assert.Equal(t, int64(callers/2), lookups, tenant)
		}
		assert.Equal(t, uint64(all), c.Stats().Embedded, "one bill per call")

		// Budgets see them: acme's meters hold its embeddings.
		_, tokens := emb.bill("acme")
		use := l.Use("acme")
		assert.Equal(t, tokens, use[spend.DailyTokens].Used)
		assert.Equal(t, tokens*embedNanoPerToken, use[spend.MonthlyCost].Used)
	})
}

// Embedding usage counts against a tenant's limits: its thresholds fire,
// and past the limit the tenant's next request is refused.
func TestRecordEmbeddingFillsLimits(t *testing.T) {
	l := newLedger(t, spend.Config{Prices: embedPrices(t), Tenants: map[string]spend.Allowance{"acme": {DailyTokens: 1000}}})
	var events []spend.Event
	defer l.Observe(func(e spend.Event) { events = append(events, e) })()
	tk, err := l.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{})
	require.NoError(t, err)
	l.RecordEmbedding(tk, cache.EmbeddingUsage{Model: embedModel, Usage: fallback.Usage{InputTokens: 950}, HasUsage: true, Lookup: true})
	tk.End()
	require.Len(t, events, 2)
	assert.Equal(t, []float64{0.7, 0.9}, []float64{events[0].Threshold, events[1].Threshold})

	l.RecordEmbedding(fallback.WithRequest(context.Background(), fallback.Request{Tenant: "acme"}),
		cache.EmbeddingUsage{Model: embedModel, Usage: fallback.Usage{InputTokens: 50}, HasUsage: true})
	require.Len(t, events, 3)
	assert.Equal(t, spend.ThresholdReached, events[2].Kind)
	assert.Equal(t, 1.0, events[2].Threshold)
	_, err = l.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{Tokens: 1})
	require.ErrorIs(t, err, spend.ErrLimitReached)
	assert.Equal(t, int64(1000), l.Use("acme")[spend.DailyTokens].Used)
}

// A model the table has no price for is unpriced, as an attempt would
// be: its tokens count, and a tenant with a cost limit fails closed.
func TestRecordEmbeddingUnpriced(t *testing.T) {
	l := newLedger(t, spend.Config{Prices: embedPrices(t), Tenants: map[string]spend.Allowance{"acme": {DailyCost: spend.Unit}}})
	var events []spend.Event
	defer l.Observe(func(e spend.Event) { events = append(events, e) })()
	ctx := fallback.WithRequest(context.Background(), fallback.Request{Tenant: "acme"})
	l.RecordEmbedding(ctx, cache.EmbeddingUsage{Model: "embedding-nobody-priced", Usage: fallback.Usage{InputTokens: 10}, HasUsage: true})
	tot := l.Totals("acme")
	assert.Equal(t, int64(1), tot.Unpriced)
	assert.Equal(t, spend.EmbeddingTotals{Calls: 1, Unpriced: 1, Usage: fallback.Usage{InputTokens: 10}}, tot.Embeddings)
	assert.Zero(t, tot.Cost)
	require.Len(t, events, 1)
	assert.Equal(t, spend.UnpricedUsage, events[0].Kind)
	_, err := l.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{})
	require.ErrorIs(t, err, spend.ErrUnpriced)
}

// An embedding API that reports no usage is billed on an estimate from
// the text's length: a token per four characters, rounded up.
func TestRecordEmbeddingEstimated(t *testing.T) {
	l := newLedger(t, spend.Config{Prices: embedPrices(t)})
	ctx := fallback.WithRequest(context.Background(), fallback.Request{Tenant: "acme"})
	l.RecordEmbedding(ctx, cache.EmbeddingUsage{Model: embedModel, Characters: 9})
	em := l.Totals("acme").Embeddings
	assert.Equal(t, spend.EmbeddingTotals{Calls: 1, Estimated: 1, Usage: fallback.Usage{InputTokens: 3}, Cost: 3 * embedNanoPerToken}, em)
}

// The tenant comes from the Ticket, else the context's fallback.Request,
// else it is the empty tenant; a tenant the ledger refuses is billed to
// the overflow account, a Ticket of another ledger for its tenant.
func TestRecordEmbeddingTenant(t *testing.T) {
	l := newLedger(t, spend.Config{Prices: embedPrices(t), Tenants: map[string]spend.Allowance{"acme": {}}, RefuseUnknown: true})
	other := newLedger(t, spend.Config{})
	u := cache.EmbeddingUsage{Model: embedModel, Usage: fallback.Usage{InputTokens: 1}, HasUsage: true}

	l.RecordEmbedding(context.Background(), u)
	l.RecordEmbedding(fallback.WithRequest(context.Background(), fallback.Request{Tenant: "initech"}), u)
	assert.Equal(t, int64(2), l.OverflowTotals().Embeddings.Calls, "the empty tenant and initech are unknown here")

	l.RecordEmbedding(fallback.WithRequest(context.Background(), fallback.Request{Tenant: "acme"}), u)
	tk := other.Begin(context.Background(), spend.Request{Tenant: "acme"})
	l.RecordEmbedding(tk, u)
	tk.End()
	assert.Equal(t, int64(2), l.Totals("acme").Embeddings.Calls)
	assert.Zero(t, other.Totals("acme").Embeddings.Calls)

	// Sums over tenants have them.
	assert.Equal(t, int64(4), l.AllTotals().Embeddings.Calls)
}

// Without a price table embeddings count their tokens, unpriced.
func TestRecordEmbeddingWithoutPrices(t *testing.T) {
	l := newLedger(t, spend.Config{})
	l.RecordEmbedding(context.Background(), cache.EmbeddingUsage{Model: embedModel, Usage: fallback.Usage{InputTokens: 7}, HasUsage: true})
	tot := l.Totals("")
	assert.Equal(t, spend.EmbeddingTotals{Calls: 1, Unpriced: 1, Usage: fallback.Usage{InputTokens: 7}}, tot.Embeddings)
	assert.Equal(t, []spend.ModelTotals{{Calls: 1, Usage: fallback.Usage{InputTokens: 7}}}, tot.ByModel)
}
