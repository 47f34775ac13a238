package fakegemini

import "net/http"

// Kind names what happened to a request: the fault a [Rule] injects, or the
// outcome counted in [Server.Stats]. Its value is a short snake_case word,
// handy in logs and table test names.
type Kind string

// Outcomes that are not faults.
const (
	// Success is a normal 200 answer.
	Success Kind = "success"
	// Canceled counts a request whose client went away (its context ended)
	// while the server was waiting or streaming, or that was cut short by
	// [Server.Close]. It is an outcome only; a Rule cannot inject it.
	Canceled Kind = "canceled"
)

// Error answers in Gemini's JSON error shape, {"error":{"code","message",
// "status","details"}}.
const (
	// Unavailable is 503 UNAVAILABLE, "The model is overloaded. Please try
	// again later."
	Unavailable Kind = "unavailable"
	// Internal is 500 INTERNAL.
	Internal Kind = "internal"
	// DeadlineExceeded is 504 DEADLINE_EXCEEDED.
	DeadlineExceeded Kind = "deadline_exceeded"
	// RateLimited is 429 RESOURCE_EXHAUSTED whose google.rpc.QuotaFailure
	// names a per-minute quota, with a google.rpc.RetryInfo.
	RateLimited Kind = "rate_limited"
	// QuotaExhausted is 429 RESOURCE_EXHAUSTED whose google.rpc.QuotaFailure
	// names a per-day quota. Like the real API it still carries a short
	// google.rpc.RetryInfo.
	QuotaExhausted Kind = "quota_exhausted"
	// Retired is 404 NOT_FOUND "models/X is not found for API version v1beta,
	// or is not supported for generateContent. ...".
	Retired Kind = "retired"
	// TokenLimit is 400 INVALID_ARGUMENT "The input token count (N) exceeds
	// the maximum number of tokens allowed (M)."
	TokenLimit Kind = "token_limit"
	// BadRequest is another 400 INVALID_ARGUMENT (a malformed request body
	// gets this one, with a JSON-parse message).
	BadRequest Kind = "bad_request"
	// InvalidAPIKey is 400 INVALID_ARGUMENT "API key not valid. Please pass a
	// valid API key." with a google.rpc.ErrorInfo whose reason is
	// API_KEY_INVALID.
	InvalidAPIKey Kind = "invalid_api_key"
	// Unauthenticated is 401 UNAUTHENTICATED.
	Unauthenticated Kind = "unauthenticated"
	// PermissionDenied is 403 PERMISSION_DENIED.
	PermissionDenied Kind = "permission_denied"
)

// Error answers that are not well-formed Gemini errors.
const (
	// BadGatewayHTML is a 502 text/html page from a front-end proxy.
	BadGatewayHTML Kind = "bad_gateway_html"
	// NoCodeJSON is a JSON error body without the "code" field (HTTP 500 by
	// default); the genai SDK reports it with Code 0.
	NoCodeJSON Kind = "no_code_json"
	// EmptyBody is an error status (500 by default) with an empty body.
	EmptyBody Kind = "empty_body"
	// HugeBody is an error status (500 by default) with a JSON error body of
	// Params.BodySize bytes (10 MiB by default), for hostile-input tests.
	HugeBody Kind = "huge_body"
)

// Transport faults.
const (
	// Drop closes the connection without writing any response.
	Drop Kind = "drop"
	// Stall holds the request until the client gives up (counted as
	// [Canceled]) or, when Params.StallFor is set, for that long before
	// answering normally (counted as Stall).
	Stall Kind = "stall"
	// StreamCut writes part of a 200 body and then drops the connection, so
	// the client reads io.ErrUnexpectedEOF rather than a clean end. A stream
	// is cut after Params.CutAfter chunks; a unary body is cut in the middle.
	StreamCut Kind = "stream_cut"
)

// Answers with status 200 that a client must still refuse.
const (
	// MalformedJSON answers 200 with text that is not valid JSON
	// (Params.Text), for clients that asked for JSON.
	MalformedJSON Kind = "malformed_json"
	// SafetyFinish answers 200 with a candidate whose finishReason is
	// SAFETY, with safetyRatings and no content.
	SafetyFinish Kind = "safety_finish"
	// PromptBlocked answers 200 with promptFeedback.blockReason SAFETY and
	// no candidates.
	PromptBlocked Kind = "prompt_blocked"
	// EmptyCandidates answers 200 with an empty candidate list.
	EmptyCandidates Kind = "empty_candidates"
	// NoFinishReason answers 200 with text but no finishReason; a stream
	// ends cleanly without any chunk carrying one.
	NoFinishReason Kind = "no_finish_reason"
)

var kindStatus = map[Kind]int{
	Success:          http.StatusOK,
	Canceled:         0,
	Unavailable:      http.StatusServiceUnavailable,
	Internal:         http.StatusInternalServerError,
	DeadlineExceeded: http.StatusGatewayTimeout,
	RateLimited:      http.StatusTooManyRequests,
	QuotaExhausted:   http.StatusTooManyRequests,
	Retired:          http.StatusNotFound,
	TokenLimit:       http.StatusBadRequest,
	BadRequest:       http.StatusBadRequest,
	InvalidAPIKey:    http.StatusBadRequest,
	Unauthenticated:  http.StatusUnauthorized,
	PermissionDenied: http.StatusForbidden,
	BadGatewayHTML:   http.StatusBadGateway,
	NoCodeJSON:       http.StatusInternalServerError,
	EmptyBody:        http.StatusInternalServerError,
	HugeBody:         http.StatusInternalServerError,
	Drop:             0,
	Stall:            http.StatusOK,
	StreamCut:        http.StatusOK,
	MalformedJSON:    http.StatusOK,
	SafetyFinish:     http.StatusOK,
	PromptBlocked:    http.StatusOK,
	EmptyCandidates:  http.StatusOK,
	NoFinishReason:   http.StatusOK,
}

// HTTPStatus is the default HTTP status the Gemini endpoints answer with for
// k: the error status for error kinds, 200 for kinds that answer 200, and 0
// for [Drop] and [Canceled] (no response) or an unknown kind. On the OpenAI
// endpoint [InvalidAPIKey] answers 401 and [PromptBlocked] 400 instead.
func (k Kind) HTTPStatus() int { return kindStatus[k] }

// Valid reports whether k is one of the kinds defined by this package.
func (k Kind) Valid() bool {
	_, ok := kindStatus[k]
	return ok
}

// ErrorKinds lists, in a fixed order, the kinds for which [ErrorResponse]
// and [OpenAIErrorResponse] produce an error response.
func ErrorKinds() []Kind {
	return []Kind{
		Unavailable, Internal, DeadlineExceeded, RateLimited, QuotaExhausted,
		Retired, TokenLimit, BadRequest, InvalidAPIKey, Unauthenticated,
		PermissionDenied, BadGatewayHTML, NoCodeJSON, EmptyBody, HugeBody,
	}
}

func (k Kind) isError() bool {
	s := kindStatus[k]
	return s >= 400
}
