package openai

import (
	"context"
	"errors"
	"net/http"
	"strconv"

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
}

// Error returns "openai: upstream error 429 RESOURCE_EXHAUSTED".
func (e *ResponseError) Error() string {
	v := e.Verdict()
	s := "openai: upstream error " + strconv.Itoa(e.StatusCode)
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

// responseError wraps an SDK error with the response it came from, when the
// response was an error response. Context errors and transport failures
// are returned as they are.
func responseError(err error, resp *http.Response) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if resp == nil || resp.StatusCode < 400 {
		return err
	}
	return &ResponseError{
		Err:          err,
		StatusCode:   resp.StatusCode,
		RetryAfter:   header(resp.Header, "Retry-After"),
		RetryAfterMs: header(resp.Header, "Retry-After-Ms"),
	}
}
