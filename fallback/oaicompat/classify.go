package oaicompat

import (
	"errors"
	"net/http"

	oai "github.com/openai/openai-go/v3"

	"github.com/tierguard/tierguard/classify"
)

// Rule is the classify.Rule for openai-go's errors. It recognises an
// *openai.Error (and a ResponseError) anywhere in the error chain and
// classifies it with classify.FromFacts: the status, the Retry-After and
// retry-after-ms headers (retry-after-ms wins when both are sent, as in
// openai-go itself), the error body as classify.ParseErrorBody reads it,
// and the message's hints. The body's string code decides where it is more
// precise than the status:
//
//	insufficient_quota (code or type)          QuotaExhausted  (a 429 retrying cannot fix)
//	context_length_exceeded                    ContextTooLong
//	content_filter, content_policy_violation,
//	invalid_prompt                             Safety
//	model_not_found                            Retired (the model the message names)
//	invalid_api_key                            Auth
//	rate_limit_exceeded                        RateLimited (QuotaExhausted when it names
//	                                           a daily quota or asks for a long wait)
//
// Without a code, the message decides what it can: "maximum context length
// is N tokens" is ContextTooLong, "try again in 1.574s" a retry-after,
// "requests per day" a quota. Gateways that speak Google's error shape —
// Gemini's OpenAI-compatible endpoint sends [{"error":{...}}] with
// "status" and google.rpc "details" — get those read too: RetryInfo, a
// per-day QuotaFailure, ErrorInfo.
//
// It returns false for any other error, so transport failures and context
// errors fall through to the built-in understanding.
func Rule(err error) (classify.Verdict, bool) {
	f, ok := FactsOf(err)
	if !ok {
		return classify.Verdict{}, false
	}
	return classify.FromFacts(f), true
}

// Classifier is classify.New(Rule): the standard classifier taught
// openai-go's errors. Give it to fallback.Config.Classifier; for a chain
// that mixes SDKs, classify.New(gemini.Rule, openai.Rule).
var Classifier = classify.New(Rule)

// FactsOf extracts the facts of an *openai.Error (or of a ResponseError)
// for classify.FromFacts. It reports false when err holds neither.
func FactsOf(err error) (classify.Facts, bool) {
	if err == nil {
		return classify.Facts{}, false
	}
	var oe *oai.Error
	hasOE := errors.As(err, &oe) && oe != nil
	var re *ResponseError
	hasRE := errors.As(err, &re) && re != nil
	if !hasOE && !hasRE {
		return classify.Facts{}, false
	}
	var f classify.Facts
	var h http.Header
	parsed := false
	if hasRE {
		f.HTTPStatus = re.StatusCode
		h = http.Header{"Retry-After": {re.RetryAfter}, "Retry-After-Ms": {re.RetryAfterMs}}
		if re.body != nil {
			f, parsed = re.body.facts, re.body.ok
			f.HTTPStatus = re.StatusCode
		}
	}
	if hasOE {
		if oe.StatusCode != 0 {
			f.HTTPStatus = oe.StatusCode
		}
		if h == nil && oe.Response != nil {
			h = oe.Response.Header
		}
		if !parsed {
			if raw := oe.RawJSON(); raw != "" && len(raw) < classify.MaxErrorBody-16 {
				// RawJSON is the "error" member: wrap it back into a body.
				g, _ := classify.ParseErrorBody([]byte(`{"error":` + raw + `}`))
				f.Status, f.Details, f.Code = g.Status, g.Details, g.Code
			}
			f.Message = oe.Message
		}
		if f.Code == "" {
			f.Code = oe.Code
		}
		if f.Code == "" && oe.Type == "insufficient_quota" {
			f.Code = oe.Type
		}
	}
	f.RetryAfterMsHeader = header(h, "Retry-After-Ms")
	f.RetryAfterHeader = header(h, "Retry-After")
	return f, true
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
