package classify

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"
)

// Classifier turns an error into a Verdict. Implementations must be safe for
// concurrent use and must not copy upstream text into Verdict.Reason.
type Classifier interface {
	// Classify returns err's verdict; class OK for a nil error.
	Classify(err error) Verdict
}

// Func adapts a function to the Classifier interface.
type Func func(err error) Verdict

// Classify calls f(err).
func (f Func) Classify(err error) Verdict { return f(err) }

// Rule recognises one kind of error — typically an SDK's error type — and
// classifies it. It returns false for errors it does not know, so the next
// rule, and finally the built-in understanding, gets its turn. A rule for an
// HTTP-shaped error usually extracts Facts and returns FromFacts(facts).
type Rule func(err error) (Verdict, bool)

// Standard is the built-in classifier, extended by rules. Its zero value is
// ready to use and is what the package-level Classify uses.
type Standard struct {
	rules []Rule
	now   func() time.Time
}

// New returns a Standard classifier that consults rules in order before its
// built-in understanding. This is how an SDK adapter teaches tierguard its
// error type without the root module importing the SDK.
func New(rules ...Rule) Standard {
	return Standard{rules: append([]Rule(nil), rules...)}
}

// Classify classifies err; see the package documentation for what it
// understands and in which order.
func (s Standard) Classify(err error) Verdict {
	if err == nil {
		return Verdict{Class: OK}
	}
	var cv Classified
	if errors.As(err, &cv) {
		return failure(cv.Verdict())
	}
	if errors.Is(err, context.Canceled) {
		return Verdict{Class: Canceled, Reason: "canceled"}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return Verdict{Class: DeadlineExhausted, Reason: "deadline exceeded"}
	}
	for _, r := range s.rules {
		if v, ok := r(err); ok {
			return failure(v)
		}
	}
	now := time.Now
	if s.now != nil {
		now = s.now
	}
	var he *HTTPError
	if errors.As(err, &he) {
		return fromFacts(he.Facts, now)
	}
	var sc interface{ StatusCode() int }
	if errors.As(err, &sc) {
		f := Facts{HTTPStatus: sc.StatusCode()}
		var ra interface{ RetryAfter() time.Duration }
		if errors.As(err, &ra) {
			f.RetryAfter = ra.RetryAfter()
		}
		return fromFacts(f, now)
	}
	if v, ok := transport(err); ok {
		return v
	}
	return Verdict{Class: Unknown, Reason: "unrecognised error"}
}

var standard Standard

// failure makes sure the verdict of an error is a failure: a rule or an
// attached verdict that leaves Class at its zero value, OK, would have a
// failed call counted as a success (by a breaker, by a retry budget).
func failure(v Verdict) Verdict {
	if v.Class == OK {
		v.Class, v.Reason = Unknown, "error classified as ok"
	}
	return v
}

// Classify classifies err with the built-in classifier and no rules.
func Classify(err error) Verdict { return standard.Classify(err) }

// transport recognises connection-level failures. They are transient: the
// next attempt gets a new connection.
func transport(err error) (Verdict, bool) {
	switch {
	case errors.Is(err, syscall.ECONNRESET):
		return Verdict{Class: Transient, Reason: "connection reset"}, true
	case errors.Is(err, syscall.ECONNREFUSED):
		return Verdict{Class: Transient, Reason: "connection refused"}, true
	case errors.Is(err, syscall.EPIPE):
		return Verdict{Class: Transient, Reason: "broken pipe"}, true
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return Verdict{Class: Transient, Reason: "connection closed mid-response"}, true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		if ne.Timeout() {
			return Verdict{Class: Transient, Reason: "network timeout"}, true
		}
		return Verdict{Class: Transient, Reason: "network error"}, true
	}
	return Verdict{}, false
}

