package cache_test

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/cache"
)

var bg = context.Background()

func TestExactMatchNormalisesWhiteSpaceAndCase(t *testing.T) {
	c := newCache(t, cache.Config[string, string]{})
	c.Put(bg, "What is  RAG?\n", "retrieval-augmented generation")
	for _, q := range []string{"what is rag?", "  WHAT IS RAG?", "What\tis\nRAG?"} {
		out, hit, ok := c.Get(bg, q)
		require.True(t, ok, q)
		assert.Equal(t, "retrieval-augmented generation", out)
		assert.Equal(t, cache.HitExact, hit)
	}
	_, _, ok := c.Get(bg, "what is a rag?")
	assert.False(t, ok)

	strict := newCache(t, cache.Config[string, string]{Normalize: func(s string) string { return s }})
	strict.Put(bg, "What is RAG?", "x")
	_, _, ok = strict.Get(bg, "what is rag?")
	assert.False(t, ok, "an identity normaliser is case-sensitive")
	_, _, ok = strict.Get(bg, "What is RAG?")
	assert.True(t, ok)
	assert.Equal(t, "what is rag?", cache.NormalizeText(" What\u00a0is\u3000RAG? "), "Unicode spaces collapse too")
}

// A prompt holding a byte that is not UTF-8 is sent to the model with
// U+FFFD in its place: any case of it, and the prompt as it was sent,
// find its entry.
func TestExactMatchOfAPromptThatIsNotUTF8(t *testing.T) {
	c := newCache(t, cache.Config[string, string]{})
	c.Put(bg, "WHAT IS \xff?", "an answer")
	for _, q := range []string{"what is \xff?", "What is \xfe?", "what is \ufffd?"} {
		out, hit, ok := c.Get(bg, q)
		require.True(t, ok, "%q", q)
		assert.Equal(t, "an answer", out)
		assert.Equal(t, cache.HitExact, hit)
	}
}

func TestExactLookupAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	c := newCache(t, cache.Config[string, string]{})
	c.Put(bg, "what is rag?", "answer")
	for _, q := range []string{"what is rag?", "What is  RAG?"} {
		allocs := testing.AllocsPerRun(100, func() {
			if _, _, ok := c.Get(bg, q); !ok {
				t.Fatal("miss")
			}
		})
		assert.Zero(t, allocs, q)
	}
}

func TestTemplateReusesAnAnswerOnlyWhenTheValuesThatMatterAgree(t *testing.T) {
	reqID := cache.Slot{Name: "req", Pattern: regexp.MustCompile(`req-[0-9a-f]{6}`), Free: true}
	c := newCache(t, cache.Config[string, string]{Template: cache.TemplateConfig[string]{Slots: []cache.Slot{reqID}}})
	c.Put(bg, "[req-00aa11] Summarise the refund policy for order 1234", "refunds within 30 days")

	out, hit, ok := c.Get(bg, "[req-ffee99] summarise the refund policy for order 1234")
	require.True(t, ok, "only a free value differs")
	assert.Equal(t, cache.HitTemplate, hit)
	assert.Equal(t, "refunds within 30 days", out)

	_, _, ok = c.Get(bg, "[req-ffee99] Summarise the refund policy for order 9999")
	assert.False(t, ok, "the order number matters: no reuse without a Refill")
}

func TestTemplateRefill(t *testing.T) {
	c := newCache(t, cache.Config[string, string]{Template: cache.TemplateConfig[string]{Refill: cache.SubstituteVars}})
	c.Put(bg, `Describe the appeal of product "Aurora Lamp"`, `The "Aurora Lamp" brightens any room.`)
	out, hit, ok := c.Get(bg, `Describe the appeal of product "Nimbus Chair"`)
	require.True(t, ok)
	assert.Equal(t, cache.HitTemplate, hit)
	assert.Equal(t, `The "Nimbus Chair" brightens any room.`, out)

	c.Put(bg, "What does SKU-1 cost?", "$40")
	_, _, ok = c.Get(bg, "What does SKU-2 cost?")
	assert.False(t, ok, "the answer does not quote the value: SubstituteVars refuses")
}

