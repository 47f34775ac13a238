package classify_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
)

// response builds an *http.Response as the Gemini API sends it.
func response(status int, body string, header ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body))}
}

const (
	body503 = `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`
	body500 = `{"error":{"code":500,"message":"An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting","status":"INTERNAL"}}`
	body504 = `{"error":{"code":504,"message":"The request timed out. Please try again.","status":"DEADLINE_EXCEEDED"}}`
	body429 = `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details. Please retry in 37.38s.","status":"RESOURCE_EXHAUSTED","details":[
		{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-pro"},"quotaValue":"5"}]},
		{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},
		{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}`
	body429Day = `{"error":{"code":429,"message":"You exceeded your current quota. Please retry in 6.1s.","status":"RESOURCE_EXHAUSTED","details":[
		{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaValue":"25"}]},
		{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"6s"}]}}`
	body429NoDetails = `{"error":{"code":429,"message":"Resource has been exhausted. Please retry in 25.46s.","status":"RESOURCE_EXHAUSTED"}}`
	body404          = `{"error":{"code":404,"message":"models/gemini-1.0-pro is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.","status":"NOT_FOUND"}}`
	body400Tokens    = `{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`
	body400Key       = `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com","metadata":{"service":"generativelanguage.googleapis.com"}}]}}`
	body400          = `{"error":{"code":400,"message":"Invalid JSON payload received. Unknown name \"foo\": Cannot find field.","status":"INVALID_ARGUMENT"}}`
	body401          = `{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`
	body403          = `{"error":{"code":403,"message":"Method doesn't allow unregistered callers.","status":"PERMISSION_DENIED"}}`
	bodyNoCode       = `{"error":{"message":"The service is currently unavailable.","status":"UNAVAILABLE"}}`
	bodyHTML502      = "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>"
)

func TestClassifyHTTPResponses(t *testing.T) {
	now := time.Now()
	httpDate := now.Add(90 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		name       string
		resp       *http.Response
		class      classify.Class
		status     string
		retryAfter time.Duration
	}{
		{"503 unavailable", response(503, body503), classify.Transient, "UNAVAILABLE", 0},
		{"500 internal", response(500, body500), classify.Transient, "INTERNAL", 0},
		{"504 deadline", response(504, body504), classify.Transient, "DEADLINE_EXCEEDED", 0},
		{"empty 500", response(500, ""), classify.Transient, "INTERNAL", 0},
		{"html 502 from a proxy", response(502, bodyHTML502, "Content-Type", "text/html"), classify.Transient, "UNAVAILABLE", 0},
		{"408", response(408, ""), classify.Transient, "DEADLINE_EXCEEDED", 0},
		{"429 per minute with RetryInfo", response(429, body429), classify.RateLimited, "RESOURCE_EXHAUSTED", 37380 * time.Millisecond}, // the message hint is more precise than RetryInfo
		{"429 header larger than RetryInfo", response(429, body429, "Retry-After", "40"), classify.RateLimited, "RESOURCE_EXHAUSTED", 40 * time.Second},
		{"429 header as HTTP-date", response(429, body429NoDetails, "Retry-After", httpDate), classify.RateLimited, "RESOURCE_EXHAUSTED", 0},
		{"429 message tail only", response(429, body429NoDetails), classify.RateLimited, "RESOURCE_EXHAUSTED", 25460 * time.Millisecond},
		{"429 retry-after-ms", response(429, "", "Retry-After-Ms", "1500"), classify.RateLimited, "RESOURCE_EXHAUSTED", 1500 * time.Millisecond},
		{"429 per day despite short RetryInfo", response(429, body429Day), classify.QuotaExhausted, "RESOURCE_EXHAUSTED", 6100 * time.Millisecond},
		{"404 retired model", response(404, body404), classify.Retired, "NOT_FOUND", 0},
		{"400 token count", response(400, body400Tokens), classify.ContextTooLong, "INVALID_ARGUMENT", 0},
		{"400 API key invalid", response(400, body400Key), classify.Auth, "INVALID_ARGUMENT", 0},
		{"400 other", response(400, body400), classify.InvalidRequest, "INVALID_ARGUMENT", 0},
		{"422", response(422, ""), classify.InvalidRequest, "", 0},
		{"413", response(413, ""), classify.ContextTooLong, "", 0},
		{"401", response(401, body401), classify.Auth, "UNAUTHENTICATED", 0},
		{"403", response(403, body403), classify.Auth, "PERMISSION_DENIED", 0},
		{"501", response(501, ""), classify.Unknown, "UNIMPLEMENTED", 0},
		{"hostile Retry-After is capped", response(503, body503, "Retry-After", "1000000000"), classify.Transient, "UNAVAILABLE", classify.MaxRetryAfter},
		{"garbage Retry-After is ignored", response(503, body503, "Retry-After", "soon"), classify.Transient, "UNAVAILABLE", 0},
		{"negative Retry-After is ignored", response(503, body503, "Retry-After", "-5"), classify.Transient, "UNAVAILABLE", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := classify.ReadResponse(context.Background(), tt.resp)
			v := classify.Classify(fmt.Errorf("call: %w", err))
			assert.Equal(t, tt.class, v.Class, "verdict %v", v)
			assert.Equal(t, tt.resp.StatusCode, v.HTTPStatus)
			assert.Equal(t, tt.status, v.Status)
			if tt.name == "429 header as HTTP-date" {
				// HTTP-dates have one-second resolution and the clock moves.
				assert.InDelta(t, 90*time.Second, v.RetryAfter, float64(2*time.Second))
			} else {
				assert.Equal(t, tt.retryAfter, v.RetryAfter)
			}
			assert.NotEmpty(t, v.Reason)
		})
	}
}

