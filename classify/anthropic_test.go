package classify_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
)

// TestAnthropicBodyShapes: Anthropic's error body is understood wherever it
// arrives — its type decides where it is more precise than the status, a
// not_found_error naming a model retires that model on any status, and
// error.details.error_code names a spend limit under a rate_limit_error.
// The bodies are the shapes https://docs.anthropic.com/en/api/errors
// documents; the corpus holds the real ones with their sources.
func TestAnthropicBodyShapes(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		class  classify.Class
		model  string
	}{
		{"404 model", 404, `{"type":"error","error":{"type":"not_found_error","message":"model: claude-3-5-sonnet-20241022 "}}`, classify.Retired, "claude-3-5-sonnet-20241022"},
		{"relayed with 400", 400, `{"type":"error","error":{"type":"not_found_error","message":"model: claude-3-opus-20240229"}}`, classify.Retired, "claude-3-opus-20240229"},
		{"relayed with 500", 500, `{"type":"error","error":{"type":"not_found_error","message":"model: claude-2.1"}}`, classify.Retired, "claude-2.1"},
		{"display name", 404, `{"type":"error","error":{"type":"not_found_error","message":"model: Claude Sonnet 4.5"}}`, classify.Retired, ""},
		{"other resource", 404, `{"type":"error","error":{"type":"not_found_error","message":"File not found: file_011"}}`, classify.InvalidRequest, ""},
		{"in a stream, no status", 0, `{"type":"error","error":{"type":"not_found_error","message":"model: claude-x-1"}}`, classify.Retired, "claude-x-1"},
		{"overloaded relayed with 400", 400, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, classify.Transient, ""},
		{"overloaded in a stream", 0, `{"type":"error","error":{"details":null,"type":"overloaded_error","message":"Overloaded"}}`, classify.Transient, ""},
		{"timeout in a stream", 0, `{"type":"error","error":{"type":"timeout_error","message":"Request timed out"}}`, classify.Transient, ""},
		{"billing", 402, `{"type":"error","error":{"type":"billing_error","message":"x"}}`, classify.QuotaExhausted, ""},
		{"billing in a stream", 0, `{"type":"error","error":{"type":"billing_error","message":"x"}}`, classify.QuotaExhausted, ""},
		{"spend limit", 429, `{"type":"error","error":{"type":"rate_limit_error","message":"x","details":{"error_code":"enforced_spend_limit_reached"}}}`, classify.QuotaExhausted, ""},
		{"unknown error_code is the type", 429, `{"type":"error","error":{"type":"rate_limit_error","message":"x","details":{"error_code":"something_new"}}}`, classify.RateLimited, ""},
		{"request too large relayed", 400, `{"error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}`, classify.ContextTooLong, ""},
		{"rate limit naming a model", 429, `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your organization's rate limit of 30,000 input tokens per minute (org: x, model: claude-sonnet-4-20250514)."}}`, classify.RateLimited, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ok := classify.ParseErrorBody([]byte(tt.body))
			require.True(t, ok)
			f.HTTPStatus = tt.status
			v := classify.FromFacts(f)
			assert.Equal(t, tt.class, v.Class, "%v", v)
			assert.Equal(t, tt.model, v.Model)
			assert.NotContains(t, v.String(), "claude", "no upstream text in the verdict")
		})
	}
}

// TestStringAboveMaxLengthIsInvalidRequest: OpenAI's per-field cap is not
// a context window another tier could offer.
func TestStringAboveMaxLengthIsInvalidRequest(t *testing.T) {
	v := classify.FromFacts(classify.Facts{HTTPStatus: 400, Code: "string_above_max_length",
		Message: "Invalid 'messages[1].content': string too long. Expected a string with maximum length 10485760, but got a string with length 12000000 instead."})
	assert.Equal(t, classify.InvalidRequest, v.Class)
	assert.Equal(t, classify.RouteFailClosed, classify.DefaultTable().Action(v.Class).Route)
}

// TestRateLimitReset: the reset of an exhausted Anthropic limit is the
// delay, counted from the response's Date; limits with tokens left, resets
// in the past and malformed values say nothing.
func TestRateLimitReset(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	h := http.Header{}
	h.Set("Anthropic-Ratelimit-Requests-Remaining", "0")
	h.Set("Anthropic-Ratelimit-Requests-Reset", "2026-12-06T12:00:07Z")
	h.Set("Anthropic-Ratelimit-Tokens-Remaining", "16000")
	h.Set("Anthropic-Ratelimit-Tokens-Reset", "2026-12-06T12:00:50Z")
	d, ok := classify.RateLimitReset(h, now)
	assert.True(t, ok)
	assert.Equal(t, 7*time.Second, d, "only the exhausted limit counts")

	h.Set("Anthropic-Ratelimit-Output-Tokens-Remaining", "0")
	h.Set("Anthropic-Ratelimit-Output-Tokens-Reset", "2026-12-06T12:00:30Z")
	d, _ = classify.RateLimitReset(h, now)
	assert.Equal(t, 30*time.Second, d, "the latest exhausted limit")

	h.Set("Date", "Sun, 06 Dec 2026 12:00:20 GMT")
	d, _ = classify.RateLimitReset(h, now)
	assert.Equal(t, 10*time.Second, d, "from the server's clock")

	for _, bad := range []string{"", "soon", "2026-12-06T11:59:00Z", "2026-12-06T12:00:07"} {
		h := http.Header{}
		h.Set("Anthropic-Ratelimit-Input-Tokens-Remaining", "0")
		h.Set("Anthropic-Ratelimit-Input-Tokens-Reset", bad)
		_, ok := classify.RateLimitReset(h, now)
		assert.False(t, ok, "%q", bad)
	}
	_, ok = classify.RateLimitReset(nil, now)
	assert.False(t, ok)
}

// TestAnthropicStopReasons: Anthropic's stop reasons on the README's
// classes.
func TestAnthropicStopReasons(t *testing.T) {
	for _, r := range []string{"end_turn", "stop_sequence", "tool_use", "max_tokens"} {
		assert.Equal(t, classify.OK, classify.FinishReason(r, true).Class, r)
		assert.Equal(t, classify.InvalidOutput, classify.FinishReason(r, false).Class, r)
	}
	assert.Equal(t, classify.Safety, classify.FinishReason("refusal", true).Class)
	assert.Equal(t, classify.Safety, classify.FinishReason("refusal", false).Class)
	assert.Equal(t, classify.InvalidOutput, classify.FinishReason("pause_turn", true).Class)
}
