package classify_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tierguard/tierguard/classify"
)

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"37", "1.5", "-5", "1000000000", "Sun, 29 Nov 2026 12:00:00 GMT", "garbage", ""} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := classify.ParseRetryAfter(s, now)
		if d < 0 || d > classify.MaxRetryAfter || (!ok && d != 0) {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v", s, d, ok)
		}
	})
}

func FuzzParseRetryDelay(f *testing.F) {
	for _, s := range []string{"37s", "1.5s", "-5s", "1e308s", "0.000000001s", "s", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := classify.ParseRetryDelay(s)
		if d < 0 || d > classify.MaxRetryAfter || (!ok && d != 0) {
			t.Fatalf("ParseRetryDelay(%q) = %v, %v", s, d, ok)
		}
	})
}

// FuzzClassifyBody classifies arbitrary error bodies with arbitrary status
// codes and Retry-After values: no panic, a bounded delay, and no upstream
// text in the verdict.
func FuzzClassifyBody(f *testing.F) {
	f.Add(429, `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}`, "")
	f.Add(400, `{"error":{"code":400,"status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID"}]}}`, "")
	f.Add(429, `{"error":{"code":429,"details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerDayPerProjectPerModel"}]}]}}`, "10")
	f.Add(502, "<html>502 Bad Gateway</html>", "")
	f.Add(0, `{"error":{"message":"x","status":"502 Bad Gateway"}}`, "Sun, 29 Nov 2026 12:00:00 GMT")
	f.Add(500, `{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1e308s"}]}}`, "-1")
	f.Fuzz(func(t *testing.T, status int, body, retryAfter string) {
		resp := &http.Response{StatusCode: status, Header: http.Header{"Retry-After": {retryAfter}}, Body: io.NopCloser(strings.NewReader(body))}
		v := classify.Classify(classify.ReadResponse(context.Background(), resp))
		if v.RetryAfter < 0 || v.RetryAfter > classify.MaxRetryAfter {
			t.Fatalf("retry-after out of range: %v", v.RetryAfter)
		}
		if v.Class == classify.OK {
			t.Fatalf("an error classified as OK")
		}
		if len(v.Status) > 32 || len(v.Reason) > 80 {
			t.Fatalf("verdict carries long text: %+v", v)
		}
		if v.Status != "" && strings.Contains(body, v.Status) && !isCanonical(v.Status) {
			t.Fatalf("status copied from body: %q", v.Status)
		}
	})
}

func isCanonical(s string) bool {
	for _, c := range s {
		if (c < 'A' || c > 'Z') && c != '_' {
			return false
		}
	}
	return true
}

// FuzzParseErrorBody decodes arbitrary bytes as a Google error and feeds
// whatever came out to FromFacts.
func FuzzParseErrorBody(f *testing.F) {
	f.Add([]byte(`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}`))
	f.Add([]byte(`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[1,null,{"quotaId":5}]}]}}`))
	f.Add([]byte(`{"error":null}`))
	f.Add([]byte("\xff\xfe"))
	f.Fuzz(func(t *testing.T, body []byte) {
		facts, ok := classify.ParseErrorBody(body)
		if !ok {
			return
		}
		v := classify.FromFacts(facts)
		if v.RetryAfter < 0 || v.RetryAfter > classify.MaxRetryAfter {
			t.Fatalf("retry-after out of range: %v", v.RetryAfter)
		}
	})
}

