package oaicompat_test

import (
	"context"
	"errors"
	"net/http"
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

type action int

const (
	retried      action = iota // two attempts on the primary, then the fallback answered
	fellBack                   // one attempt on the primary, then the fallback answered
	failedClosed               // one attempt on the primary, no fallback, an error
)

// TestEveryFault drives the real openai-go SDK against every fault the
// fake's chat completions endpoint can produce on the primary tier, with a
// healthy fallback tier.
func TestEveryFault(t *testing.T) {
	tests := []struct {
		name       string
		kind       fakegemini.Kind
		params     fakegemini.Params
		json       bool
		class      classify.Class
		status     int
		retryAfter time.Duration
		act        action
		sdkError   bool // the attempt's error holds an *openai.Error
	}{
		{name: "503 with retry-after-ms", kind: fakegemini.Unavailable, params: fakegemini.Params{RetryDelay: 20 * time.Millisecond},
			class: classify.Transient, status: 503, retryAfter: 20 * time.Millisecond, act: retried, sdkError: true},
		{name: "503 asking for 37.38 s, past the budget", kind: fakegemini.Unavailable,
			class: classify.Transient, status: 503, retryAfter: 37380 * time.Millisecond, act: fellBack, sdkError: true},
		{name: "500", kind: fakegemini.Internal, class: classify.Transient, status: 500, act: retried, sdkError: true},
		{name: "504", kind: fakegemini.DeadlineExceeded, class: classify.Transient, status: 504, act: retried, sdkError: true},
		{name: "429 rate_limit_exceeded", kind: fakegemini.RateLimited, params: fakegemini.Params{RetryDelay: 50 * time.Millisecond},
			class: classify.RateLimited, status: 429, retryAfter: 50 * time.Millisecond, act: retried, sdkError: true},
		{name: "429 with Retry-After past the budget (the message asks for 37.38 s, the larger)", kind: fakegemini.RateLimited, params: fakegemini.Params{RetryAfter: "30"},
			class: classify.RateLimited, status: 429, retryAfter: 37380 * time.Millisecond, act: fellBack, sdkError: true},
		{name: "429 insufficient_quota", kind: fakegemini.QuotaExhausted, class: classify.QuotaExhausted, status: 429, act: fellBack, sdkError: true},
		{name: "404 model_not_found", kind: fakegemini.Retired, class: classify.Retired, status: 404, act: fellBack, sdkError: true},
		{name: "400 context_length_exceeded", kind: fakegemini.TokenLimit, class: classify.ContextTooLong, status: 400, act: fellBack, sdkError: true},
		{name: "400 invalid request", kind: fakegemini.BadRequest, class: classify.InvalidRequest, status: 400, act: failedClosed, sdkError: true},
		{name: "401 invalid_api_key", kind: fakegemini.InvalidAPIKey, class: classify.Auth, status: 401, act: failedClosed, sdkError: true},
		{name: "401 no key", kind: fakegemini.Unauthenticated, class: classify.Auth, status: 401, act: failedClosed, sdkError: true},
		{name: "403", kind: fakegemini.PermissionDenied, class: classify.Auth, status: 403, act: failedClosed, sdkError: true},
		{name: "400 content_filter on the prompt", kind: fakegemini.PromptBlocked, class: classify.Safety, status: 400, act: failedClosed, sdkError: true},
		{name: "502 HTML page", kind: fakegemini.BadGatewayHTML, class: classify.Transient, status: 502, act: retried, sdkError: true},
		{name: "JSON error without code", kind: fakegemini.NoCodeJSON, class: classify.Transient, status: 500, act: retried, sdkError: true},
		{name: "empty 500", kind: fakegemini.EmptyBody, class: classify.Transient, status: 500, act: retried, sdkError: true},
		{name: "2 MiB error body", kind: fakegemini.HugeBody, params: fakegemini.Params{BodySize: 2 << 20}, class: classify.Transient, status: 500, act: retried, sdkError: true},
		{name: "dropped connection", kind: fakegemini.Drop, class: classify.Transient, act: retried},
		{name: "body cut mid-response", kind: fakegemini.StreamCut, class: classify.Transient, act: retried},
		{name: "stall past the per-try cap", kind: fakegemini.Stall, class: classify.Transient, act: retried},
		{name: "malformed JSON answer", kind: fakegemini.MalformedJSON, json: true, class: classify.InvalidOutput, act: fellBack},
		{name: "finish_reason content_filter", kind: fakegemini.SafetyFinish, class: classify.Safety, act: failedClosed},
		{name: "no choices", kind: fakegemini.EmptyCandidates, class: classify.InvalidOutput, act: fellBack},
		{name: "no finish_reason", kind: fakegemini.NoFinishReason, class: classify.InvalidOutput, act: fellBack},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.srv.SetScript(primaryModel, always(tc.kind, tc.params))
			var v = jsonText
			if !tc.json {
				v = nil
			}
			res, err := e.chain(t, v).Do(context.Background(), question{Text: "why is the sky blue?", JSON: tc.json})

			attempts := res.Attempts()
			require.NotEmpty(t, attempts)
			first := attempts[0]
			assert.Equal(t, "primary", first.Tier)
			assert.Equal(t, tc.class, first.Verdict.Class, "verdict %v, error %v", first.Verdict, first.Err)
			assert.Equal(t, tc.status, first.Verdict.HTTPStatus, "verdict %v", first.Verdict)
			assert.Equal(t, tc.retryAfter, first.Verdict.RetryAfter, "verdict %v", first.Verdict)
			assert.NotEmpty(t, first.Verdict.Reason)
			if tc.sdkError {
				var oe *oai.Error
				assert.True(t, errors.As(first.Err, &oe), "the SDK's *openai.Error is reachable: %v", first.Err)
			}

			primaryCalls := e.srv.Requests(primaryModel)
			fallbackCalls := e.srv.Requests(fallbackModel)
			switch tc.act {
			case retried:
				require.NoError(t, err)
				assert.EqualValues(t, 2, primaryCalls)
				assert.EqualValues(t, 1, fallbackCalls)
				assert.Equal(t, "fallback", res.Tier)
				assert.GreaterOrEqual(t, first.Wait, tc.retryAfter, "the wait honours the server's delay")
			case fellBack:
				require.NoError(t, err)
				assert.Zero(t, first.Wait, "no retry followed")
				assert.EqualValues(t, 1, primaryCalls)
				assert.EqualValues(t, 1, fallbackCalls)
				assert.Equal(t, "fallback", res.Tier)
			case failedClosed:
				var fe *fallback.Error
				require.ErrorAs(t, err, &fe)
				assert.True(t, fe.FailedClosed)
				assert.Equal(t, tc.class, fe.Cause.Class)
				assert.EqualValues(t, 1, primaryCalls)
				assert.EqualValues(t, 0, fallbackCalls)
			}
			// One HTTP request per attempt.
			assert.EqualValues(t, res.UpstreamCalls, primaryCalls+fallbackCalls)
			assert.EqualValues(t, res.UpstreamCalls, e.sent.n.Load())
		})
	}
}

