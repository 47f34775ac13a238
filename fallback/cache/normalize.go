package cache

import (
	"slices"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// NormalizeText is the default exact-match normaliser: it trims the text,
// collapses every run of white space to one space and lower-cases it, so
// that "What is  RAG?\n" and "what is rag?" share an entry. A byte that is
// not part of valid UTF-8 becomes U+FFFD, one per byte, as encoding/json
// writes it in the request to the model: prompts the model is sent alike
// share an entry, whatever their case. Its cost is linear in the text,
// about a nanosecond per byte of ASCII.
func NormalizeText(s string) string {
	if isNormal(s) {
		return s
	}
	b := appendNormal(make([]byte, 0, len(s)), s)
	// b is not kept: the string may own it, as strings.Builder's does.
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// Byte classes of the normaliser.
const (
	bKept    = iota // an ASCII byte that stays as it is
	bSpace          // ' '
	bChanged        // other ASCII white space, or an upper-case letter
	bMulti          // the first byte of a rune of more than one byte
)

var byteClass = func() (t [256]uint8) {
	for c := range 256 {
		switch {
		case c >= utf8.RuneSelf:
			t[c] = bMulti
		case c == ' ':
			t[c] = bSpace
		case c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || ('A' <= c && c <= 'Z'):
			t[c] = bChanged
		}
	}
	return t
}()

// isNormal reports whether NormalizeText would return s unchanged, without
// allocating: most prompts that reach a cache twice were built by code.
func isNormal(s string) bool {
	prevSpace := true // no leading space
	for i := 0; i < len(s); {
		if byteClass[s[i]] == bKept {
			i = keptRun(s, i)
			prevSpace = false
			continue
		}
		switch byteClass[s[i]] {
		case bSpace:
			if prevSpace {
				return false
			}
			prevSpace = true
			i++
		case bMulti:
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 || unicode.IsSpace(r) || unicode.ToLower(r) != r {
				// A byte that is not UTF-8 becomes U+FFFD.
				return false
			}
			prevSpace = false
			i += n
		default:
			return false
		}
	}
	return s == "" || !prevSpace
}

// keptRun returns the end of the run of s that starts at i with a byte
// kept: bytes kept, and single spaces between them.
func keptRun(s string, i int) int {
	for i++; i < len(s); {
		switch byteClass[s[i]] {
		case bKept:
			i++
		case bSpace:
			if i+1 == len(s) || byteClass[s[i+1]] != bKept {
				return i
			}
			i += 2
		default:
			return i
		}
	}
	return i
}

// appendNormal appends NormalizeText(s) to dst: runs of bytes that stay
// (see keptRun) are copied whole.
func appendNormal(dst []byte, s string) []byte {
	dst = slices.Grow(dst, len(s))
	start := len(dst)
	gap := false // a space is due before the next byte bKept
	for i := 0; i < len(s); {
		c := s[i]
		cls := byteClass[c]
		if cls == bSpace || (cls == bChanged && c < 'A') {
			i++
			gap = len(dst) > start
			continue
		}
		if cls == bMulti {
			if r, n := utf8.DecodeRuneInString(s[i:]); unicode.IsSpace(r) {
				i += n
				gap = len(dst) > start
				continue
			}
		}
		if gap {
			dst = append(dst, ' ')
			gap = false
		}
		switch cls {
		case bKept:
			j := keptRun(s, i)
			dst = append(dst, s[i:j]...)
			i = j
		case bChanged: // an upper-case letter
			dst = append(dst, c+'a'-'A')
			i++
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			dst = utf8.AppendRune(dst, unicode.ToLower(r))
			i += n
		}
	}
	return dst
}
