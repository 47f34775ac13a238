package classify_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/tierguard/tierguard/classify"
)

// BenchmarkClassify429 classifies Gemini's per-minute 429 with its three
// details (QuotaFailure, Help, RetryInfo) and the "Please retry in" hint:
// reading the response, decoding the body, and deciding.
func BenchmarkClassify429(b *testing.B) {
	body := []byte(body429)
	b.ReportAllocs()
	for b.Loop() {
		resp := &http.Response{StatusCode: 429, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body))}
		v := classify.Classify(classify.ReadResponse(context.Background(), resp))
		if v.Class != classify.RateLimited {
			b.Fatal(v)
		}
	}
}

// BenchmarkClassifyFacts is the decision alone, on facts an SDK adapter has
// already decoded (what a genai.APIError carries).
func BenchmarkClassifyFacts(b *testing.B) {
	f, ok := classify.ParseErrorBody([]byte(body429))
	if !ok {
		b.Fatal("body")
	}
	f.HTTPStatus = 429
	b.ReportAllocs()
	for b.Loop() {
		if v := classify.FromFacts(f); v.Class != classify.RateLimited {
			b.Fatal(v)
		}
	}
}