func TestBuiltinSlots(t *testing.T) {
	c := newCache(t, cache.Config[string, string]{Template: cache.TemplateConfig[string]{Refill: func(_ context.Context, out string, stored, query []cache.Var) (string, bool) {
		var b strings.Builder
		for i := range query {
			fmt.Fprintf(&b, "%s:%s→%s;", query[i].Slot, stored[i].Value, query[i].Value)
		}
		return b.String(), true
	}}})
	for _, tc := range []struct{ stored, query, want string }{
		{"open https://example.com/a?x=1 now", "open https://example.org/b now", "url:https://example.com/a?x=1→https://example.org/b;"},
		{`translate "good morning"`, `translate "good night"`, `quoted:"good morning"→"good night";`},
		{"翻訳して「おはよう」", "翻訳して「こんばんは」", "quoted:「おはよう」→「こんばんは」;"},
		{"events on 2024-05-01", "events on 2025-12-31T10:00:00Z", "date:2024-05-01→2025-12-31T10:00:00Z;"},
		{"events on 5/1/2024", "events on 12/31/2025", "date:5/1/2024→12/31/2025;"},
		{"events on March 3rd, 2024", "events on Jan 9, 2025", "date:March 3rd, 2024→Jan 9, 2025;"},
		{"2024年5月1日の予定", "2025年1月9日の予定", "date:2024年5月1日→2025年1月9日;"},
		{"status of order A12B-77", "status of order ZZ9-1", "id:A12B-77→ZZ9-1;"},
		{"ticket #4521 summary", "ticket #99 summary", "id:#4521→#99;"},
		{"user 123e4567-e89b-12d3-a456-426614174000 plan", "user 00000000-0000-0000-0000-000000000001 plan", "id:123e4567-e89b-12d3-a456-426614174000→00000000-0000-0000-0000-000000000001;"},
		{"add 1,250.50 and 3", "add 7 and -2.5", "number:1,250.50→7;number:3→-2.5;"},
	} {
		c.Put(bg, tc.stored, "stored")
		out, hit, ok := c.Get(bg, tc.query)
		if assert.True(t, ok, tc.query) {
			assert.Equal(t, cache.HitTemplate, hit)
			assert.Equal(t, tc.want, out, tc.query)
		}
	}
	c.Put(bg, "render {name} for 3 users", "x")
	_, _, ok := c.Get(bg, "render {number} for 4 users")
	assert.False(t, ok, "a prompt's own braces never read as a placeholder")
	_, _, ok = c.Get(bg, "it's 'quoted' here, isn't it")
	assert.False(t, ok, "single quotes are apostrophes, not a slot")
}

func TestTemplateListIsBounded(t *testing.T) {
	c := newCache(t, cache.Config[string, string]{Template: cache.TemplateConfig[string]{MaxPerTemplate: 2}})
	for i := range 5 {
		c.Put(bg, fmt.Sprintf("[run %d] status", i), fmt.Sprint(i))
	}
	// Exact entries all stay; only the template list forgets.
	assert.Equal(t, 5, c.Stats().Entries)
	for i := range 5 {
		_, hit, ok := c.Get(bg, fmt.Sprintf("[run  %d] STATUS", i))
		require.True(t, ok)
		assert.Equal(t, cache.HitExact, hit)
	}
}

func semantic(emb cache.Embedder, simplified float64) cache.SemanticConfig {
	return cache.SemanticConfig{Embedder: emb, SimplifiedThreshold: simplified}
}

