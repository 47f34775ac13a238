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
