package classify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"
)

// MaxErrorBody is the most of an error response body ReadResponse reads and
// ParseErrorBody accepts. Real error bodies are a few kilobytes.
const MaxErrorBody = 1 << 20

// HTTPError is an upstream error response read by ReadResponse. Its Error
// string names only the status: the upstream message may echo the request,
// so it stays in Facts.Message for callers who choose to log it.
type HTTPError struct {
	// Facts are what the response said: status, error body, and retry
	// headers.
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

// ReadResponse reads a failed response into an *HTTPError: the error body if
// it is one ParseErrorBody understands, the Retry-After and retry-after-ms
// headers, and for a 429 the reset of the exhausted limit that Anthropic's
// anthropic-ratelimit-*-reset headers give (RateLimitReset). Call it only for responses you treat as failures;
// it does not close the body.
//
// Reading is bounded twice: by size (at most MaxErrorBody bytes) and by ctx
// — when ctx ends, the body is closed, so a server that trickles an endless
// error body cannot hold the caller past its attempt. Pass the attempt's
// context (the one the request was sent with).
func ReadResponse(ctx context.Context, resp *http.Response) *HTTPError {
	f := Facts{HTTPStatus: resp.StatusCode}
	if resp.Body != nil {
		body := resp.Body
		stop := context.AfterFunc(ctx, func() { body.Close() })
		data, err := io.ReadAll(io.LimitReader(body, MaxErrorBody+1))
		stop()
		if err == nil {
			if g, ok := ParseErrorBody(data); ok {
				f.Status, f.Message, f.Details, f.Code = g.Status, g.Message, g.Details, g.Code
				if f.HTTPStatus == 0 {
					f.HTTPStatus = g.HTTPStatus
				}
			}
		}
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		// Anthropic's rate-limit headers say when the exhausted limit
		// resets, where a Retry-After may be missing.
		if d, ok := RateLimitReset(resp.Header, time.Now()); ok {
			f.RetryAfter = d
		}
	}
	f.RetryAfterHeader = resp.Header.Get("Retry-After")
	f.RetryAfterMsHeader = resp.Header.Get("Retry-After-Ms")
	return &HTTPError{Facts: f}
}

// parseRetryAfterMillis reads a retry-after-ms header value (milliseconds,
// possibly fractional), as OpenAI and Azure OpenAI send it. It returns
// false for an empty, malformed or non-positive value; large values are
// capped at MaxRetryAfter.
func parseRetryAfterMillis(s string) (time.Duration, bool) {
	if s == "" || len(s) > maxDelayText {
		return 0, false
	}
	ms, err := strconv.ParseFloat(s, 64)
	if err != nil || !(ms > 0) {
		return 0, false
	}
	if ms >= float64(MaxRetryAfter/time.Millisecond) {
		return MaxRetryAfter, true
	}
	return time.Duration(ms * float64(time.Millisecond)), true
}

// ParseErrorBody decodes an LLM API's error body. It understands:
//
//   - Google's form, {"error":{"code":429,"message":"...","status":
//     "RESOURCE_EXHAUSTED","details":[...]}}, and the same inside a JSON
//     array, [{"error":{...}}], as Gemini's OpenAI-compatible endpoint,
//     Code Assist and the non-SSE streamGenerateContent send it (the first
//     element with an error counts);
//   - OpenAI's form, {"error":{"message":"...","type":"...","code":
//     "insufficient_quota"}}, whose string code (or, without one, its type)
//     becomes Facts.Code, and the gateways that follow it with a numeric
//     code (OpenRouter) or a numeric "status" (Azure OpenAI);
//   - Anthropic's form, {"type":"error","error":{"type":"overloaded_error",
//     "message":"Overloaded","details":{"error_code":"..."}},"request_id":
//     "req_..."}, whose error type (or, when the classifier knows it, its
//     details' error_code) becomes Facts.Code;
//   - a bare string error, {"error":"overloaded"};
//   - vLLM's top-level form, {"object":"error","message":"...","code":400}.
//
// HTTPStatus is the body's numeric code (0 when absent). It returns false
// for bodies it does not understand or larger than MaxErrorBody.
func ParseErrorBody(body []byte) (Facts, bool) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || len(body) > MaxErrorBody {
		return Facts{}, false
	}
	switch body[0] {
	case '[':
		// One pass over the array; a type error in one element (a bare
		// string error, say) leaves the others decoded.
		var list []errorEnvelope
		err := json.Unmarshal(body, &list)
		if err != nil && !isTypeError(err) {
			return Facts{}, false
		}
		for i := range list {
			if i == maxDetails {
				break
			}
			if f, ok := list[i].facts(); ok {
				return f, true
			}
		}
		return Facts{}, false
	case '{':
		var env errorEnvelope
		err := json.Unmarshal(body, &env)
		if err == nil {
			return env.facts()
		}
		if !isTypeError(err) {
			return Facts{}, false
		}
		// {"error":"overloaded"}: the error is a bare string.
		var bare struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &bare) == nil && bare.Error != "" {
			return Facts{Message: bare.Error}, true
		}
		return env.facts()
	}
	return Facts{}, false
}

