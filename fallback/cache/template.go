package cache

import (
	"context"
	"regexp"
	"slices"
	"strings"
)

// Slot is a kind of variable part of a prompt. The template layer replaces
// each match with the placeholder "{Name}" and keeps the matched text as
// the prompt's value for the slot.
type Slot struct {
	// Name names the placeholder: "sku" makes "{sku}".
	Name string
	// Pattern finds the slot's values in a prompt.
	Pattern *regexp.Regexp
	// Free is set when answers never depend on the slot's value (a request
	// id, a timestamp quoted in the prompt): two prompts that differ only
	// in free values share their answer.
	Free bool

	// needs, when set, are the bytes one of which every match of Pattern
	// holds (see promptBytes): a prompt with none of them is not scanned.
	// Only the built-in slots set it, from their patterns.
	needs byteKinds
}

// byteKinds is a set of kinds of bytes a prompt holds, each a necessary
// part of some built-in slot's matches: a prompt lacking every kind a
// slot needs cannot match it, and scanning it with the slot's pattern —
// most of what a write to the cache costs for a prompt with no variable
// parts — is skipped.
type byteKinds uint8

const (
	// hasDigit: an ASCII digit, which \d alone matches.
	hasDigit byteKinds = 1 << iota
	// hasHyphen: '-', in a UUID of hex letters alone.
	hasHyphen
	// hasColon: ':', in a URL's "://".
	hasColon
	// hasQuote: '"', or a lead byte of a three-byte UTF-8 sequence that
	// begins “ (0xE2) or 「 and 『 (0xE3).
	hasQuote
)

// promptBytes returns the kinds of bytes s holds.
func promptBytes(s string) byteKinds {
	var k byteKinds
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			k |= hasDigit
		case c == '-':
			k |= hasHyphen
		case c == ':':
			k |= hasColon
		case c == '"' || c == 0xE2 || c == 0xE3:
			k |= hasQuote
		}
	}
	return k
}

// Var is one variable part of a prompt: the slot that matched and the
// text it matched.
type Var struct {
	Slot  string
	Value string
}

var builtins = []Slot{
	{Name: "url", Pattern: regexp.MustCompile(`\bhttps?://[^\s"'<>()\[\]]+`), needs: hasColon},
	// Double and typographic quotes only: a single quote is an apostrophe
	// as often as not.
	{Name: "quoted", Pattern: regexp.MustCompile(`"[^"\n]{1,200}"|“[^”\n]{1,200}”|「[^」\n]{1,200}」|『[^』\n]{1,200}』`), needs: hasQuote},
	{Name: "date", Pattern: regexp.MustCompile(`(?i)\b\d{4}-\d{1,2}-\d{1,2}(?:[t ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:z|[+-]\d{2}:?\d{2})?)?\b` +
		`|\b\d{4}/\d{1,2}/\d{1,2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b|\d{4}年\d{1,2}月\d{1,2}日` +
		`|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.? \d{1,2}(?:st|nd|rd|th)?,? \d{4}\b` +
		`|\b\d{1,2} (?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.? \d{4}\b`), needs: hasDigit},
	// A UUID, a "#1234" reference, or a token that mixes letters and
	// digits (SKU-1234, A12B, order_77).
	{Name: "id", Pattern: regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b|#\d+\b` +
		`|\b(?:[a-z]+[-_]?\d|\d+[-_]?[a-z])[a-z\d]*(?:[-_][a-z\d]+)*\b`), needs: hasDigit | hasHyphen},
	{Name: "number", Pattern: regexp.MustCompile(`[-+]?\b\d{1,3}(?:,\d{3})+(?:\.\d+)?\b|[-+]?\b\d+(?:\.\d+)?\b`), needs: hasDigit},
}

// Builtins returns the built-in slots, in the order they are tried: url,
// quoted, date, id, number. None is Free.
func Builtins() []Slot { return slices.Clone(builtins) }

// template is a prompt with its variable parts replaced.
type template struct {
	key  string
	vars []Var
	// free marks the vars whose slot is Free.
	free []bool
}

type span struct {
	start, end, slot int
}

// extraction is how extract ended.
type extraction int

const (
	// extracted: the prompt has a template.
	extracted extraction = iota
	// constant: the prompt has no variable parts; its exact key serves.
	constant
	// tooLong: the prompt is longer than the template layer searches.
	tooLong
	// cut: the context ended first.
	cut
)

