package cache

import (
	"context"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// quadraticSpans is the overlap rule as it was first written — each match
// checked against every span taken before — the reference for extract's
// merge.
func quadraticSpans(prompt string, slots []Slot) []span {
	var spans []span
	for i, s := range slots {
		for _, m := range s.Pattern.FindAllStringIndex(prompt, -1) {
			overlap := false
			for _, sp := range spans {
				overlap = overlap || (m[0] < sp.end && sp.start < m[1])
			}
			if m[0] == m[1] || overlap {
				continue
			}
			spans = append(spans, span{m[0], m[1], i})
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	return spans
}

// extract finds the spans the quadratic rule finds, on prompts where the
// slots' matches overlap in every way: earlier slots win, zero-width
// matches are dropped.
func TestExtractMatchesTheQuadraticRule(t *testing.T) {
	slots := append([]Slot{
		{Name: "order", Pattern: regexp.MustCompile(`order \d+`)},
		{Name: "maybe", Pattern: regexp.MustCompile(`x*`)},
		{Name: "pair", Pattern: regexp.MustCompile(`\d+ \d+`), Free: true},
	}, builtins...)
	parts := []string{"order ", "12", "3", " ", "x", "SKU-", "7a", "2024-05-01", `"q q"`, "https://e.org/a", "#9", "{", "}", ", ", "1,250.50", "May 3, 2024", "é"}
	r := rand.New(rand.NewPCG(5, 6))
	for range 3000 {
		var b strings.Builder
		for range r.IntN(20) {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		prompt := b.String()
		want := quadraticSpans(prompt, slots)
		got, how := extract(context.Background(), prompt, slots, normalizeWithin, len(prompt))
		if len(want) == 0 {
			require.Equal(t, constant, how, "%q", prompt)
			continue
		}
		require.Equal(t, extracted, how, "%q", prompt)
		vars := make([]Var, len(want))
		for i, sp := range want {
			vars[i] = Var{Slot: slots[sp.slot].Name, Value: prompt[sp.start:sp.end]}
		}
		if !assert.Equal(t, vars, got.vars, "%q", prompt) {
			return
		}
	}
}

// withoutPrefilter is slots with every pattern run on every prompt.
func withoutPrefilter(slots []Slot) []Slot {
	out := slices.Clone(slots)
	for i := range out {
		out[i].needs = 0
	}
	return out
}

// prefilterPrompts are prompts at the edge of each built-in slot's
// prefilter: a UUID of hex letters alone (no digit), typographic quotes,
// URLs, dates written out, and prompts with no variable part.
var prefilterPrompts = []string{
	"Why is the sky blue?",
	"what about abcdefab-abcd-abcd-abcd-abcdefabcdef then",
	"ABCDEFAB-ABCD-ABCD-ABCD-ABCDEFABCDEF",
	"see https://example.com/a?b=c and http://x.y",
	"see https:/nope and ://alone",
	"he said “hello there” and 「こんにちは」 and 『本』 and \"quoted\"",
	"an em dash — and an ellipsis … with no quote",
	"on 2026-12-06T03:04:05Z or 12/6/26 or 2026年12月6日 or Dec 6th, 2026 or 6 dec 2026",
	"order #42, SKU-1234, A12B, order_77, 1,234.56 and -7",
	"well-known, state-of-the-art: no digits here",
	"",
	"-",
	"\xe2\x80",
	"\xe3",
}

// The built-in slots' prefilter skips only scans that would find nothing:
// extract finds the same template with it as without, on prompts at its
// edges and on random ones.
func TestPrefilterChangesNoTemplate(t *testing.T) {
	ctx := context.Background()
	norm := func(_ context.Context, s string) (string, bool) { return NormalizeText(s), true }
	slots := append([]Slot{{Name: "mine", Pattern: regexp.MustCompile(`zz+`)}}, builtins...)
	plain := withoutPrefilter(slots)
	check := func(prompt string) {
		got, gotHow := extract(ctx, prompt, slots, norm, 1<<20)
		want, wantHow := extract(ctx, prompt, plain, norm, 1<<20)
		require.Equal(t, wantHow, gotHow, "%q", prompt)
		require.Equal(t, want, got, "%q", prompt)
	}
	for _, p := range prefilterPrompts {
		check(p)
	}
	alphabet := []string{"a", "f", "Z", "0", "7", "-", "_", ":", "/", "http", "://", "\"", "“", "”", "「", "」", "『", "』", " ", "\n", "#", ",", ".", "é", "dec", "年", "zz"}
	rng := rand.New(rand.NewPCG(47, 1))
	for range 5000 {
		var b strings.Builder
		for range rng.IntN(40) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		check(b.String())
	}
}

// A prompt with none of the bytes the built-in slots need is scanned by
// no built-in pattern: its template is constant without a regexp run.
func TestPromptWithoutVariableBytesSkipsEveryBuiltin(t *testing.T) {
	assert.Equal(t, byteKinds(0), promptBytes("Why is the sky blue?"))
	assert.Equal(t, hasDigit|hasHyphen|hasColon|hasQuote, promptBytes(`a-1: "b"`))
	for _, s := range builtins {
		assert.NotZero(t, s.needs, s.Name)
	}
	allocs := testing.AllocsPerRun(100, func() {
		_, how := extract(context.Background(), "Why is the sky blue?", builtins, func(_ context.Context, s string) (string, bool) { return s, true }, 1<<20)
		if how != constant {
			t.Fatal(how)
		}
	})
	assert.Zero(t, allocs)
}
