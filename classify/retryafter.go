package classify

import (
	"net/http"
	"strings"
	"time"
)

// maxDelayText bounds the length of any delay string the parsers look at; a
// real value is at most about 30 bytes (an HTTP-date).
const maxDelayText = 64

// parseRetryAfter reads an HTTP Retry-After header value: delta-seconds
// ("120", and leniently "1.5") or an HTTP-date, relative to now. It returns
// false for an empty, negative or malformed value. The delay is capped at
// MaxRetryAfter, and a date in the past means no wait (0, true).
func parseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	value = strings.TrimSpace(value)
	if value == "" || len(value) > maxDelayText {
		return 0, false
	}
	if isDigit(value[0]) {
		return parseSeconds(value)
	}
	t, err := http.ParseTime(value)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d < 0 {
		return 0, true
	}
	return min(d, MaxRetryAfter), true
}

// parseRetryDelay reads google.rpc.RetryInfo's retryDelay, a protobuf
// Duration in its JSON form: decimal seconds with an "s" suffix ("37s",
// "1.5s", "0.000000001s"). Negative, exponent ("1e308s") and other malformed
// forms return false; large values are capped at MaxRetryAfter.
func parseRetryDelay(value string) (time.Duration, bool) {
	if len(value) < 2 || len(value) > maxDelayText || value[len(value)-1] != 's' {
		return 0, false
	}
	return parseSeconds(value[:len(value)-1])
}

// parseSeconds reads "ddd" or "ddd.fffffffff" seconds. Leading digits beyond
// what fits MaxRetryAfter saturate instead of overflowing; fraction digits
// past nanoseconds are ignored.
func parseSeconds(s string) (time.Duration, bool) {
	if s == "" {
		return 0, false
	}
	intPart, frac, hasDot := strings.Cut(s, ".")
	if intPart == "" || (hasDot && frac == "") {
		return 0, false
	}
	const capSeconds = int64(MaxRetryAfter / time.Second)
	var secs int64
	for i := 0; i < len(intPart); i++ {
		c := intPart[i]
		if !isDigit(c) {
			return 0, false
		}
		if secs <= capSeconds {
			secs = secs*10 + int64(c-'0')
		}
	}
	var nanos int64
	scale := int64(100_000_000)
	for i := 0; i < len(frac); i++ {
		c := frac[i]
		if !isDigit(c) {
			return 0, false
		}
		nanos += int64(c-'0') * scale
		scale /= 10
	}
	if secs >= capSeconds {
		return MaxRetryAfter, true
	}
	return min(time.Duration(secs)*time.Second+time.Duration(nanos), MaxRetryAfter), true
}

// rateLimitKinds are the limits Anthropic reports in its response headers,
// anthropic-ratelimit-<kind>-{limit,remaining,reset}
// (https://docs.anthropic.com/en/api/rate-limits).
var rateLimitKinds = [...]string{"requests", "tokens", "input-tokens", "output-tokens"}

// RateLimitReset reads when the rate limits a 429 exhausted reset, from
// Anthropic's anthropic-ratelimit-{requests,tokens,input-tokens,
// output-tokens}-reset headers (RFC 3339 times): the latest reset among
// the limits whose -remaining header is 0, as a delay counted from the
// response's Date header when it has one (the server's clock, so that a
// skewed local clock does not stretch or shrink it) and from now
// otherwise. It reports false when no exhausted limit says when, or when
// the reset has passed. The delay is capped at MaxRetryAfter.
//
// ReadResponse, and the Anthropic adapter, use it for a 429 alongside
// Retry-After: the longer of the two is the wait.
func RateLimitReset(h http.Header, now time.Time) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	if date := h.Get("Date"); date != "" && len(date) <= maxDelayText {
		if t, err := http.ParseTime(date); err == nil {
			now = t
		}
	}
	var best time.Duration
	found := false
	for _, kind := range rateLimitKinds {
		prefix := "Anthropic-Ratelimit-" + kind
		if strings.TrimSpace(h.Get(prefix+"-Remaining")) != "0" {
			continue
		}
		reset := strings.TrimSpace(h.Get(prefix + "-Reset"))
		if reset == "" || len(reset) > maxDelayText {
			continue
		}
		t, err := time.Parse(time.RFC3339, reset)
		if err != nil {
			continue
		}
		if d := t.Sub(now); d > 0 {
			best, found = max(best, min(d, MaxRetryAfter)), true
		}
	}
	return best, found
}
