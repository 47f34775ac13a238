package cache

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// NormalizeText is the default exact-match normaliser: it trims the text,
// collapses every run of white space to one space and lower-cases it, so
// that "What is  RAG?\n" and "what is rag?" share an entry.
func NormalizeText(s string) string {
	if isNormal(s) {
		return s
	}
	return string(appendNormal(make([]byte, 0, len(s)), s))
}

// isNormal reports whether NormalizeText would return s unchanged, without
// allocating: most prompts that reach a cache twice were built by code.
func isNormal(s string) bool {
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

func appendNormal(dst []byte, s string) []byte {
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