func TestSemanticThresholdAtTheBoundary(t *testing.T) {
	const dims = 8
	below := math.Nextafter32(0.95, 0)
	emb := newFixed(map[string][]float32{
		"stored question": axis(0, dims),
		"at threshold":    at(0.95, dims),
		"just below":      at(below, dims),
		"at simplified":   at(0.86, dims),
		"below both":      at(math.Nextafter32(0.86, 0), dims),
	})
	plain := newCache(t, cache.Config[string, string]{Semantic: semantic(emb, 0)})
	marked := newCache(t, cache.Config[string, string]{Semantic: semantic(emb, 0.86)})
	for _, c := range []*cache.Cache[string, string]{plain, marked} {
		c.Put(bg, "stored question", "stored answer")
		settle(t, c, 1)
	}
	for _, tc := range []struct {
		query       string
		plain, mark string
	}{
		{"at threshold", cache.HitSemantic, cache.HitSemantic},
		{"just below", "", cache.HitSimplified},
		{"at simplified", "", cache.HitSimplified},
		{"below both", "", ""},
	} {
		for _, c := range []struct {
			c    *cache.Cache[string, string]
			want string
		}{{plain, tc.plain}, {marked, tc.mark}} {
			out, hit, ok := c.c.Get(bg, tc.query)
			assert.Equal(t, c.want, hit, tc.query)
			assert.Equal(t, c.want != "", ok, tc.query)
			if ok {
				assert.Equal(t, "stored answer", out)
			}
		}
	}
	assert.Equal(t, uint64(1), plain.Stats().Semantic)
	assert.Equal(t, uint64(1), marked.Stats().Semantic)
	assert.Equal(t, uint64(2), marked.Stats().Simplified)
}

func TestSemanticNeverMixesValues(t *testing.T) {
	emb := newFixed(map[string][]float32{
		"What is the price of SKU-1?": axis(0, 4),
		"How much is SKU-2?":          at(0.99, 4),
		"How much is SKU-1 then?":     at(0.97, 4),
	})
	c := newCache(t, cache.Config[string, string]{Semantic: semantic(emb, 0)})
	c.Put(bg, "What is the price of SKU-1?", "$40")
	settle(t, c, 1)
	_, _, ok := c.Get(bg, "How much is SKU-2?")
	assert.False(t, ok, "close embeddings, different product")
	out, hit, ok := c.Get(bg, "How much is SKU-1 then?")
	require.True(t, ok)
	assert.Equal(t, "$40", out)
	assert.Equal(t, cache.HitSemantic, hit)

	loose := newCache(t, cache.Config[string, string]{Semantic: cache.SemanticConfig{Embedder: emb, KeepVariables: true}})
	loose.Put(bg, "What is the price of SKU-1?", "$40")
	settle(t, loose, 1)
	_, _, ok = loose.Get(bg, "How much is SKU-2?")
	assert.True(t, ok, "KeepVariables trusts the embedding alone")
}

