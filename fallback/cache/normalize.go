package cache

import (
	"context"
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
	ok, prevSpace := normalPart(s, true) // no leading space
	return ok && (s == "" || !prevSpace)
}

// normalPart reports whether s, a part of a text cut at a rune boundary,
// is as NormalizeText leaves it, given whether the text before it ended
// with a space (or is empty: no leading space), and whether s does.
func normalPart(s string, prevSpace bool) (ok, endsInSpace bool) {
	for i := 0; i < len(s); {
		if byteClass[s[i]] == bKept {
			i = keptRun(s, i)
			prevSpace = false
			continue
		}
		switch byteClass[s[i]] {
		case bSpace:
			if prevSpace {
				return false, true
			}
			prevSpace = true
			i++
		case bMulti:
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 || unicode.IsSpace(r) || unicode.ToLower(r) != r {
				// A byte that is not UTF-8 becomes U+FFFD.
				return false, prevSpace
			}
			prevSpace = false
			i += n
		default:
			return false, prevSpace
		}
	}
	return true, prevSpace
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
	dst, _ = appendNormalPart(dst, s, len(dst), false)
	return dst
}

// appendNormalPart is appendNormal of a part of a text cut at a rune
// boundary, whose normal form starts at dst[start:]: gap says a space is
// due before the next byte that stays, and is what the part leaves due.
func appendNormalPart(dst []byte, s string, start int, gap bool) ([]byte, bool) {
	dst = slices.Grow(dst, len(s))
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
	return dst, gap
}

// stride is the most bytes of a prompt the cache's work on it reads
// between two checks of the request's context (normalising, hashing,
// building a template's key), and the window the template layer's
// patterns scan at a time: past the deadline, a request is held for one
// stride of work, not for the rest of its prompt.
const stride = 16 << 10

// strideEnd is where the stride of s that starts at off ends: at len(s),
// or at a rune boundary — a rune that is cut short decodes as one U+FFFD
// per byte, so a cut inside a rune would change the text. A byte that
// starts a rune is a boundary; three continuation bytes before the cut
// make it one too, since no rune is longer than four bytes.
func strideEnd(s string, off int) int {
	end := off + stride
	if end >= len(s) {
		return len(s)
	}
	for back := end; back > end-utf8.UTFMax; back-- {
		if utf8.RuneStart(s[back]) {
			return back
		}
	}
	return end
}

// normalizeWithin is NormalizeText(s) in strides, checking ctx between
// them: ok is false when ctx ended first, and then nothing is returned.
func normalizeWithin(ctx context.Context, s string) (string, bool) {
	ok, prevSpace := true, true
	for off := 0; ok && off < len(s); {
		end := strideEnd(s, off)
		ok, prevSpace = normalPart(s[off:end], prevSpace)
		if off = end; off < len(s) && ctx.Err() != nil {
			return "", false
		}
	}
	if ok && (s == "" || !prevSpace) {
		return s, true
	}
	b, gap := make([]byte, 0, len(s)), false
	for off := 0; off < len(s); {
		end := strideEnd(s, off)
		b, gap = appendNormalPart(b, s[off:end], 0, gap)
		if off = end; off < len(s) && ctx.Err() != nil {
			return "", false
		}
	}
	// b is not kept: the string may own it, as strings.Builder's does.
	return unsafe.String(unsafe.SliceData(b), len(b)), true
}
