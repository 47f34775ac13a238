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
