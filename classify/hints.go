package classify

import (
	"strings"
	"time"
)

// The classifier searches upstream messages for hints — never copying
// them: a retry delay, a daily quota, a context overflow, billing, the
// model a 404 names. Every search looks at the first maxInspect bytes only,
// case-insensitively, and lower-cases the message once, only for the
// statuses that have hints.

// lazyLower is a message lower-cased on first use.
type lazyLower struct {
	msg   string
	lower string
	done  bool
}

// get returns the searched part of the message with its ASCII letters
// lower-cased: byte for byte as long as the message, so that an index into
// it is an index into the message too.
func (l *lazyLower) get() string {
	if !l.done {
		l.done = true
		msg := l.msg
		if len(msg) > maxInspect {
			msg = msg[:maxInspect]
		}
		upper := false
		for i := 0; i < len(msg); i++ {
			if c := msg[i]; c >= 'A' && c <= 'Z' {
				upper = true
				break
			}
		}
		if !upper {
			l.lower = msg
			return msg
		}
		var b strings.Builder
		b.Grow(len(msg))
		for i := 0; i < len(msg); i++ {
			c := msg[i]
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			b.WriteByte(c)
		}
		l.lower = b.String()
	}
	return l.lower
}

// retryHint returns the longest delay a lower-cased message asks for:
// Gemini's "Please retry in 37.38s.", OpenAI's "Please try again in
// 1.574s." and "try again in 114h18m0s", Azure's "Please retry after 6
// seconds.", Code Assist's "Your quota will reset after 49s.". A delay too
// large to represent is MaxRetryAfter, never dropped: a dropped hint would
// turn a long wait into a retry at normal backoff. Two scans find every
// marker: each starts with "try " or "reset".
func retryHint(lower string) (time.Duration, bool) {
	var best time.Duration
	found := false
	seen := 0
	for _, stem := range [...]string{"try ", "reset"} {
		rest := lower
		for seen < maxHints {
			i := strings.Index(rest, stem)
			if i < 0 {
				break
			}
			rest = rest[i+len(stem):]
			var tail string
			switch {
			case stem == "reset" && strings.HasPrefix(rest, " after "):
				tail = rest[len(" after "):]
			case stem == "reset" && strings.HasPrefix(rest, "s in "):
				tail = rest[len("s in "):]
			case stem == "try " && strings.HasPrefix(rest, "in "):
				tail = rest[len("in "):] // "retry in"
			case stem == "try " && strings.HasPrefix(rest, "after "):
				tail = rest[len("after "):] // "retry after"
			case stem == "try " && strings.HasPrefix(rest, "again in "):
				tail = rest[len("again in "):]
			case stem == "try " && strings.HasPrefix(rest, "again after "):
				tail = rest[len("again after "):]
			default:
				continue
			}
			seen++
			if d, ok := parseHintDuration(tail); ok {
				best, found = max(best, d), true
			}
		}
	}
	return best, found
}

// maxHints bounds how many delay hints one message may offer.
const maxHints = 8

// parseHintDuration reads a delay at the start of s: Go's form ("37.38s",
// "7m12s", "114h18m0s", "500ms") or a number and a word ("6 seconds",
// "2 minutes", "1 hour"). Digits saturate at MaxRetryAfter.
func parseHintDuration(s string) (time.Duration, bool) {
	var total time.Duration
	parsed := false
	i := 0
	for i < len(s) {
		start := i
		var whole, frac, scale int64 = 0, 0, 1
		for i < len(s) && isDigit(s[i]) {
			if whole < 1e15 {
				whole = whole*10 + int64(s[i]-'0')
			}
			i++
		}
		if i == start {
			break
		}
		if i+1 < len(s) && s[i] == '.' && isDigit(s[i+1]) {
			i++
			for i < len(s) && isDigit(s[i]) {
				if scale < 1e9 {
					frac = frac*10 + int64(s[i]-'0')
					scale *= 10
				}
				i++
			}
		}
		unit, n, word := hintUnit(s[i:])
		if n == 0 {
			break
		}
		i += n
		total = addSaturating(total, scaled(whole, frac, scale, unit))
		parsed = true
		if word || i >= len(s) || !isDigit(s[i]) {
			// "6 seconds" ends the delay; "7m12s" goes on after "7m".
			break
		}
	}
	if !parsed {
		return 0, false
	}
	return min(total, MaxRetryAfter), true
}

