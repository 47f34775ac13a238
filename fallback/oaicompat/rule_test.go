package oaicompat_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/oaicompat"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
)

func oaiErr(status int, code, typ string, h http.Header) *oai.Error {
	if h == nil {
		h = http.Header{}
	}
	return &oai.Error{StatusCode: status, Code: code, Type: typ, Response: &http.Response{StatusCode: status, Header: h}}
}

func TestRule(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		class  classify.Class
		status int
		after  time.Duration
	}{
		{"503", oaiErr(503, "", "server_error", nil), classify.Transient, 503, 0},
		{"insufficient_quota code", oaiErr(429, "insufficient_quota", "insufficient_quota", nil), classify.QuotaExhausted, 429, 0},
		{"insufficient_quota type only", oaiErr(429, "", "insufficient_quota", nil), classify.QuotaExhausted, 429, 0},
		{"context_length_exceeded", oaiErr(400, "context_length_exceeded", "invalid_request_error", nil), classify.ContextTooLong, 400, 0},
		{"content_filter", oaiErr(400, "content_filter", "invalid_request_error", nil), classify.Safety, 400, 0},
		{"model_not_found", oaiErr(404, "model_not_found", "invalid_request_error", nil), classify.Retired, 404, 0},
		{"invalid_api_key", oaiErr(401, "invalid_api_key", "invalid_request_error", nil), classify.Auth, 401, 0},
		{"Retry-After seconds", oaiErr(429, "rate_limit_exceeded", "requests", http.Header{"Retry-After": {"12"}}), classify.RateLimited, 429, 12 * time.Second},
		{"retry-after-ms wins", oaiErr(429, "rate_limit_exceeded", "requests", http.Header{"Retry-After": {"2"}, "Retry-After-Ms": {"1500"}}), classify.RateLimited, 429, 1500 * time.Millisecond},
		{"Retry-After HTTP date", oaiErr(503, "", "", http.Header{"Retry-After": {time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)}}), classify.Transient, 503, time.Hour},
		{"wrapped", fmt.Errorf("gateway: %w", oaiErr(403, "", "", nil)), classify.Auth, 403, 0},
		{"status-only ResponseError", &oaicompat.ResponseError{Err: errors.New("json: cannot unmarshal"), StatusCode: 502, RetryAfter: "4"}, classify.Transient, 502, 4 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := oaicompat.Rule(tc.err)
			require.True(t, ok)
			assert.Equal(t, tc.class, v.Class, "%v", v)
			assert.Equal(t, tc.status, v.HTTPStatus)
			if tc.name == "Retry-After HTTP date" {
				assert.InDelta(t, float64(tc.after), float64(v.RetryAfter), float64(2*time.Second))
			} else {
				assert.Equal(t, tc.after, v.RetryAfter)
			}
			assert.Equal(t, v.Class, oaicompat.Classifier.Classify(tc.err).Class)
		})
	}
	for _, err := range []error{errors.New("boom"), context.Canceled, nil} {
		_, ok := oaicompat.Rule(err)
		assert.False(t, ok, "%v", err)
	}
}

// gateway answers every chat completion with status and body.
func gateway(t *testing.T, status int, header http.Header, body string) *oai.Client {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	c := oai.NewClient(option.WithAPIKey("k"), option.WithBaseURL(srv.URL), option.WithHTTPClient(srv.Client()))
	return &c
}

