package fakegemini_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
)

func chat(t *testing.T, srv *fakegemini.Server, model, prompt string, hdr ...string) result {
	t.Helper()
	return do(t, srv, http.MethodPost, "/v1/chat/completions", chatBody(model, prompt), hdr...)
}

func TestOpenAISuccess(t *testing.T) {
	now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	srv := fakegemini.New(fakegemini.WithNow(func() time.Time { return now }))
	defer srv.Close()

	for _, path := range []string{"/v1/chat/completions", "/v1beta/openai/chat/completions"} {
		r := do(t, srv, http.MethodPost, path, chatBody("gemini-2.5-flash", "ping"))
		require.Equal(t, http.StatusOK, r.status)
		assert.Equal(t, "application/json", r.header.Get("Content-Type"))
		o := decode[oaiResp](t, r.body)
		assert.True(t, strings.HasPrefix(o.ID, "chatcmpl-"))
		assert.Equal(t, "chat.completion", o.Object)
		assert.Equal(t, now.Unix(), o.Created)
		assert.Equal(t, "gemini-2.5-flash", o.Model)
		require.Len(t, o.Choices, 1)
		assert.Equal(t, 0, o.Choices[0].Index)
		assert.Equal(t, "assistant", o.Choices[0].Message.Role)
		require.NotNil(t, o.Choices[0].Message.Content)
		assert.Equal(t, "answer from gemini-2.5-flash: ping", *o.Choices[0].Message.Content)
		require.NotNil(t, o.Choices[0].FinishReason)
		assert.Equal(t, "stop", *o.Choices[0].FinishReason)
		assert.Equal(t, o.Usage.PromptTokens+o.Usage.CompletionTokens, o.Usage.TotalTokens)
	}
	assert.EqualValues(t, 2, srv.Count("gemini-2.5-flash", fakegemini.Success))

	// Content as a list of parts, JSON mode.
	body := `{"model":"m","messages":[{"role":"system","content":"sys"},{"role":"user","content":[{"type":"text","text":"hi"}]}],"response_format":{"type":"json_object"}}`
	o := decode[oaiResp](t, do(t, srv, http.MethodPost, "/v1/chat/completions", body).body)
	assert.JSONEq(t, `{"model":"m","answer":"sys\nhi"}`, *o.Choices[0].Message.Content)
}

func TestOpenAISharesScripts(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript("m", fakegemini.Script{Reply: fakegemini.Text("shared"), Rules: []fakegemini.Rule{{Kind: fakegemini.Unavailable, P: fakegemini.Always, Every: 2}}})
	assert.Equal(t, 200, generate(t, srv, "m", "x").status)
	r := chat(t, srv, "m", "x")
	assert.Equal(t, 503, r.status)
	r = chat(t, srv, "m", "x")
	assert.Equal(t, "shared", *decode[oaiResp](t, r.body).Choices[0].Message.Content)
	assert.EqualValues(t, 3, srv.Requests("m"))
}

