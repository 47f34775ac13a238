package oaicompat

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tierguard/tierguard/classify"
)

// Errors for 200 responses that carry no usable answer. Tier returns them
// wrapped with classify.Wrap; errors.Is finds them.
var (
	// ErrNoChoices: the response had no choice. InvalidOutput.
	ErrNoChoices = errors.New("openai: response has no choices")
	// ErrNoFinishReason: the choice has no finish_reason, so the answer may
	// be cut short. InvalidOutput.
	ErrNoFinishReason = errors.New("openai: choice has no finish reason")
	// ErrContentFilter: the answer stopped with finish_reason
	// content_filter. Safety: the default class table fails closed.
	ErrContentFilter = errors.New("openai: answer stopped by the content filter")
	// ErrRefusal: the model refused (message.refusal set, no content).
	// Safety.
	ErrRefusal = errors.New("openai: the model refused to answer")
	// ErrEmptyAnswer: the choice carries nothing usable — no content that
	// is not blank, no tool call — such as a "length" finish with an
	// empty message. InvalidOutput: the next tier answers.
	ErrEmptyAnswer = errors.New("openai: answer is empty")
)

// ResponseError is an error response as Tier returns it: the SDK's error
// (usually an *openai.Error) with the response's status and retry headers.
// openai-go keeps the headers in Error.Response, but for a body whose
// "error" is not an object ({"error":"overloaded"}, as some gateways send)
// it returns a bare JSON decoding error and the status is lost; Tier reads
// the status from the response (option.WithResponseInto) in that case too.
//
// It carries its own verdict (it implements classify.Classified), so it
// classifies correctly with any classifier built on classify.Standard. Its
// text names only the status, never the upstream message.
type ResponseError struct {
	// Err is the SDK's error; errors.As(err, &oaiErr) with an
	// *openai.Error target reaches it when there is one.
	Err error
	// StatusCode is the HTTP status of the response.
	StatusCode int
	// RetryAfter and RetryAfterMs are the raw header values ("" if absent).
	RetryAfter   string
	RetryAfterMs string

	// body is what the error body said, read once when the error was made;
	// it stays out of Error's text.
	body *parsedBody
}

// parsedBody is an error body decoded by classify.ParseErrorBody.
type parsedBody struct {
	facts classify.Facts
	ok    bool
}

// Error returns "openai: upstream error 429 RESOURCE_EXHAUSTED". For an
// error that carried no status (an error event whose code is a string,
// such as "server_error"), it names the status the code stands for.
func (e *ResponseError) Error() string {
	v := e.Verdict()
	code := e.StatusCode
	if code == 0 {
		code = v.HTTPStatus
	}
	s := "openai: upstream error " + strconv.Itoa(code)
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

// errBodyError stands for an error object inside a 200 answer; the
// object's text stays out of every error string.
var errBodyError = errors.New("openai: error inside a 200 answer")

// bodyError returns the error a 200 without choices carries in its body —
// OpenRouter and some gateways answer {"error":{"code":502,...}} with HTTP
// 200 once the model has started — as a *ResponseError whose StatusCode is
// the embedded code, so that it classifies as that status would. It
// returns nil when the body holds no error.
func bodyError(resp *oai.ChatCompletion) error {
	if resp == nil {
		return nil
	}
	raw := resp.RawJSON()
	if raw == "" || len(raw) > classify.MaxErrorBody {
		return nil
	}
	f, ok := classify.ParseErrorBody([]byte(raw))
	if !ok {
		return nil
	}
	return &ResponseError{Err: errBodyError, StatusCode: f.HTTPStatus, body: &parsedBody{facts: f, ok: true}}
}

// responseError wraps an SDK error with the response it came from, when the
// response was an error response. Context errors and transport failures
// are returned as they are. openai-go has read the body already (at most
// classify.MaxErrorBody bytes: limitErrorBody saw to that) and left a copy
// in resp.Body; it is decoded here, in every form classify.ParseErrorBody
// knows — the array form and bare strings that openai-go cannot decode
// among them.
func responseError(err error, resp *http.Response) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if resp == nil || resp.StatusCode < 400 {
		return err
	}
	re := &ResponseError{
		Err:          err,
		StatusCode:   resp.StatusCode,
		RetryAfter:   header(resp.Header, "Retry-After"),
		RetryAfterMs: header(resp.Header, "Retry-After-Ms"),
	}
	if resp.Body != nil {
		if raw, rerr := io.ReadAll(io.LimitReader(resp.Body, classify.MaxErrorBody+1)); rerr == nil {
			f, ok := classify.ParseErrorBody(raw)
			re.body = &parsedBody{facts: f, ok: ok}
		}
	}
	return re
}

// limitErrorBody is an openai-go middleware that caps the body of an error
// response at classify.MaxErrorBody bytes: openai-go reads error bodies
// whole into memory. Reading is also bounded by the request's context,
// which net/http ties the body to.
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
