package classify

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Classified is implemented by errors that carry their own verdict: local
// rejections (an open circuit, a full bulkhead), validation failures, and
// errors made by SDK adapters. The Standard classifier trusts it first.
type Classified interface {
	error
	// Verdict returns the error's own verdict.
	Verdict() Verdict
}

// Error is an error with an explicit verdict, wrapping an optional cause.
type Error struct {
	// V is the verdict.
	V Verdict
	// Err is the cause; it may be nil.
	Err error
}

// Wrap returns err with the verdict v attached; errors.Is and errors.As see
// err through it. Wrap(nil, v) is an error too: a failure with no cause
// other than the verdict (e.g. a blocked prompt on a 200).
func Wrap(err error, v Verdict) error { return &Error{V: v, Err: err} }

// Error describes the verdict, then the cause.
func (e *Error) Error() string {
	if e.Err == nil {
		return "tierguard: " + e.V.String()
	}
	return "tierguard: " + e.V.String() + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Verdict returns the attached verdict.
func (e *Error) Verdict() Verdict { return e.V }

// MaxErrorBody is the most of an error response body ResponseError reads and
// ParseGoogleError accepts. Real error bodies are a few kilobytes.
const MaxErrorBody = 1 << 20

// HTTPError is an upstream error response read by ResponseError. Its Error
// string names only the status: the upstream message may echo the request,
// so it stays in Facts.Message for callers who choose to log it.
type HTTPError struct {
	// Facts are what the response said: status, Google error body, and
	// retry headers.
	Facts Facts
}

// Error returns "upstream error: 503 UNAVAILABLE".
func (e *HTTPError) Error() string {
	s := "upstream error: " + strconv.Itoa(e.Facts.HTTPStatus)
	if st := canonicalStatus(e.Facts.Status); st != "" {
		s += " " + st
	}
	return s
}

// StatusCode returns the HTTP status code.
func (e *HTTPError) StatusCode() int { return e.Facts.HTTPStatus }

// ResponseError reads an error response into an *HTTPError: the Google JSON
// error body if there is one (status, message, details), and the Retry-After
// and retry-after-ms headers. It reads at most MaxErrorBody bytes and does
// not close the body. Call it only for responses you treat as failures.
func ResponseError(resp *http.Response) *HTTPError {
	f := Facts{HTTPStatus: resp.StatusCode}
	if resp.Body != nil {
		body, err := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBody+1))
		if err == nil {
			if g, ok := ParseGoogleError(body); ok {
				f.Status, f.Message, f.Details = g.Status, g.Message, g.Details
			}
		}
	}
	f.RetryAfterHeader = resp.Header.Get("Retry-After")
	if ms := resp.Header.Get("Retry-After-Ms"); ms != "" && len(ms) <= maxDelayText {
		if v, err := strconv.ParseFloat(ms, 64); err == nil && v > 0 {
			f.RetryAfter = min(time.Duration(min(v, float64(MaxRetryAfter/time.Millisecond))*float64(time.Millisecond)), MaxRetryAfter)
		}
	}
	return &HTTPError{Facts: f}
}

// ParseGoogleError decodes a Google API error body,
// {"error":{"code":429,"message":"...","status":"RESOURCE_EXHAUSTED","details":[...]}}.
// It returns false for bodies that are not such JSON or are larger than
// MaxErrorBody. HTTPStatus is the body's "code" (0 when absent).
func ParseGoogleError(body []byte) (Facts, bool) {
	if len(body) == 0 || len(body) > MaxErrorBody {
		return Facts{}, false
	}
	var env struct {
		Error *struct {
			Code    int              `json:"code"`
			Message string           `json:"message"`
			Status  string           `json:"status"`
			Details []map[string]any `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil || env.Error == nil {
		return Facts{}, false
	}
	e := env.Error
	return Facts{HTTPStatus: e.Code, Status: e.Status, Message: e.Message, Details: e.Details}, true
}
