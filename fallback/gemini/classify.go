package gemini

import (
	"errors"

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
//     the retry-after, a QuotaFailure or an ErrorInfo's metadata naming a
//     PerDay quota makes a 429 QuotaExhausted, an ErrorInfo reason such as
//     API_KEY_INVALID makes a 400 Auth;
//   - an error body genai could not decode (the array form
//     [{"error":{...}}], kept raw in APIError.Message) is decoded with
//     classify.ParseErrorBody, so its details count too;
//   - the message is searched (never copied) for the hints classify knows:
//     the token-limit wording (ContextTooLong), "Please retry in 25.46s.",
//     a daily quota, billing, and the model a 404 names (only a 404 that
//     names a model is Retired);
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
	if len(f.Details) == 0 && looksLikeJSON(f.Message) {
		// genai decodes only the object form of an error body. For any other
		// — the array form [{"error":{...}}] that Gemini's OpenAI-compatible
		// endpoint and non-SSE streamGenerateContent send — it keeps the raw
		// body as Message and "429 Too Many Requests" as Status: decode it
		// here, so that RetryInfo, QuotaFailure and ErrorInfo still count.
		if g, ok := classify.ParseErrorBody([]byte(f.Message)); ok {
			f.Message, f.Details, f.Code = g.Message, g.Details, g.Code
			if g.Status != "" {
				f.Status = g.Status
			}
			if f.HTTPStatus == 0 {
				f.HTTPStatus = g.HTTPStatus
			}
		}
	}
	if !hasRE {
		return f, true
	}
	if f.HTTPStatus == 0 && re.StatusCode != 0 && classify.FromFacts(classify.Facts{Status: f.Status}).HTTPStatus == 0 {
		f.HTTPStatus = re.StatusCode
	}
	f.RetryAfterHeader = re.RetryAfter
	f.RetryAfterMsHeader = re.RetryAfterMs
	return f, true
}

// looksLikeJSON reports whether an APIError message is a raw JSON body.
func looksLikeJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			continue
		case '[', '{':
			return len(s) <= classify.MaxErrorBody
		}
		return false
	}
	return false
}
