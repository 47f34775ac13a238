package anthropic

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/tierguard/tierguard/classify"
)

// Errors for 200 responses that carry no usable answer. Tier returns them
// wrapped with classify.Wrap; errors.Is finds them.
var (
	// ErrRefusal: the message stopped with stop_reason "refusal" (the
	// API's streaming classifiers declined it). Safety: the default class
	// table fails closed.
	ErrRefusal = errors.New("anthropic: the model refused to answer")
	// ErrEmptyAnswer: the message carries nothing usable — no text that is
	// not blank, no tool call — such as a "max_tokens" stop whose budget
	// went to thinking. InvalidOutput: the next tier answers.
	ErrEmptyAnswer = errors.New("anthropic: answer is empty")
	// ErrNoStopReason: the message has no stop_reason, so it may be cut
	// short. InvalidOutput.
	ErrNoStopReason = errors.New("anthropic: message has no stop reason")
	// ErrPauseTurn: the message stopped with stop_reason "pause_turn": the
	// API paused a long server-tool turn (web search, code execution),
	// which goes on only when the caller sends the message back. The tier
	// does not continue it. InvalidOutput: the next tier answers; call the
	// SDK yourself where you need the continuation.
	ErrPauseTurn = errors.New("anthropic: turn paused (pause_turn)")
	// ErrMalformedEvent: a stream event the SDK could not decode, or an
	// error event that is not Anthropic's error object. Transient, with no
	// upstream text in the error.
	ErrMalformedEvent = errors.New("anthropic: malformed stream event")
)

// ResponseError is an error response as Tier returns it: the SDK's error
// (usually an *anthropic.Error) with the response's status and retry
// headers, and an error event inside a 200 stream. It carries its own
// verdict (it implements classify.Classified), so it classifies correctly
// with any classifier built on classify.Standard.
//
// Its text names only the status and Anthropic's error type ("anthropic:
// upstream error 529 overloaded_error"): the SDK's own error text holds
// the request's URL and the whole body, and a body's message may echo the
// request; neither reaches Error.
type ResponseError struct {
	// Err is the SDK's error; errors.As(err, &apiErr) with an
	// *anthropic.Error target reaches it when there is one.
	Err error
	// StatusCode is the HTTP status of the response; 0 for an error event
	// inside a 200 stream.
	StatusCode int
	// RetryAfter and RetryAfterMs are the raw header values ("" if absent).
	RetryAfter   string
	RetryAfterMs string
	// ResetAfter is how long the exhausted rate limit of a 429 takes to
	// reset, as Anthropic's anthropic-ratelimit-*-reset headers say
	// (classify.RateLimitReset, read when the response arrived); 0 when
	// they do not say.
	ResetAfter time.Duration

	// facts are what the body said, read once when the error was made;
	// they stay out of Error's text.
	facts classify.Facts
}

// Error returns "anthropic: upstream error 529 overloaded_error". For an
// error event inside a stream, the status is the one its type stands for.
func (e *ResponseError) Error() string {
	v := e.Verdict()
	code := e.StatusCode
	if code == 0 {
		code = v.HTTPStatus
	}
	s := "anthropic: upstream error " + strconv.Itoa(code)
	if t := e.facts.Code; identifier(t) {
		s += " " + t
	}
	return s
}

// identifier reports whether s is an error type or code ("overloaded_error"),
// not text.
func identifier(s string) bool {
	if s == "" || len(s) > 48 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && c != '_' && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// Unwrap returns the SDK's error.
func (e *ResponseError) Unwrap() error { return e.Err }

// Verdict classifies the response with Rule.
func (e *ResponseError) Verdict() classify.Verdict {
	v, _ := Rule(e)
	return v
}

// Facts returns what the response said, for classify.FromFacts: the
// status, Anthropic's error type (or its details' error_code) as Code,
// the message (searched for hints, never quoted), and the delays.
func (e *ResponseError) Facts() classify.Facts {
	f := e.facts
	f.HTTPStatus = e.StatusCode
	f.RetryAfter = max(f.RetryAfter, e.ResetAfter)
	f.RetryAfterHeader = e.RetryAfter
	f.RetryAfterMsHeader = e.RetryAfterMs
	return f
}

// newResponseError reads a failed response: its status, its headers and
// the error body (at most classify.MaxErrorBody bytes).
func newResponseError(err error, status int, h http.Header, body []byte) *ResponseError {
	re := &ResponseError{Err: err, StatusCode: status}
	if status >= 400 {
		re.RetryAfter = header(h, "Retry-After")
		re.RetryAfterMs = header(h, "Retry-After-Ms")
	}
	if status == http.StatusTooManyRequests {
		re.ResetAfter, _ = classify.RateLimitReset(h, time.Now())
	}
	if f, ok := classify.ParseErrorBody(body); ok {
		re.facts = classify.Facts{Code: f.Code, Message: f.Message, Details: f.Details, Status: f.Status}
		if status == 0 {
			// A relayed error object may carry the status in its body.
			re.StatusCode = f.HTTPStatus
		}
	}
	return re
}

// responseError wraps an SDK error with the response it came from, when
// the response was an error response. Context errors and transport
// failures are returned as they are. anthropic-sdk-go has read the body
// already (at most classify.MaxErrorBody bytes: limitErrorBody saw to
// that) and left a copy in resp.Body.
func responseError(err error, resp *http.Response) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var ae *sdk.Error
	if !errors.As(err, &ae) || ae == nil {
		return err
	}
	if resp == nil {
		resp = ae.Response
	}
	if resp == nil || resp.StatusCode < 400 {
		// An error event inside a 200 stream: the 200 says nothing of it,
		// its type does.
		raw := ae.RawJSON()
		if len(raw) > classify.MaxErrorBody {
			raw = ""
		}
		return newResponseError(err, 0, nil, []byte(raw))
	}
	var body []byte
	if resp.Body != nil {
		if raw, rerr := io.ReadAll(io.LimitReader(resp.Body, classify.MaxErrorBody+1)); rerr == nil {
			body = raw
		}
	}
	if len(body) == 0 {
		body = []byte(ae.RawJSON())
	}
	return newResponseError(err, resp.StatusCode, resp.Header, body)
}

// limitErrorBody is an anthropic-sdk-go middleware that caps the body of
// an error response at classify.MaxErrorBody bytes: the SDK reads error
// bodies whole into memory. Reading is also bounded by the request's
// context, which net/http ties the body to.
func limitErrorBody(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	resp, err := next(req)
	if err == nil && resp != nil && resp.StatusCode >= 400 && resp.Body != nil {
		resp.Body = limitedBody{Reader: io.LimitReader(resp.Body, classify.MaxErrorBody), Closer: resp.Body}
	}
	return resp, err
}

type limitedBody struct {
	io.Reader
	io.Closer
}

// maxHeader bounds a header value the rule reads; a real Retry-After is at
// most an HTTP-date (29 bytes).
const maxHeader = 64

func header(h http.Header, name string) string {
	if h == nil {
		return ""
	}
	v := h.Get(name)
	if len(v) > maxHeader {
		return ""
	}
	return v
}
