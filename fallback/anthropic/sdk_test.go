package anthropic_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/anthropic"
	reportedpkg "github.com/tierguard/tierguard/internal/testbed/reported"
	"github.com/tierguard/tierguard/retry"
)

// A message with every usage count Anthropic reports: the docs' example
// message (corpus anthropic-message-end-turn-200-docs) with the cache
// counts of the prompt-caching docs' usage fields
// (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching),
// set to numbers of this test's choosing.
const cachedMessage = `{"content":[{"text":"Hi! My name is Claude.","type":"text"}],"id":"msg_013Zva2CMHLNnXjNJJKqJ2EF","model":"claude-3-opus-20240229","role":"assistant","stop_reason":"end_turn","stop_sequence":null,"type":"message",` +
	`"usage":{"input_tokens":10,"cache_creation_input_tokens":1043,"cache_read_input_tokens":2000,"output_tokens":25,"output_tokens_details":{"thinking_tokens":7}}}`

// One chain attempt is one HTTP request, also with a client built with
// the SDK's defaults (two retries): the chain owns retrying.
func TestOneRequestPerAttempt(t *testing.T) {
	for _, sdkDefaults := range []bool{false, true} {
		c := corpusCase(t, "anthropic-overloaded-529-sdk-typescript")
		srv := newServer(t, jsonReply(c.Status, string(c.Body)))
		st := newTier(t, "claude", "claude-sonnet-5-5", srv.client(sdkDefaults)).Stage()
		st.Retry = retry.Policy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}
		chain, err := fallback.New(fallback.Config[string, anthropic.Answer]{Stages: []fallback.Stage[string, anthropic.Answer]{st},
			Classifier: anthropic.Classifier, Total: 10 * time.Second})
		require.NoError(t, err)
		_, err = chain.Do(context.Background(), "hi")
		require.Error(t, err)
		assert.EqualValues(t, 3, srv.n.Load(), "three attempts, three requests (SDK defaults: %v)", sdkDefaults)
		noSecret(t, err.Error(), "Overloaded")
	}
}

// The usage is reported in tierguard's terms: the whole prompt as
// InputTokens (Anthropic's input_tokens counts only what follows the last
// cache breakpoint), the cache writes and reads as their own kinds,
// thinking as reasoning; the id, model, stop reason and max_tokens too.
func TestUsageIsReported(t *testing.T) {
	srv := newServer(t, jsonReply(200, cachedMessage))
	tier := newTier(t, "claude", "claude-opus-4-7", srv.client(false))
	a, rep := reportedpkg.Call(t, fallback.ModelTier[string, anthropic.Answer](tier), "hi")
	assert.Equal(t, "Hi! My name is Claude.", a.Text)
	assert.Equal(t, "end_turn", a.StopReason)
	want := fallback.Usage{InputTokens: 10 + 1043 + 2000, OutputTokens: 25, CacheWriteInputTokens: 1043, CacheReadInputTokens: 2000, ReasoningOutputTokens: 7}
	assert.Equal(t, want, a.Usage)
	assert.True(t, rep.HasUsage)
	assert.Equal(t, want, rep.Usage)
	assert.Equal(t, fallback.ResponseInfo{ID: "msg_013Zva2CMHLNnXjNJJKqJ2EF", Model: "claude-3-opus-20240229", FinishReason: "end_turn"}, rep.Response)
	assert.EqualValues(t, 1024, rep.RequestMaxTokens)

	// The docs' message without cache counts: the prompt is input_tokens.
	c := corpusCase(t, "anthropic-message-end-turn-200-docs")
	u, ok := anthropic.UsageOf(decode(t, string(c.Body)).Usage)
	assert.True(t, ok)
	assert.Equal(t, fallback.Usage{InputTokens: 10, OutputTokens: 25}, u)
	_, ok = anthropic.UsageOf(sdk.Usage{})
	assert.False(t, ok, "no usage in the response, none reported")
}

func decode(t *testing.T, body string) sdk.Message {
	t.Helper()
	var m sdk.Message
	require.NoError(t, m.UnmarshalJSON([]byte(body)))
	return m
}

// Stop reasons on the class table, through the SDK: refusal fails closed,
// pause_turn and an empty max_tokens move on, tool_use is an answer.
func TestStopReasons(t *testing.T) {
	tests := []struct {
		name, body string
		want       error
		class      classify.Class
	}{
		{"refusal", string(corpusCase(t, "anthropic-refusal-200-docs").Body), anthropic.ErrRefusal, classify.Safety},
		{"max_tokens empty", string(corpusCase(t, "anthropic-max-tokens-empty-content-200").Body), anthropic.ErrEmptyAnswer, classify.InvalidOutput},
		{"pause_turn", `{"id":"msg_x","type":"message","role":"assistant","model":"claude-opus-5","content":[{"type":"text","text":"Searching."}],"stop_reason":"pause_turn","usage":{"input_tokens":5,"output_tokens":3}}`, anthropic.ErrPauseTurn, classify.InvalidOutput},
		{"no stop reason", `{"id":"msg_x","type":"message","role":"assistant","model":"claude-opus-5","content":[{"type":"text","text":"Hi"}],"stop_reason":null}`, anthropic.ErrNoStopReason, classify.InvalidOutput},
		{"tool_use", `{"id":"msg_x","type":"message","role":"assistant","model":"claude-opus-5","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"location":"SF"}}],"stop_reason":"tool_use","usage":{"input_tokens":5,"output_tokens":3}}`, nil, classify.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, jsonReply(200, tt.body))
			a, err := newTier(t, "claude", "claude-opus-5", srv.client(false)).Call(context.Background(), "hi")
			if tt.want == nil {
				require.NoError(t, err)
				require.NotNil(t, a.Message)
				assert.Equal(t, "tool_use", a.Message.Content[0].Type)
				return
			}
			require.ErrorIs(t, err, tt.want)
			assert.Equal(t, tt.class, anthropic.Classifier.Classify(err).Class)
			noSecret(t, err.Error(), "Hello..", "cyber")
		})
	}
}

