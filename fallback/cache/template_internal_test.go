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