// TestVerdictNeverCarriesUpstreamText feeds secrets through every field an
// upstream controls and checks that neither the verdict nor the error string
// repeats them.
func TestVerdictNeverCarriesUpstreamText(t *testing.T) {
	const secret = "sk-SECRET-prompt-text-4242"
	bodies := []string{
		`{"error":{"code":400,"message":"` + secret + `","status":"` + secret + `"}}`,
		`{"error":{"code":429,"message":"` + secret + ` Please retry in 3s.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"` + secret + `"}]}}`,
		`{"error":{"message":"` + secret + `","status":"502 ` + secret + `"}}`,
		"<html>" + secret + "</html>",
	}
	for _, b := range bodies {
		err := classify.ReadResponse(context.Background(), response(502, b, "Retry-After", secret))
		v := classify.Classify(err)
		assert.NotContains(t, fmt.Sprintf("%+v", v), secret)
		assert.NotContains(t, v.String(), secret)
		assert.NotContains(t, err.Error(), secret)
	}
}

func TestStatusWithoutCode(t *testing.T) {
	tests := []struct {
		status string
		class  classify.Class
		code   int
	}{
		{"UNAVAILABLE", classify.Transient, 503},
		{"RESOURCE_EXHAUSTED", classify.RateLimited, 429},
		{"NOT_FOUND", classify.InvalidRequest, 404}, // names no model: an unknown entity or URL
		{"UNAUTHENTICATED", classify.Auth, 401},
		{"PERMISSION_DENIED", classify.Auth, 403},
		{"INVALID_ARGUMENT", classify.InvalidRequest, 400},
		{"502 Bad Gateway", classify.Transient, 502},
		{"503", classify.Transient, 503},
		{"nonsense", classify.Unknown, 0},
		{"999 Nope", classify.Unknown, 0},
		{"", classify.Unknown, 0},
	}
	for _, tt := range tests {
		t.Run(tt.status, func(t *testing.T) {
			v := classify.FromFacts(classify.Facts{Status: tt.status})
			assert.Equal(t, tt.class, v.Class)
			assert.Equal(t, tt.code, v.HTTPStatus)
		})
	}
}