// hintUnits are the units a delay hint may use, longest first within each
// kind so that "ms" is not read as "m".
var hintUnits = [...]struct {
	name string
	d    time.Duration
	word bool
}{
	{"milliseconds", time.Millisecond, true}, {"millisecond", time.Millisecond, true},
	{"seconds", time.Second, true}, {"second", time.Second, true}, {"secs", time.Second, true}, {"sec", time.Second, true},
	{"minutes", time.Minute, true}, {"minute", time.Minute, true}, {"mins", time.Minute, true}, {"min", time.Minute, true},
	{"hours", time.Hour, true}, {"hour", time.Hour, true},
	{"ms", time.Millisecond, false}, {"µs", time.Microsecond, false}, {"us", time.Microsecond, false}, {"ns", time.Nanosecond, false},
	{"h", time.Hour, false}, {"m", time.Minute, false}, {"s", time.Second, false},
}

// hintUnit reads a unit at the start of s: a Go unit right after the
// number ("37s"), or a word after at most one space ("6 seconds"). It
// returns the unit, the bytes read (0 when there is none) and whether it
// was a word.
func hintUnit(s string) (unit time.Duration, n int, word bool) {
	spaced := strings.HasPrefix(s, " ")
	rest := s
	if spaced {
		rest = s[1:]
	}
	for _, u := range hintUnits {
		if spaced && !u.word || !strings.HasPrefix(rest, u.name) {
			continue
		}
		end := len(s) - len(rest) + len(u.name)
		if end < len(s) && isLetter(s[end]) {
			// "5 monkeys", "5mo": not a unit.
			continue
		}
		return u.d, end, u.word
	}
	return 0, 0, false
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// scaled returns (whole + frac/scale) units, saturating at MaxRetryAfter.
func scaled(whole, frac, scale int64, unit time.Duration) time.Duration {
	limit := int64(MaxRetryAfter / unit)
	if whole > limit {
		return MaxRetryAfter
	}
	return time.Duration(whole)*unit + time.Duration(float64(frac)/float64(scale)*float64(unit))
}

func addSaturating(a, b time.Duration) time.Duration {
	if a > MaxRetryAfter-b {
		return MaxRetryAfter
	}
	return a + b
}

// perDayMessage recognises a daily quota named in a lower-cased message:
// "... on requests per day (RPD): Limit 200", "tokens per day (TPD)",
// "free-models-per-day".
func perDayMessage(lower string) bool {
	for rest := lower; ; {
		i := strings.Index(rest, "per")
		if i < 0 {
			break
		}
		rest = rest[i+3:]
		if strings.HasPrefix(rest, " day") || strings.HasPrefix(rest, "day") || strings.HasPrefix(rest, "-day") || strings.HasPrefix(rest, "_day") {
			return true
		}
	}
	return strings.Contains(lower, "pd)") && (strings.Contains(lower, "(rpd)") || strings.Contains(lower, "(tpd)"))
}

// zeroLimit recognises a quota whose limit is zero — "limit: 0" in
// Gemini's free-tier messages — which no amount of waiting satisfies.
func zeroLimit(lower string) bool {
	return strings.Contains(lower, "limit: 0,") || strings.Contains(lower, "limit: 0\n") || strings.HasSuffix(lower, "limit: 0")
}

// tokenLimit recognises an input over the model's context window:
// Gemini's "The input token count (N) exceeds the maximum number of tokens
// allowed (M).", Vertex AI's "the input token count is N but model only
// supports up to M", OpenAI's and vLLM's "This model's maximum context length
// is N tokens. However, you requested M tokens", "prompt is too long",
// and a request payload over the size limit.
func tokenLimit(lower string) bool {
	return strings.Contains(lower, "token count") && strings.Contains(lower, "exceed") ||
		strings.Contains(lower, "token count") && strings.Contains(lower, "only supports up to") ||
		strings.Contains(lower, "maximum context length") ||
		strings.Contains(lower, "context length") && strings.Contains(lower, "exceed") ||
		strings.Contains(lower, "context window") && strings.Contains(lower, "exceed") ||
		strings.Contains(lower, "too many tokens") ||
		strings.Contains(lower, "prompt is too long") ||
		strings.Contains(lower, "input is too long") ||
		strings.Contains(lower, "payload size exceeds") ||
		// Anthropic, also behind OpenAI-compatible gateways: "input length
		// and `max_tokens` exceed context limit: 179413 + 32768 > 200000".
		strings.Contains(lower, "context limit") && strings.Contains(lower, "exceed") ||
		// OpenAI: "Input tokens exceed the configured limit of 272000 tokens."
		strings.Contains(lower, "input tokens exceed")
}

// retiredMessage recognises a message saying that a model is no longer
// served: Groq's "The model `x` has been decommissioned and is no longer
// supported", OpenAI's "The model `x` has been deprecated", Gemini's
// "Gemini 1.0 Pro Vision has been deprecated on July 12, 2024", OpenRouter's
// "x is not a valid model ID" and "No endpoints found for x.". A message
// that only says a model is deprecated but still works is not sent as an
// error, so the past tense is enough. namedModel says which model.
func retiredMessage(lower string) bool {
	return strings.Contains(lower, "decommissioned") ||
		strings.Contains(lower, "been deprecated") ||
		strings.Contains(lower, "no longer supported") ||
		strings.Contains(lower, "not a valid model") ||
		strings.Contains(lower, "invalid model") ||
		strings.Contains(lower, "no endpoints found for ")
}

// maxModelID bounds a model id read from a message; real ones are short.
const maxModelID = 128

// namedModel reads the model a "not found" message names. named is set when
// the message is about a model at all; id is the model's id when the
// message spells it (without a "models/" or "projects/.../models/" prefix).
// A message about another entity — a cached content, a file, a tuning
// operation, an unknown URL — names no model.
func namedModel(msg, lower string) (id string, named bool) {
	if !(strings.Contains(lower, "not found") || strings.Contains(lower, "does not exist") || strings.Contains(lower, "not exist") ||
		retiredMessage(lower)) {
		return "", false
	}
	if strings.Contains(lower, "requested url") {
		// Google's front end: "The requested URL /v1/models/x:generate was
		// not found on this server." A wrong path, not a missing model.
		return "", false
	}
	if len(msg) > maxInspect {
		msg = msg[:maxInspect]
	}
	// Quoted after the word model: "The model `gpt-x` does not exist",
	// "Publisher Model `projects/p/.../models/gemini-pro` was not found",
	// `model "llama3" not found`.
	for i := 0; i+6 < len(lower); {
		j := strings.Index(lower[i:], "model")
		if j < 0 {
			break
		}
		j += i + len("model")
		i = j
		// "model `x`", "model: `x`", "model 'x'".
		for n := 0; n < 2 && j < len(msg) && (msg[j] == ':' || msg[j] == ' '); n++ {
			j++
		}
		if j >= len(msg) {
			break
		}
		q := msg[j]
		if q != '`' && q != '\'' && q != '"' {
			continue
		}
		end := strings.IndexByte(msg[j+1:], q)
		if end < 0 || end > 4*maxModelID {
			continue
		}
		quoted := msg[j+1 : j+1+end]
		if k := strings.LastIndex(quoted, "models/"); k >= 0 && !strings.HasPrefix(quoted, "tunedModels/") {
			quoted = quoted[k+len("models/"):]
		}
		if isModelID(quoted, true) {
			return quoted, true
		}
	}
	// Gemini API: "models/gemini-1.0-pro is not found for API version
	// v1beta"; a tuned model: "tunedModels/my-model is not found". A path
	// that goes on ("tunedModels/x/operations/y") names something else.
	for _, prefix := range [...]string{"tunedModels/", "models/"} {
		rest := msg
		for n := 0; n < maxHints; n++ {
			k := strings.Index(rest, prefix)
			if k < 0 {
				break
			}
			if prefix == "models/" && k > 0 && rest[k-1] == 'd' {
				// The tail of "tunedModels/", searched above.
				rest = rest[k+len(prefix):]
				continue
			}
			tail := rest[k+len(prefix):]
			end := 0
			for end < len(tail) && modelChar(tail[end], false) {
				end++
			}
			cand := tail[:end]
			if end < len(tail) && tail[end] == '/' {
				cand = ""
			}
			if cand != "" && isModelID(cand, false) {
				if prefix == "tunedModels/" {
					return prefix + cand, true
				}
				return cand, true
			}
			rest = tail
		}
	}
	if id, ok := unquotedModel(msg, lower); ok {
		return id, true
	}
	if strings.Contains(lower, "model") && !strings.Contains(lower, "models/") && !strings.Contains(lower, "tunedmodels/") {
		// "Model not found." with no id: the model the call used.
		return "", true
	}
	if strings.Contains(lower, "no endpoints found for ") {
		// OpenRouter names the model without the word: handled above when
		// the id reads as one.
		return "", true
	}
	return "", false
}

// unquotedModel reads a model id that a message spells without quotes, in
// the places real messages put one: "The model gemma2-9b-it has been
// decommissioned", "Invalid model: mistral-medium-3.5" (Mistral), "No
// endpoints found for stepfun/step-3.5-flash:free." and
// "google/gemini-2.0-pro-exp-02-05:free is not a valid model ID"
// (OpenRouter). A word that does not look like an id (no digit, no dash,
// no slash: "The model has been ...") is not one.
func unquotedModel(msg, lower string) (string, bool) {
	if len(msg) > maxInspect {
		msg = msg[:maxInspect]
	}
	// After a marker: the id is the next word.
	for _, marker := range [...]string{"the model ", "invalid model: ", "no endpoints found for "} {
		if i := strings.Index(lower, marker); i >= 0 {
			if id, ok := modelWord(msg[i+len(marker):], false); ok {
				return id, true
			}
		}
	}
	// Before a marker: the id is the word before it.
	if i := strings.Index(lower, " is not a valid model"); i > 0 {
		start := strings.LastIndexAny(msg[:i], " \t\n\"'`") + 1
		if id, ok := modelWord(msg[start:i], true); ok {
			return id, true
		}
	}
	return "", false
}

// modelWord reads a model id at the start of s (the whole of s when whole
// is set), without a trailing full stop, and only if it looks like one.
func modelWord(s string, whole bool) (string, bool) {
	end := 0
	for end < len(s) && end <= maxModelID && modelChar(s[end], true) {
		end++
	}
	if whole && end != len(s) {
		return "", false
	}
	id := strings.TrimRight(s[:end], ".:")
	if !isModelID(id, true) || !strings.ContainsAny(id, "0123456789-/") {
		return "", false
	}
	return id, true
}

// modelChar reports whether c may appear in a model id. Ids in quotes may
// carry an organisation ("meta-llama/Llama-3-70b") and a tag
// ("llama3:8b"); after "models/" a colon starts the method
// ("models/gemini-pro:generateContent") and a slash a sub-resource.
func modelChar(c byte, quoted bool) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	case c == '-', c == '.', c == '_', c == '@':
		return true
	case c == ':', c == '/':
		return quoted
	}
	return false
}

