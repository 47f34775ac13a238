package gemini_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// genai v1.77.0 does not retry unless HTTPOptions.RetryOptions is set. A
// client built with retries still makes one request per tier call: the
// tier's per-request RetryOptions (Attempts 1) override the client's.
func TestSDKRetriesStayOff(t *testing.T) {
	t.Run("default client does not retry", func(t *testing.T) {
		e := newEnv(t, genai.ClientConfig{})
		e.srv.SetScript(proModel, always(fakegemini.Unavailable, fakegemini.Params{}))
		_, err := e.client.Models.GenerateContent(context.Background(), proModel, genai.Text("hi"), nil)
		require.Error(t, err)
		assert.EqualValues(t, 1, e.sent.n.Load())
	})

	five, tiny := int32(5), 0.001
	cc := genai.ClientConfig{HTTPOptions: genai.HTTPOptions{RetryOptions: &genai.HTTPRetryOptions{Attempts: &five, InitialDelay: &tiny, MaxDelay: &tiny, Jitter: &tiny}}}

	t.Run("client with retries retries on its own", func(t *testing.T) {
		e := newEnv(t, cc)
		e.srv.SetScript(proModel, always(fakegemini.Unavailable, fakegemini.Params{}))
		_, err := e.client.Models.GenerateContent(context.Background(), proModel, genai.Text("hi"), nil)
		require.Error(t, err)
		assert.EqualValues(t, 5, e.sent.n.Load(), "the SDK made five requests for one call")
	})

	t.Run("the tier turns them off", func(t *testing.T) {
		e := newEnv(t, cc)
		e.srv.SetScript(proModel, always(fakegemini.Unavailable, fakegemini.Params{}))
		res, err := e.chain(t, nil).Do(context.Background(), question{Text: "hi"})
		require.NoError(t, err)
		assert.Equal(t, 3, res.UpstreamCalls)
		assert.EqualValues(t, 2, e.srv.Requests(proModel))
		assert.EqualValues(t, 3, e.sent.n.Load(), "one request per attempt")
	})

	t.Run("the tier turns a prompt's own off", func(t *testing.T) {
		e := newEnv(t, genai.ClientConfig{})
		e.srv.SetScript(proModel, always(fakegemini.Unavailable, fakegemini.Params{}))
		tier, err := gemini.NewTier(gemini.TierConfig[string]{Name: "pro", Model: proModel, Client: e.client,
			Prompt: func(q string) ([]*genai.Content, *genai.GenerateContentConfig) {
				return genai.Text(q), &genai.GenerateContentConfig{HTTPOptions: &genai.HTTPOptions{RetryOptions: cc.HTTPOptions.RetryOptions}}
			}})
		require.NoError(t, err)
		_, err = tier.Call(context.Background(), "hi")
		require.Error(t, err)
		assert.EqualValues(t, 1, e.sent.n.Load(), "one request for the call")
	})
}

// continuationServer answers the first request with finish reason
// CONTINUATION and a continuation token, the next with STOP.
func continuationServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if n.Add(1) == 1 {
			fmt.Fprint(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"part one, "}]},"finishReason":"CONTINUATION","continuationToken":"dG9rZW4="}]}`)
			return
		}
		fmt.Fprint(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"part two"}]},"finishReason":"STOP"}]}`)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// Automatic continuation makes more requests inside one call; the tier
// turns it off unless asked, and then treats a CONTINUATION as an
// incomplete answer.
func TestContinuation(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprint("continuation ", on), func(t *testing.T) {
			srv, n := continuationServer(t)
			tr := &http.Transport{}
			t.Cleanup(tr.CloseIdleConnections)
			client, err := gemini.NewClient(context.Background(), genai.ClientConfig{APIKey: "k", HTTPClient: &http.Client{Transport: tr}, HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL}})
			require.NoError(t, err)
			tier, err := gemini.NewTier(gemini.TierConfig[question]{Name: "pro", Model: proModel, Client: client, Prompt: prompt(""), Continuation: on})
			require.NoError(t, err)

			a, err := tier.Call(context.Background(), question{Text: "write a long story"})
			if on {
				require.NoError(t, err)
				assert.Equal(t, "part one, part two", a.Text)
				assert.EqualValues(t, 2, n.Load(), "the SDK continued with a second request")
				return
			}
			require.ErrorIs(t, err, gemini.ErrContinuation)
			assert.Equal(t, classify.InvalidOutput, gemini.Classifier.Classify(err).Class)
			assert.EqualValues(t, 1, n.Load())
		})
	}
}