func TestOpenAIErrors(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	str := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return *p
	}
	tests := []struct {
		kind      fakegemini.Kind
		params    fakegemini.Params
		status    int
		typ, code string
		retry     string
		retryMS   string
	}{
		{kind: fakegemini.RateLimited, status: 429, typ: "requests", code: "rate_limit_exceeded", retry: "38", retryMS: "37380"},
		{kind: fakegemini.RateLimited, params: fakegemini.Params{OmitRetryAfter: true}, status: 429, typ: "requests", code: "rate_limit_exceeded"},
		{kind: fakegemini.RateLimited, params: fakegemini.Params{RetryAfter: "2"}, status: 429, typ: "requests", code: "rate_limit_exceeded", retry: "2"},
		{kind: fakegemini.QuotaExhausted, status: 429, typ: "insufficient_quota", code: "insufficient_quota"},
		{kind: fakegemini.Unavailable, status: 503, typ: "service_unavailable_error", code: "server_is_overloaded", retry: "38", retryMS: "37380"},
		{kind: fakegemini.Internal, status: 500, typ: "server_error", code: "<nil>"},
		{kind: fakegemini.DeadlineExceeded, status: 504, typ: "server_error", code: "timeout"},
		{kind: fakegemini.Retired, status: 404, typ: "invalid_request_error", code: "model_not_found"},
		{kind: fakegemini.TokenLimit, status: 400, typ: "invalid_request_error", code: "context_length_exceeded"},
		{kind: fakegemini.BadRequest, status: 400, typ: "invalid_request_error", code: "<nil>"},
		{kind: fakegemini.InvalidAPIKey, status: 401, typ: "invalid_request_error", code: "invalid_api_key"},
		{kind: fakegemini.Unauthenticated, status: 401, typ: "invalid_request_error", code: "<nil>"},
		{kind: fakegemini.PermissionDenied, status: 403, typ: "request_forbidden", code: "unsupported_country_region_territory"},
		{kind: fakegemini.PromptBlocked, status: 400, typ: "invalid_request_error", code: "content_filter"},
		{kind: fakegemini.HugeBody, params: fakegemini.Params{BodySize: 5000}, status: 500, typ: "server_error", code: "<nil>"},
	}
	for _, tc := range tests {
		t.Run(string(tc.kind), func(t *testing.T) {
			srv.SetScript("gpt-x", always(tc.kind, tc.params))
			r := chat(t, srv, "gpt-x", "hi")
			require.Equal(t, tc.status, r.status, "%s", r.body)
			e := decode[oaiErr](t, r.body)
			assert.NotEmpty(t, e.Error.Message)
			assert.Equal(t, tc.typ, e.Error.Type)
			assert.Equal(t, tc.code, str(e.Error.Code))
			assert.Equal(t, tc.retry, r.header.Get("Retry-After"))
			assert.Equal(t, tc.retryMS, r.header.Get("retry-after-ms"))
			if tc.kind == fakegemini.HugeBody {
				assert.Len(t, r.body, 5000)
			}
			if tc.kind.HTTPStatus() >= 400 {
				p := tc.params
				p.Model = "gpt-x"
				status, _, body := fakegemini.OpenAIErrorResponse(tc.kind, p)
				assert.Equal(t, tc.status, status)
				assert.Equal(t, string(body), string(r.body))
			}
		})
	}

	t.Run("retired message", func(t *testing.T) {
		srv.Retire("old")
		e := decode[oaiErr](t, chat(t, srv, "old", "hi").body)
		assert.Equal(t, "The model `old` does not exist or you do not have access to it.", e.Error.Message)
	})
	t.Run("non-JSON faults", func(t *testing.T) {
		srv.SetScript("gpt-x", always(fakegemini.BadGatewayHTML, fakegemini.Params{}))
		r := chat(t, srv, "gpt-x", "hi")
		assert.Equal(t, 502, r.status)
		assert.Contains(t, r.header.Get("Content-Type"), "text/html")
		srv.SetScript("gpt-x", always(fakegemini.EmptyBody, fakegemini.Params{Status: 503}))
		r = chat(t, srv, "gpt-x", "hi")
		assert.Equal(t, 503, r.status)
		assert.Empty(t, r.body)
		srv.SetScript("gpt-x", always(fakegemini.NoCodeJSON, fakegemini.Params{}))
		r = chat(t, srv, "gpt-x", "hi")
		assert.Equal(t, 500, r.status)
		assert.NotContains(t, string(r.body), `"code"`)
	})
}

func TestOpenAIOKFaults(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()

	srv.SetScript("m", always(fakegemini.SafetyFinish, fakegemini.Params{}))
	o := decode[oaiResp](t, chat(t, srv, "m", "x").body)
	assert.Equal(t, "content_filter", *o.Choices[0].FinishReason)
	assert.Nil(t, o.Choices[0].Message.Content)

	srv.SetScript("m", always(fakegemini.EmptyCandidates, fakegemini.Params{}))
	r := chat(t, srv, "m", "x")
	assert.Contains(t, string(r.body), `"choices":[]`)

	srv.SetScript("m", always(fakegemini.NoFinishReason, fakegemini.Params{}))
	o = decode[oaiResp](t, chat(t, srv, "m", "x").body)
	assert.Nil(t, o.Choices[0].FinishReason)

	srv.SetScript("m", always(fakegemini.MalformedJSON, fakegemini.Params{}))
	o = decode[oaiResp](t, chat(t, srv, "m", "x").body)
	assert.Equal(t, `{"answer": "this JSON is cut off`, *o.Choices[0].Message.Content)
}

func TestOpenAIBadRequests(t *testing.T) {
	srv := fakegemini.New(fakegemini.WithAPIKeys("sk-good"))
	defer srv.Close()

	for name, body := range map[string]string{
		"malformed": `{"model":`,
		"stream":    `{"model":"m","messages":[],"stream":true}`,
		"no model":  `{"messages":[]}`,
	} {
		r := do(t, srv, http.MethodPost, "/v1/chat/completions", body, "Authorization", "Bearer sk-good")
		assert.Equal(t, http.StatusBadRequest, r.status, name)
		assert.Equal(t, "invalid_request_error", decode[oaiErr](t, r.body).Error.Type, name)
	}
	assert.Equal(t, http.StatusOK, chat(t, srv, "m", "x", "Authorization", "Bearer sk-good").status)

	r := chat(t, srv, "m", "x", "Authorization", "Bearer sk-bad")
	require.Equal(t, http.StatusUnauthorized, r.status)
	assert.Equal(t, "invalid_api_key", *decode[oaiErr](t, r.body).Error.Code)
	r = chat(t, srv, "m", "x")
	assert.Equal(t, http.StatusUnauthorized, r.status)

	assert.Equal(t, http.StatusNotFound, do(t, srv, http.MethodGet, "/v1/chat/completions", "").status)
}