func TestJSONErrorWithoutCode(t *testing.T) {
	f, ok := classify.ParseErrorBody([]byte(bodyNoCode))
	require.True(t, ok)
	assert.Equal(t, 0, f.HTTPStatus)
	v := classify.FromFacts(f)
	assert.Equal(t, classify.Transient, v.Class)
	assert.Equal(t, 503, v.HTTPStatus)
	assert.Equal(t, "UNAVAILABLE", v.Status)
}

type statusErr struct {
	code  int
	after time.Duration
}

func (e statusErr) Error() string             { return "status error" }
func (e statusErr) StatusCode() int           { return e.code }
func (e statusErr) RetryAfter() time.Duration { return e.after }

func TestClassifyErrorShapes(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		class classify.Class
	}{
		{"nil", nil, classify.OK},
		{"canceled", fmt.Errorf("x: %w", context.Canceled), classify.Canceled},
		{"deadline", &url.Error{Op: "Post", URL: "http://x", Err: context.DeadlineExceeded}, classify.DeadlineExhausted},
		{"connection reset", &url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}}, classify.Transient},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, classify.Transient},
		{"unexpected EOF", io.ErrUnexpectedEOF, classify.Transient},
		{"EOF in url.Error", &url.Error{Op: "Post", URL: "http://x", Err: io.EOF}, classify.Transient},
		{"dns", &net.DNSError{Err: "no such host", Name: "x"}, classify.Transient},
		{"StatusCode method 503", statusErr{code: 503}, classify.Transient},
		{"StatusCode method 429", statusErr{code: 429, after: time.Second}, classify.RateLimited},
		{"explicit verdict", classify.Wrap(errors.New("blocked"), classify.Verdict{Class: classify.Safety, Reason: "blocked"}), classify.Safety},
		{"plain error", errors.New("boom"), classify.Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.class, classify.Classify(tt.err).Class)
		})
	}
	assert.Equal(t, time.Second, classify.Classify(statusErr{code: 429, after: time.Second}).RetryAfter)
}

type sdkError struct{ Code int }

func (e sdkError) Error() string { return "sdk error" }

func TestRulesComeBeforeBuiltins(t *testing.T) {
	rule := func(err error) (classify.Verdict, bool) {
		var se sdkError
		if !errors.As(err, &se) {
			return classify.Verdict{}, false
		}
		return classify.FromFacts(classify.Facts{HTTPStatus: se.Code}), true
	}
	c := classify.New(rule)
	assert.Equal(t, classify.Transient, c.Classify(fmt.Errorf("wrapped: %w", sdkError{Code: 503})).Class)
	assert.Equal(t, classify.Unknown, classify.Classify(sdkError{Code: 503}).Class, "the default classifier has no rules")
	assert.Equal(t, classify.Canceled, c.Classify(context.Canceled).Class)
}

func TestInContext(t *testing.T) {
	perTry := classify.Classify(context.DeadlineExceeded)
	require.Equal(t, classify.DeadlineExhausted, perTry.Class)
	assert.Equal(t, classify.Transient, classify.InContext(context.Background(), perTry).Class,
		"a per-try timeout while the request lives is transient")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.Equal(t, classify.Canceled, classify.InContext(ctx, classify.Verdict{Class: classify.Transient}).Class)

	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	assert.Equal(t, classify.DeadlineExhausted, classify.InContext(expired, perTry).Class)

	assert.Equal(t, classify.Unknown, classify.InContext(context.Background(), classify.Verdict{Class: classify.Canceled}).Class)
	assert.Equal(t, classify.Retired, classify.InContext(context.Background(), classify.Verdict{Class: classify.Retired}).Class)
}