// Concurrent calls through one client never see each other's Retry-After.
func TestRetryAfterIsPerRequest(t *testing.T) {
	e := newEnv(t, genai.ClientConfig{})
	const calls = 16
	for i := range calls {
		sc := always(fakegemini.RateLimited, fakegemini.Params{RetryDelay: time.Millisecond, RetryAfter: strconv.Itoa(i + 1)})
		sc.FaultLatency = fakegemini.Latency{Fixed: 20 * time.Millisecond} // the calls overlap
		e.srv.SetScript(fmt.Sprint("model-", i), sc)
	}
	// All calls are in flight before any answer comes back.
	var ready sync.WaitGroup
	ready.Add(calls)
	var wg sync.WaitGroup
	got := make([]classify.Verdict, calls)
	for i := range calls {
		wg.Go(func() {
			tier, err := gemini.NewTier(gemini.TierConfig[question]{Name: "t", Model: fmt.Sprint("model-", i), Client: e.client, Prompt: prompt("")})
			if err != nil {
				panic(err)
			}
			ready.Done()
			ready.Wait()
			_, err = tier.Call(context.Background(), question{Text: "hi"})
			got[i] = gemini.Classifier.Classify(err)
		})
	}
	wg.Wait()
	for i, v := range got {
		assert.Equal(t, classify.RateLimited, v.Class)
		assert.Equal(t, time.Duration(i+1)*time.Second, v.RetryAfter, "call %d", i)
	}
}

// The rule on its own, for SDK calls made outside a tier.
func TestRule(t *testing.T) {
	details := []map[string]any{
		{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []any{map[string]any{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}}},
		{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "42s"},
	}
	tests := []struct {
		name   string
		err    error
		class  classify.Class
		status int
		after  time.Duration
	}{
		{"value", genai.APIError{Code: 503, Status: "UNAVAILABLE"}, classify.Transient, 503, 0},
		{"pointer", &genai.APIError{Code: 404, Status: "NOT_FOUND", Message: "models/gemini-1.0-pro is not found for API version v1beta"}, classify.Retired, 404, 0},
		{"404 naming no model", genai.APIError{Code: 404, Status: "NOT_FOUND", Message: "Requested entity was not found."}, classify.InvalidRequest, 404, 0},
		{"wrapped", fmt.Errorf("calling pro: %w", genai.APIError{Code: 401, Status: "UNAUTHENTICATED"}), classify.Auth, 401, 0},
		{"no code, canonical status", genai.APIError{Status: "RESOURCE_EXHAUSTED"}, classify.RateLimited, 429, 0},
		{"no code, Go status text", genai.APIError{Status: "502 Bad Gateway"}, classify.Transient, 502, 0},
		{"per-day quota with RetryInfo", genai.APIError{Code: 429, Status: "RESOURCE_EXHAUSTED", Details: details}, classify.QuotaExhausted, 429, 42 * time.Second},
		{"token limit", genai.APIError{Code: 400, Message: "The input token count (2000000) exceeds the maximum number of tokens allowed (1048576)."}, classify.ContextTooLong, 400, 0},
		{"Retry-After header from the transport", &gemini.ResponseError{Err: genai.APIError{Code: 429}, StatusCode: 429, RetryAfter: "7"}, classify.RateLimited, 429, 7 * time.Second},
		{"Retry-After-Ms header from the transport", &gemini.ResponseError{Err: genai.APIError{Code: 503}, StatusCode: 503, RetryAfterMs: "1500"}, classify.Transient, 503, 1500 * time.Millisecond},
		{"status from the transport when the body has none", &gemini.ResponseError{Err: genai.APIError{Message: "?"}, StatusCode: 503}, classify.Transient, 503, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := gemini.Rule(tc.err)
			require.True(t, ok)
			assert.Equal(t, tc.class, v.Class, "%v", v)
			assert.Equal(t, tc.status, v.HTTPStatus)
			assert.Equal(t, tc.after, v.RetryAfter)
			assert.Equal(t, v, gemini.Classifier.Classify(tc.err))
		})
	}

	for _, err := range []error{errors.New("boom"), context.DeadlineExceeded, nil} {
		_, ok := gemini.Rule(err)
		assert.False(t, ok, "%v", err)
	}
}

