package gemrest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/catalog"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	"github.com/tierguard/tierguard/internal/testbed/gemrest"
	reportedpkg "github.com/tierguard/tierguard/internal/testbed/reported"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// retryOnce disables retries: one attempt per tier.
var retryOnce = retry.Policy{MaxAttempts: 1}

// Strings that must never appear in an error.
const (
	secretPrompt = "SECRET-PROMPT-7f3a"
	secretAnswer = "SECRET-ANSWER-91c2"
	secretKey    = "SECRET-KEY-55d0"
)

func newClient(t *testing.T, srv *fakegemini.Server, model string) *gemrest.Client {
	t.Helper()
	c, err := gemrest.New(gemrest.Config{BaseURL: srv.URL(), APIKey: secretKey, Model: model, HTTPClient: srv.Client()})
	require.NoError(t, err)
	return c
}

func assertNoSecrets(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range []string{secretPrompt, secretAnswer, secretKey} {
		assert.NotContains(t, err.Error(), s)
	}
}

func TestCallSuccess(t *testing.T) {
	srv := fakegemini.New(fakegemini.WithAPIKeys(secretKey))
	defer srv.Close()
	var mu sync.Mutex
	var seen fakegemini.Request
	srv.SetScript("gemini-2.5-pro", fakegemini.Script{Reply: func(r fakegemini.Request) string {
		mu.Lock()
		defer mu.Unlock()
		seen = r
		return `{"answer":"blue"}`
	}})
	c := newClient(t, srv, "models/gemini-2.5-pro")
	assert.Equal(t, "gemini-2.5-pro", c.Name())
	assert.Equal(t, "gemini-2.5-pro", c.Model())

	out, err := c.Call(context.Background(), gemrest.Request{Prompt: "why is the sky blue?", System: "be brief", JSON: true, MaxOutputTokens: 64})
	require.NoError(t, err)
	assert.JSONEq(t, `{"answer":"blue"}`, out.Text)
	assert.Equal(t, "STOP", out.FinishReason)
	assert.Equal(t, "gemini-2.5-pro", out.ModelVersion)
	assert.NotEmpty(t, out.ResponseID)
	require.True(t, out.HasUsage)
	assert.Positive(t, out.Usage.InputTokens)
	assert.Positive(t, out.Usage.OutputTokens)
	rep := reported(t, c, gemrest.Request{Prompt: "why is the sky blue?", System: "be brief", JSON: true, MaxOutputTokens: 64})
	assert.True(t, rep.HasUsage)
	assert.Equal(t, out.Usage, rep.Usage)
	assert.Equal(t, "STOP", rep.Response.FinishReason)

	mu.Lock()
	assert.Equal(t, "be brief\nwhy is the sky blue?", seen.Prompt, "system instruction first, then the prompt")
	assert.True(t, seen.JSON, "JSON mode reaches the server")
	mu.Unlock()
	assert.EqualValues(t, 2, srv.Requests("gemini-2.5-pro")) // the call, then the same request through a chain
}

// faultCase is one fakegemini fault and how its error must classify.
type faultCase struct {
	kind       fakegemini.Kind
	params     fakegemini.Params
	class      classify.Class
	status     int
	retryAfter time.Duration
	is         error
	// check, when set, replaces the error expectations (kinds that answer).
	check func(t *testing.T, out gemrest.Response, err error)
}