func TestTenantsAndScenariosAreIsolated(t *testing.T) {
	emb := newFixed(map[string][]float32{"q? [id 17]": axis(0, 4), "Q?  [ID 17]": axis(0, 4), "question, reworded [id 18]": at(0.99, 4)})
	c := newCache(t, cache.Config[string, string]{Semantic: semantic(emb, 0.5), Template: cache.TemplateConfig[string]{Refill: cache.SubstituteVars}})
	acme := fallback.WithRequest(bg, fallback.Request{Tenant: "acme", Scenario: "chat"})
	c.Put(acme, "q? [id 17]", "acme's answer for 17")
	settle(t, c, 1)
	for _, ctx := range []context.Context{
		bg,
		fallback.WithRequest(bg, fallback.Request{Tenant: "globex", Scenario: "chat"}),
		fallback.WithRequest(bg, fallback.Request{Tenant: "acme", Scenario: "report"}),
	} {
		for _, q := range []string{"Q?  [ID 17]", "q? [id 18]", "question, reworded [id 18]"} {
			_, _, ok := c.Get(ctx, q)
			assert.False(t, ok, "%v %q", fallback.RequestFrom(ctx), q)
		}
	}
	_, hit, ok := c.Get(acme, "Q?  [ID 17]")
	assert.True(t, ok)
	assert.Equal(t, cache.HitExact, hit)
	_, hit, _ = c.Get(acme, "q? [id 18]")
	assert.Equal(t, cache.HitTemplate, hit)

	shared := newCache(t, cache.Config[string, string]{ShareAcrossTenants: true})
	shared.Put(acme, "public fact", "x")
	_, _, ok = shared.Get(fallback.WithRequest(bg, fallback.Request{Tenant: "globex", Scenario: "chat"}), "public fact")
	assert.True(t, ok, "shared across tenants")
	_, _, ok = shared.Get(fallback.WithRequest(bg, fallback.Request{Tenant: "globex", Scenario: "report"}), "public fact")
	assert.False(t, ok, "still apart by scenario")

	type req struct{ tenant, text string }
	byField, err := cache.New(cache.Config[req, string]{
		Prompt: func(r req) string { return r.text },
		Scope:  func(_ context.Context, r req) cache.Scope { return cache.Scope{Tenant: r.tenant} },
	})
	require.NoError(t, err)
	defer byField.Close()
	byField.Put(bg, req{"acme", "hi"}, "hello acme")
	_, _, ok = byField.Get(bg, req{"globex", "hi"})
	assert.False(t, ok)
	out, _, ok := byField.Get(bg, req{"acme", "hi"})
	assert.True(t, ok)
	assert.Equal(t, "hello acme", out)
}

func TestTTLExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCache(t, cache.Config[string, string]{})
		c.Put(bg, "q", "a")
		time.Sleep(24*time.Hour - time.Nanosecond)
		_, _, ok := c.Get(bg, "q")
		assert.True(t, ok, "24h by default")
		time.Sleep(time.Nanosecond)
		_, _, ok = c.Get(bg, "q")
		assert.False(t, ok, "expired")
		c.Put(bg, "other", "b")
		assert.Equal(t, 1, c.Stats().Entries, "the expired entry is swept on the next write")
		assert.Equal(t, uint64(1), c.Stats().Expired)

		short := newCache(t, cache.Config[string, string]{TTL: time.Minute})
		short.Put(bg, "q", "a")
		time.Sleep(time.Minute)
		_, _, ok = short.Get(bg, "q")
		assert.False(t, ok)
	})
}

func TestMemoryIsBoundedInBytes(t *testing.T) {
	const max = 64 << 10
	c := newCache(t, cache.Config[string, string]{MaxBytes: max})
	c.Put(bg, "hot", strings.Repeat("h", 1000))
	for i := range 500 {
		c.Put(bg, fmt.Sprintf("question %d", i), strings.Repeat("x", 1000+i))
		_, _, ok := c.Get(bg, "hot")
		require.True(t, ok, "an entry hit between writes survives eviction (step %d)", i)
		require.LessOrEqual(t, c.Stats().Bytes, int64(max))
	}
	s := c.Stats()
	assert.Positive(t, s.Evicted)
	assert.Less(t, s.Entries, 100)
	assert.Greater(t, s.Bytes, int64(max)*3/4, "eviction stops once there is room")

	c.Put(bg, "huge", strings.Repeat("x", max/16))
	assert.Equal(t, uint64(1), c.Stats().Rejected, "an answer above a sixteenth of the bound is not cached")
	_, _, ok := c.Get(bg, "huge")
	assert.False(t, ok)

	type answer struct{ Text string }
	sized := newCache(t, cache.Config[string, answer]{MaxBytes: max, Size: func(a answer) int { return 10 * len(a.Text) }})
	sized.Put(bg, "q", answer{Text: strings.Repeat("y", 300)})
	assert.Greater(t, sized.Stats().Bytes, int64(3000), "Size decides an answer's weight")
	encoded := newCache(t, cache.Config[string, answer]{MaxBytes: max})
	encoded.Put(bg, "q", answer{Text: strings.Repeat("y", 500)})
	assert.Greater(t, encoded.Stats().Bytes, int64(500), "without Size, the JSON encoding's length")
}

