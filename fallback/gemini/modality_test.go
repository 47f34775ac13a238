package gemini_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/gemini"
)

// served parses body through the real SDK, as a GenerateContent response
// from an httptest server.
func served(t *testing.T, body string) *genai.GenerateContentResponse {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client, err := gemini.NewClient(context.Background(), genai.ClientConfig{APIKey: "k", HTTPClient: &http.Client{Transport: tr}, HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL}})
	require.NoError(t, err)
	resp, err := client.Models.GenerateContent(context.Background(), proModel, genai.Text("q"), nil)
	require.NoError(t, err)
	return resp
}

// The usage breakdown by modality of real responses reaches the reply.
func TestUsageByModality(t *testing.T) {
	cases := []struct {
		name string
		// source is where the payload was published.
		source string
		body   string
		want   fallback.Usage
	}{{
		// A text prompt that ran out of tokens thinking: the prompt is
		// broken down, the output is not (no candidatesTokensDetails), so
		// its 2048+1986 tokens stay of no known modality.
		name:   "text prompt, thoughts",
		source: "https://github.com/carlrobertoh/llm-client/pull/61",
		body: `{"candidates":[{"content":{"role":"model"},"finishReason":"MAX_TOKENS","index":0}],` +
			`"usageMetadata":{"promptTokenCount":333780,"candidatesTokenCount":2048,"totalTokenCount":335828,` +
			`"promptTokensDetails":[{"modality":"TEXT","tokenCount":333780}],"thoughtsTokenCount":1986},"modelVersion":"gemini-2.5-pro-exp-03-25"}`,
		want: fallback.Usage{InputTokens: 333780, OutputTokens: 2048 + 1986, ReasoningOutputTokens: 1986, TextInputTokens: 333780},
	}, {
		// The last chunk of a gemini-2.0-flash stream: both sides broken
		// down, all text.
		name:   "text in, text out",
		source: "https://github.com/vercel/ai/issues/5217",
		body: `{"candidates": [{"content": {"parts": [{"text": ""}],"role": "model"},"finishReason": "STOP"}],` +
			`"usageMetadata": {"promptTokenCount": 2301,"candidatesTokenCount": 1,"totalTokenCount": 2302,` +
			`"promptTokensDetails": [{"modality": "TEXT","tokenCount": 2301}],"candidatesTokensDetails": [{"modality": "TEXT","tokenCount": 1}]},"modelVersion": "gemini-2.0-flash"}`,
		want: fallback.Usage{InputTokens: 2301, OutputTokens: 1, TextInputTokens: 2301, TextOutputTokens: 1},
	}, {
		// Built from the field names of the reference
		// (https://ai.google.dev/api/generate-content#UsageMetadata), not
		// captured: an image and a PDF in the prompt, a tool-use prompt,
		// an image answer, and a modality the API leaves unspecified,
		// which stays of no known modality.
		name:   "multimodal",
		source: "",
		body: `{"candidates":[{"content":{"role":"model","parts":[{"text":"ok"}]},"finishReason":"STOP"}],` +
			`"usageMetadata":{"promptTokenCount":1600,"candidatesTokenCount":1300,"toolUsePromptTokenCount":30,"totalTokenCount":2930,` +
			`"promptTokensDetails":[{"modality":"TEXT","tokenCount":80},{"modality":"IMAGE","tokenCount":258},{"modality":"DOCUMENT","tokenCount":1200},{"modality":"MODALITY_UNSPECIFIED","tokenCount":62}],` +
			`"toolUsePromptTokensDetails":[{"modality":"TEXT","tokenCount":30}],` +
			`"candidatesTokensDetails":[{"modality":"IMAGE","tokenCount":1290},{"modality":"TEXT","tokenCount":10}]}}`,
		want: fallback.Usage{InputTokens: 1630, OutputTokens: 1300, TextInputTokens: 110, ImageInputTokens: 258, DocumentInputTokens: 1200, ImageOutputTokens: 1290, TextOutputTokens: 10},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := gemini.ReplyOf(served(t, tc.body))
			require.True(t, rep.HasUsage)
			assert.Equal(t, tc.want, rep.Usage)
		})
	}
}

// The request's sampling numbers are reported as the config set them; a
// temperature of 0 is a temperature, an unset one is not reported.
func TestSamplingReported(t *testing.T) {
	temp, topP := float32(0), float32(0.95)
	got := gemini.SamplingOf(&genai.GenerateContentConfig{Temperature: &temp, TopP: &topP, MaxOutputTokens: 512})
	assert.Equal(t, fallback.Reply{RequestMaxTokens: 512, RequestTemperature: 0, HasTemperature: true, RequestTopP: float64(topP), HasTopP: true}, got)
	assert.Equal(t, fallback.Reply{}, gemini.SamplingOf(&genai.GenerateContentConfig{}))
	assert.Equal(t, fallback.Reply{}, gemini.SamplingOf(nil))
}
