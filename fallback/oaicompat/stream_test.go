package oaicompat_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/oaicompat"
)

func sseServer(t *testing.T, body string) *oai.Client {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(ts.Close)
	c := oaicompat.NewClient(option.WithBaseURL(ts.URL), option.WithAPIKey("k"))
	return &c
}

func chunkEvent(content, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` + content + `"},"finish_reason":` + f + `}]}` + "\n\n"
}

// TestStreamThroughOpenAIGo: a chat completion stream reaches the consumer
// chunk by chunk, complete with its finish reason; a content_filter finish
// is Safety and an error event is classified without quoting it.
func TestStreamThroughOpenAIGo(t *testing.T) {
	tier := func(body string) *oaicompat.Tier[string] {
		tr, err := oaicompat.NewTier(oaicompat.TierConfig[string]{Name: "gpt", Model: "m", Client: sseServer(t, body),
			Prompt: func(q string) oai.ChatCompletionNewParams {
				return oai.ChatCompletionNewParams{Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage(q)}}
			}})
		require.NoError(t, err)
		return tr
	}
	stream := func(tr *oaicompat.Tier[string]) (string, fallback.StreamResult, error) {
		c, err := fallback.NewStream(fallback.StreamConfig[string, oaicompat.Answer]{
			Stages: []fallback.StreamStage[string, oaicompat.Answer]{tr.StreamStage()}, Total: 5 * time.Second, Classifier: oaicompat.Classifier,
		})
		require.NoError(t, err)
		s := c.Stream(context.Background(), "hi")
		var b strings.Builder
		var last error
		for a, err := range s.Chunks() {
			if err != nil {
				last = err
				continue
			}
			b.WriteString(a.Text)
		}
		return b.String(), s.Result(), last
	}

	text, res, err := stream(tier(": ping\n\n" + chunkEvent("", "") + chunkEvent("Hel", "") + chunkEvent("lo", "stop") + "data: [DONE]\n\n"))
	require.NoError(t, err)
	assert.Equal(t, "Hello", text)
	assert.True(t, res.Complete)
	assert.Equal(t, "stop", res.FinishReason)

	_, _, err = stream(tier(chunkEvent("", "content_filter")))
	assert.Equal(t, classify.Safety, oaicompat.Classifier.Classify(err).Class)

	const secret = "SECRET-PROMPT-ECHO"
	_, _, err = stream(tier(chunkEvent("Hi", "") + `data: {"error":{"message":"` + secret + `","code":502}}` + "\n\n"))
	var ie *fallback.IncompleteError
	require.True(t, errors.As(err, &ie), "%v", err)
	assert.Equal(t, classify.Transient, ie.V.Class)
	assert.NotContains(t, err.Error(), secret)
}