// A ResponseError's text names the status only, never the upstream
// message (which may echo the prompt).
func TestResponseErrorText(t *testing.T) {
	e := newEnv(t, genai.ClientConfig{})
	e.srv.SetScript(proModel, always(fakegemini.RateLimited, fakegemini.Params{Message: "secret prompt text", RetryAfter: "3", RetryDelay: time.Second}))
	_, err := e.tier(t, "pro", proModel).Call(context.Background(), question{Text: "secret prompt text"})
	var re *gemini.ResponseError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, "gemini: upstream error 429 RESOURCE_EXHAUSTED", err.Error())
	assert.Equal(t, 429, re.StatusCode)
	assert.Equal(t, "3", re.RetryAfter)
	api, ok := errorsAsAPI(err)
	require.True(t, ok)
	assert.Contains(t, api.Message, "secret prompt text", "the SDK's error keeps the message for those who log it")
	// Classified: even the plain classifier gets it right.
	v := classify.Classify(err)
	assert.Equal(t, classify.RateLimited, v.Class)
	assert.Equal(t, 3*time.Second, v.RetryAfter)
}

// The Transport caps error bodies, which the SDK would read whole.
func TestErrorBodyIsCapped(t *testing.T) {
	e := newEnv(t, genai.ClientConfig{})
	e.srv.SetScript(proModel, always(fakegemini.HugeBody, fakegemini.Params{BodySize: 3 << 20}))
	_, err := e.tier(t, "pro", proModel).Call(context.Background(), question{Text: "hi"})
	api, ok := errorsAsAPI(err)
	require.True(t, ok)
	assert.LessOrEqual(t, len(api.Message), classify.MaxErrorBody)
	assert.Equal(t, "500 Internal Server Error", api.Status, "a cut JSON body is reported like a non-JSON one")
	assert.Equal(t, classify.Transient, gemini.Classifier.Classify(err).Class)
}

func TestAnswerAndUsage(t *testing.T) {
	e := newEnv(t, genai.ClientConfig{})
	e.srv.SetScript(proModel, fakegemini.Script{Reply: fakegemini.Text("Rayleigh scattering.")})
	tier := e.tier(t, "pro", proModel)
	a, rep := reported(t, tier, question{Text: "why is the sky blue?"})
	assert.Equal(t, "Rayleigh scattering.", a.Text)
	assert.Equal(t, genai.FinishReasonStop, a.FinishReason)
	assert.Equal(t, proModel, a.ModelVersion)
	require.NotNil(t, a.Response)
	require.True(t, rep.HasUsage)
	u := rep.Usage
	assert.EqualValues(t, a.Response.UsageMetadata.PromptTokenCount, u.InputTokens)
	assert.EqualValues(t, a.Response.UsageMetadata.CandidatesTokenCount, u.OutputTokens)
	assert.Positive(t, u.InputTokens)
	assert.Positive(t, u.OutputTokens)

	stage := tier.Stage()
	assert.Equal(t, proModel, stage.Model)
	assert.Equal(t, "gcp.gemini", stage.Provider)
	assert.Same(t, tier, stage.Tier)
}

func TestBlockedErrorText(t *testing.T) {
	assert.Equal(t, "gemini: prompt blocked (SAFETY)", (&gemini.BlockedError{BlockReason: genai.BlockedReasonSafety}).Error())
	assert.Equal(t, "gemini: answer blocked (SPII)", (&gemini.BlockedError{FinishReason: genai.FinishReasonSPII}).Error())
	assert.Equal(t, "gemini: answer blocked (unrecognised)", (&gemini.BlockedError{FinishReason: "my prompt was: ..."}).Error())
}

