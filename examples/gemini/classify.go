package gemini

import (
	"errors"
	"strconv"
	"time"

	"github.com/tierguard/tierguard/classify"
)

// Rule is the classify.Rule for the genai SDK's errors. It recognises a
// genai.APIError anywhere in the error chain — the SDK returns it as a
// value, so it is found with errors.As and a genai.APIError target — and
// classifies it with classify.FromFacts:
//
//   - the HTTP status is APIError.Code; when Code is 0 (a JSON error body
//     without "code") it is read from APIError.Status, which is either a
//     canonical status ("INTERNAL" → 500) or, for a non-JSON body, Go's
//     "502 Bad Gateway" form; failing both, from a ResponseError's status;
//   - APIError.Details are google.rpc details: RetryInfo.retryDelay gives
//     the retry-after, a QuotaFailure naming a PerDay quota makes a 429
//     QuotaExhausted, an ErrorInfo reason such as API_KEY_INVALID makes a
//     400 Auth;
//   - the message is searched (never copied) for the token-limit wording
//     (ContextTooLong) and the "Please retry in 25.46s." hint;
//   - a ResponseError in the chain adds the Retry-After and Retry-After-Ms
//     headers, which the SDK drops.
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

// Classifier is classify.New(Rule): the standard classifier taught the
// genai SDK's errors. Give it to fallback.Config.Classifier. To combine it
// with other SDKs' rules, use classify.New(gemini.Rule, otherRule).
var Classifier = classify.New(Rule)

// FactsOf extracts the facts of a genai.APIError (and of a ResponseError
// around it) for classify.FromFacts. It reports false when err holds
// neither.
func FactsOf(err error) (classify.Facts, bool) {
	var re *ResponseError
	hasRE := errors.As(err, &re) && re != nil
	api, hasAPI := apiError(err)
	if !hasAPI && !hasRE {
		return classify.Facts{}, false
	}
	f := classify.Facts{HTTPStatus: api.Code, Status: api.Status, Message: api.Message, Details: api.Details}
	if !hasRE {
		return f, true
	}
	if f.HTTPStatus == 0 && re.StatusCode != 0 && classify.FromFacts(classify.Facts{Status: f.Status}).HTTPStatus == 0 {
		f.HTTPStatus = re.StatusCode
	}
	f.RetryAfterHeader = re.RetryAfter
	if d, ok := parseMillis(re.RetryAfterMs); ok {
		f.RetryAfter = d
	}
	return f, true
}

// parseMillis reads a Retry-After-Ms value, capped at classify.MaxRetryAfter.
func parseMillis(s string) (time.Duration, bool) {
	if s == "" || len(s) > maxHeader {
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