// faultCases cover every fault kind fakegemini can inject.
var faultCases = []faultCase{
	{kind: fakegemini.Unavailable, class: classify.Transient, status: 503},
	{kind: fakegemini.Internal, class: classify.Transient, status: 500},
	{kind: fakegemini.DeadlineExceeded, class: classify.Transient, status: 504},
	{kind: fakegemini.RateLimited, params: fakegemini.Params{RetryDelay: 2 * time.Second}, class: classify.RateLimited, status: 429, retryAfter: 2 * time.Second},
	{kind: fakegemini.RateLimited, params: fakegemini.Params{RetryDelay: 250 * time.Millisecond}, class: classify.RateLimited, status: 429, retryAfter: 250 * time.Millisecond},
	{kind: fakegemini.RateLimited, params: fakegemini.Params{RetryDelay: time.Second, RetryAfter: "3"}, class: classify.RateLimited, status: 429, retryAfter: 3 * time.Second},
	{kind: fakegemini.QuotaExhausted, class: classify.QuotaExhausted, status: 429, retryAfter: 37380 * time.Millisecond}, // RetryInfo says 37s, the message 37.38s: the larger wins,
	{kind: fakegemini.Retired, class: classify.Retired, status: 404},
	{kind: fakegemini.TokenLimit, class: classify.ContextTooLong, status: 400},
	{kind: fakegemini.BadRequest, class: classify.InvalidRequest, status: 400},
	{kind: fakegemini.InvalidAPIKey, class: classify.Auth, status: 400},
	{kind: fakegemini.Unauthenticated, class: classify.Auth, status: 401},
	{kind: fakegemini.PermissionDenied, class: classify.Auth, status: 403},
	{kind: fakegemini.BadGatewayHTML, class: classify.Transient, status: 502},
	{kind: fakegemini.NoCodeJSON, class: classify.Transient, status: 500},
	{kind: fakegemini.NoCodeJSON, params: fakegemini.Params{Status: 503}, class: classify.Transient, status: 503},
	{kind: fakegemini.EmptyBody, class: classify.Transient, status: 500},
	{kind: fakegemini.HugeBody, class: classify.Transient, status: 500},
	{kind: fakegemini.Drop, class: classify.Transient, is: io.EOF},
	{kind: fakegemini.StreamCut, class: classify.Transient, is: io.ErrUnexpectedEOF},
	{kind: fakegemini.SafetyFinish, class: classify.Safety, status: 200, is: gemrest.ErrAnswerBlocked},
	{kind: fakegemini.PromptBlocked, class: classify.Safety, status: 200, is: gemrest.ErrPromptBlocked},
	{kind: fakegemini.EmptyCandidates, class: classify.InvalidOutput},
	{kind: fakegemini.NoFinishReason, class: classify.InvalidOutput},
	{kind: fakegemini.MalformedJSON, check: func(t *testing.T, out gemrest.Response, err error) {
		// The envelope is fine; the answer the model wrote is not JSON. The
		// tier returns it, and the stage's validator rejects it.
		require.NoError(t, err)
		assert.Equal(t, "STOP", out.FinishReason)
		verr := validate.JSON().Validate(out.Text)
		require.Error(t, verr)
		assert.Equal(t, classify.InvalidOutput, classify.Classify(verr).Class)
	}},
	{kind: fakegemini.Stall, params: fakegemini.Params{StallFor: 20 * time.Millisecond}, check: func(t *testing.T, out gemrest.Response, err error) {
		require.NoError(t, err)
		assert.Contains(t, out.Text, secretAnswer)
	}},
}