func TestNewTierValidates(t *testing.T) {
	_, err := gemini.NewTier(gemini.TierConfig[question]{})
	require.Error(t, err)
	for _, field := range []string{"Name", "Model", "Client", "Prompt"} {
		assert.True(t, strings.Contains(err.Error(), field), "%v names %s", err, field)
	}
}

// NewClient copies the caller's HTTP client instead of changing it.
func TestNewClientLeavesCallerClientAlone(t *testing.T) {
	hc := &http.Client{Transport: &http.Transport{}}
	orig := hc.Transport
	client, err := gemini.NewClient(context.Background(), genai.ClientConfig{APIKey: "k", HTTPClient: hc})
	require.NoError(t, err)
	assert.Same(t, orig, hc.Transport)
	tr, ok := client.ClientConfig().HTTPClient.Transport.(*gemini.Transport)
	require.True(t, ok)
	assert.Same(t, orig, tr.Base)
}

// The usage, response id and model version of a real response shape reach
// the chain's observers; the field names are those of the GenerateContent
// reference (https://ai.google.dev/api/generate-content#UsageMetadata):
// promptTokenCount includes the cached content, thoughtsTokenCount is
// output spent thinking.
func TestUsageDetailsAndResponse(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"Rayleigh scattering."}]},"finishReason":"STOP","index":0}],`+
			`"usageMetadata":{"promptTokenCount":1200,"candidatesTokenCount":40,"totalTokenCount":1490,"cachedContentTokenCount":1024,"thoughtsTokenCount":250,`+
			`"promptTokensDetails":[{"modality":"TEXT","tokenCount":1200}]},"modelVersion":"gemini-2.5-pro-preview-06-05","responseId":"mEZpaOa3NKWf1dkP4bnQ0Qs"}`)
	}))
	t.Cleanup(srv.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client, err := gemini.NewClient(context.Background(), genai.ClientConfig{APIKey: "k", HTTPClient: &http.Client{Transport: tr}, HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL}})
	require.NoError(t, err)
	tier, err := gemini.NewTier(gemini.TierConfig[question]{Name: "pro", Model: proModel, Client: client, Prompt: prompt("")})
	require.NoError(t, err)

	_, rep := reported(t, tier, question{Text: "why is the sky blue?"})
	require.True(t, rep.HasUsage)
	// The totals; the breakdown by modality is TestUsageByModality's.
	u := rep.Usage
	assert.Equal(t, fallback.Usage{InputTokens: 1200, OutputTokens: 290, CacheReadInputTokens: 1024, ReasoningOutputTokens: 250},
		fallback.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadInputTokens: u.CacheReadInputTokens, CacheWriteInputTokens: u.CacheWriteInputTokens, ReasoningOutputTokens: u.ReasoningOutputTokens})
	assert.Equal(t, fallback.ResponseInfo{ID: "mEZpaOa3NKWf1dkP4bnQ0Qs", Model: "gemini-2.5-pro-preview-06-05", FinishReason: "STOP"}, rep.Response)

	host, port, err := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	require.NoError(t, err)
	ep := tier.Endpoint()
	assert.Equal(t, "gcp.gemini", ep.Provider)
	assert.Equal(t, host, ep.Address)
	assert.Equal(t, port, strconv.Itoa(ep.Port))

	// A stage that leaves Provider empty still names it.
	c, err := fallback.New(fallback.Config[question, gemini.Answer]{Stages: []fallback.Stage[question, gemini.Answer]{{Tier: tier, Model: proModel}}})
	require.NoError(t, err)
	assert.Equal(t, "gcp.gemini", c.Stages()[0].Provider)
}

// With the SDK's default base URL the tier reports the Gemini API's host.
func TestEndpointOfTheGeminiAPI(t *testing.T) {
	client, err := gemini.NewClient(context.Background(), genai.ClientConfig{APIKey: "k", Backend: genai.BackendGeminiAPI})
	require.NoError(t, err)
	tier, err := gemini.NewTier(gemini.TierConfig[question]{Name: "pro", Model: proModel, Client: client, Prompt: prompt("")})
	require.NoError(t, err)
	assert.Equal(t, fallback.Endpoint{Provider: "gcp.gemini", Address: "generativelanguage.googleapis.com", Port: 443}, tier.Endpoint())
}
