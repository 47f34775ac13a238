package classify

import (
	"strconv"
	"time"
)

// MaxRetryAfter caps every server-requested delay the classifier reports. A
// hostile or broken server can send "Retry-After: 1000000000"; the verdict
// then says 24h, and the retry layer, which never sleeps past the deadline,
// moves on at once.
const MaxRetryAfter = 24 * time.Hour

// Verdict is the classifier's reading of one error.
//
// Every field is safe to log or to put on a span: Status is one of the
// canonical Google status names (never text copied from the response),
// Reason is a short fixed phrase chosen by the classifier, never a prompt,
// an output or an upstream message, and Model is a validated model id.
type Verdict struct {
	// Class is the failure's class; OK for a nil error.
	Class Class
	// PerMinute is set on a RateLimited verdict whose details name a
	// per-minute quota (a google.rpc.QuotaFailure violation's quotaId or
	// quotaMetric, Vertex AI's ErrorInfo quota_limit). Such a quota is
	// the key's, shared by every caller: its 429 says the quota is spent
	// for all of them until the minute turns, where a bare 429 may be one
	// overloaded moment. The fallback chain takes a tier out for every
	// request on this evidence alone (fallback.CoolDown).
	PerMinute bool
	// HTTPStatus is the HTTP status code, or 0 when the error carried none
	// (a transport failure, a local rejection). For an error without a
	// status of its own — an error event inside a 200 stream, an error
	// object inside a 200 answer — it is the status the error's code or
	// canonical status stands for.
	HTTPStatus int
	// Status is the canonical status name ("UNAVAILABLE",
	// "RESOURCE_EXHAUSTED", ...) given by the server or derived from the HTTP
	// status; empty when unknown.
	Status string
	// RetryAfter is the delay the server asked for (Retry-After header,
	// google.rpc.RetryInfo, or "Please retry in 25s." as a last resort),
	// capped at MaxRetryAfter; 0 when none was given.
	RetryAfter time.Duration
	// Reason is a short fixed phrase explaining the class.
	Reason string
	// Model is the model id a Retired verdict names ("gemini-1.0-pro"),
	// read from the error's message; empty when the message names none, and
	// for every other class. It is an identifier of the request's own
	// model, kept only when it is short and made of the characters model
	// ids use, so it is safe to log; it is not a metric attribute.
	Model string
}

// String renders the verdict for humans, e.g.
// "rate_limited (429 RESOURCE_EXHAUSTED, retry after 37s): per-minute rate limit".
func (v Verdict) String() string {
	b := make([]byte, 0, 64)
	b = append(b, v.Class.String()...)
	if v.HTTPStatus != 0 || v.Status != "" || v.RetryAfter > 0 {
		b = append(b, " ("...)
		sep := false
		if v.HTTPStatus != 0 {
			b = strconv.AppendInt(b, int64(v.HTTPStatus), 10)
			sep = true
		}
		if v.Status != "" {
			if sep {
				b = append(b, ' ')
			}
			b = append(b, v.Status...)
			sep = true
		}
		if v.RetryAfter > 0 {
			if sep {
				b = append(b, ", "...)
			}
			b = append(b, "retry after "...)
			b = append(b, v.RetryAfter.String()...)
		}
		b = append(b, ')')
	}
	if v.Reason != "" {
		b = append(b, ": "...)
		b = append(b, v.Reason...)
	}
	return string(b)
}

// googleStatus is a canonical Google RPC status and the HTTP status it maps
// to (google.rpc.Code's documented mapping). name is stored so that verdicts
// carry this package's interned string, never bytes from a response.
type googleStatus struct {
	name string
	http int
}

var googleStatuses = func() map[string]googleStatus {
	m := map[string]int{
		"OK": 200, "CANCELLED": 499, "UNKNOWN": 500, "INVALID_ARGUMENT": 400,
		"DEADLINE_EXCEEDED": 504, "NOT_FOUND": 404, "ALREADY_EXISTS": 409,
		"PERMISSION_DENIED": 403, "UNAUTHENTICATED": 401,
		"RESOURCE_EXHAUSTED": 429, "FAILED_PRECONDITION": 400, "ABORTED": 409,
		"OUT_OF_RANGE": 400, "UNIMPLEMENTED": 501, "INTERNAL": 500,
		"UNAVAILABLE": 503, "DATA_LOSS": 500,
	}
	out := make(map[string]googleStatus, len(m))
	for name, code := range m {
		out[name] = googleStatus{name: name, http: code}
	}
	return out
}()

// canonicalStatus returns the interned canonical name for s, or "" when s is
// not a canonical status name.
func canonicalStatus(s string) string {
	return googleStatuses[s].name
}

// statusForHTTP is the canonical status a server would send with code.
func statusForHTTP(code int) string {
	switch code {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 408, 504:
		return "DEADLINE_EXCEEDED"
	case 409:
		return "ABORTED"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case 500:
		return "INTERNAL"
	case 501:
		return "UNIMPLEMENTED"
	case 502, 503:
		return "UNAVAILABLE"
	}
	return ""
}

// httpFromStatus reads an HTTP code from a status string: a canonical name
// ("UNAVAILABLE" → 503) or the "NNN Text" form Go's net/http and the genai
// SDK use for non-JSON bodies ("502 Bad Gateway" → 502).
func httpFromStatus(s string) int {
	if st, ok := googleStatuses[s]; ok {
		return st.http
	}
	if len(s) >= 3 && isDigit(s[0]) && isDigit(s[1]) && isDigit(s[2]) && (len(s) == 3 || s[3] == ' ') {
		code := int(s[0]-'0')*100 + int(s[1]-'0')*10 + int(s[2]-'0')
		if code >= 100 && code <= 599 {
			return code
		}
	}
	return 0
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
