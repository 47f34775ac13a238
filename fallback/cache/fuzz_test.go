package cache_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback/cache"
)

// FuzzPutThenGet writes one answer for prompt p and asks for q, both
// hostile: nothing panics, p finds its own answer as an exact hit, a q the
// normaliser makes p finds it too, and whatever q finds is that one answer
// (the cache holds no other), exactly only when q normalises to p.
func FuzzPutThenGet(f *testing.F) {
	for _, s := range [][2]string{
		{"What is RAG?", "what is  rag?"},
		{"order 12345 status", "order 67890 status"},
		{"mail me at a@example.com", "mail me at b@example.com"},
		{"on 2026-12-03 at 10:00", "on 2026-12-04 at 11:30"},
		{"A\xff", "a\xfe"},
		{"", " "},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, p, q string) {
		c, err := cache.New(cache.Config[string, string]{Prompt: func(in string) string { return in }})
		require.NoError(t, err)
		defer func() { require.NoError(t, c.Close()) }()
		const answer = "the one answer"
		c.Put(bg, p, answer)

		out, hit, ok := c.Get(bg, p)
		require.True(t, ok, "%q finds its own answer", p)
		assert.Equal(t, answer, out)
		assert.Equal(t, cache.HitExact, hit)

		same := cache.NormalizeText(q) == cache.NormalizeText(p)
		out, hit, ok = c.Get(bg, q)
		if same {
			require.True(t, ok, "%q normalises to %q", q, p)
			assert.Equal(t, cache.HitExact, hit)
		}
		if ok {
			assert.Equal(t, answer, out, "%q", q)
			assert.Equal(t, same, hit == cache.HitExact, "%q against %q: %s", q, p, hit)
		}
	})
}

// FuzzSubstituteVars: whatever the values, SubstituteVars refuses with an
// empty answer, keeps the answer when no value differs, and otherwise
// replaces only stored values that are not empty: the answer grows by no
// more than the query's values could, so an empty stored value cannot
// spread the query's value through the answer.
func FuzzSubstituteVars(f *testing.F) {
	f.Add("order 12 ships monday", "12", "34", "monday", "friday")
	f.Add("abc", "", "X", "b", "b")
	f.Add("aaaa", "a", "aa", "aa", "a")
	f.Fuzz(func(t *testing.T, out, s1, q1, s2, q2 string) {
		stored := []cache.Var{{Slot: "a", Value: s1}, {Slot: "b", Value: s2}}
		query := []cache.Var{{Slot: "a", Value: q1}, {Slot: "b", Value: q2}}
		got, ok := cache.SubstituteVars(bg, out, stored, query)
		if !ok {
			assert.Empty(t, got)
			return
		}
		if s1 == q1 && s2 == q2 {
			assert.Equal(t, out, got, "nothing differs")
			return
		}
		for _, v := range []struct{ s, q string }{{s1, q1}, {s2, q2}} {
			if v.s != v.q {
				assert.NotEmpty(t, v.s, "an empty stored value that differs is refused")
			}
		}
		// Each replaced value took at least one byte of the answer.
		grow := max(len(q1), len(q2), 1)
		assert.LessOrEqual(t, len(got), len(out)*grow, "%q → %q", out, got)
	})
}