func TestEmbeddingsCountTowardTheBound(t *testing.T) {
	// The embedding waits for the entry's own size to be read: it is
	// computed in the background and could otherwise be counted already.
	measured := make(chan struct{})
	emb := cache.EmbedderFunc(func(context.Context, string) (cache.Embedding, error) {
		<-measured
		return cache.Embedding{Vector: axis(0, 3072)}, nil
	})
	c := newCache(t, cache.Config[string, string]{Semantic: semantic(emb, 0)})
	c.Put(bg, "q", "a")
	before := c.Stats().Bytes
	close(measured)
	settle(t, c, 1)
	assert.Equal(t, before+4*3072, c.Stats().Bytes)
}

func TestInvalidation(t *testing.T) {
	type answer struct{ Model, Text string }
	c := newCache(t, cache.Config[string, answer]{Model: func(a answer) string { return a.Model }})
	acme := fallback.WithRequest(bg, fallback.Request{Tenant: "acme"})
	globex := fallback.WithRequest(bg, fallback.Request{Tenant: "globex"})
	c.Put(acme, "a1", answer{"pro", "x"})
	c.Put(acme, "a2", answer{"flash", "x"})
	c.Put(globex, "g1", answer{"pro", "x"})
	c.Put(globex, "g2", answer{"flash", "x"})

	ok, err := c.Invalidate(acme, "A1 ")
	require.NoError(t, err)
	assert.True(t, ok)
	ok, _ = c.Invalidate(globex, "a2")
	assert.False(t, ok, "another tenant's key")
	n, err := c.InvalidateModel(bg, "flash")
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	n, err = c.InvalidateTenant(bg, "globex")
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Zero(t, c.Stats().Entries)
	assert.Equal(t, uint64(4), c.Stats().Invalidated)
	_, err = c.InvalidateTenant(bg, "")
	assert.Error(t, err)
	_, err = c.InvalidateModel(bg, "")
	assert.Error(t, err)
}

func TestConfigErrorsNameEveryField(t *testing.T) {
	_, err := cache.New(cache.Config[string, string]{
		TTL: -1, MaxBytes: -1,
		Template: cache.TemplateConfig[string]{MaxPerTemplate: -1, MaxPrompt: -1, Slots: []cache.Slot{{}}},
		Semantic: cache.SemanticConfig{Threshold: 1.5, SimplifiedThreshold: 2, Timeout: -1, MinBudget: -1, Queue: -1},
	})
	require.Error(t, err)
	for _, f := range []string{"Prompt", "TTL", "MaxBytes", "MaxPerTemplate", "Template.MaxPrompt", "Pattern", "Name", "Semantic.Threshold", "SimplifiedThreshold", "Semantic.Timeout", "Semantic.MinBudget", "Semantic.Queue"} {
		assert.Contains(t, err.Error(), f)
	}
	_, err = cache.New(cache.Config[string, string]{Prompt: func(s string) string { return s }, Semantic: cache.SemanticConfig{SimplifiedThreshold: 0.96}})
	require.ErrorContains(t, err, "SimplifiedThreshold 0.96")
}