// Without the tier's option the SDK retries on its own, honouring
// retry-after-ms; a tier over the very same client makes one request per
// attempt.
func TestSDKRetriesStayOff(t *testing.T) {
	e := newEnv(t) // a client with openai-go's default of two retries
	e.srv.SetScript(primaryModel, always(fakegemini.Unavailable, fakegemini.Params{RetryDelay: time.Millisecond}))

	_, err := e.client.Chat.Completions.New(context.Background(), oai.ChatCompletionNewParams{
		Model: primaryModel, Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")},
	})
	require.Error(t, err)
	assert.EqualValues(t, 3, e.sent.n.Load(), "openai-go made three requests for one call")

	e.sent.n.Store(0)
	_, err = e.tier(t, "primary", primaryModel).Call(context.Background(), question{Text: "hi"})
	require.Error(t, err)
	assert.EqualValues(t, 1, e.sent.n.Load())

	e.sent.n.Store(0)
	c := oaicompat.NewClient(option.WithAPIKey("k"), option.WithBaseURL(e.srv.OpenAIURL()), option.WithHTTPClient(&http.Client{Transport: e.sent}))
	_, err = c.Chat.Completions.New(context.Background(), oai.ChatCompletionNewParams{
		Model: primaryModel, Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")},
	})
	require.Error(t, err)
	assert.EqualValues(t, 1, e.sent.n.Load(), "NewClient's clients do not retry")
}
