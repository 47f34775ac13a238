package classify_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
)

// TestRetryHintsInMessages: every wording of a delay that real APIs put in
// their messages is read, and the longest wins; absurd values are capped,
// never dropped.
func TestRetryHintsInMessages(t *testing.T) {
	tests := []struct {
		msg  string
		want time.Duration
	}{
		{"Resource has been exhausted. Please retry in 25.46s.", 25460 * time.Millisecond},
		{"Rate limit reached for gpt-4o-mini in organization org-x on tokens per min (TPM): Limit 200000, Used 199000, Requested 2500. Please try again in 1.574s.", 1574 * time.Millisecond},
		{"Please try again in 20s. Visit https://platform.openai.com/account/rate-limits", 20 * time.Second},
		{"Please try again in 7m12s.", 7*time.Minute + 12*time.Second},
		{"Please try again in 114h18m0s.", classify.MaxRetryAfter},
		{"Please try again in 500ms.", 500 * time.Millisecond},
		{"Requests to the ChatCompletions_Create Operation have exceeded call rate limit. Please retry after 6 seconds.", 6 * time.Second},
		{"Rate limit is exceeded. Try again in 5 seconds.", 5 * time.Second},
		{"try again in 2 minutes", 2 * time.Minute},
		{"retry in 99999999999999999999999999s", classify.MaxRetryAfter},
		{"retry in 99999999999999999999999999h and retry in 3s", classify.MaxRetryAfter},
		{"retry in 3s, or try again in 9s", 9 * time.Second},
	}
	for _, tt := range tests {
		v := classify.FromFacts(classify.Facts{HTTPStatus: 429, Message: tt.msg})
		assert.Equal(t, tt.want, v.RetryAfter, "%q", tt.msg)
	}
	for _, msg := range []string{"retry in soon", "retry in 5 monkeys", "retry in s", "try again in .5s", "retry after 6."} {
		v := classify.FromFacts(classify.Facts{HTTPStatus: 429, Message: msg})
		assert.Zero(t, v.RetryAfter, "%q", msg)
		assert.Equal(t, classify.RateLimited, v.Class, "%q", msg)
	}
}

