package cache_test

import (
	"context"
	"fmt"
	"regexp"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback/cache"
)

// endingCtx is a request context whose deadline passes while the cache
// works: Err reports nothing for its first live calls, then
// context.DeadlineExceeded — as if the clock had run out between two
// steps of matching.
type endingCtx struct {
	context.Context
	live  int32
	calls atomic.Int32
	done  chan struct{}
}

func endsAfter(live int32) *endingCtx {
	return &endingCtx{Context: context.Background(), live: live, done: make(chan struct{})}
}

func (c *endingCtx) Err() error {
	if c.calls.Add(1) > c.live {
		select {
		case <-c.done:
		default:
			close(c.done)
		}
		return context.DeadlineExceeded
	}
	return nil
}

func (c *endingCtx) Done() <-chan struct{} { return c.done }

func (c *endingCtx) Deadline() (time.Time, bool) { return time.Now(), true }

// templateCache holds one answer that a template match would serve to
// query below: only a free value differs.
func templateCache(t *testing.T) *cache.Cache[string, string] {
	t.Helper()
	reqID := cache.Slot{Name: "req", Pattern: regexp.MustCompile(`req-[0-9a-f]{6}`), Free: true}
	c := newCache(t, cache.Config[string, string]{Template: cache.TemplateConfig[string]{Slots: []cache.Slot{reqID}}})
	c.Put(bg, "[req-00aa11] Summarise the refund policy for order 1234", "refunds within 30 days")
	_, hit, ok := c.Get(bg, query)
	require.True(t, ok)
	require.Equal(t, cache.HitTemplate, hit)
	return c
}

const query = "[req-ffee99] summarise the refund policy for order 1234"

// Template matching is bounded by the request's context: a lookup whose
// deadline has passed, or passes while its prompt is being matched, is
// not held for the template layer; the exact layer still answers.
func TestTemplateMatchingStopsAtTheDeadline(t *testing.T) {
	t.Run("ended", func(t *testing.T) {
		c := templateCache(t)
		ctx, cancel := context.WithCancel(bg)
		cancel()
		_, _, ok := c.Get(ctx, query)
		assert.False(t, ok, "no template matching after the deadline")
		assert.Equal(t, uint64(1), c.Stats().TemplateCut)
		out, hit, ok := c.Get(ctx, "[REQ-00aa11]  summarise the refund policy for order 1234")
		require.True(t, ok, "an exact hit costs no more than the lookup itself")
		assert.Equal(t, cache.HitExact, hit)
		assert.Equal(t, "refunds within 30 days", out)
	})
	t.Run("ending", func(t *testing.T) {
		c := templateCache(t)
		ctx := endsAfter(1)
		_, _, ok := c.Get(ctx, query)
		assert.False(t, ok, "the deadline passed while matching: the lookup stops")
		assert.Greater(t, ctx.calls.Load(), int32(1), "the context is checked again while matching")
		assert.Equal(t, uint64(1), c.Stats().TemplateCut)
	})
	t.Run("refill", func(t *testing.T) {
		refills := 0
		c := newCache(t, cache.Config[string, string]{Template: cache.TemplateConfig[string]{
			Refill: func(ctx context.Context, out string, stored, query []cache.Var) (string, bool) {
				refills++
				return cache.SubstituteVars(ctx, out, stored, query)
			}}})
		c.Put(bg, "where is order 1042?", "order 1042 left the depot")
		out, _, ok := c.Get(bg, "where is order 77?")
		require.True(t, ok)
		assert.Equal(t, "order 77 left the depot", out)
		// Matching checks the context before each slot and before it
		// builds the key; the deadline passes right after.
		_, _, ok = c.Get(endsAfter(int32(len(cache.Builtins())+1)), "where is order 78?")
		assert.False(t, ok, "the deadline passed before the refill: it is not tried")
		assert.Equal(t, uint64(1), c.Stats().TemplateCut)
		assert.Equal(t, 1, refills)
	})
	t.Run("write-back", func(t *testing.T) {
		reqID := cache.Slot{Name: "req", Pattern: regexp.MustCompile(`req-[0-9a-f]{6}`), Free: true}
		c := newCache(t, cache.Config[string, string]{Template: cache.TemplateConfig[string]{Slots: []cache.Slot{reqID}}})
		ctx := endsAfter(1)
		c.Put(ctx, "[req-00aa11] Summarise the refund policy for order 1234", "refunds within 30 days")
		assert.Greater(t, ctx.calls.Load(), int32(1), "the write-back checks the context while matching")
		assert.Equal(t, uint64(1), c.Stats().TemplateCut)
		_, _, ok := c.Get(bg, query)
		assert.False(t, ok, "a write-back cut by its deadline is cached without its template")
		out, hit, ok := c.Get(bg, "[req-00aa11] summarise the refund policy for order 1234")
		require.True(t, ok, "the answer is cached for its own prompt")
		assert.Equal(t, cache.HitExact, hit)
		assert.Equal(t, "refunds within 30 days", out)
	})
}

// A prompt longer than Template.MaxPrompt is not searched for variable
// parts, on lookups and writes, and is counted; it is still cached and
// served exactly. Its values unknown, it is neither embedded nor matched
// by meaning, unless Semantic.KeepVariables says values do not matter.
func TestLongPromptsSkipTheTemplateLayer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		long := func(order int) string { return fmt.Sprintf("%-60s order %d", "please tell me the status of", order) }
		require.Len(t, long(1234), 71)
		emb := newFixed(map[string][]float32{long(1234): axis(0, 4), long(5678): axis(0, 4), "order 1": axis(1, 4)})
		for _, keep := range []bool{false, true} {
			emb.calls.Store(0)
			c := newCache(t, cache.Config[string, string]{
				Template: cache.TemplateConfig[string]{MaxPrompt: 70},
				Semantic: cache.SemanticConfig{Embedder: emb, KeepVariables: keep},
			})
			c.Put(bg, "order 1", "a") // a template entry, and a vector, in the scope
			c.Put(bg, long(1234), "shipped")
			synctest.Wait()
			assert.Equal(t, uint64(1), c.Stats().TemplateTooLong)

			out, hit, ok := c.Get(bg, long(1234))
			require.True(t, ok)
			assert.Equal(t, cache.HitExact, hit)
			assert.Equal(t, "shipped", out)

			out, hit, ok = c.Get(bg, long(5678))
			assert.Equal(t, uint64(2), c.Stats().TemplateTooLong)
			if !keep {
				assert.False(t, ok, "values unknown: no semantic match for a long prompt")
				assert.Equal(t, int64(1), emb.calls.Load(), "only the short prompt was embedded")
				continue
			}
			require.True(t, ok, "KeepVariables: the semantic layer needs no values")
			assert.Equal(t, cache.HitSemantic, hit)
			assert.Equal(t, "shipped", out)
			assert.Equal(t, int64(3), emb.calls.Load())
		}

		c := newCache(t, cache.Config[string, string]{Template: cache.TemplateConfig[string]{MaxPrompt: 71, Refill: cache.SubstituteVars}})
		c.Put(bg, long(1234), "order 1234 shipped")
		out, hit, ok := c.Get(bg, long(5678))
		require.True(t, ok, "a prompt of MaxPrompt bytes is searched")
		assert.Equal(t, cache.HitTemplate, hit)
		assert.Equal(t, "order 5678 shipped", out)
		assert.Zero(t, c.Stats().TemplateTooLong)
	})
}
