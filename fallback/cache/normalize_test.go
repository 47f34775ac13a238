package cache_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"github.com/tierguard/tierguard/fallback/cache"
)

// The normaliser as it was before its ASCII fast path: the reference.

func oldNormalizeText(s string) string {
	if oldIsNormal(s) {
		return s
	}
	return string(oldAppendNormal(make([]byte, 0, len(s)), s))
}

// isNormal reports whether NormalizeText would return s unchanged, without
// allocating: most prompts that reach a cache twice were built by code.
func oldIsNormal(s string) bool {
	if s == "" {
		return true
	}
	prevSpace := true // no leading space
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == ' ':
				if prevSpace {
					return false
				}
				prevSpace = true
			case c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || ('A' <= c && c <= 'Z'):
				return false
			default:
				prevSpace = false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if unicode.IsSpace(r) || unicode.ToLower(r) != r {
			return false
		}
		prevSpace = false
		i += n
	}
	return !prevSpace
}

func oldAppendNormal(dst []byte, s string) []byte {
	first := true
	for f := range strings.FieldsFuncSeq(s, unicode.IsSpace) {
		if !first {
			dst = append(dst, ' ')
		}
		first = false
		for _, r := range f {
			dst = utf8.AppendRune(dst, unicode.ToLower(r))
		}
	}
	return dst
}

// NormalizeText agrees with its reference (the normaliser as it was) on random mixes of ASCII,
// upper case, every kind of white space, multi-byte runes and invalid
// bytes.
func TestNormalizeTextAgreesWithItsReference(t *testing.T) {
	parts := []string{"a", "b", "Z", "Q", "0", "?", " ", "  ", "\t", "\n", "\r\n", "\v", "\f", "\u00a0", "\u0085", "\u3000", "\u2028",
		"é", "É", "Σ", "ß", "İ", "日本", "\xff", "\xe2\x82", "{", "}", "\x00"}
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		s := b.String()
		got := cache.NormalizeText(s)
		if !assert.Equal(t, oldNormalizeText(s), got, "%q", s) {
			return
		}
		assert.Equal(t, got, cache.NormalizeText(got), "idempotent: %q", s)
	}
}