func isModelID(s string, quoted bool) bool {
	if s == "" || len(s) > maxModelID {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !modelChar(s[i], quoted) {
			return false
		}
	}
	return true
}

// anthropicModel reads the model an Anthropic not_found_error names: its
// message is the missing parameter and its value, "model:
// claude-3-5-sonnet-20241022" (sometimes with a trailing space). named is
// false for a message about anything else. id is empty when the value does
// not read as a model id ("model: Claude Sonnet 4.5", a display name):
// the model the call used is meant.
func anthropicModel(msg string) (id string, named bool) {
	if len(msg) > maxInspect {
		msg = msg[:maxInspect]
	}
	rest, ok := strings.CutPrefix(strings.TrimSpace(msg), "model:")
	if !ok {
		return "", false
	}
	id, _ = modelWord(strings.TrimLeft(rest, " "), false)
	return id, true
}

// relayedAnthropicModel reads the model of an Anthropic not_found_error
// that a gateway quoted inside its own message, as LiteLLM does: "...
// AnthropicException - b'{"type":"error","error":{"type":"not_found_error",
// "message":"model: claude-3-5-sonnet-latest"},...}'".
func relayedAnthropicModel(msg, lower string) (id string, named bool) {
	i := strings.Index(lower, "not_found_error")
	if i < 0 {
		return "", false
	}
	j := strings.Index(lower[i:], `"model: `)
	if j < 0 || j > 64 {
		return "", false
	}
	start := i + j + len(`"`)
	end := strings.IndexByte(msg[start:], '"')
	if end < 0 {
		end = len(lower) - start
	}
	return anthropicModel(msg[start : start+end])
}