// TestLongRetryAfterParksLikeAQuota: a 429 that asks for a wait far beyond
// any deadline is QuotaExhausted, from whichever source the delay came.
func TestLongRetryAfterParksLikeAQuota(t *testing.T) {
	for _, f := range []classify.Facts{
		{HTTPStatus: 429, Message: "Please try again in 114h18m0s."},
		{HTTPStatus: 429, RetryAfterHeader: "3600"},
		{HTTPStatus: 429, Details: []map[string]any{{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7200s"}}},
		{HTTPStatus: 429, Code: "rate_limit_exceeded", Message: "Please try again in 6h0m0s."},
	} {
		v := classify.FromFacts(f)
		assert.Equal(t, classify.QuotaExhausted, v.Class, "%+v", f)
		assert.GreaterOrEqual(t, v.RetryAfter, classify.LongRetryAfter)
	}
	v := classify.FromFacts(classify.Facts{HTTPStatus: 429, RetryAfterHeader: "299"})
	assert.Equal(t, classify.RateLimited, v.Class, "just under the threshold stays a rate limit")
}

// TestPerDayQuotaNamedAnywhere: QuotaFailure, ErrorInfo metadata and the
// message each name a daily quota; RATE_LIMIT_EXCEEDED does not override
// one, QUOTA_EXHAUSTED is one.
func TestPerDayQuotaNamedAnywhere(t *testing.T) {
	errorInfo := func(reason string, md map[string]any) map[string]any {
		return map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "googleapis.com", "metadata": md}
	}
	quota := []classify.Facts{
		{HTTPStatus: 429, Details: []map[string]any{{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []any{map[string]any{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}}}}},
		{HTTPStatus: 429, Details: []map[string]any{errorInfo("RATE_LIMIT_EXCEEDED", map[string]any{"quota_limit": "GenerateContentRequestsPerDayPerProjectPerModel", "quota_metric": "aiplatform.googleapis.com/generate_content_requests"})}},
		{HTTPStatus: 429, Details: []map[string]any{errorInfo("RATE_LIMIT_EXCEEDED", map[string]any{"quota_metric": "generativelanguage.googleapis.com/requests_per_day"})}},
		{HTTPStatus: 429, Details: []map[string]any{errorInfo("QUOTA_EXHAUSTED", nil)}},
		{HTTPStatus: 429, Message: "Rate limit reached for gpt-4 in organization org-x on requests per day (RPD): Limit 200, Used 200, Requested 1. Please try again in 7m12s."},
		{HTTPStatus: 429, Code: "insufficient_quota", Message: "You exceeded your current quota, please check your plan and billing details."},
		{HTTPStatus: 402, Message: "Insufficient Balance"},
		{HTTPStatus: 400, Status: "FAILED_PRECONDITION", Message: "Gemini API free tier is not available in your country. Please enable billing on your project in Google AI Studio."},
	}
	for _, f := range quota {
		assert.Equal(t, classify.QuotaExhausted, classify.FromFacts(f).Class, "%+v", f)
	}
	perMinute := classify.Facts{HTTPStatus: 429, Details: []map[string]any{errorInfo("RATE_LIMIT_EXCEEDED", map[string]any{"quota_limit": "GenerateContentRequestsPerMinutePerProjectPerRegion"})}}
	assert.Equal(t, classify.RateLimited, classify.FromFacts(perMinute).Class)
	assert.True(t, classify.FromFacts(perMinute).PerMinute, "Vertex names the per-minute quota in ErrorInfo's metadata")
	location := classify.Facts{HTTPStatus: 400, Status: "FAILED_PRECONDITION", Message: "User location is not supported for the API use."}
	assert.Equal(t, classify.InvalidRequest, classify.FromFacts(location).Class)
}

// TestNotFoundNamesAModel: only a 404 about a model is Retired, and the
// verdict names the model when the message does.
func TestNotFoundNamesAModel(t *testing.T) {
	tests := []struct {
		msg, code string
		class     classify.Class
		model     string
	}{
		{"models/gemini-1.0-pro is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.", "", classify.Retired, "gemini-1.0-pro"},
		{"Publisher Model `projects/my-project/locations/us-central1/publishers/google/models/gemini-pro` was not found or your project does not have access to it. Please ensure you are using a valid model version.", "", classify.Retired, "gemini-pro"},
		{"The model `gpt-4-32k` does not exist or you do not have access to it.", "model_not_found", classify.Retired, "gpt-4-32k"},
		{"The model `meta-llama/Llama-3-70b` does not exist.", "", classify.Retired, "meta-llama/Llama-3-70b"},
		{`model "llama3:8b" not found, try pulling it first`, "", classify.Retired, "llama3:8b"},
		{"tunedModels/my-tuned-model is not found.", "", classify.Retired, "tunedModels/my-tuned-model"},
		{"Model not found.", "", classify.Retired, ""},
		{"", "model_not_found", classify.Retired, ""},
		{"CachedContent not found (or permission denied)", "", classify.InvalidRequest, ""},
		{"Requested entity was not found.", "", classify.InvalidRequest, ""},
		{"File 7m4xq2 is not found.", "", classify.InvalidRequest, ""},
		{"tunedModels/my-model/operations/abc123 is not found.", "", classify.InvalidRequest, ""},
		{"The requested URL /v1/models/gemini-pro:generateContent was not found on this server.", "", classify.InvalidRequest, ""},
		{"", "", classify.InvalidRequest, ""},
	}
	for _, tt := range tests {
		v := classify.FromFacts(classify.Facts{HTTPStatus: 404, Code: tt.code, Message: tt.msg})
		assert.Equal(t, tt.class, v.Class, "%q", tt.msg)
		assert.Equal(t, tt.model, v.Model, "%q", tt.msg)
	}
	hostile := classify.FromFacts(classify.Facts{HTTPStatus: 404, Message: "The model `sk-SECRET prompt text` does not exist"})
	assert.Equal(t, classify.Retired, hostile.Class)
	assert.Empty(t, hostile.Model, "text that is not a model id is never kept")
	long := classify.FromFacts(classify.Facts{HTTPStatus: 404, Message: "models/" + strings.Repeat("a", 500) + " is not found"})
	assert.Empty(t, long.Model)
}

// TestErrorBodyForms: the object, array, OpenAI, bare-string and vLLM forms
// all parse into the same facts.
func TestErrorBodyForms(t *testing.T) {
	tests := []struct {
		name, body string
		class      classify.Class
		retry      time.Duration
	}{
		{"google object", `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`, classify.Transient, 0},
		{"google array", `[{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"12s"}]}}]`, classify.RateLimited, 12 * time.Second},
		{"array per day", `[{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]}}]`, classify.QuotaExhausted, 0},
		{"openai", `{"error":{"message":"This model's maximum context length is 8192 tokens. However, you requested 9000 tokens (8000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":null}}`, classify.ContextTooLong, 0},
		{"openai code", `{"error":{"message":"You exceeded your current quota.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`, classify.QuotaExhausted, 0},
		{"azure status number", `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy.","type":null,"param":"prompt","code":"content_filter","status":400}}`, classify.Safety, 0},
		{"openrouter numeric code", `{"error":{"message":"Rate limit exceeded: free-models-per-day.","code":429,"metadata":{"headers":{"X-RateLimit-Limit":"50"}}}}`, classify.QuotaExhausted, 0},
		{"bare string", `{"error":"overloaded"}`, classify.Transient, 0},
		{"vllm top level", `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens in the messages, Please reduce the length of the messages.","type":"BadRequestError","param":null,"code":400}`, classify.ContextTooLong, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status := 503
			switch tt.class {
			case classify.RateLimited, classify.QuotaExhausted:
				status = 429
			case classify.ContextTooLong, classify.Safety:
				status = 400
			}
			v := classify.Classify(classify.ReadResponse(context.Background(), response(status, tt.body)))
			assert.Equal(t, tt.class, v.Class, "%v", v)
			assert.Equal(t, tt.retry, v.RetryAfter)
		})
	}
	_, ok := classify.ParseErrorBody([]byte(`[1, "x", {"no":"error"}]`))
	assert.False(t, ok)
	_, ok = classify.ParseErrorBody([]byte(`{"object":"list"}`))
	assert.False(t, ok)
}

// TestServerSentCancelIsTransient: Gemini's 499 CANCELLED under load is
// not the caller's cancel.
func TestServerSentCancelIsTransient(t *testing.T) {
	body := `{"error":{"code":499,"message":"The operation was cancelled.","status":"CANCELLED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"backendError"}]}}`
	v := classify.Classify(classify.ReadResponse(context.Background(), response(499, body)))
	assert.Equal(t, classify.Transient, v.Class)
	assert.Equal(t, "CANCELLED", v.Status)
	assert.Equal(t, classify.Transient, classify.FromFacts(classify.Facts{Status: "CANCELLED"}).Class)
}

// TestFinishReasons: every finish reason of genai's enum and OpenAI's has
// a class, and an empty answer is never a success.
func TestFinishReasons(t *testing.T) {
	safety := []string{"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "content_filter"}
	invalid := []string{"RECITATION", "IMAGE_RECITATION", "MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS",
		"LANGUAGE", "OTHER", "IMAGE_OTHER", "NO_IMAGE", "CONTINUATION", "", "FINISH_REASON_UNSPECIFIED"}
	for _, r := range safety {
		assert.Equal(t, classify.Safety, classify.FinishReason(r, true).Class, r)
	}
	for _, r := range invalid {
		assert.Equal(t, classify.InvalidOutput, classify.FinishReason(r, true).Class, r)
	}
	for _, r := range []string{"STOP", "stop", "MAX_TOKENS", "length", "tool_calls", "SOMETHING_NEW"} {
		assert.Equal(t, classify.OK, classify.FinishReason(r, true).Class, r)
		assert.Equal(t, classify.InvalidOutput, classify.FinishReason(r, false).Class, "%s without content", r)
	}
	assert.Equal(t, classify.OK, classify.BlockReason("").Class)
	assert.Equal(t, classify.OK, classify.BlockReason("BLOCKED_REASON_UNSPECIFIED").Class)
	for _, r := range []string{"SAFETY", "OTHER", "BLOCKLIST", "PROHIBITED_CONTENT", "IMAGE_SAFETY", "MODEL_ARMOR", "JAILBREAK"} {
		assert.Equal(t, classify.Safety, classify.BlockReason(r).Class, r)
	}
}

// endless is a body that never ends: it hands out a byte at a time and
// then blocks until closed.
type endless struct {
	closed chan struct{}
	sent   int
}

func (e *endless) Read(p []byte) (int, error) {
	if e.sent < 16 {
		e.sent++
		p[0] = '{'
		return 1, nil
	}
	<-e.closed
	return 0, io.ErrClosedPipe
}

func (e *endless) Close() error {
	select {
	case <-e.closed:
	default:
		close(e.closed)
	}
	return nil
}

// TestReadResponseIsBoundedByContext: a body that never ends cannot hold
// classification past the attempt's context.
func TestReadResponseIsBoundedByContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		body := &endless{closed: make(chan struct{})}
		start := time.Now()
		he := classify.ReadResponse(ctx, &http.Response{StatusCode: 503, Header: http.Header{}, Body: body})
		assert.Equal(t, 2*time.Second, time.Since(start))
		assert.Equal(t, classify.Transient, classify.Classify(he).Class)
	})
	// And by size: an endless fast body stops at MaxErrorBody.
	fast := io.NopCloser(io.LimitReader(zeros{}, 64<<20))
	he := classify.ReadResponse(context.Background(), &http.Response{StatusCode: 500, Header: http.Header{}, Body: fast})
	require.NotNil(t, he)
	assert.Equal(t, classify.Transient, classify.Classify(he).Class)
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}
