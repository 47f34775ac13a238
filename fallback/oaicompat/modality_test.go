package oaicompat_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/oaicompat"
)

// completion parses a chat completion with usage through the real SDK,
// from an httptest server.
func completion(t *testing.T, usage string) *oai.ChatCompletion {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"m",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":`+usage+`}`)
	}))
	t.Cleanup(ts.Close)
	c := oaicompat.NewClient(option.WithBaseURL(ts.URL), option.WithAPIKey("k"))
	resp, err := c.Chat.Completions.New(context.Background(), oai.ChatCompletionNewParams{Model: "m", Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("q")}})
	require.NoError(t, err)
	return resp
}

// The details by modality of published usage objects reach the reply.
func TestUsageByModality(t *testing.T) {
	cases := []struct {
		name string
		// source is where the usage object was published.
		source string
		usage  string
		want   fallback.Usage
	}{{
		// An image edit through an OpenAI-compatible gateway to Gemini:
		// only the prompt's text is detailed (the image's tokens stay of
		// no known modality), the answer is an image.
		name:   "image out through a compatible server",
		source: "https://github.com/BerriAI/litellm/issues/18182",
		usage: `{"completion_tokens": 1337, "prompt_tokens": 533, "total_tokens": 1870,` +
			`"completion_tokens_details": {"reasoning_tokens": 217, "text_tokens": 0, "image_tokens": 1120},` +
			`"prompt_tokens_details": {"text_tokens": 6}}`,
		want: fallback.Usage{InputTokens: 533, OutputTokens: 1337, ReasoningOutputTokens: 217, TextInputTokens: 6, ImageOutputTokens: 1120},
	}, {
		// Built from the field names of OpenAI's CompletionUsage
		// (https://platform.openai.com/docs/api-reference/chat/object),
		// not captured: an audio conversation with a cached prefix.
		name:   "audio",
		source: "",
		usage: `{"prompt_tokens": 700, "completion_tokens": 300, "total_tokens": 1000,` +
			`"prompt_tokens_details": {"cached_tokens": 512, "audio_tokens": 600, "text_tokens": 100},` +
			`"completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 250, "text_tokens": 50}}`,
		want: fallback.Usage{InputTokens: 700, OutputTokens: 300, CacheReadInputTokens: 512, AudioInputTokens: 600, TextInputTokens: 100, AudioOutputTokens: 250, TextOutputTokens: 50},
	}, {
		// A server that details nothing: totals only.
		name:  "totals only",
		usage: `{"prompt_tokens": 19, "completion_tokens": 10, "total_tokens": 29}`,
		want:  fallback.Usage{InputTokens: 19, OutputTokens: 10},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, ok := oaicompat.UsageOf(completion(t, tc.usage).Usage)
			require.True(t, ok)
			assert.Equal(t, tc.want, u)
		})
	}
}

// The request's sampling numbers are reported as the parameters set
// them: max_completion_tokens before the older max_tokens, a temperature
// of 0 as a temperature.
func TestSamplingReported(t *testing.T) {
	p := oai.ChatCompletionNewParams{MaxCompletionTokens: oai.Int(256), MaxTokens: oai.Int(100), Temperature: oai.Float(0), TopP: oai.Float(0.9)}
	assert.Equal(t, fallback.Reply{RequestMaxTokens: 256, HasTemperature: true, RequestTopP: 0.9, HasTopP: true}, oaicompat.SamplingOf(&p))
	old := oai.ChatCompletionNewParams{MaxTokens: oai.Int(100)}
	assert.Equal(t, fallback.Reply{RequestMaxTokens: 100}, oaicompat.SamplingOf(&old))
	assert.Equal(t, fallback.Reply{}, oaicompat.SamplingOf(&oai.ChatCompletionNewParams{}))
}