func TestCallFaults(t *testing.T) {
	srv := fakegemini.New(fakegemini.WithAPIKeys(secretKey))
	defer srv.Close()
	covered := map[fakegemini.Kind]bool{}
	for _, tc := range faultCases {
		covered[tc.kind] = true
		t.Run(string(tc.kind), func(t *testing.T) {
			model := "m-" + string(tc.kind)
			srv.SetScript(model, fakegemini.Script{
				Rules: []fakegemini.Rule{{Kind: tc.kind, P: fakegemini.Always, Params: tc.params}},
				Reply: fakegemini.Text(secretAnswer),
			})
			srv.ResetStats()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			out, err := newClient(t, srv, model).Call(ctx, gemrest.Request{Prompt: secretPrompt})
			assert.EqualValues(t, 1, srv.Requests(model), "one Call, one HTTP request")
			assertNoSecrets(t, err)
			if tc.check != nil {
				tc.check(t, out, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, gemrest.Response{}, out)
			v := classify.Classify(err)
			assert.Equal(t, tc.class, v.Class, "verdict %v, error %v", v, err)
			assert.Equal(t, tc.status, v.HTTPStatus, "verdict %v", v)
			assert.Equal(t, tc.retryAfter, v.RetryAfter, "verdict %v", v)
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
			if tc.status >= 400 {
				var he *classify.HTTPError
				require.ErrorAs(t, err, &he)
			}
		})
	}
	// Stall without StallFor has its own test; Success and Canceled are
	// outcomes, not faults.
	covered[fakegemini.Success], covered[fakegemini.Canceled] = true, true
	for _, k := range append(fakegemini.ErrorKinds(),
		fakegemini.Drop, fakegemini.Stall, fakegemini.StreamCut, fakegemini.MalformedJSON, fakegemini.SafetyFinish,
		fakegemini.PromptBlocked, fakegemini.EmptyCandidates, fakegemini.NoFinishReason) {
		assert.True(t, covered[k], "fault kind %s has no case", k)
	}
}

func TestCallRetiredModel(t *testing.T) {
	srv := fakegemini.New(fakegemini.WithRetired("gemini-1.0-pro"))
	defer srv.Close()
	_, err := newClient(t, srv, "gemini-1.0-pro").Call(context.Background(), gemrest.Request{Prompt: "hi"})
	v := classify.Classify(err)
	assert.Equal(t, classify.Retired, v.Class)
	assert.Equal(t, 404, v.HTTPStatus)
	assert.Equal(t, "NOT_FOUND", v.Status)
}

func TestCallWrongKey(t *testing.T) {
	srv := fakegemini.New(fakegemini.WithAPIKeys("the-right-key"))
	defer srv.Close()
	_, err := newClient(t, srv, "gemini-2.5-flash").Call(context.Background(), gemrest.Request{Prompt: secretPrompt})
	assertNoSecrets(t, err)
	assert.Equal(t, classify.Auth, classify.Classify(err).Class)

	noKey, err := gemrest.New(gemrest.Config{BaseURL: srv.URL(), Model: "gemini-2.5-flash", HTTPClient: srv.Client()})
	require.NoError(t, err)
	_, err = noKey.Call(context.Background(), gemrest.Request{Prompt: secretPrompt})
	v := classify.Classify(err)
	assert.Equal(t, classify.Auth, v.Class)
	assert.Equal(t, 403, v.HTTPStatus)
}

func TestCallStallHonoursContext(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript("slow", fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.Stall, P: fakegemini.Always}}})
	c := newClient(t, srv, "slow")

	request, cancelRequest := context.WithCancel(context.Background())
	defer cancelRequest()
	attempt, cancel := context.WithTimeout(request, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Call(attempt, gemrest.Request{Prompt: secretPrompt})
	elapsed := time.Since(start)

	require.Error(t, err)
	assertNoSecrets(t, err)
	assert.Less(t, elapsed, 5*time.Second, "the call must end with its context")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	v := classify.Classify(err)
	assert.Equal(t, classify.DeadlineExhausted, v.Class)
	assert.Equal(t, classify.Transient, classify.InContext(request, v).Class,
		"a per-try timeout while the request's budget remains is transient")
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.EqualValues(c, 1, srv.Count("slow", fakegemini.Canceled))
	}, 5*time.Second, 10*time.Millisecond, "the server saw the client go away")
	assert.EqualValues(t, 1, srv.Requests("slow"))
}

func TestCallCanceled(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript("slow", fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.Stall, P: fakegemini.Always}}})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := newClient(t, srv, "slow").Call(ctx, gemrest.Request{Prompt: "x"})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, classify.Canceled, classify.Classify(err).Class)
}

func TestCallEmptyPrompt(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	_, err := newClient(t, srv, "m").Call(context.Background(), gemrest.Request{Prompt: "  \n", System: "sys"})
	assert.Equal(t, classify.InvalidRequest, classify.Classify(err).Class)
	assert.Zero(t, srv.Requests("m"), "no upstream call for a request that cannot be valid")
}

func TestCallResponseTooLarge(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript("big", fakegemini.Script{Reply: fakegemini.Text(strings.Repeat(secretAnswer, 200))})
	c, err := gemrest.New(gemrest.Config{BaseURL: srv.URL(), Model: "big", HTTPClient: srv.Client(), MaxResponseBytes: 1024})
	require.NoError(t, err)
	_, err = c.Call(context.Background(), gemrest.Request{Prompt: "x"})
	assert.ErrorIs(t, err, gemrest.ErrResponseTooLarge)
	assert.Equal(t, classify.InvalidOutput, classify.Classify(err).Class)
	assertNoSecrets(t, err)
}

