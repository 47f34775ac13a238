package classify_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tierguard/tierguard/classify"
)

// TestRetiredWordings: a model the server no longer serves is Retired
// however the provider says it, with the model it names; a 400 that says
// "no longer supported" about something else is not.
func TestRetiredWordings(t *testing.T) {
	for _, tc := range []struct {
		name  string
		f     classify.Facts
		class classify.Class
		model string
	}{
		{"groq code", classify.Facts{HTTPStatus: 400, Code: "model_decommissioned", Message: "The model `llama3-70b-8192` has been decommissioned and is no longer supported."}, classify.Retired, "llama3-70b-8192"},
		{"groq wording, no code", classify.Facts{HTTPStatus: 400, Message: "The model gemma2-9b-it has been decommissioned and is no longer supported."}, classify.Retired, "gemma2-9b-it"},
		{"openai deprecated", classify.Facts{HTTPStatus: 404, Code: "model_not_found", Message: "The model `text-davinci-003` has been deprecated, learn more here: https://platform.openai.com/docs/deprecations"}, classify.Retired, "text-davinci-003"},
		{"gemini deprecated, no id", classify.Facts{HTTPStatus: 404, Status: "NOT_FOUND", Message: "Gemini 1.0 Pro Vision has been deprecated on July 12, 2024. Consider switching to different model, for example gemini-1.5-flash."}, classify.Retired, ""},
		{"mistral invalid model", classify.Facts{HTTPStatus: 400, Code: "invalid_model", Message: "Invalid model: mistral-medium-3.5"}, classify.Retired, "mistral-medium-3.5"},
		{"openrouter no endpoints", classify.Facts{HTTPStatus: 404, Message: "No endpoints found for stepfun/step-3.5-flash:free."}, classify.Retired, "stepfun/step-3.5-flash:free"},
		{"openrouter not a valid id", classify.Facts{HTTPStatus: 400, Message: "google/gemini-2.0-pro-exp-02-05:free is not a valid model ID"}, classify.Retired, "google/gemini-2.0-pro-exp-02-05:free"},
		{"a parameter no longer supported", classify.Facts{HTTPStatus: 400, Message: "The 'functions' parameter is no longer supported for this model; use 'tools'."}, classify.InvalidRequest, ""},
		{"no endpoints for tools", classify.Facts{HTTPStatus: 404, Message: "No endpoints found that support tool use. To learn more about provider routing, visit: https://openrouter.ai/docs/provider-routing"}, classify.InvalidRequest, ""},
		{"the model does not exist, no id", classify.Facts{HTTPStatus: 404, Code: "model_not_found", Message: "The model does not exist or you do not have access to it."}, classify.Retired, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := classify.FromFacts(tc.f)
			assert.Equal(t, tc.class, v.Class, "%v", v)
			assert.Equal(t, tc.model, v.Model)
			assert.NotContains(t, v.String(), tc.f.Message)
		})
	}
}

// TestContextOverflowWordings: the providers' wordings for an input over
// the context window are ContextTooLong.
func TestContextOverflowWordings(t *testing.T) {
	for _, msg := range []string{
		"input length and `max_tokens` exceed context limit: 179413 + 32768 > 200000, decrease input length or `max_tokens` and try again",
		"Input tokens exceed the configured limit of 272000 tokens.",
		"The input token count exceeds the maximum number of tokens allowed (1048576).",
		"The input token count (25270) exceeds the maximum number of tokens allowed (4000).",
		"This endpoint's maximum context length is 32768 tokens. However, you requested about 42832 tokens (42832 of text input).",
		"prompt is too long: 209303 tokens > 200000 maximum",
		// Vertex AI, without the word "exceeds":
		// https://github.com/google-gemini/gemini-cli/issues/19727
		"Unable to submit request because the input token count is 1251952 but model only supports up to 1048576. Reduce the input token count and try again. " +
			"You can also use the CountTokens API to calculate prompt token count and billable characters. Learn more: https://cloud.google.com/vertex-ai/generative-ai/docs/learn/models",
	} {
		v := classify.FromFacts(classify.Facts{HTTPStatus: 400, Message: msg})
		assert.Equal(t, classify.ContextTooLong, v.Class, "%q: %v", msg, v)
	}
}

// TestStringCodesWithoutStatus: an error that carries a string code and no
// status (an error event inside a 200 stream) classifies as the status the
// code stands for outside a stream.
func TestStringCodesWithoutStatus(t *testing.T) {
	for _, tc := range []struct {
		code   string
		class  classify.Class
		status int
	}{
		{"server_error", classify.Transient, 500},
		{"api_error", classify.Transient, 500},
		{"overloaded_error", classify.Transient, 529},
		{"request_too_large", classify.ContextTooLong, 413},
		{"rate_limit_exceeded", classify.RateLimited, 429},
		{"tokens", classify.RateLimited, 429},
		{"insufficient_quota", classify.QuotaExhausted, 429},
		{"invalid_request_error", classify.InvalidRequest, 400},
		{"context_length_exceeded", classify.ContextTooLong, 0},
		{"authentication_error", classify.Auth, 401},
	} {
		v := classify.FromFacts(classify.Facts{Code: tc.code, Message: "x"})
		assert.Equal(t, tc.class, v.Class, "%s: %v", tc.code, v)
		assert.Equal(t, tc.status, v.HTTPStatus, "%s: %v", tc.code, v)
	}
	v := classify.FromFacts(classify.Facts{Code: "invalid_request_error", Message: "This model's maximum context length is 8192 tokens."})
	assert.Equal(t, classify.ContextTooLong, v.Class, "a 400's hints apply to the code's status")
}

// TestNumericCodeDefersToType: Mistral's numeric "code" ("1500") is not a
// status; the type says what the error is.
func TestNumericCodeDefersToType(t *testing.T) {
	f, ok := classify.ParseErrorBody([]byte(`{"object":"error","message":"Invalid model: mistral-large-2402","type":"invalid_model","param":null,"code":"1500"}`))
	assert.True(t, ok)
	assert.Equal(t, "invalid_model", f.Code)
	f.HTTPStatus = 400
	v := classify.FromFacts(f)
	assert.Equal(t, classify.Retired, v.Class)
	assert.Equal(t, "mistral-large-2402", v.Model)
}