// Facts are what an HTTP-shaped error says about the response that caused
// it. SDK adapters fill them from their error types and call FromFacts.
type Facts struct {
	// HTTPStatus is the response's status code; 0 when unknown (a JSON error
	// without "code", for example).
	HTTPStatus int
	// Status is the error's status string: a canonical Google status
	// ("UNAVAILABLE") or the "NNN Text" form of a non-JSON body
	// ("502 Bad Gateway"). Used when HTTPStatus is 0.
	Status string
	// Message is the upstream error message. It is only searched for hints
	// (token limit, "Please retry in"); it never reaches the Verdict.
	Message string
	// Details are google.rpc error details decoded from JSON.
	Details []map[string]any
	// RetryAfter is a delay already read from the response (a parsed
	// Retry-After or retry-after-ms header).
	RetryAfter time.Duration
	// RetryAfterHeader is a raw Retry-After header value, parsed against the
	// current time (delta-seconds or HTTP-date).
	RetryAfterHeader string
}

// FromFacts classifies an HTTP-shaped failure described by f. It is the
// decision logic of the Standard classifier, exported for rules.
func FromFacts(f Facts) Verdict { return fromFacts(f, time.Now) }

func fromFacts(f Facts, now func() time.Time) Verdict {
	code := f.HTTPStatus
	if code == 0 {
		code = httpFromStatus(f.Status)
	}
	status := canonicalStatus(f.Status)
	if status == "" {
		status = statusForHTTP(code)
	}
	v := Verdict{HTTPStatus: code, Status: status}

	d := readDetails(f.Details)
	v.RetryAfter = f.RetryAfter
	if f.RetryAfterHeader != "" {
		if ra, ok := ParseRetryAfter(f.RetryAfterHeader, now()); ok {
			v.RetryAfter = max(v.RetryAfter, ra)
		}
	}
	if d.hasRetryDelay {
		v.RetryAfter = max(v.RetryAfter, d.retryDelay)
	}
	v.RetryAfter = min(max(v.RetryAfter, 0), MaxRetryAfter)

	if class, ok := knownReasons[d.reason]; ok {
		v.Class = class
		v.Reason = reasonFor(d.reason)
		return v
	}
	switch {
	case code == 401:
		v.Class, v.Reason = Auth, "unauthenticated"
	case code == 403:
		v.Class, v.Reason = Auth, "permission denied"
	case code == 429:
		if d.perDayQuota {
			v.Class, v.Reason = QuotaExhausted, "per-day quota exhausted"
		} else {
			v.Class, v.Reason = RateLimited, "rate limited"
		}
		// RetryInfo is truncated to whole seconds ("37s") while the message
		// says "Please retry in 37.38s.": the larger avoids retrying early.
		if ra, ok := retryInMessage(f.Message); ok {
			v.RetryAfter = max(v.RetryAfter, ra)
		}
	case code == 404:
		v.Class, v.Reason = Retired, "model not found"
	case code == 413:
		v.Class, v.Reason = ContextTooLong, "request too large"
	case code == 400:
		if tokenLimit(f.Message) {
			v.Class, v.Reason = ContextTooLong, "input token count exceeds the model's limit"
		} else {
			v.Class, v.Reason = InvalidRequest, "invalid request"
		}
	case code == 408:
		v.Class, v.Reason = Transient, "request timeout"
	case code == 409:
		v.Class, v.Reason = Transient, "aborted"
	case code == 501:
		v.Class, v.Reason = Unknown, "not implemented"
	case code >= 500 && code <= 599:
		v.Class, v.Reason = Transient, "server error"
	case code >= 400 && code <= 499:
		v.Class, v.Reason = InvalidRequest, "client error"
	default:
		v.Class, v.Reason = Unknown, "unrecognised status"
	}
	return v
}

func reasonFor(errorInfoReason string) string {
	switch knownReasons[errorInfoReason] {
	case Auth:
		return "credentials rejected"
	case QuotaExhausted:
		return "billing disabled"
	case RateLimited:
		return "rate limited"
	}
	return "error info"
}

// tokenLimit recognises Gemini's "The input token count (N) exceeds the
// maximum number of tokens allowed (M)." and close variants.
func tokenLimit(msg string) bool {
	if len(msg) > maxInspect {
		msg = msg[:maxInspect]
	}
	msg = strings.ToLower(msg)
	return strings.Contains(msg, "token count") && strings.Contains(msg, "exceeds") ||
		strings.Contains(msg, "context length") && strings.Contains(msg, "exceed") ||
		strings.Contains(msg, "too many tokens")
}