// TestCallBodies feeds hand-made 200 bodies to the parser.
func TestCallBodies(t *testing.T) {
	cases := []struct {
		name   string
		body   string
		class  classify.Class
		is     error
		text   string
		finish string
		usage  *fallback.Usage
		absent string // must not be in the error text
	}{
		{
			name:   "thoughts and usage",
			body:   `{"candidates":[{"content":{"parts":[{"text":"hmm","thought":true},{"text":"a"},{"text":"b"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":2,"thoughtsTokenCount":5,"cachedContentTokenCount":1,"totalTokenCount":10},"modelVersion":"v1","responseId":"r1"}`,
			text:   "ab",
			finish: "STOP",
			usage:  &fallback.Usage{InputTokens: 3, OutputTokens: 7, CacheReadInputTokens: 1, ReasoningOutputTokens: 5},
		},
		{name: "max tokens", body: `{"candidates":[{"content":{"parts":[{"text":"partial"}]},"finishReason":"MAX_TOKENS"}]}`, text: "partial", finish: "MAX_TOKENS"},
		{name: "no usage", body: `{"candidates":[{"content":{"parts":[{"text":"x"}]},"finishReason":"STOP"}]}`, text: "x", finish: "STOP"},
		{name: "not json", body: "<html>" + secretAnswer + "</html>", class: classify.Transient, absent: secretAnswer},
		{name: "json syntax", body: `{"candidates":[` + secretAnswer, class: classify.Transient, absent: secretAnswer},
		{name: "wrong shape", body: `["` + secretAnswer + `"]`, class: classify.Transient, absent: secretAnswer},
		{name: "null", body: `null`, class: classify.InvalidOutput},
		{name: "prompt blocked, unknown reason", body: `{"promptFeedback":{"blockReason":"` + secretAnswer + `"}}`, class: classify.Safety, is: gemrest.ErrPromptBlocked, absent: secretAnswer},
		{name: "prohibited", body: `{"candidates":[{"finishReason":"PROHIBITED_CONTENT"}]}`, class: classify.Safety, is: gemrest.ErrAnswerBlocked},
		{name: "blocklist", body: `{"candidates":[{"finishReason":"BLOCKLIST","content":{"parts":[{"text":"` + secretAnswer + `"}]}}]}`, class: classify.Safety, is: gemrest.ErrAnswerBlocked, absent: secretAnswer},
		{name: "spii", body: `{"candidates":[{"finishReason":"SPII"}]}`, class: classify.Safety, is: gemrest.ErrAnswerBlocked},
		{name: "no finish reason", body: `{"candidates":[{"content":{"parts":[{"text":"` + secretAnswer + `"}]}}]}`, class: classify.InvalidOutput, absent: secretAnswer},
	}
	var mu sync.Mutex
	body := ""
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		b := body
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, b)
	}))
	defer ts.Close()
	c, err := gemrest.New(gemrest.Config{BaseURL: ts.URL, Model: "m", HTTPClient: ts.Client()})
	require.NoError(t, err)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			body = tc.body
			mu.Unlock()
			out, err := c.Call(context.Background(), gemrest.Request{Prompt: "p"})
			if tc.class == classify.OK {
				require.NoError(t, err)
				assert.Equal(t, tc.text, out.Text)
				assert.Equal(t, tc.finish, out.FinishReason)
				if tc.usage != nil {
					assert.True(t, out.HasUsage)
					assert.Equal(t, *tc.usage, out.Usage)
				} else {
					assert.False(t, out.HasUsage)
				}
				return
			}
			require.Error(t, err)
			assert.Equal(t, tc.class, classify.Classify(err).Class, "%v", err)
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
			if tc.absent != "" {
				assert.NotContains(t, err.Error(), tc.absent)
			}
		})
	}
}

func TestCallDoesNotFollowRedirects(t *testing.T) {
	var mu sync.Mutex
	var hits []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits = append(hits, r.URL.Path+" key="+r.Header.Get("x-goog-api-key"))
		mu.Unlock()
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	}))
	defer ts.Close()
	c, err := gemrest.New(gemrest.Config{BaseURL: ts.URL, APIKey: secretKey, Model: "m", HTTPClient: ts.Client()})
	require.NoError(t, err)
	_, err = c.Call(context.Background(), gemrest.Request{Prompt: secretPrompt})
	require.Error(t, err)
	assertNoSecrets(t, err)
	v := classify.Classify(err)
	assert.Equal(t, 307, v.HTTPStatus)
	assert.Equal(t, classify.Unknown, v.Class)
	mu.Lock()
	defer mu.Unlock()
	assert.Len(t, hits, 1, "one Call, one request: the redirect (and the key) go nowhere")
	assert.Nil(t, ts.Client().CheckRedirect, "the caller's client is not modified")
}

