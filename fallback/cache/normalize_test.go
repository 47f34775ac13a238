package cache_test

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback/cache"
)

// specNormalize is NormalizeText as its doc states it, written the plain
// way: each byte that is not UTF-8 becomes U+FFFD, every rune is
// lower-cased, runs of white space collapse to one space and the ends are
// trimmed.
func specNormalize(s string) string {
	runes := make([]rune, 0, len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:]) // utf8.RuneError, 1 for a byte that is not UTF-8
		runes = append(runes, unicode.ToLower(r))
		i += n
	}
	return strings.Join(strings.FieldsFunc(string(runes), unicode.IsSpace), " ")
}

// sentAs is the prompt as a JSON request carries it to the model:
// encoding/json replaces each byte that is not UTF-8 with U+FFFD.
func sentAs(t testing.TB, s string) string {
	b, err := json.Marshal(s)
	require.NoError(t, err)
	var sent string
	require.NoError(t, json.Unmarshal(b, &sent))
	return sent
}

// checkNormal holds NormalizeText(s) to its spec, and to what the model is
// sent: two prompts a JSON request carries alike share an entry.
func checkNormal(t testing.TB, s string) bool {
	got := cache.NormalizeText(s)
	return assert.Equal(t, specNormalize(s), got, "%q", s) &&
		assert.True(t, utf8.ValidString(got), "valid UTF-8: %q", s) &&
		assert.Equal(t, got, cache.NormalizeText(got), "idempotent: %q", s) &&
		assert.Equal(t, got, cache.NormalizeText(sentAs(t, s)), "the prompt as the model is sent it: %q", s)
}

// NormalizeText agrees with its spec on random mixes of ASCII, upper case,
// every kind of white space, multi-byte runes and bytes that are not
// UTF-8, alone and cut short.
func TestNormalizeTextAgreesWithItsSpec(t *testing.T) {
	parts := []string{"a", "b", "Z", "Q", "0", "?", " ", "  ", "\t", "\n", "\r\n", "\v", "\f", "\u00a0", "\u0085", "\u3000", "\u2028",
		"é", "É", "Σ", "ß", "İ", "日本", "\xff", "\xe2\x82", "\x82", "\ufffd", "{", "}", "\x00"}
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		if !checkNormal(t, b.String()) {
			return
		}
	}
}

// Prompts that differ only in case share an entry when they hold bytes
// that are not UTF-8 too: the model is sent U+FFFD for each.
func TestBytesThatAreNotUTF8BecomeTheReplacementRune(t *testing.T) {
	for _, s := range []string{"a\xff", "A\xff", "a\xfe", "A\ufffd", " a\xff  "} {
		assert.Equal(t, "a\ufffd", cache.NormalizeText(s), "%q", s)
	}
	assert.Equal(t, "\ufffd\ufffd x", cache.NormalizeText("\xe2\x82 X"), "a rune cut short: one U+FFFD per byte, as encoding/json writes it")
}

func FuzzNormalizeText(f *testing.F) {
	for _, s := range []string{"", "What is  RAG?\n", "a\xff", "A\xff", "\xe2\x82", "İ", "\u00a0x\u2028", "ß\ufffd"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkNormal(t, s) })
}
