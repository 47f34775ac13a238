package cache_test

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/cache"
	"github.com/tierguard/tierguard/retry"
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

// longPrompt is a prompt of about n bytes that every built-in slot
// matches all along, in upper and lower case, so that the write-back
// rewrites it as it normalises it.
func longPrompt(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "Ship ORDER %d on 2024-05-%02d to \"Main St\", see https://example.org/a?b=%d\n", i, i%28+1, i)
	}
	return b.String()
}

// A write-back of a long prompt (MaxPrompt raised: 256 KiB) checks its
// context every 16 KiB stride of its work — normalising, each slot's
// scan, the template's key, hashing — and the check after the context
// ends stops it, wherever it is: the request is held past its deadline
// for one stride of work. Cut while matching templates, the answer is
// cached for its prompt alone; cut before its key is made, it is not
// cached. The context used to be checked once per slot: a write held its
// request for a slot's whole scan of the prompt past the deadline.
func TestWriteBackStopsWithinAStride(t *testing.T) {
	prompt := longPrompt(256 << 10)
	newLong := func() *cache.Cache[string, string] {
		return newCache(t, cache.Config[string, string]{MaxBytes: 1 << 30, Template: cache.TemplateConfig[string]{MaxPrompt: 2 << 20}})
	}
	c := newLong()
	all := endsAfter(math.MaxInt32)
	c.Put(all, prompt, "shipped")
	checks := all.calls.Load()
	strides := int32(len(prompt) / (16 << 10))
	assert.GreaterOrEqual(t, checks, int32(len(cache.Builtins()))*strides, "a check every stride of every slot's scan")
	assert.Zero(t, c.Stats().TemplateCut+c.Stats().WritesCut)
	_, hit, ok := c.Get(bg, strings.ToLower(prompt))
	require.True(t, ok)
	assert.Equal(t, cache.HitExact, hit)

	for _, live := range []int32{0, 1, strides, checks / 2, checks - 1} {
		c := newLong()
		ctx := endsAfter(live)
		c.Put(ctx, prompt, "shipped")
		assert.Equal(t, live+1, ctx.calls.Load(), "ended after %d checks: the next one stops the write", live)
		st := c.Stats()
		t.Logf("ended after %d checks: TemplateCut %d, WritesCut %d", live, st.TemplateCut, st.WritesCut)
		assert.Equal(t, uint64(1), st.TemplateCut+st.WritesCut, "ended after %d checks", live)
		_, _, cached := c.Get(bg, prompt)
		assert.Equal(t, st.TemplateCut == 1, cached, "ended after %d checks: cached without its template, or not at all", live)
	}
}

// The request's deadline passes while its answer is being written — here
// while the cache asks for the request's scope, on the bubble's clock: a
// 1 MiB prompt's answer is not cached (the write stops at its first
// stride), a short prompt's is, without its template.
func TestWriteBackKeepsToTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slowScope := func(context.Context, string) cache.Scope {
			time.Sleep(2 * time.Millisecond)
			return cache.Scope{}
		}
		c := newCache(t, cache.Config[string, string]{Scope: slowScope, MaxBytes: 1 << 30, Template: cache.TemplateConfig[string]{MaxPrompt: 2 << 20}})
		ctx, cancel := context.WithTimeout(bg, time.Millisecond)
		defer cancel()
		c.Put(ctx, longPrompt(1<<20), "shipped")
		c.Put(ctx, "where is order 1234?", "on its way")
		st := c.Stats()
		assert.Equal(t, uint64(1), st.WritesCut, "the long prompt")
		assert.Equal(t, uint64(1), st.TemplateCut, "the short prompt")
		assert.Equal(t, 1, st.Entries)
		_, hit, ok := c.Get(bg, "where is order 1234?")
		require.True(t, ok)
		assert.Equal(t, cache.HitExact, hit)
	})
}

// Through a chain: the write-back's context ends with the chain's own
// Total (no deadline of the caller's), so a long prompt whose answer came
// late is not cached past the budget — the write stops at its first
// stride once the Total has passed — and a short one's answer is.
func TestWriteBackKeepsToTheChainsTotal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var deadline time.Time
		scope := func(ctx context.Context, _ string) cache.Scope {
			deadline, _ = ctx.Deadline()
			// The write-back's own work, before it reads the prompt.
			time.Sleep(10 * time.Millisecond)
			return cache.Scope{}
		}
		c := newCache(t, cache.Config[string, string]{Scope: scope, MaxBytes: 1 << 30, Template: cache.TemplateConfig[string]{MaxPrompt: 2 << 20}})
		pro := fallback.Tier("pro", func(context.Context, string) (string, error) {
			time.Sleep(195 * time.Millisecond)
			return "answer", nil
		})
		chain, err := fallback.New(fallback.Config[string, string]{Total: 200 * time.Millisecond, Cache: c,
			Stages: []fallback.Stage[string, string]{{Tier: pro, Retry: retry.Policy{MaxAttempts: 1}}}})
		require.NoError(t, err)
		start := time.Now()
		_, err = chain.Do(bg, longPrompt(256<<10))
		require.NoError(t, err)
		assert.Equal(t, start.Add(200*time.Millisecond), deadline, "the chain's Total reaches the write-back")
		assert.Equal(t, uint64(1), c.Stats().WritesCut, "past the Total: not cached")
		assert.Zero(t, c.Stats().Entries)

		_, err = chain.Do(bg, "where is order 1234?")
		require.NoError(t, err)
		assert.Equal(t, 1, c.Stats().Entries, "a short prompt is cached, without its template")
		assert.Equal(t, uint64(1), c.Stats().TemplateCut)
	})
}