func TestNewConfig(t *testing.T) {
	_, err := gemrest.New(gemrest.Config{})
	require.ErrorContains(t, err, "Model is required")
	_, err = gemrest.New(gemrest.Config{Model: "m", BaseURL: "localhost:8080"})
	require.ErrorContains(t, err, "absolute http or https URL")
	_, err = gemrest.New(gemrest.Config{Model: "m", BaseURL: "http://h?key=" + secretKey})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), secretKey)
	_, err = gemrest.New(gemrest.Config{Model: "m", MaxResponseBytes: -1})
	require.ErrorContains(t, err, "MaxResponseBytes")
	_, err = gemrest.New(gemrest.Config{Model: "m", APIVersion: "v1/x"})
	require.ErrorContains(t, err, "APIVersion")

	c, err := gemrest.New(gemrest.Config{Model: "gemini-2.5-flash", Name: "flash"})
	require.NoError(t, err)
	assert.Equal(t, "flash", c.Name())
	assert.Equal(t, "gemini-2.5-flash", c.Model())
}

func TestNewTier(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	type question struct{ Topic string }
	flash := gemrest.NewTier(newClient(t, srv, "gemini-2.5-flash"), func(q question) gemrest.Request {
		return gemrest.Request{Prompt: "In one line: " + q.Topic}
	})
	var tier fallback.ModelTier[question, gemrest.Response] = flash
	assert.Equal(t, "gemini-2.5-flash", tier.Name())
	assert.Equal(t, "gemini-2.5-flash", flash.Model())
	assert.Equal(t, "gemini-2.5-flash", flash.Client().Model())
	out, err := tier.Call(context.Background(), question{Topic: "tides"})
	require.NoError(t, err)
	assert.Equal(t, "answer from gemini-2.5-flash: In one line: tides", out.Text)
	rep := reported(t, tier, question{Topic: "tides"})
	assert.True(t, rep.HasUsage)
	assert.Positive(t, rep.Usage.InputTokens)
}

// reported is what one call of tier reports to the chain it runs in.
func reported[In, Out any](t *testing.T, tier fallback.ModelTier[In, Out], in In) fallback.Reply {
	t.Helper()
	_, rep := reportedpkg.Call(t, tier, in)
	return rep
}

func TestListModels(t *testing.T) {
	srv := fakegemini.New(
		fakegemini.WithModels(append(fakegemini.DefaultModels(),
			fakegemini.Model{ID: "gemini-1.0-pro"},
			fakegemini.Model{ID: "text-embedding-004", Methods: []string{"embedContent"}})...),
		fakegemini.WithRetired("gemini-1.0-pro"),
	)
	defer srv.Close()
	ids, err := newClient(t, srv, "any").ListModels(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite", "gemini-2.0-flash"}, ids)

	models, err := catalog.New(newClient(t, srv, "any").ListModels, catalog.Options{})
	require.NoError(t, err)
	require.NoError(t, models.Refresh(context.Background()))
	assert.True(t, models.Available("gemini-2.5-pro"))
	assert.False(t, models.Available("gemini-1.0-pro"), "retired models are not listed")
	assert.False(t, models.Available("text-embedding-004"), "models without generateContent are left out")
}

// pager serves a model list of three pages, or a scripted failure.
func pager(t *testing.T, repeat bool, status int) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1beta/models" || r.Header.Get("x-goog-api-key") != secretKey {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if status != 0 {
			status, h, body := fakegemini.ErrorResponse(fakegemini.PermissionDenied, fakegemini.Params{})
			for k, v := range h {
				w.Header()[k] = v
			}
			w.WriteHeader(status)
			_, _ = w.Write(body)
			return
		}
		pages := map[string]string{
			"":    `{"models":[{"name":"models/a","supportedGenerationMethods":["generateContent"]}],"nextPageToken":"p/2"}`,
			"p/2": `{"models":[{"name":"models/b","supportedGenerationMethods":["countTokens"]},{"name":"models/c","supportedGenerationMethods":["countTokens","generateContent"]}],"nextPageToken":"p3"}`,
			"p3":  `{"models":[{"name":"models/d","supportedGenerationMethods":["generateContent"]}]}`,
		}
		if repeat {
			pages["p3"] = `{"models":[],"nextPageToken":"p/2"}`
		}
		b, ok := pages[r.URL.Query().Get("pageToken")]
		if !ok {
			http.Error(w, "unknown token", http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, b)
	}))
}