func TestEmbedderOutageFallsBackToExactAndTemplateWithinTheBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		emb := newFixed(map[string][]float32{"Status of order 17?": axis(0, 4)})
		br, err := breaker.New(breaker.Config{Name: "embed", ConsecutiveFailures: 2, Cooldown: time.Minute})
		require.NoError(t, err)
		c := newCache(t, cache.Config[string, string]{
			Semantic: cache.SemanticConfig{Embedder: emb, Breaker: br, Timeout: 200 * time.Millisecond},
			Template: cache.TemplateConfig[string]{Refill: cache.SubstituteVars},
		})
		c.Put(bg, "Status of order 17?", "order 17 shipped")
		synctest.Wait()
		require.Equal(t, uint64(1), c.Stats().Embedded)

		emb.hang.Store(true)
		ctx, cancel := context.WithTimeout(bg, time.Second)
		defer cancel()
		start := time.Now()
		out, hit, ok := c.Get(ctx, "status of order 17?")
		assert.True(t, ok)
		assert.Equal(t, cache.HitExact, hit, "exact first: the embedder is not asked")
		assert.Equal(t, "order 17 shipped", out)
		out, hit, _ = c.Get(ctx, "Status of order 18?")
		assert.Equal(t, cache.HitTemplate, hit)
		assert.Equal(t, "order 18 shipped", out)
		assert.Zero(t, time.Since(start))
		assert.Equal(t, int64(1), emb.calls.Load())

		start = time.Now()
		_, _, ok = c.Get(ctx, "something else entirely")
		assert.False(t, ok)
		assert.Equal(t, 200*time.Millisecond, time.Since(start), "the embedding's own deadline, well inside the request's")

		// The request's deadline is the earlier: 50ms left, 50ms waited;
		// and the request's end is not the embedder's failure.
		short, cancelShort := context.WithTimeout(bg, 50*time.Millisecond)
		defer cancelShort()
		start = time.Now()
		c.Get(short, "a third one")
		assert.Equal(t, 50*time.Millisecond, time.Since(start))
		assert.Equal(t, breaker.Closed, br.State())

		// An embedder that ignores its context is abandoned at the same
		// deadline.
		emb.ignore.Store(true)
		start = time.Now()
		_, _, ok = c.Get(ctx, "and another")
		assert.False(t, ok)
		assert.Equal(t, 200*time.Millisecond, time.Since(start))
		close(emb.release)
		emb.ignore.Store(false)
		assert.Equal(t, breaker.Open, br.State(), "two slow calls trip the embedder's breaker")

		calls := emb.calls.Load()
		start = time.Now()
		_, _, ok = c.Get(ctx, "while it is open")
		assert.False(t, ok)
		assert.Zero(t, time.Since(start), "an open breaker skips the semantic layer at once")
		assert.Equal(t, calls, emb.calls.Load())

		tiny, cancelTiny := context.WithTimeout(bg, 5*time.Millisecond)
		defer cancelTiny()
		br.ForceClosed()
		c.Get(tiny, "too little time")
		assert.Equal(t, calls, emb.calls.Load(), "below MinBudget the embedder is not called")
		s := c.Stats()
		assert.Equal(t, uint64(3), s.EmbedFailures)
		assert.Equal(t, uint64(2), s.EmbedSkipped)
		synctest.Wait()
	})
}

// TestEmbedderPanic: the embedder runs on a goroutine of the cache's. A
// panic while embedding a lookup is raised again on the caller's
// goroutine as a *fallback.PanicError with the stack where it happened; a
// panic while embedding a new entry in the background is counted as a
// failed embedding, and the entry still serves exact matches.
func TestEmbedderPanic(t *testing.T) {
	emb := cache.EmbedderFunc(func(_ context.Context, text string) (cache.Embedding, error) {
		if strings.HasPrefix(text, "boom") {
			panic("embedder exploded")
		}
		return cache.Embedding{Vector: axis(0, 4)}, nil
	})
	c := newCache(t, cache.Config[string, string]{Semantic: semantic(emb, 0)})
	c.Put(bg, "boom q", "a")
	c.Put(bg, "q", "b")
	settle(t, c, 2)
	assert.Equal(t, uint64(1), c.Stats().EmbedFailures)
	assert.Equal(t, uint64(1), c.Stats().Embedded)
	out, hit, ok := c.Get(bg, "boom q")
	require.True(t, ok)
	assert.Equal(t, "a", out)
	assert.Equal(t, cache.HitExact, hit)

	defer func() {
		pe, ok := recover().(*fallback.PanicError)
		require.True(t, ok, "a *fallback.PanicError")
		assert.Equal(t, "embedder exploded", pe.Value)
		assert.Contains(t, string(pe.Stack), "cache_test.go", "the stack where the embedder panicked")
		assert.Equal(t, uint64(2), c.Stats().EmbedFailures)
	}()
	c.Get(bg, "boom, another question")
	t.Fatal("the lookup's panic did not reach the caller")
}