// Error shapes of OpenAI-compatible gateways other than OpenAI.
func TestGatewayErrorShapes(t *testing.T) {
	call := func(c *oai.Client) error {
		tier, err := oaicompat.NewTier(oaicompat.TierConfig[question]{Name: "gw", Model: "m", Client: c, Prompt: prompt("")})
		require.NoError(t, err)
		_, err = tier.Call(context.Background(), question{Text: "hi"})
		return err
	}

	t.Run("error is a string: openai-go loses the status, the tier keeps it", func(t *testing.T) {
		c := gateway(t, 503, http.Header{"Retry-After": {"3"}}, `{"error":"upstream overloaded"}`)
		_, err := c.Chat.Completions.New(context.Background(), oai.ChatCompletionNewParams{Model: "m", Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")}}, option.WithMaxRetries(0))
		var oe *oai.Error
		assert.False(t, errors.As(err, &oe), "openai-go v3.99.0 returns a JSON decoding error here: %T", err)

		err = call(c)
		v := oaicompat.Classifier.Classify(err)
		assert.Equal(t, classify.Transient, v.Class)
		assert.Equal(t, 503, v.HTTPStatus)
		assert.Equal(t, 3*time.Second, v.RetryAfter)
		assert.Equal(t, "openai: upstream error 503 UNAVAILABLE", err.Error())
	})

	t.Run("Gemini's OpenAI-compatible endpoint: google.rpc details", func(t *testing.T) {
		_, _, body := fakegemini.ErrorResponse(fakegemini.QuotaExhausted, fakegemini.Params{})
		c := gateway(t, 429, nil, string(body))
		v := oaicompat.Classifier.Classify(call(c))
		assert.Equal(t, classify.QuotaExhausted, v.Class, "%v", v)
		assert.Equal(t, "RESOURCE_EXHAUSTED", v.Status)
		assert.Equal(t, 37380*time.Millisecond, v.RetryAfter, "the message's \"retry in 37.38s\" beats RetryInfo's truncated 37s")
	})

	t.Run("refusal", func(t *testing.T) {
		c := gateway(t, 200, nil, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"","refusal":"I can't help with that."}}]}`)
		err := call(c)
		require.ErrorIs(t, err, oaicompat.ErrRefusal)
		assert.Equal(t, classify.Safety, classify.Classify(err).Class)
	})
}

func TestAnswerAndUsage(t *testing.T) {
	e := newEnv(t)
	e.srv.SetScript(primaryModel, fakegemini.Script{Reply: fakegemini.Text("Rayleigh scattering.")})
	tier := e.tier(t, "primary", primaryModel)
	a, rep := reported(t, tier, question{Text: "why is the sky blue?"})
	assert.Equal(t, "Rayleigh scattering.", a.Text)
	assert.Equal(t, "stop", a.FinishReason)
	assert.Equal(t, primaryModel, a.Model)
	require.True(t, rep.HasUsage)
	u := rep.Usage
	assert.Equal(t, a.Response.Usage.PromptTokens, u.InputTokens)
	assert.Equal(t, a.Response.Usage.CompletionTokens, u.OutputTokens)
	assert.Positive(t, u.InputTokens)
	assert.Positive(t, u.OutputTokens)

	st := tier.Stage()
	assert.Equal(t, primaryModel, st.Model)
	assert.Equal(t, "openai", st.Provider)
}

func TestNewTierValidates(t *testing.T) {
	_, err := oaicompat.NewTier(oaicompat.TierConfig[question]{})
	require.EqualError(t, err, "openai: invalid tier config: Name, Model, Client, Prompt required")
}

// The response shape of the chat completions reference
// (https://platform.openai.com/docs/api-reference/chat/object): the id, the
// model that answered, and the usage details (cached prompt tokens,
// reasoning tokens), which reach the chain's observers.
func TestUsageDetailsAndResponse(t *testing.T) {
	c := gateway(t, http.StatusOK, nil, `{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion","created":1741570283,"model":"gpt-4o-2024-08-06",`+
		`"choices":[{"index":0,"message":{"role":"assistant","content":"Rayleigh scattering.","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":1117,"completion_tokens":46,"total_tokens":1163,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},`+
		`"completion_tokens_details":{"reasoning_tokens":12,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},`+
		`"service_tier":"default","system_fingerprint":"fp_fc9f1d7035"}`)
	tier, err := oaicompat.NewTier(oaicompat.TierConfig[question]{Name: "gpt", Model: "gpt-4o", Client: c, Prompt: prompt("")})
	require.NoError(t, err)
	_, rep := reported(t, tier, question{Text: "why is the sky blue?"})
	require.True(t, rep.HasUsage)
	assert.Equal(t, fallback.Usage{InputTokens: 1117, OutputTokens: 46, CacheReadInputTokens: 1024, ReasoningOutputTokens: 12}, rep.Usage)
	assert.Equal(t, fallback.ResponseInfo{ID: "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG", Model: "gpt-4o-2024-08-06", FinishReason: "stop"}, rep.Response)
	assert.Equal(t, fallback.Endpoint{Provider: "openai"}, tier.Endpoint())

	gw, err := oaicompat.NewTier(oaicompat.TierConfig[question]{Name: "gw", Model: "m", Client: c, Prompt: prompt(""), Provider: "azure.ai.openai"})
	require.NoError(t, err)
	chain, err := fallback.New(fallback.Config[question, oaicompat.Answer]{Stages: []fallback.Stage[question, oaicompat.Answer]{{Tier: gw}}})
	require.NoError(t, err)
	assert.Equal(t, "azure.ai.openai", chain.Stages()[0].Provider, "a stage without Provider takes the tier's")
}
