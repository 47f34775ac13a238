package openai

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	oai "github.com/openai/openai-go/v3"

	"github.com/tierguard/tierguard/classify"
)

// Rule is the classify.Rule for openai-go's errors. It recognises an
// *openai.Error (and a ResponseError) anywhere in the error chain and
// classifies it with classify.FromFacts — StatusCode, the Retry-After and
// retry-after-ms headers of Error.Response (retry-after-ms wins when both
// are sent, as in openai-go itself), and the message's hints — then lets
// OpenAI's error codes decide where they are more precise than the status:
//
//	insufficient_quota (code or type)  QuotaExhausted  (a 429 that retrying cannot fix)
//	context_length_exceeded            ContextTooLong
//	content_filter                     Safety          (a blocked prompt, 400)
//	model_not_found                    Retired
//	invalid_api_key                    Auth
//	rate_limit_exceeded                RateLimited
//
// Gateways that speak Google's error shape inside OpenAI's envelope (Gemini's
// OpenAI-compatible endpoint sends "status" and google.rpc "details") get
// those read too: RetryInfo, a per-day QuotaFailure, ErrorInfo.
//
// It returns false for any other error, so transport failures and context
// errors fall through to the built-in understanding.
func Rule(err error) (classify.Verdict, bool) {
	f, code, ok := facts(err)
	if !ok {
		return classify.Verdict{}, false
	}
	v := classify.FromFacts(f)
	if c, reason, ok := codeClass(code); ok {
		v.Class, v.Reason = c, reason
	}
	return v, true
}

// Classifier is classify.New(Rule): the standard classifier taught
// openai-go's errors. Give it to fallback.Config.Classifier; for a chain
// that mixes SDKs, classify.New(gemini.Rule, openai.Rule).
var Classifier = classify.New(Rule)

// FactsOf extracts the facts of an *openai.Error (or of a ResponseError)
// for classify.FromFacts. It reports false when err holds neither. The
// OpenAI error code is not a fact classify knows; Rule applies it.
func FactsOf(err error) (classify.Facts, bool) {
	f, _, ok := facts(err)
	return f, ok
}

func facts(err error) (f classify.Facts, code string, ok bool) {
	if err == nil {
		return f, "", false
	}
	var oe *oai.Error
	hasOE := errors.As(err, &oe) && oe != nil
	var re *ResponseError
	hasRE := errors.As(err, &re) && re != nil
	if !hasOE && !hasRE {
		return f, "", false
	}
	var h http.Header
	if hasRE {
		f.HTTPStatus = re.StatusCode
		h = http.Header{"Retry-After": {re.RetryAfter}, "Retry-After-Ms": {re.RetryAfterMs}}
	}
	if hasOE {
		if oe.StatusCode != 0 {
			f.HTTPStatus = oe.StatusCode
		}
		f.Message = oe.Message
		code = oe.Code
		if code == "" && oe.Type == "insufficient_quota" {
			code = oe.Type
		}
		if h == nil && oe.Response != nil {
			h = oe.Response.Header
		}
		if raw := oe.RawJSON(); len(raw) < classify.MaxErrorBody-16 && (strings.Contains(raw, `"status"`) || strings.Contains(raw, `"details"`)) {
			if g, ok := classify.ParseGoogleError([]byte(`{"error":` + raw + `}`)); ok {
				f.Status, f.Details = g.Status, g.Details
			}
		}
	}
	if d, ok := parseMillis(header(h, "Retry-After-Ms")); ok {
		f.RetryAfter = d
	} else {
		f.RetryAfterHeader = header(h, "Retry-After")
	}
	return f, code, true
}

func codeClass(code string) (classify.Class, string, bool) {
	switch code {
	case "insufficient_quota":
		return classify.QuotaExhausted, "insufficient quota", true
	case "context_length_exceeded":
		return classify.ContextTooLong, "context length exceeded", true
	case "content_filter":
		return classify.Safety, "content filter", true
	case "model_not_found":
		return classify.Retired, "model not found", true
	case "invalid_api_key":
		return classify.Auth, "invalid api key", true
	case "rate_limit_exceeded":
		return classify.RateLimited, "rate limited", true
	}
	return 0, "", false
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

// parseMillis reads a retry-after-ms value, capped at classify.MaxRetryAfter.
func parseMillis(s string) (time.Duration, bool) {
	if s == "" {
		return 0, false
	}
	ms, err := strconv.ParseFloat(s, 64)
	if err != nil || !(ms > 0) {
		return 0, false
	}
	if ms >= float64(classify.MaxRetryAfter/time.Millisecond) {
		return classify.MaxRetryAfter, true
	}
	return time.Duration(ms * float64(time.Millisecond)), true
}