// FuzzErrorBodyForms decodes arbitrary bytes in every error-body form the
// classifier knows (object, array, OpenAI, bare string, vLLM) and feeds
// what came out to FromFacts: no panic, bounded results, no upstream text
// in the verdict beyond a validated model id.
func FuzzErrorBodyForms(f *testing.F) {
	f.Add([]byte(`[{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"RATE_LIMIT_EXCEEDED","metadata":{"quota_limit":"GenerateContentRequestsPerDayPerProjectPerModel"}}]}}]`))
	f.Add([]byte(`{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}`))
	f.Add([]byte(`{"error":{"message":"filtered","code":"content_filter","status":400}}`))
	f.Add([]byte(`{"object":"error","message":"x","code":"400"}`))
	f.Add([]byte(`[1,{"error":"overloaded"}]`))
	f.Add([]byte(`{"error":{"code":404,"message":"models/gemini-1.0-pro is not found"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		facts, ok := classify.ParseErrorBody(body)
		if !ok {
			return
		}
		if len(facts.Code) > 256 {
			t.Fatalf("code not bounded: %d bytes", len(facts.Code))
		}
		v := classify.FromFacts(facts)
		checkFuzzVerdict(t, v)
	})
}

// FuzzRetryHints searches arbitrary messages for delay hints: the delay is
// never negative, never past MaxRetryAfter, and a 429 always stays a rate
// limit or a quota.
func FuzzRetryHints(f *testing.F) {
	for _, s := range []string{"Please retry in 37.38s.", "Please try again in 114h18m0s.", "retry after 6 seconds",
		"try again in 1.574s", "reset after 12h34m16s", "retry in 99999999999999999999999h", "try again in 5 monkeys", "retry in .s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		v := classify.FromFacts(classify.Facts{HTTPStatus: 429, Message: msg})
		if v.Class != classify.RateLimited && v.Class != classify.QuotaExhausted {
			t.Fatalf("a 429 classified %v", v.Class)
		}
		if v.RetryAfter < 0 || v.RetryAfter > classify.MaxRetryAfter {
			t.Fatalf("retry-after out of range: %v", v.RetryAfter)
		}
		if v.RetryAfter >= classify.LongRetryAfter && v.Class != classify.QuotaExhausted {
			t.Fatalf("a %v wait is not a quota", v.RetryAfter)
		}
	})
}

// FuzzNotFoundMessages reads the model a 404 names from arbitrary
// messages: a model id is short and made of model-id characters, and it is
// a part of the message.
func FuzzNotFoundMessages(f *testing.F) {
	for _, s := range []string{"models/gemini-1.0-pro is not found for API version v1beta",
		"Publisher Model `projects/p/locations/l/publishers/google/models/gemini-pro` was not found",
		"The model: `gpt-4` does not exist", `model "llama3:8b" not found`, "tunedModels/x/operations/y is not found",
		"Requested entity was not found.", "The model `a b` does not exist",
		"No endpoints found for stepfun/step-3.5-flash:free.", "The model gemma2-9b-it has been decommissioned and is no longer supported.",
		"Gemini 1.0 Pro Vision has been deprecated on July 12, 2024. Consider switching to different model, for example gemini-1.5-flash.",
		"x/y:free is not a valid model ID", "Invalid model: mistral-medium-3.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		v := classify.FromFacts(classify.Facts{HTTPStatus: 404, Message: msg})
		if v.Class != classify.Retired && v.Class != classify.InvalidRequest {
			t.Fatalf("a 404 classified %v", v.Class)
		}
		if v.Model == "" {
			return
		}
		if v.Class != classify.Retired || len(v.Model) > 128 || !strings.Contains(msg, strings.TrimPrefix(v.Model, "tunedModels/")) {
			t.Fatalf("model %q read from %q", v.Model, msg)
		}
		for _, c := range v.Model {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-._@:/", c)) {
				t.Fatalf("model %q holds %q", v.Model, c)
			}
		}
	})
}

func checkFuzzVerdict(t *testing.T, v classify.Verdict) {
	t.Helper()
	if v.Class == classify.OK {
		t.Fatalf("an error classified as OK")
	}
	if v.RetryAfter < 0 || v.RetryAfter > classify.MaxRetryAfter {
		t.Fatalf("retry-after out of range: %v", v.RetryAfter)
	}
	if v.Status != "" && !isCanonical(v.Status) {
		t.Fatalf("status copied: %q", v.Status)
	}
	if len(v.Reason) > 80 || len(v.Model) > 128 {
		t.Fatalf("verdict carries long text: %+v", v)
	}
}
