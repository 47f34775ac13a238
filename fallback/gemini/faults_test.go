package gemini_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/gemini"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
)

// action is what the chain did with the primary's failure.
type action int

const (
	// retried: two attempts on pro, then flash answered.
	retried action = iota
	// fellBack: one attempt on pro, then flash answered.
	fellBack
	// failedClosed: one attempt on pro, no flash, an error.
	failedClosed
)

func (a action) String() string {
	return [...]string{"retried", "fell back", "failed closed"}[a]
}

// TestEveryFault drives the real genai SDK against every fault the fake
// can produce on the primary tier, with a healthy second tier, and checks
// the class, the status, the retry-after, what the chain did, and that each
// attempt was exactly one HTTP request.
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
		sdkError   bool // the attempt's error holds a genai.APIError
	}{
		{name: "503 unavailable", kind: fakegemini.Unavailable, class: classify.Transient, status: 503, act: retried, sdkError: true},
		{name: "500 internal", kind: fakegemini.Internal, class: classify.Transient, status: 500, act: retried, sdkError: true},
		{name: "504 deadline exceeded", kind: fakegemini.DeadlineExceeded, class: classify.Transient, status: 504, act: retried, sdkError: true},
		{name: "429 per-minute with RetryInfo", kind: fakegemini.RateLimited, params: fakegemini.Params{RetryDelay: 50 * time.Millisecond},
			class: classify.RateLimited, status: 429, retryAfter: 50 * time.Millisecond, act: retried, sdkError: true},
		{name: "429 per-minute, Retry-After past the budget", kind: fakegemini.RateLimited, params: fakegemini.Params{RetryDelay: 10 * time.Millisecond, RetryAfter: "30"},
			class: classify.RateLimited, status: 429, retryAfter: 30 * time.Second, act: fellBack, sdkError: true},
		{name: "429 per-day quota", kind: fakegemini.QuotaExhausted, class: classify.QuotaExhausted, status: 429, retryAfter: 37380 * time.Millisecond,
			act: fellBack, sdkError: true},
		{name: "404 retired model", kind: fakegemini.Retired, class: classify.Retired, status: 404, act: fellBack, sdkError: true},
		{name: "400 token limit", kind: fakegemini.TokenLimit, class: classify.ContextTooLong, status: 400, act: fellBack, sdkError: true},
		{name: "400 bad request", kind: fakegemini.BadRequest, class: classify.InvalidRequest, status: 400, act: failedClosed, sdkError: true},
		{name: "400 API_KEY_INVALID", kind: fakegemini.InvalidAPIKey, class: classify.Auth, status: 400, act: failedClosed, sdkError: true},
		{name: "401 unauthenticated", kind: fakegemini.Unauthenticated, class: classify.Auth, status: 401, act: failedClosed, sdkError: true},
		{name: "403 permission denied", kind: fakegemini.PermissionDenied, class: classify.Auth, status: 403, act: failedClosed, sdkError: true},
		{name: "502 HTML page", kind: fakegemini.BadGatewayHTML, class: classify.Transient, status: 502, act: retried, sdkError: true},
		{name: "JSON error without code", kind: fakegemini.NoCodeJSON, class: classify.Transient, status: 500, act: retried, sdkError: true},
		{name: "JSON error without code, 503", kind: fakegemini.NoCodeJSON, params: fakegemini.Params{Status: 503}, class: classify.Transient, status: 500, act: retried, sdkError: true},
		{name: "empty 500", kind: fakegemini.EmptyBody, class: classify.Transient, status: 500, act: retried, sdkError: true},
		{name: "2 MiB error body", kind: fakegemini.HugeBody, params: fakegemini.Params{BodySize: 2 << 20}, class: classify.Transient, status: 500, act: retried, sdkError: true},
		{name: "dropped connection", kind: fakegemini.Drop, class: classify.Transient, act: retried},
		{name: "body cut mid-response", kind: fakegemini.StreamCut, class: classify.Transient, act: retried},
		{name: "stall past the per-try cap", kind: fakegemini.Stall, class: classify.Transient, act: retried},
		{name: "malformed JSON answer", kind: fakegemini.MalformedJSON, json: true, class: classify.InvalidOutput, act: fellBack},
		{name: "SAFETY finish", kind: fakegemini.SafetyFinish, class: classify.Safety, act: failedClosed},
		{name: "prompt blocked", kind: fakegemini.PromptBlocked, class: classify.Safety, act: failedClosed},
		{name: "no candidates", kind: fakegemini.EmptyCandidates, class: classify.InvalidOutput, act: fellBack},
		{name: "no finish reason", kind: fakegemini.NoFinishReason, class: classify.InvalidOutput, act: fellBack},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, genai.ClientConfig{})
			e.srv.SetScript(proModel, always(tc.kind, tc.params))
			chain := e.chain(t, jsonText, func(cfg *fallback.Config[question, gemini.Answer]) {
				if !tc.json {
					cfg.Stages[0].Validate, cfg.Stages[1].Validate = nil, nil
				}
			})

			start := time.Now()
			res, err := chain.Do(context.Background(), question{Text: "why is the sky blue?", JSON: tc.json})
			elapsed := time.Since(start)

			attempts := res.Attempts()
			require.NotEmpty(t, attempts)
			first := attempts[0]
			assert.Equal(t, "pro", first.Tier)
			assert.Equal(t, tc.class, first.Verdict.Class, "verdict %v, error %v", first.Verdict, first.Err)
			assert.Equal(t, tc.status, first.Verdict.HTTPStatus, "verdict %v", first.Verdict)
			assert.Equal(t, tc.retryAfter, first.Verdict.RetryAfter, "verdict %v", first.Verdict)
			assert.NotEmpty(t, first.Verdict.Reason)
			if tc.sdkError {
				_, isAPI := errorsAsAPI(first.Err)
				assert.True(t, isAPI, "the SDK's genai.APIError is reachable: %v", first.Err)
			}

			proCalls := e.srv.Requests(proModel)
			flashCalls := e.srv.Requests(flashModel)
			switch tc.act {
			case retried:
				require.NoError(t, err)
				assert.EqualValues(t, 2, proCalls, "pro is retried once")
				assert.EqualValues(t, 1, flashCalls)
				assert.Equal(t, "flash", res.Tier)
				assert.True(t, res.Degraded)
				assert.Equal(t, tc.class, attempts[1].Verdict.Class)
				assert.GreaterOrEqual(t, first.Wait, tc.retryAfter, "the wait honours the server's delay")
			case fellBack:
				require.NoError(t, err)
				assert.Zero(t, first.Wait, "no retry followed")
				assert.EqualValues(t, 1, proCalls, "pro is not retried")
				assert.EqualValues(t, 1, flashCalls)
				assert.Equal(t, "flash", res.Tier)
				assert.True(t, res.Degraded)
			case failedClosed:
				var fe *fallback.Error
				require.ErrorAs(t, err, &fe)
				assert.True(t, fe.FailedClosed)
				assert.Equal(t, tc.class, fe.Cause.Class)
				assert.EqualValues(t, 1, proCalls)
				assert.EqualValues(t, 0, flashCalls, "a fail-closed class never reaches the next tier")
				assert.Equal(t, fallback.TierNotReached, fe.Tiers[1].Outcome)
			}
			if tc.act == retried {
				assert.Less(t, elapsed, 2*time.Second)
			}
			// One HTTP request per attempt: at the fake, on the wire, and in
			// the chain's count.
			assert.EqualValues(t, res.UpstreamCalls, proCalls+flashCalls)
			assert.EqualValues(t, res.UpstreamCalls, e.sent.n.Load())
		})
	}
}

func errorsAsAPI(err error) (genai.APIError, bool) {
	var v genai.APIError
	ok := errors.As(err, &v)
	return v, ok
}

// Later requests skip a tier whose model answered 404, or whose per-day
// quota is exhausted, without an upstream call.
func TestParkedTiersAreSkipped(t *testing.T) {
	for _, tc := range []struct {
		kind fakegemini.Kind
		skip fallback.Skip
	}{
		{fakegemini.Retired, fallback.SkipRetired},
		{fakegemini.QuotaExhausted, fallback.SkipQuota},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			e := newEnv(t, genai.ClientConfig{})
			e.srv.SetScript(proModel, always(tc.kind, fakegemini.Params{}))
			chain := e.chain(t, nil)
			for range 3 {
				res, err := chain.Do(context.Background(), question{Text: "hello"})
				require.NoError(t, err)
				assert.Equal(t, "flash", res.Tier)
			}
			assert.EqualValues(t, 1, e.srv.Requests(proModel), "only the first request reaches pro")
			res, err := chain.Do(context.Background(), question{Text: "hello"})
			require.NoError(t, err)
			assert.Equal(t, tc.skip, res.Attempts()[0].Skip)
			assert.Equal(t, 1, res.UpstreamCalls)
		})
	}
}