func isTypeError(err error) bool {
	var te *json.UnmarshalTypeError
	return errors.As(err, &te)
}

// errorEnvelope is the top level of an error body: Google's and OpenAI's
// {"error":{...}}, or vLLM's {"object":"error","message":...,"code":400}.
type errorEnvelope struct {
	Error   *errorObject    `json:"error"`
	Object  string          `json:"object"`
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

// errorObject is the "error" member, in Google's and OpenAI's forms: code
// and status may be numbers or strings.
type errorObject struct {
	Code    json.RawMessage `json:"code"`
	Message string          `json:"message"`
	Status  json.RawMessage `json:"status"`
	Type    json.RawMessage `json:"type"`
	// Details are google.rpc details (an array) or, in Anthropic's form,
	// an object whose error_code names the cause
	// ({"error_code":"enforced_spend_limit_reached"}).
	Details json.RawMessage `json:"details"`
}

// details reads the "details" member: Google's array, or the error_code of
// Anthropic's object.
func (e *errorObject) details() (list []map[string]any, errorCode string) {
	raw := bytes.TrimSpace(e.Details)
	if len(raw) == 0 {
		return nil, ""
	}
	switch raw[0] {
	case '[':
		// A malformed element leaves the others decoded, as before.
		_ = json.Unmarshal(raw, &list)
	case '{':
		var obj struct {
			ErrorCode json.RawMessage `json:"error_code"`
		}
		if json.Unmarshal(raw, &obj) == nil {
			errorCode, _ = stringValue(obj.ErrorCode)
		}
	}
	return list, boundedCode(errorCode)
}

func (env *errorEnvelope) facts() (Facts, bool) {
	e := env.Error
	if e == nil {
		if env.Object != "error" {
			return Facts{}, false
		}
		f := Facts{Message: env.Message}
		f.HTTPStatus, f.Code = numberOrCode(env.Code)
		if f.Code == "" || numeric(f.Code) {
			// Mistral: "type":"invalid_model","code":"1500".
			f.Code = boundedCode(env.Type)
		}
		return f, true
	}
	details, errorCode := e.details()
	f := Facts{Message: e.Message, Details: details}
	f.HTTPStatus, f.Code = numberOrCode(e.Code)
	if st, ok := stringValue(e.Status); ok {
		f.Status = st
	} else if n, ok := intValue(e.Status); ok && f.HTTPStatus == 0 {
		f.HTTPStatus = n
	}
	if f.Code == "" || numeric(f.Code) {
		if t, ok := stringValue(e.Type); ok {
			f.Code = boundedCode(t)
		}
	}
	if _, _, known := codeClass(errorCode); known {
		// Anthropic's error.details.error_code is more precise than the
		// type ("enforced_spend_limit_reached" under "rate_limit_error");
		// an error_code the classifier does not know counts as the bare
		// type, as Anthropic's SDKs advise.
		f.Code = errorCode
	}
	return f, true
}

// numeric reports whether an error code is a number that is not an HTTP
// status (Mistral's "1500"): its type says more.
func numeric(code string) bool {
	for i := 0; i < len(code); i++ {
		if !isDigit(code[i]) {
			return false
		}
	}
	return code != ""
}

// numberOrCode reads a "code" member: a number is an HTTP status, a string
// an API error code.
func numberOrCode(raw json.RawMessage) (int, string) {
	if n, ok := intValue(raw); ok {
		return n, ""
	}
	if s, ok := stringValue(raw); ok {
		if n, err := strconv.Atoi(s); err == nil && n >= 100 && n <= 599 {
			return n, ""
		}
		return 0, boundedCode(s)
	}
	return 0, ""
}

func intValue(raw json.RawMessage) (int, bool) {
	if len(raw) == 0 || raw[0] == '"' {
		return 0, false
	}
	var n int
	if json.Unmarshal(raw, &n) != nil || n < 0 || n > 999 {
		return 0, false
	}
	return n, true
}

func stringValue(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// boundedCode keeps an error code only when it is short: codes are
// identifiers, and a long one is text that has no business being matched.
func boundedCode(s string) string {
	if len(s) > maxIDLen {
		return ""
	}
	return s
}
