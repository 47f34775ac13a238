package modelid

import "strings"

// segment is the resource path segment before a model's id.
const segment = "models/"

// Normalize returns id in its normal form (see the package documentation
// for the rule). An id already in normal form is returned as is, without
// allocating.
func Normalize(id string) string {
	if normal(id) {
		return id
	}
	s := strings.ToLower(id)
	for {
		t := cut(strings.TrimSpace(s))
		if t == s {
			return s
		}
		s = t
	}
}

// cut returns what follows the last "models/" segment of s, or s.
func cut(s string) string {
	for end := len(s); end > 0; {
		i := strings.LastIndex(s[:end], segment)
		if i < 0 {
			break
		}
		if i == 0 || s[i-1] == '/' {
			return s[i+len(segment):]
		}
		end = i
	}
	return s
}

// normal reports, cheaply, that Normalize would return id unchanged: it
// is ASCII without upper-case letters, neither starts nor ends with white
// space and holds no "models/".
func normal(id string) bool {
	if id == "" {
		return true
	}
	if space(id[0]) || space(id[len(id)-1]) {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c >= 0x80 || ('A' <= c && c <= 'Z') {
			return false
		}
	}
	return !strings.Contains(id, segment)
}

// space reports the ASCII white space strings.TrimSpace removes.
func space(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\v', '\f', '\r':
		return true
	}
	return false
}
