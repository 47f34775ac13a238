package anthropic

import (
	"errors"
	"net/http"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/tierguard/tierguard/classify"
)

// Rule is the classify.Rule for anthropic-sdk-go's errors. It recognises an
// *anthropic.Error (and a ResponseError) anywhere in the error chain and
// classifies it with classify.FromFacts: the status, the retry-after and
// retry-after-ms headers, the reset of an exhausted limit that a 429's
// anthropic-ratelimit-*-reset headers give (the longer wait wins), and the
// error body — Anthropic's {"type":"error","error":{"type":...,
// "message":...}} — as classify.ParseErrorBody reads it. The error type
// decides where it is more precise than the status
// (https://docs.anthropic.com/en/api/errors):
//
//	invalid_request_error (400)   InvalidRequest; ContextTooLong for "prompt is
//	                              too long"; QuotaExhausted for "credit balance
//	                              is too low" (a billing limit Anthropic still
//	                              sends as a 400)
//	authentication_error (401),
//	permission_error (403)        Auth
//	billing_error (402)           QuotaExhausted
//	not_found_error (404)         Retired for the model its message names
//	                              ("model: claude-x"), on any status; else
//	                              InvalidRequest
//	request_too_large (413)       ContextTooLong (the request's bytes)
//	rate_limit_error (429)        RateLimited; QuotaExhausted when its
//	                              details' error_code is a spend limit
//	                              (enforced_spend_limit_reached, ...)
//	api_error (500),
//	timeout_error (504),
//	overloaded_error (529)        Transient
//
// An error event inside a 200 stream has no status: its type stands for
// the status above. The rule returns false for any other error, so
// transport failures and context errors fall through to the built-in
// understanding.
func Rule(err error) (classify.Verdict, bool) {
	f, ok := FactsOf(err)
	if !ok {
		return classify.Verdict{}, false
	}
	return classify.FromFacts(f), true
}

// Classifier is classify.New(Rule): the standard classifier taught
// anthropic-sdk-go's errors. Give it to fallback.Config.Classifier; for a
// chain that mixes SDKs, classify.New(gemini.Rule, anthropic.Rule,
// oaicompat.Rule).
var Classifier = classify.New(Rule)

// FactsOf extracts the facts of an *anthropic.Error (or of a
// ResponseError) for classify.FromFacts. It reports false when err holds
// neither.
func FactsOf(err error) (classify.Facts, bool) {
	if err == nil {
		return classify.Facts{}, false
	}
	var re *ResponseError
	if errors.As(err, &re) && re != nil {
		return re.Facts(), true
	}
	var ae *sdk.Error
	if !errors.As(err, &ae) || ae == nil {
		return classify.Facts{}, false
	}
	// The SDK's error alone (a caller's own call): its status — a 200 for
	// an error event inside a stream, which says nothing — its headers and
	// its body.
	status := ae.StatusCode
	var h http.Header
	if ae.Response != nil {
		h = ae.Response.Header
	}
	if status < 400 {
		status, h = 0, nil
	}
	raw := ae.RawJSON()
	if len(raw) > classify.MaxErrorBody {
		raw = ""
	}
	return newResponseError(err, status, h, []byte(raw)).Facts(), true
}
