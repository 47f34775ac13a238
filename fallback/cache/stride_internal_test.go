package cache

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingCtx counts the checks of its Err, and ends (DeadlineExceeded)
// at the check after the first live ones: the work that checks it ends
// it, after a number of strides it chooses.
type countingCtx struct {
	context.Context
	live   int64
	checks atomic.Int64
}

func (c *countingCtx) Err() error {
	if c.checks.Add(1) > c.live {
		return context.DeadlineExceeded
	}
	return nil
}

// longText is a text of about n bytes made of parts, so that strides and
// windows fall inside runes, runs of spaces, upper case and invalid UTF-8
// as often as between them.
func longText(r *rand.Rand, n int) string {
	parts := []string{"a", "b ", "  ", " ", "X", "é", "É", "\u3000", "\n", "\t", "\xff", "\xe2\x82", "\x9c\xac", "\x80", "日本", "{", "}", "order 12", "3 ", "𝔘"}
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(parts[r.IntN(len(parts))])
	}
	return b.String()
}

// normalizeWithin, a stride at a time, is NormalizeText: the strides are
// cut at rune boundaries and carry the state of the white space between
// them.
func TestNormalizeWithinIsNormalizeText(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	bg := context.Background()
	for i := range 60 {
		s := longText(r, stride*(1+i%3)+r.IntN(stride))
		got, ok := normalizeWithin(bg, s)
		require.True(t, ok)
		require.Equal(t, NormalizeText(s), got, "text %d", i)
		got, ok = normalizeWithin(bg, got)
		require.True(t, ok)
		require.Equal(t, NormalizeText(s), got, "text %d, normal already", i)
	}
	// Continuation bytes across the cut, with no rune start near it.
	s := strings.Repeat("a", stride-2) + strings.Repeat("\x80", 8) + " B"
	got, _ := normalizeWithin(bg, s)
	assert.Equal(t, NormalizeText(s), got)
}

// strideEnd cuts at most a stride on, at a byte where the text decodes
// the same cut as whole.
func TestStrideEndCutsBetweenRunes(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for range 40 {
		s := longText(r, 2*stride+r.IntN(stride))
		var whole []rune
		for _, c := range s {
			whole = append(whole, c)
		}
		var cut []rune
		for off := 0; off < len(s); {
			end := strideEnd(s, off)
			require.Greater(t, end, off)
			require.LessOrEqual(t, end-off, stride)
			for _, c := range s[off:end] {
				cut = append(cut, c)
			}
			off = end
		}
		require.Equal(t, whole, cut)
	}
}

// A long prompt whose lines are shorter than a quarter stride is cut into
// windows at line breaks, which no built-in slot's value spans: its
// template is the one a scan of the whole prompt finds.
func TestExtractOfALongPromptMatchesTheWholeScan(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	parts := []string{"order ", "12", "3", " ", "SKU-", "7a", "2024-05-01", `"q q"`, "https://e.org/a", "#9", "{", "}", ", ", "1,250.50", "May 3, 2024", "é"}
	for range 3 {
		var b strings.Builder
		for b.Len() < 2*stride+stride/2 {
			for range 1 + r.IntN(20) {
				b.WriteString(parts[r.IntN(len(parts))])
			}
			b.WriteByte('\n')
		}
		prompt := b.String()
		want := quadraticSpans(prompt, builtins)
		got, how := extract(context.Background(), prompt, builtins, normalizeWithin, len(prompt))
		require.Equal(t, extracted, how)
		require.Len(t, got.vars, len(want))
		for i, sp := range want {
			require.Equal(t, Var{Slot: builtins[sp.slot].Name, Value: prompt[sp.start:sp.end]}, got.vars[i])
		}
	}
}

// A long prompt costs extract a check of its context every window of every
// slot's scan, every stride of the key it builds and of the key's
// normalisation — and once the context ends, the next check stops it:
// the work done past the deadline is at most one stride.
func TestExtractChecksItsContextEveryStride(t *testing.T) {
	var b strings.Builder
	for b.Len() < 8*stride {
		b.WriteString("Ship order 1234 on 2024-05-01 to \"Main St\", see https://example.org/a?b=1\n")
	}
	prompt := b.String()
	windows := 0
	for off := 0; off < len(prompt); off = windowEnd(prompt, off) {
		require.LessOrEqual(t, windowEnd(prompt, off)-off, stride)
		windows++
	}
	all := &countingCtx{Context: context.Background(), live: 1 << 62}
	_, how := extract(all, prompt, builtins, normalizeWithin, len(prompt))
	require.Equal(t, extracted, how)
	checks := all.checks.Load()
	assert.GreaterOrEqual(t, checks, int64(len(builtins)*windows), "a check per window of every slot's scan")
	t.Logf("%d checks over %d bytes, %d windows a slot", checks, len(prompt), windows)
	for _, live := range []int64{0, 1, int64(windows), checks / 2, checks - 1} {
		ctx := &countingCtx{Context: context.Background(), live: live}
		_, how := extract(ctx, prompt, builtins, normalizeWithin, len(prompt))
		assert.Equal(t, cut, how, "ended after %d checks", live)
		assert.Equal(t, live+1, ctx.checks.Load(), "the check after the end stops the work")
	}
}

// In a text of three-byte runes, every stride ends inside a rune: it
// backs off to the rune's start.
func TestStrideEndBacksOffToTheRunesStart(t *testing.T) {
	s := strings.Repeat("€", stride) // three bytes each
	for off := 0; off < len(s); {
		end := strideEnd(s, off)
		require.True(t, end == len(s) || utf8.RuneStart(s[end]))
		require.Zero(t, end%3)
		off = end
	}
}

// FuzzNormalizeWithin: a text repeated past a few strides is normalised a
// stride at a time as NormalizeText normalises it whole, wherever the
// strides fall in it.
func FuzzNormalizeWithin(f *testing.F) {
	for _, s := range []string{"a", " B ", "\xe2\x82", "é  É\u3000x", "\xff\x80\x80\x80", "日本 語\n"} {
		f.Add(s, uint16(0))
	}
	f.Fuzz(func(t *testing.T, s string, shift uint16) {
		if s == "" {
			return
		}
		long := strings.Repeat("a", int(shift)%stride) + strings.Repeat(s, 2*stride/len(s)+1)
		got, ok := normalizeWithin(context.Background(), long)
		require.True(t, ok)
		require.Equal(t, NormalizeText(long), got)
	})
}