func TestAChainAnswersWithinItsDeadlineWhileTheEmbedderHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		emb := newFixed(map[string][]float32{"q": axis(0, 4)})
		c := newCache(t, cache.Config[string, string]{Semantic: cache.SemanticConfig{Embedder: emb, Timeout: 5 * time.Second}})
		emb.hang.Store(true)
		down := fallback.Tier("pro", func(ctx context.Context, _ string) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		})
		chain, err := fallback.New(fallback.Config[string, string]{
			Stages: []fallback.Stage[string, string]{{Tier: down}}, Total: 2 * time.Second, Cache: c,
			Default: func(context.Context, string) (string, bool) { return "default", true },
		})
		require.NoError(t, err)
		c.Put(bg, "seed", "x") // a vector-less entry: the semantic layer has nothing
		start := time.Now()
		res, err := chain.Do(bg, "unseen question")
		require.NoError(t, err)
		assert.Equal(t, fallback.SourceDefault, res.Source)
		assert.LessOrEqual(t, time.Since(start), 2*time.Second)
		synctest.Wait()
	})
}

func TestUsageIsRecorded(t *testing.T) {
	emb := newFixed(map[string][]float32{"stored": axis(0, 4), "lookup ü": axis(1, 4)})
	log := &usageLog{}
	c := newCache(t, cache.Config[string, string]{Semantic: cache.SemanticConfig{Embedder: emb, Usage: log}})
	acme := fallback.WithRequest(bg, fallback.Request{Tenant: "acme"})
	c.Put(acme, "stored", "a")
	settle(t, c, 1)
	c.Get(acme, "lookup ü")
	got, tenants := log.all()
	require.Len(t, got, 2)
	assert.Equal(t, cache.EmbeddingUsage{Model: "fixed-embed", Usage: fallback.Usage{InputTokens: 6}, HasUsage: true, Characters: 6}, got[0])
	assert.Equal(t, cache.EmbeddingUsage{Model: "fixed-embed", Usage: fallback.Usage{InputTokens: 9}, HasUsage: true, Characters: 8, Lookup: true}, got[1])
	assert.Equal(t, []string{"acme", "acme"}, tenants, "the request's values reach the ledger")
}

func TestOnlyValidatedAnswersAreWritten(t *testing.T) {
	c := newCache(t, cache.Config[string, string]{})
	var proDown, flashDown bool
	pro := fallback.Tier("pro", func(context.Context, string) (string, error) {
		if proDown {
			return "", classifiedDown
		}
		return "not json", nil
	})
	flash := fallback.Tier("flash", func(context.Context, string) (string, error) {
		if flashDown {
			return "", classifiedDown
		}
		return `{"ok":true}`, nil
	})
	json := validatorFunc(func(s string) error {
		if !strings.HasPrefix(s, "{") {
			return fmt.Errorf("not an object")
		}
		return nil
	})
	chain, err := fallback.New(fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{{Tier: pro, Validate: json}, {Tier: flash, Validate: json}},
		Cache:  c,
	})
	require.NoError(t, err)
	res, err := chain.Do(bg, "q")
	require.NoError(t, err)
	assert.Equal(t, "flash", res.Tier)
	assert.Equal(t, uint64(1), c.Stats().Writes, "the rejected answer was not written")

	proDown, flashDown = true, true
	res, err = chain.Do(bg, "Q")
	require.NoError(t, err)
	assert.Equal(t, fallback.SourceCache, res.Source)
	assert.Equal(t, cache.HitExact, res.CacheHit)
	assert.Equal(t, `{"ok":true}`, res.Value)
	assert.Equal(t, uint64(1), c.Stats().Writes, "a cache answer is not written back")
}