// extract finds the variable parts of prompt. The template's key is
// normalised with normalize; braces of the prompt's own are doubled so
// that no prompt text reads as a placeholder. A prompt longer than maxLen
// is not searched (tooLong), and the search stops when ctx ends (cut).
// It checks ctx before each slot, before each window a slot's pattern
// scans, and every stride of the key it builds, so that it outlasts ctx
// by at most one window's scan (a stride of the prompt) or one stride of
// the key; normalize is to check ctx as often.
//
// The cost is linear in the prompt: each slot's pattern scans it once
// (Go's regexp is linear), window by window, and its matches are checked
// against the spans taken so far, both sorted, in one merge. A prompt of
// at most a stride is one window: its matches are the pattern's matches
// in the whole prompt. A longer one is cut into windows of at most a
// stride (see windowEnd): a value that spans a cut is not matched whole.
// The cuts depend on the prompt alone, so a lookup and a write of the
// same prompt find the same template.
func extract(ctx context.Context, prompt string, slots []Slot, normalize func(context.Context, string) (string, bool), maxLen int) (template, extraction) {
	if len(prompt) > maxLen {
		return template{}, tooLong
	}
	var spans, added, merged []span
	var kinds byteKinds
	kindsRead := false
	for i, s := range slots {
		if ctx.Err() != nil {
			return template{}, cut
		}
		if s.needs != 0 {
			if !kindsRead {
				kinds, kindsRead = promptBytes(prompt), true
			}
			if kinds&s.needs == 0 {
				continue
			}
		}
		added = added[:0]
		j := 0
		for off := 0; off < len(prompt); {
			if off > 0 && ctx.Err() != nil {
				return template{}, cut
			}
			end := windowEnd(prompt, off)
			// A slot's matches come in order and never overlap each other.
			for _, m := range s.Pattern.FindAllStringIndex(prompt[off:end], -1) {
				start, stop := off+m[0], off+m[1]
				if start == stop {
					continue
				}
				for j < len(spans) && spans[j].end <= start {
					j++
				}
				if j < len(spans) && spans[j].start < stop {
					continue // an earlier slot's match wins the overlap
				}
				added = append(added, span{start, stop, i})
			}
			off = end
		}
		switch {
		case len(added) == 0:
		case len(spans) == 0:
			// The first slot that matched: its spans are the list. The
			// three buffers stay apart.
			spans, added, merged = added, merged[:0], spans[:0]
		default:
			merged = mergeSpans(merged[:0], spans, added)
			spans, merged = merged, spans
		}
	}
	if len(spans) == 0 {
		return template{}, constant
	}
	if ctx.Err() != nil {
		return template{}, cut
	}
	var b strings.Builder
	b.Grow(len(prompt))
	t := template{vars: make([]Var, len(spans)), free: make([]bool, len(spans))}
	// The key is built a stride of the prompt at a time, and ctx checked
	// each time the prompt read since the last check reaches a stride.
	last, due := 0, stride
	escape := func(upTo int) bool {
		for last < upTo {
			next := min(upTo, last+stride)
			writeEscaped(&b, prompt[last:next])
			last = next
			if last >= due {
				if ctx.Err() != nil {
					return false
				}
				due = last + stride
			}
		}
		return true
	}
	for i, sp := range spans {
		if !escape(sp.start) {
			return template{}, cut
		}
		b.WriteByte('{')
		b.WriteString(slots[sp.slot].Name)
		b.WriteByte('}')
		last = sp.end
		t.vars[i] = Var{Slot: slots[sp.slot].Name, Value: prompt[sp.start:sp.end]}
		t.free[i] = slots[sp.slot].Free
	}
	if !escape(len(prompt)) {
		return template{}, cut
	}
	key, ok := normalize(ctx, b.String())
	if !ok {
		return template{}, cut
	}
	t.key = key
	return t, extracted
}

// windowEnd is where the window of prompt that a slot's pattern scans
// from off ends: at most a stride on, right after the last line break in
// the stride's last quarter, or else its last space, or else at a rune
// boundary. No built-in slot's value spans a line break, and only a date
// spans a space.
func windowEnd(prompt string, off int) int {
	end := strideEnd(prompt, off)
	if end == len(prompt) {
		return end
	}
	from := end - stride/4
	tail := prompt[from:end]
	if i := strings.LastIndexByte(tail, '\n'); i >= 0 {
		return from + i + 1
	}
	if i := strings.LastIndexByte(tail, ' '); i >= 0 {
		return from + i + 1
	}
	return end
}

// mergeSpans appends to dst the spans of a and b, two lists sorted by
// start whose spans do not overlap, in order of start.
func mergeSpans(dst, a, b []span) []span {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if a[i].start < b[j].start {
			dst = append(dst, a[i])
			i++
		} else {
			dst = append(dst, b[j])
			j++
		}
	}
	dst = append(dst, a[i:]...)
	return append(dst, b[j:]...)
}

func writeEscaped(b *strings.Builder, s string) {
	for {
		i := strings.IndexAny(s, "{}")
		if i < 0 {
			b.WriteString(s)
			return
		}
		b.WriteString(s[:i+1])
		b.WriteByte(s[i])
		s = s[i+1:]
	}
}

// sameValues reports whether two templates' values agree on every slot
// that is not free.
func sameValues(a, b []Var, aFree, bFree []bool) bool {
	i, j := 0, 0
	for {
		for i < len(a) && aFree[i] {
			i++
		}
		for j < len(b) && bFree[j] {
			j++
		}
		if i == len(a) || j == len(b) {
			return i == len(a) && j == len(b)
		}
		if a[i] != b[j] {
			return false
		}
		i++
		j++
	}
}

// valueSet is the sorted list of the values of slots that are not free,
// for comparing prompts whose templates differ (the semantic layer's
// check).
func valueSet(vars []Var, free []bool) []string {
	var out []string
	for i, v := range vars {
		if !free[i] {
			out = append(out, v.Slot+"\x00"+v.Value)
		}
	}
	slices.Sort(out)
	return out
}

// SubstituteVars is a TemplateConfig.Refill for string answers: it
// replaces, in the stored answer, each stored value with the query's
// value in the same position, and refuses (false) when the prompts'
// values do not pair up slot for slot, or when a value that differs does
// not appear in the answer (the answer may depend on it in a way text
// substitution cannot fix, such as a price) or is empty. It gives up
// (false) when ctx ends.
func SubstituteVars(ctx context.Context, out string, stored, query []Var) (string, bool) {
	if len(stored) != len(query) {
		return "", false
	}
	var pairs []string
	for i := range stored {
		if i%64 == 63 && ctx.Err() != nil {
			return "", false
		}
		if stored[i].Slot != query[i].Slot {
			return "", false
		}
		if stored[i].Value == query[i].Value {
			continue
		}
		if stored[i].Value == "" || !strings.Contains(out, stored[i].Value) {
			// An empty value is in every answer and nowhere: replacing it
			// would write the query's value between every two bytes.
			return "", false
		}
		pairs = append(pairs, stored[i].Value, query[i].Value)
	}
	return strings.NewReplacer(pairs...).Replace(out), true
}
