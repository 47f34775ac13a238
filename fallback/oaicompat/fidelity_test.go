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
	"github.com/tierguard/tierguard/retry"
)

const fidelitySecret = "SECRET-PROMPT-ECHO"

func streamTier(t *testing.T, body string) *oaicompat.Tier[string] {
	tr, err := oaicompat.NewTier(oaicompat.TierConfig[string]{Name: "gpt", Model: "m", Client: sseServer(t, body),
		Prompt: func(q string) oai.ChatCompletionNewParams {
			return oai.ChatCompletionNewParams{Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage(q)}}
		}})
	require.NoError(t, err)
	return tr
}

// drain streams "hi" through a chain of tr alone (one attempt) and returns
// the text, the result and the last error.
func drain(t *testing.T, tr *oaicompat.Tier[string]) (string, fallback.StreamResult, error) {
	stage := tr.StreamStage()
	stage.Retry = retry.Policy{MaxAttempts: 1}
	c, err := fallback.NewStream(fallback.StreamConfig[string, oaicompat.Answer]{
		Stages: []fallback.StreamStage[string, oaicompat.Answer]{stage}, Total: 5 * time.Second, Classifier: oaicompat.Classifier,
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

// TestStreamErrorEventStringCodes: an error event whose only status is a
// string code classifies as the status that code stands for outside a
// stream, and its text names that status, not "upstream error 0".
func TestStreamErrorEventStringCodes(t *testing.T) {
	for _, tc := range []struct {
		event  string
		class  classify.Class
		status string
	}{
		{`{"type":"error","error":{"type":"server_error","code":"server_error","message":"` + fidelitySecret + `"}}`, classify.Transient, "500 INTERNAL"},
		{`{"error":{"type":"tokens","code":"rate_limit_exceeded","message":"` + fidelitySecret + ` Please try again in 2.512s."}}`, classify.RateLimited, "429 RESOURCE_EXHAUSTED"},
		{`{"error":{"message":"` + fidelitySecret + `","type":"server_error","param":null,"code":null}}`, classify.Transient, "500 INTERNAL"},
	} {
		t.Run(tc.status, func(t *testing.T) {
			_, _, err := drain(t, streamTier(t, chunkEvent("Hi", "")+"data: "+tc.event+"\n\n"))
			var ie *fallback.IncompleteError
			require.True(t, errors.As(err, &ie), "%v", err)
			assert.Equal(t, tc.class, ie.V.Class)
			var re *oaicompat.ResponseError
			require.True(t, errors.As(err, &re), "%v", err)
			assert.Equal(t, "openai: upstream error "+tc.status, re.Error())
			assert.NotContains(t, err.Error(), fidelitySecret)
		})
	}
}

// TestStreamFinishThenErrorEvent: a finish_reason followed by an error event
// is an incomplete stream with the text received, not a complete one.
func TestStreamFinishThenErrorEvent(t *testing.T) {
	text, res, err := drain(t, streamTier(t, chunkEvent("Hel", "stop")+chunkEvent("lo", "stop")+`data: {"error":{"message":"`+fidelitySecret+`","code":502}}`+"\n\n"))
	var ie *fallback.IncompleteError
	require.True(t, errors.As(err, &ie), "%v", err)
	assert.Equal(t, classify.Transient, ie.V.Class)
	assert.Equal(t, "Hello", text)
	assert.Equal(t, "stop", ie.FinishReason)
	assert.False(t, res.Complete)

	text, res, err = drain(t, streamTier(t, chunkEvent("Hel", "stop")+chunkEvent("lo", "stop")+"data: [DONE]\n\n"))
	require.NoError(t, err)
	assert.Equal(t, "Hello", text)
	assert.True(t, res.Complete, "stop on every chunk, then [DONE]: complete")
}

// TestStreamRoleOnlyThenClose: role-only chunks and a clean close, without
// finish_reason or [DONE], are a cut stream (Transient), not an empty
// answer.
func TestStreamRoleOnlyThenClose(t *testing.T) {
	role := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}` + "\n\n"
	_, res, err := drain(t, streamTier(t, role+role))
	require.Error(t, err)
	require.NotEmpty(t, res.Attempts())
	a := res.Attempts()[0]
	assert.ErrorIs(t, a.Err, fallback.ErrEmptyStream)
	assert.Equal(t, classify.Transient, a.Verdict.Class)
}

// TestErrorInside200: OpenRouter answers HTTP 200 with {"error":{"code":
// 502,...}} once a model has started: the embedded code classifies it, so
// the tier is retried and its breaker counts it, and its message stays out
// of the error's text.
func TestErrorInside200(t *testing.T) {
	for _, tc := range []struct {
		body  string
		class classify.Class
	}{
		{`{"error":{"message":"` + fidelitySecret + `","code":502},"user_id":"user_1"}`, classify.Transient},
		{`{"id":null,"choices":null,"error":{"message":"Provider returned error","code":429,"metadata":{"raw":"` + fidelitySecret + `"}}}`, classify.RateLimited},
		{`{"error":{"message":"` + fidelitySecret + `","code":400}}`, classify.InvalidRequest},
	} {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, tc.body)
		}))
		client := oaicompat.NewClient(option.WithBaseURL(ts.URL), option.WithAPIKey("k"))
		tr, err := oaicompat.NewTier(oaicompat.TierConfig[string]{Name: "gpt", Model: "m", Client: &client,
			Prompt: func(q string) oai.ChatCompletionNewParams {
				return oai.ChatCompletionNewParams{Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage(q)}}
			}})
		require.NoError(t, err)
		_, err = tr.Call(context.Background(), "hi")
		ts.Close()
		require.Error(t, err)
		assert.Equal(t, tc.class, oaicompat.Classifier.Classify(err).Class, "%s", tc.body)
		assert.NotErrorIs(t, err, oaicompat.ErrNoChoices)
		assert.NotContains(t, err.Error(), fidelitySecret)
	}
}