func TestDefaultTableMatchesDesign(t *testing.T) {
	tab := classify.DefaultTable()
	type row struct {
		retry, counts bool
		route         classify.Route
	}
	want := map[classify.Class]row{
		classify.Transient:         {true, true, classify.RouteNextTier},
		classify.RateLimited:       {true, true, classify.RouteNextTier},
		classify.QuotaExhausted:    {false, false, classify.RouteNextTier},
		classify.Retired:           {false, false, classify.RouteNextTier},
		classify.ContextTooLong:    {false, false, classify.RouteNextTier},
		classify.InvalidRequest:    {false, false, classify.RouteFailClosed},
		classify.Auth:              {false, false, classify.RouteFailClosed},
		classify.Safety:            {false, false, classify.RouteFailClosed},
		classify.InvalidOutput:     {false, false, classify.RouteNextTier},
		classify.Canceled:          {false, false, classify.RouteFailClosed},
		classify.DeadlineExhausted: {false, false, classify.RouteLocal},
		classify.Rejected:          {false, false, classify.RouteNextTier},
		classify.Unknown:           {false, true, classify.RouteNextTier},
	}
	for _, c := range classify.Classes()[1:] {
		a := tab.Action(c)
		assert.Equal(t, want[c], row{a.Retry, a.BreakerFailure, a.Route}, "class %v", c)
	}
	over := tab.With(classify.QuotaExhausted, classify.Action{Route: classify.RouteFailClosed})
	assert.Equal(t, classify.RouteFailClosed, over.Action(classify.QuotaExhausted).Route)
	assert.Equal(t, classify.RouteNextTier, tab.Action(classify.QuotaExhausted).Route, "With must not modify the receiver")
	assert.Panics(t, func() { tab.With(classify.Class(200), classify.Action{}) })
	assert.Equal(t, tab.Action(classify.Unknown), tab.Action(classify.Class(200)))
}

func TestClassNames(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range classify.Classes() {
		name := c.String()
		assert.NotContains(t, name, " ")
		assert.False(t, seen[name], "duplicate name %q", name)
		seen[name] = true
	}
	assert.Equal(t, "invalid_class", classify.Class(250).String())
}

func TestVerdictString(t *testing.T) {
	v := classify.Verdict{Class: classify.RateLimited, HTTPStatus: 429, Status: "RESOURCE_EXHAUSTED", RetryAfter: 37 * time.Second, Reason: "rate limited"}
	assert.Equal(t, "rate_limited (429 RESOURCE_EXHAUSTED, retry after 37s): rate limited", v.String())
	assert.Equal(t, "transient: connection reset", classify.Verdict{Class: classify.Transient, Reason: "connection reset"}.String())
}

func TestHostileBodiesAreBounded(t *testing.T) {
	huge := bytes.Repeat([]byte("x"), 10<<20)
	start := time.Now()
	err := classify.ReadResponse(context.Background(), response(503, string(huge)))
	v := classify.Classify(err)
	assert.Equal(t, classify.Transient, v.Class)
	assert.Less(t, time.Since(start), 5*time.Second)

	// A well-formed but huge message is beyond MaxErrorBody: status only.
	bigJSON := `{"error":{"code":429,"message":"` + strings.Repeat("a", 2<<20) + ` Please retry in 5s.","status":"RESOURCE_EXHAUSTED"}}`
	v = classify.Classify(classify.ReadResponse(context.Background(), response(429, bigJSON)))
	assert.Equal(t, classify.RateLimited, v.Class)
	assert.Zero(t, v.RetryAfter)

	deep := strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5000)
	nested := `{"error":{"code":503,"status":"UNAVAILABLE","details":[{"@type":"x","v":` + deep + `}]}}`
	v = classify.Classify(classify.ReadResponse(context.Background(), response(503, nested)))
	assert.Equal(t, classify.Transient, v.Class)

	many := `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[` + strings.Repeat(`{"@type":"type.googleapis.com/google.rpc.Help"},`, 100000) + `{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"9s"}]}}`
	v = classify.Classify(classify.ReadResponse(context.Background(), response(429, many)))
	assert.Equal(t, classify.RateLimited, v.Class)
	assert.Zero(t, v.RetryAfter, "details past the examined prefix are ignored")
}