type validatorFunc func(string) error

func (f validatorFunc) Validate(s string) error { return f(s) }

func TestStreamCache(t *testing.T) {
	type chunk struct{ text, finish string }
	c := newCache(t, cache.Config[string, string]{})
	sc := cache.ForStream(c, func(text string) chunk { return chunk{text, "STOP"} }, cache.Text)
	sc.Put(bg, "q", "whole answer")
	ch, hit, ok := sc.Get(bg, "Q")
	require.True(t, ok)
	assert.Equal(t, chunk{"whole answer", "STOP"}, ch)
	assert.Equal(t, cache.HitExact, hit)
	_, _, ok = sc.Get(bg, "missing")
	assert.False(t, ok)
}

// TestStreamCacheOfStructuredAnswers: one cache of structured answers
// serves a unary chain and a streaming one: a stream's text becomes an
// answer to cache (or not, when the stream says nothing cacheable), and a
// cached answer becomes the stream's one chunk.
func TestStreamCacheOfStructuredAnswers(t *testing.T) {
	type answer struct{ Text, Model string }
	type chunk struct{ text, finish string }
	c := newCache(t, cache.Config[string, answer]{Prompt: func(s string) string { return s }})
	c.Put(bg, "unary question", answer{"from a unary chain", "pro"})
	sc := cache.ForStream(c, func(a answer) chunk { return chunk{a.Text, "STOP"} },
		func(text string) (answer, bool) { return answer{Text: text}, text != "" })
	ch, hit, ok := sc.Get(bg, "unary question")
	require.True(t, ok)
	assert.Equal(t, chunk{"from a unary chain", "STOP"}, ch)
	assert.Equal(t, cache.HitExact, hit)
	sc.Put(bg, "streamed question", "streamed answer")
	got, _, ok := c.Get(bg, "streamed question")
	require.True(t, ok)
	assert.Equal(t, answer{Text: "streamed answer"}, got)
	sc.Put(bg, "empty", "")
	_, _, ok = c.Get(bg, "empty")
	assert.False(t, ok, "answer said not to cache it")
}

func TestConcurrentUse(t *testing.T) {
	emb := cache.EmbedderFunc(func(_ context.Context, text string) (cache.Embedding, error) {
		v := make([]float32, 8)
		v[len(text)%8] = 1
		return cache.Embedding{Vector: v}, nil
	})
	c := newCache(t, cache.Config[string, string]{MaxBytes: 32 << 10, Semantic: semantic(emb, 0.5)})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			ctx := fallback.WithRequest(bg, fallback.Request{Tenant: fmt.Sprint(w % 2)})
			for i := range 300 {
				q := fmt.Sprintf("question %d about item %d", i%37, i%11)
				c.Put(ctx, q, strings.Repeat("a", i))
				c.Get(ctx, q)
				c.Get(ctx, "another "+q)
				if i%100 == 0 {
					_, _ = c.InvalidateTenant(ctx, "1")
				}
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, c.Stats().Bytes, int64(32<<10))
}

func TestTheSamePromptAnsweredAgainKeepsItsEmbedding(t *testing.T) {
	emb := newFixed(map[string][]float32{"q": axis(0, 4), "Q": axis(0, 4), "close to q": at(0.99, 4)})
	c := newCache(t, cache.Config[string, string]{Semantic: semantic(emb, 0)})
	c.Put(bg, "q", "first")
	settle(t, c, 1)
	c.Put(bg, "Q", "second")
	c.Put(bg, "q", "third")
	out, hit, ok := c.Get(bg, "close to q")
	require.True(t, ok)
	assert.Equal(t, cache.HitSemantic, hit)
	assert.Equal(t, "third", out, "the newest answer, found through the first embedding")
	assert.Equal(t, int64(2), emb.calls.Load(), "one embedding for the written prompt, one for the lookup")
	assert.Equal(t, 1, c.Stats().Entries)
}