// A 429's delay is the longer of retry-after and the exhausted limit's
// reset, counted from the response's Date.
func TestRateLimitDelay(t *testing.T) {
	date := time.Now().UTC().Truncate(time.Second)
	reset := date.Add(40 * time.Second).Format(time.RFC3339)
	body := string(corpusCase(t, "anthropic-rate-limit-429-request-tokens-per-minute").Body)
	for _, tc := range []struct {
		name   string
		header []string
		want   time.Duration
	}{
		{"reset only", []string{"Date", date.Format(http.TimeFormat), "Anthropic-Ratelimit-Input-Tokens-Remaining", "0", "Anthropic-Ratelimit-Input-Tokens-Reset", reset}, 40 * time.Second},
		{"retry-after longer", []string{"Date", date.Format(http.TimeFormat), "Retry-After", "55", "Anthropic-Ratelimit-Requests-Remaining", "0", "Anthropic-Ratelimit-Requests-Reset", reset}, 55 * time.Second},
		{"limit not exhausted", []string{"Date", date.Format(http.TimeFormat), "Retry-After", "3", "Anthropic-Ratelimit-Tokens-Remaining", "12", "Anthropic-Ratelimit-Tokens-Reset", reset}, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, jsonReply(429, body, tc.header...))
			_, err := newTier(t, "claude", "claude-opus-5", srv.client(false)).Call(context.Background(), "hi")
			var re *anthropic.ResponseError
			require.ErrorAs(t, err, &re)
			v := anthropic.Classifier.Classify(err)
			assert.Equal(t, classify.RateLimited, v.Class)
			assert.Equal(t, tc.want, v.RetryAfter)
			assert.Equal(t, "anthropic: upstream error 429 rate_limit_error", err.Error())
		})
	}
}

// No key, prompt or upstream text in an error's text, nor in its verdict,
// however the SDK's own error text looks (it holds the URL and the body).
func TestNoSecretInErrors(t *testing.T) {
	cases := []string{"anthropic-credit-balance-too-low-400", "anthropic-not-found-model-404-trailing-space", "anthropic-prompt-too-long-400", "anthropic-authentication-error-401"}
	for _, name := range cases {
		c := corpusCase(t, name)
		srv := newServer(t, jsonReply(c.Status, string(c.Body)))
		tier := newTier(t, "claude", "claude-opus-5", srv.client(false))
		_, err := tier.Call(context.Background(), "PROMPT-SECRET")
		require.Error(t, err)
		var ae *sdk.Error
		require.True(t, errors.As(err, &ae), "the SDK's error is reachable")
		v := anthropic.Classifier.Classify(err)
		for _, s := range []string{err.Error(), v.String(), v.Reason} {
			noSecret(t, s, "PROMPT", "credit", "prompt is too long", "invalid x-api-key", "req_", srv.URL)
		}
	}
}

// Rule knows the SDK's error alone, as a caller's own call returns it.
func TestRuleOnTheSDKsError(t *testing.T) {
	c := corpusCase(t, "anthropic-not-found-model-404-claude-code")
	srv := newServer(t, jsonReply(c.Status, string(c.Body)))
	_, err := srv.client(false).Messages.New(context.Background(), prompt("hi"))
	require.Error(t, err)
	v, ok := anthropic.Rule(err)
	require.True(t, ok)
	assert.Equal(t, classify.Retired, v.Class)
	assert.Equal(t, "sonnet4", v.Model)
	_, ok = anthropic.Rule(errors.New("other"))
	assert.False(t, ok)
}

// NewTier names what is missing.
func TestNewTierValidates(t *testing.T) {
	_, err := anthropic.NewTier(anthropic.TierConfig[string]{})
	require.EqualError(t, err, "anthropic: invalid tier config: Name, Model, Client, Prompt required")
	srv := newServer(t, jsonReply(200, cachedMessage))
	tier := newTier(t, "claude", "claude-opus-5", srv.client(false))
	assert.Equal(t, fallback.Endpoint{Provider: "anthropic"}, tier.Endpoint())
	assert.Equal(t, "anthropic", tier.Stage().Provider)
	assert.Equal(t, "claude-opus-5", tier.StreamStage().Model)
}