func TestListModelsPaging(t *testing.T) {
	list := func(ts *httptest.Server) ([]string, error) {
		c, err := gemrest.New(gemrest.Config{BaseURL: ts.URL, APIKey: secretKey, Model: "m", HTTPClient: ts.Client()})
		require.NoError(t, err)
		return c.ListModels(context.Background())
	}
	ts := pager(t, false, 0)
	defer ts.Close()
	ids, err := list(ts)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "c", "d"}, ids)

	loop := pager(t, true, 0)
	defer loop.Close()
	_, err = list(loop)
	require.ErrorContains(t, err, "page token repeated")

	denied := pager(t, false, 403)
	defer denied.Close()
	_, err = list(denied)
	assert.Equal(t, classify.Auth, classify.Classify(err).Class)
	assertNoSecrets(t, err)
}

// TestChainOverFake runs a chain of gemrest tiers against the fake: the
// primary is down, a retired middle tier is skipped by the catalog, and
// the answer comes from the fallback after JSON validation.
func TestChainOverFake(t *testing.T) {
	srv := fakegemini.New(fakegemini.WithRetired("gemini-1.0-pro"))
	defer srv.Close()
	srv.SetScript("gemini-2.5-pro", fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.Unavailable, P: fakegemini.Always}}})
	models, err := catalog.New(newClient(t, srv, "x").ListModels, catalog.Options{})
	require.NoError(t, err)
	require.NoError(t, models.Refresh(context.Background()))

	stage := func(name, model string) fallback.Stage[gemrest.Request, gemrest.Response] {
		c, err := gemrest.New(gemrest.Config{BaseURL: srv.URL(), Model: model, Name: name, HTTPClient: srv.Client()})
		require.NoError(t, err)
		return fallback.Stage[gemrest.Request, gemrest.Response]{
			Tier: c, Model: c.Model(),
			Retry:    retryOnce,
			Validate: validate.Field(func(r gemrest.Response) string { return r.Text }, validate.JSON()),
		}
	}
	chain, err := fallback.New(fallback.Config[gemrest.Request, gemrest.Response]{
		Stages:  []fallback.Stage[gemrest.Request, gemrest.Response]{stage("pro", "gemini-2.5-pro"), stage("legacy", "gemini-1.0-pro"), stage("flash", "gemini-2.5-flash")},
		Total:   5 * time.Second,
		Catalog: models,
	})
	require.NoError(t, err)
	res, err := chain.Do(context.Background(), gemrest.Request{Prompt: "hello", JSON: true})
	require.NoError(t, err)
	assert.Equal(t, "flash", res.Tier)
	var answer struct{ Model, Answer string }
	require.NoError(t, json.Unmarshal([]byte(res.Value.Text), &answer))
	assert.Equal(t, "gemini-2.5-flash", answer.Model)
	assert.Equal(t, 2, res.UpstreamCalls)
	assert.EqualValues(t, 1, srv.Requests("gemini-2.5-pro"))
	assert.Zero(t, srv.Requests("gemini-1.0-pro"), "the models skips the retired model")
	var skipped bool
	for _, a := range res.Attempts() {
		if a.Tier == "legacy" {
			skipped = a.Skip == fallback.SkipRetired
		}
	}
	assert.True(t, skipped)
}

// A tier reports what the SDK adapters' tiers report: the provider and
// server, and each answer's id, model version and finish reason.
func TestTierDescribesItself(t *testing.T) {
	srv := fakegemini.New(fakegemini.WithAPIKeys(secretKey))
	defer srv.Close()
	tier := gemrest.NewTier(newClient(t, srv, "gemini-2.5-pro"), func(q string) gemrest.Request { return gemrest.Request{Prompt: q} })
	u, err := url.Parse(srv.URL())
	require.NoError(t, err)
	ep := tier.Endpoint()
	assert.Equal(t, "gcp.gemini", ep.Provider)
	assert.Equal(t, u.Hostname(), ep.Address)
	assert.Equal(t, u.Port(), strconv.Itoa(ep.Port))

	out, err := tier.Call(context.Background(), "q")
	require.NoError(t, err)
	assert.NotEmpty(t, out.ResponseID)
	info := reported(t, tier, "q").Response
	assert.Equal(t, "gemini-2.5-pro", info.Model)
	assert.Equal(t, "STOP", info.FinishReason)
	assert.NotEmpty(t, info.ID)
}
