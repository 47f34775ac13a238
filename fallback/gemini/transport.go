package gemini

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"

	"google.golang.org/genai"

	"github.com/tierguard/tierguard/classify"
)

// Transport is an http.RoundTripper for the genai client. It does three
// things the SDK does not:
//
//   - It records, for the call whose context carries a Capture (see
//     WithCapture), the status and the Retry-After / Retry-After-Ms headers
//     of every error response, and how many HTTP requests the call made.
//     genai.APIError keeps neither the headers nor, for JSON bodies without
//     "code", the status.
//   - It caps the body of error responses at MaxErrorBody bytes: the SDK
//     reads an error body whole into memory (and into APIError.Message).
//   - It removes from event streams the lines genai cannot read: SSE
//     comments (": keepalive", ": ping"), which the SSE specification tells
//     clients to ignore and which proxies and load balancers insert into
//     quiet streams, and the event, id and retry fields. genai v1.77.0
//     fails a stream on any line but "data:", so without this every
//     stream through such a proxy would fail and count against the
//     breaker. Data lines pass through untouched.
//
// The Capture travels in the request's context, which the SDK derives from
// the context given to GenerateContent, so concurrent calls through one
// client never see each other's headers. Requests whose context has no
// Capture pass through unrecorded (their error bodies are still capped).
//
// Install it with NewClient, or set it as the Transport of the
// genai.ClientConfig's HTTPClient yourself.
type Transport struct {
	// Base makes the requests; nil means http.DefaultTransport.
	Base http.RoundTripper
	// MaxErrorBody caps the bytes of an error response body the SDK may
	// read; 0 means classify.MaxErrorBody (1 MiB), negative means no cap.
	// A capped JSON body no longer parses, so the SDK reports it as
	// "NNN Status" with the raw prefix as its message: still classified by
	// its status.
	MaxErrorBody int64
}

// RoundTrip sends req through Base and records the response in the
// request's Capture, if any.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	c, _ := req.Context().Value(captureKey{}).(*Capture)
	if c != nil {
		c.sent()
	}
	resp, err := base.RoundTrip(req)
	if err != nil || resp == nil {
		return resp, err
	}
	if resp.StatusCode < 400 {
		if resp.Body != nil && isEventStream(resp) {
			resp.Body = newSSEFilter(resp.Body)
		}
		return resp, nil
	}
	if c != nil {
		c.failed(resp)
	}
	limit := t.MaxErrorBody
	if limit == 0 {
		limit = classify.MaxErrorBody
	}
	if limit > 0 && resp.Body != nil {
		resp.Body = limitedBody{Reader: io.LimitReader(resp.Body, limit), Closer: resp.Body}
	}
	return resp, nil
}

// CloseIdleConnections closes the idle connections of Base, if it can.
// http.Client.CloseIdleConnections calls it.
func (t *Transport) CloseIdleConnections() {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if ci, ok := base.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

type limitedBody struct {
	io.Reader
	io.Closer
}

type captureKey struct{}

// Capture records what a Transport saw for the HTTP requests made under one
// context: how many there were, and the status and retry headers of the
// last error response. The Tier uses one per attempt; use one yourself to
// classify errors of SDK calls you make directly:
//
//	ctx, capture := gemini.WithCapture(ctx)
//	_, err := client.Models.GenerateContent(ctx, model, contents, config)
//	err = capture.Wrap(err) // now carries Retry-After, if the server sent it
//	v := gemini.Classifier.Classify(err)
//
// A Capture is safe for concurrent use.
type Capture struct {
	mu           sync.Mutex
	requests     int
	status       int
	retryAfter   string
	retryAfterMs string
}

// WithCapture returns a context that makes a Transport record into the
// returned Capture.
func WithCapture(ctx context.Context) (context.Context, *Capture) {
	c := &Capture{}
	return context.WithValue(ctx, captureKey{}, c), c
}

func (c *Capture) sent() {
	c.mu.Lock()
	c.requests++
	c.mu.Unlock()
}

// maxHeader bounds a recorded header value; a real Retry-After is at most
// an HTTP-date (29 bytes).
const maxHeader = 64

func header(h http.Header, name string) string {
	v := h.Get(name)
	if len(v) > maxHeader {
		return ""
	}
	return v
}

func (c *Capture) failed(resp *http.Response) {
	c.mu.Lock()
	c.status = resp.StatusCode
	c.retryAfter = header(resp.Header, "Retry-After")
	c.retryAfterMs = header(resp.Header, "Retry-After-Ms")
	c.mu.Unlock()
}

// Requests returns how many HTTP requests were sent under the context.
func (c *Capture) Requests() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests
}

// Wrap returns err with the last error response's status and retry headers
// attached, as a *ResponseError, when err is a genai.APIError and an error
// response was recorded. Otherwise it returns err unchanged.
func (c *Capture) Wrap(err error) error {
	if err == nil || c == nil {
		return err
	}
	if _, ok := apiError(err); !ok {
		return err
	}
	var re *ResponseError
	if errors.As(err, &re) {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status == 0 {
		return err
	}
	return &ResponseError{Err: err, StatusCode: c.status, RetryAfter: c.retryAfter, RetryAfterMs: c.retryAfterMs}
}

// ResponseError is a genai.APIError together with what the SDK dropped from
// the HTTP response: its status and its Retry-After and Retry-After-Ms
// headers. Tier returns it for every error response; Capture.Wrap makes one
// for calls of your own.
//
// It carries its own verdict (it implements classify.Classified), so it
// classifies correctly with any classifier built on classify.Standard. Its
// Error text names only the status: the upstream message may echo the
// prompt, so it stays in the wrapped genai.APIError for callers who choose
// to log it.
type ResponseError struct {
	// Err is the SDK's error; errors.As(err, &apiErr) with a
	// genai.APIError target reaches it.
	Err error
	// StatusCode is the HTTP status of the response.
	StatusCode int
	// RetryAfter and RetryAfterMs are the raw header values ("" if absent).
	RetryAfter   string
	RetryAfterMs string
}

// Error returns "gemini: upstream error 503 UNAVAILABLE".
func (e *ResponseError) Error() string {
	v := e.Verdict()
	s := "gemini: upstream error " + strconv.Itoa(v.HTTPStatus)
	if v.Status != "" {
		s += " " + v.Status
	}
	return s
}

// Unwrap returns the SDK's error.
func (e *ResponseError) Unwrap() error { return e.Err }

// Verdict classifies the response with Rule.
func (e *ResponseError) Verdict() classify.Verdict {
	v, _ := Rule(e)
	return v
}

// apiError finds a genai.APIError in err's chain. The SDK returns it as a
// value; a pointer is accepted too.
func apiError(err error) (genai.APIError, bool) {
	var v genai.APIError
	if errors.As(err, &v) {
		return v, true
	}
	var p *genai.APIError
	if errors.As(err, &p) && p != nil {
		return *p, true
	}
	return genai.APIError{}, false
}
