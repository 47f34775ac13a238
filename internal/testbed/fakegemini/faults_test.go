package fakegemini_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
)

func always(k fakegemini.Kind, p fakegemini.Params) fakegemini.Script {
	return fakegemini.Script{Rules: []fakegemini.Rule{{Kind: k, P: fakegemini.Always, Params: p}}}
}

// detail returns the first detail of the given google.rpc type.
func detail(t *testing.T, e apiError, typ string) map[string]any {
	t.Helper()
	for _, d := range e.Error.Details {
		if d["@type"] == "type.googleapis.com/google.rpc."+typ {
			return d
		}
	}
	t.Fatalf("no %s detail in %v", typ, e.Error.Details)
	return nil
}

func TestErrorKindsOverHTTP(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	const model = "gemini-2.5-pro"

	tests := []struct {
		kind   fakegemini.Kind
		params fakegemini.Params
		status int
		check  func(t *testing.T, r result)
	}{
		{kind: fakegemini.Unavailable, status: 503, check: func(t *testing.T, r result) {
			e := decode[apiError](t, r.body)
			assert.Equal(t, 503, e.Error.Code)
			assert.Equal(t, "UNAVAILABLE", e.Error.Status)
			assert.Equal(t, "The model is overloaded. Please try again later.", e.Error.Message)
			assert.Empty(t, r.header.Get("Retry-After"))
		}},
		{kind: fakegemini.Internal, status: 500, check: func(t *testing.T, r result) {
			assert.Equal(t, "INTERNAL", decode[apiError](t, r.body).Error.Status)
		}},
		{kind: fakegemini.DeadlineExceeded, status: 504, check: func(t *testing.T, r result) {
			assert.Equal(t, "DEADLINE_EXCEEDED", decode[apiError](t, r.body).Error.Status)
		}},
		{kind: fakegemini.RateLimited, status: 429, check: func(t *testing.T, r result) {
			e := decode[apiError](t, r.body)
			assert.Equal(t, 429, e.Error.Code)
			assert.Equal(t, "RESOURCE_EXHAUSTED", e.Error.Status)
			assert.True(t, strings.HasSuffix(e.Error.Message, "\nPlease retry in 37.38s."), e.Error.Message)
			assert.Contains(t, e.Error.Message, "limit: 10, model: gemini-2.5-pro")
			qf := detail(t, e, "QuotaFailure")
			v := qf["violations"].([]any)[0].(map[string]any)
			assert.Equal(t, "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", v["quotaId"])
			assert.Equal(t, "generativelanguage.googleapis.com/generate_content_free_tier_requests", v["quotaMetric"])
			assert.Equal(t, map[string]any{"location": "global", "model": model}, v["quotaDimensions"])
			assert.Equal(t, "10", v["quotaValue"])
			assert.Equal(t, "37s", detail(t, e, "RetryInfo")["retryDelay"])
			detail(t, e, "Help")
			assert.Empty(t, r.header.Get("Retry-After"), "the real API sends no Retry-After")
		}},
		{kind: fakegemini.RateLimited, params: fakegemini.Params{RetryDelay: 250 * time.Millisecond, RetryAfter: "1"}, status: 429, check: func(t *testing.T, r result) {
			e := decode[apiError](t, r.body)
			assert.Equal(t, "0.250s", detail(t, e, "RetryInfo")["retryDelay"])
			assert.True(t, strings.HasSuffix(e.Error.Message, "Please retry in 0.25s."), e.Error.Message)
			assert.Equal(t, "1", r.header.Get("Retry-After"))
		}},
		{kind: fakegemini.QuotaExhausted, status: 429, check: func(t *testing.T, r result) {
			e := decode[apiError](t, r.body)
			assert.Equal(t, "RESOURCE_EXHAUSTED", e.Error.Status)
			v := detail(t, e, "QuotaFailure")["violations"].([]any)[0].(map[string]any)
			assert.Equal(t, "GenerateRequestsPerDayPerProjectPerModel-FreeTier", v["quotaId"])
			assert.Equal(t, "250", v["quotaValue"])
			assert.Equal(t, "37s", detail(t, e, "RetryInfo")["retryDelay"], "a per-day 429 still carries a short RetryInfo")
		}},
		{kind: fakegemini.Retired, status: 404, check: func(t *testing.T, r result) {
			e := decode[apiError](t, r.body)
			assert.Equal(t, "NOT_FOUND", e.Error.Status)
			assert.Equal(t, "models/gemini-2.5-pro is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.", e.Error.Message)
		}},
		{kind: fakegemini.TokenLimit, params: fakegemini.Params{InputTokens: 1200000, TokenLimit: 1048575}, status: 400, check: func(t *testing.T, r result) {
			e := decode[apiError](t, r.body)
			assert.Equal(t, "INVALID_ARGUMENT", e.Error.Status)
			assert.Equal(t, "The input token count (1200000) exceeds the maximum number of tokens allowed (1048575).", e.Error.Message)
		}},
		{kind: fakegemini.BadRequest, status: 400, check: func(t *testing.T, r result) {
			assert.Equal(t, "INVALID_ARGUMENT", decode[apiError](t, r.body).Error.Status)
		}},
		{kind: fakegemini.InvalidAPIKey, status: 400, check: func(t *testing.T, r result) {
			e := decode[apiError](t, r.body)
			assert.Equal(t, "API key not valid. Please pass a valid API key.", e.Error.Message)
			ei := detail(t, e, "ErrorInfo")
			assert.Equal(t, "API_KEY_INVALID", ei["reason"])
			assert.Equal(t, "googleapis.com", ei["domain"])
		}},
		{kind: fakegemini.Unauthenticated, status: 401, check: func(t *testing.T, r result) {
			assert.Equal(t, "UNAUTHENTICATED", decode[apiError](t, r.body).Error.Status)
		}},
		{kind: fakegemini.PermissionDenied, status: 403, check: func(t *testing.T, r result) {
			assert.Equal(t, "PERMISSION_DENIED", decode[apiError](t, r.body).Error.Status)
		}},
		{kind: fakegemini.BadGatewayHTML, status: 502, check: func(t *testing.T, r result) {
			assert.Equal(t, "text/html; charset=UTF-8", r.header.Get("Content-Type"))
			assert.Contains(t, string(r.body), "<title>Error 502 (Server Error)!!1</title>")
			assert.False(t, json.Valid(r.body))
		}},
		{kind: fakegemini.NoCodeJSON, status: 500, check: func(t *testing.T, r result) {
			var raw map[string]map[string]any
			require.NoError(t, json.Unmarshal(r.body, &raw))
			assert.NotContains(t, raw["error"], "code")
			assert.Equal(t, 0, decode[apiError](t, r.body).Error.Code)
		}},
		{kind: fakegemini.NoCodeJSON, params: fakegemini.Params{Status: 503}, status: 503},
		{kind: fakegemini.EmptyBody, status: 500, check: func(t *testing.T, r result) {
			assert.Empty(t, r.body)
		}},
		{kind: fakegemini.HugeBody, params: fakegemini.Params{BodySize: 100_000}, status: 500, check: func(t *testing.T, r result) {
			assert.Len(t, r.body, 100_000)
			e := decode[apiError](t, r.body)
			assert.Equal(t, "INTERNAL", e.Error.Status)
		}},
	}
	for _, tc := range tests {
		t.Run(string(tc.kind), func(t *testing.T) {
			srv.SetScript(model, always(tc.kind, tc.params))
			r := generate(t, srv, model, "hello")
			require.Equal(t, tc.status, r.status, "%s", r.body)
			if tc.check != nil {
				tc.check(t, r)
			}
			// The server sends exactly what ErrorResponse builds.
			p := tc.params
			p.Model = model
			status, header, body := fakegemini.ErrorResponse(tc.kind, p)
			assert.Equal(t, tc.status, status)
			assert.Equal(t, string(body), string(r.body))
			assert.Equal(t, header.Get("Content-Type"), r.header.Get("Content-Type"))
			assert.Equal(t, header.Get("Retry-After"), r.header.Get("Retry-After"))
		})
	}
	for _, tc := range tests {
		assert.Positive(t, srv.Count(model, tc.kind), tc.kind)
	}
}

func TestErrorResponseDefaults(t *testing.T) {
	for _, k := range fakegemini.ErrorKinds() {
		t.Run(string(k), func(t *testing.T) {
			status, header, body := fakegemini.ErrorResponse(k, fakegemini.Params{})
			assert.Equal(t, k.HTTPStatus(), status)
			require.NotNil(t, header)
			switch k {
			case fakegemini.HugeBody:
				// Too big to decode quickly under -race: check the frame.
				require.Len(t, body, fakegemini.DefaultBodySize)
				assert.True(t, strings.HasPrefix(string(body[:64]), `{"error":{"code":500,"message":"xxxx`), "%.64s", body)
				assert.True(t, strings.HasSuffix(string(body[len(body)-64:]), `xxxx","status":"INTERNAL"}}`), "%s", body[len(body)-64:])
			case fakegemini.EmptyBody:
				assert.Empty(t, body)
			case fakegemini.BadGatewayHTML:
				assert.False(t, json.Valid(body))
			default:
				require.True(t, json.Valid(body), "%.200s", body)
				e := decode[apiError](t, body)
				assert.NotEmpty(t, e.Error.Status)
				if k != fakegemini.NoCodeJSON {
					assert.Equal(t, status, e.Error.Code)
				}
			}
		})
	}
	s, h, b := fakegemini.ErrorResponse(fakegemini.Success, fakegemini.Params{})
	assert.Zero(t, s)
	assert.Nil(t, h)
	assert.Nil(t, b)
}

func TestOKFaults(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()

	t.Run("malformed JSON", func(t *testing.T) {
		srv.SetScript("m", always(fakegemini.MalformedJSON, fakegemini.Params{}))
		r := do(t, srv, http.MethodPost, "/v1beta/models/m:generateContent", genJSONBody("x"))
		require.Equal(t, 200, r.status)
		g := decode[genResponse](t, r.body)
		assert.Equal(t, "STOP", g.Candidates[0].FinishReason)
		assert.False(t, json.Valid([]byte(g.text())), g.text())
	})
	t.Run("safety finish", func(t *testing.T) {
		srv.SetScript("m", always(fakegemini.SafetyFinish, fakegemini.Params{}))
		g := decode[genResponse](t, generate(t, srv, "m", "x").body)
		require.Len(t, g.Candidates, 1)
		assert.Equal(t, "SAFETY", g.Candidates[0].FinishReason)
		assert.Nil(t, g.Candidates[0].Content)
		assert.NotEmpty(t, g.Candidates[0].SafetyRatings)
		assert.Contains(t, g.Candidates[0].SafetyRatings, map[string]any{"category": "HARM_CATEGORY_HARASSMENT", "probability": "HIGH", "blocked": true})
	})
	t.Run("prompt blocked", func(t *testing.T) {
		srv.SetScript("m", always(fakegemini.PromptBlocked, fakegemini.Params{}))
		r := generate(t, srv, "m", "x")
		g := decode[genResponse](t, r.body)
		assert.Empty(t, g.Candidates)
		require.NotNil(t, g.PromptFeedback)
		assert.Equal(t, "SAFETY", g.PromptFeedback.BlockReason)
		assert.NotContains(t, string(r.body), `"candidates"`)
	})
	t.Run("empty candidates", func(t *testing.T) {
		srv.SetScript("m", always(fakegemini.EmptyCandidates, fakegemini.Params{}))
		r := generate(t, srv, "m", "x")
		var raw map[string]any
		require.NoError(t, json.Unmarshal(r.body, &raw))
		assert.Equal(t, []any{}, raw["candidates"])
	})
	t.Run("no finish reason", func(t *testing.T) {
		srv.SetScript("m", always(fakegemini.NoFinishReason, fakegemini.Params{}))
		g := decode[genResponse](t, generate(t, srv, "m", "x").body)
		assert.Empty(t, g.Candidates[0].FinishReason)
		assert.NotEmpty(t, g.text())
	})
	t.Run("unary cut", func(t *testing.T) {
		srv.SetScript("m", always(fakegemini.StreamCut, fakegemini.Params{}))
		resp, err := srv.Client().Post(srv.URL()+"/v1beta/models/m:generateContent", "application/json", strings.NewReader(genBody("x")))
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		_, err = io.ReadAll(resp.Body)
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	})
	for _, k := range []fakegemini.Kind{fakegemini.MalformedJSON, fakegemini.SafetyFinish, fakegemini.PromptBlocked, fakegemini.EmptyCandidates, fakegemini.NoFinishReason, fakegemini.StreamCut} {
		assert.EqualValues(t, 1, srv.Count("m", k), k)
	}
}

func TestDrop(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript("m", always(fakegemini.Drop, fakegemini.Params{}))
	resp, err := srv.Client().Post(srv.URL()+"/v1beta/models/m:generateContent", "application/json", strings.NewReader(genBody("x")))
	if err == nil {
		resp.Body.Close()
	}
	require.Error(t, err)
	assert.ErrorIs(t, err, io.EOF)
	assert.EqualValues(t, 1, srv.Count("m", fakegemini.Drop), "counted before the connection drops")
	// The server keeps serving on new connections.
	srv.ClearScript("m")
	assert.Equal(t, 200, generate(t, srv, "m", "x").status)
}

func TestStallReleasedByClientCancel(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript("m", always(fakegemini.Stall, fakegemini.Params{}))

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/v1beta/models/m:generateContent", strings.NewReader(genBody("x")))
		resp, err := srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	require.Eventually(t, func() bool { return srv.InFlight() == 1 }, 5*time.Second, time.Millisecond)
	assert.EqualValues(t, 1, srv.Stats()["m"].InFlight)
	cancel()
	assert.ErrorIs(t, <-errc, context.Canceled)
	require.Eventually(t, func() bool { return srv.Count("m", fakegemini.Canceled) == 1 }, 5*time.Second, time.Millisecond)
	assert.EqualValues(t, 0, srv.InFlight())
	assert.EqualValues(t, 0, srv.Count("m", fakegemini.Stall))
}

func TestStallForThenAnswer(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript("m", always(fakegemini.Stall, fakegemini.Params{StallFor: 5 * time.Millisecond}))
	r := generate(t, srv, "m", "x")
	require.Equal(t, 200, r.status)
	assert.Equal(t, "STOP", decode[genResponse](t, r.body).Candidates[0].FinishReason)
	assert.EqualValues(t, 1, srv.Count("m", fakegemini.Stall))
}

func TestLatencyCanceled(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript("m", fakegemini.Script{Latency: fakegemini.Latency{Fixed: time.Hour}})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for srv.InFlight() == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/v1beta/models/m:generateContent", strings.NewReader(genBody("x")))
	resp, err := srv.Client().Do(req)
	if err == nil {
		resp.Body.Close()
	}
	require.ErrorIs(t, err, context.Canceled)
	require.Eventually(t, func() bool { return srv.Count("m", fakegemini.Canceled) == 1 }, 5*time.Second, time.Millisecond)
}

func TestCloseWithStalledRequests(t *testing.T) {
	srv := fakegemini.New()
	srv.SetScript("stall", always(fakegemini.Stall, fakegemini.Params{}))
	srv.SetScript("slow", fakegemini.Script{Latency: fakegemini.Latency{Fixed: time.Hour}})
	srv.SetScript("stream", fakegemini.Script{Chunks: 5, ChunkDelay: time.Hour})

	const n = 6
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		path := []string{
			"/v1beta/models/stall:generateContent",
			"/v1beta/models/slow:generateContent",
			"/v1beta/models/stream:streamGenerateContent?alt=sse",
		}[i%3]
		wg.Go(func() {
			resp, err := srv.Client().Post(srv.URL()+path, "application/json", strings.NewReader(genBody("x")))
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			errs <- err
		})
	}
	require.Eventually(t, func() bool { return srv.InFlight() == n }, 5*time.Second, time.Millisecond)

	closed := make(chan struct{})
	go func() {
		srv.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close hung with stalled requests in flight")
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.Error(t, err)
	}
	assert.EqualValues(t, 0, srv.InFlight())
	st := srv.Stats()
	assert.EqualValues(t, 2, st["stall"].Outcomes[fakegemini.Canceled])
	assert.EqualValues(t, 2, st["slow"].Outcomes[fakegemini.Canceled])
	assert.EqualValues(t, 2, st["stream"].Outcomes[fakegemini.Canceled])
	srv.Close() // idempotent
}

func TestConcurrentRequests(t *testing.T) {
	srv := fakegemini.New(fakegemini.WithSeed(42))
	defer srv.Close()
	models := []string{"a", "b", "c", "d"}
	srv.SetScript("a", fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.Unavailable, P: 0.3}}})
	srv.SetScript("b", fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.RateLimited, P: 0.5}}, Latency: fakegemini.Latency{Jitter: time.Millisecond}})
	srv.SetScript("c", fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.Retired, P: fakegemini.Always}}})

	const workers, per = 16, 25
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	errc := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range per {
				m := models[(w+i)%len(models)]
				path := "/v1beta/models/" + m + ":generateContent"
				if i%5 == 0 {
					path = "/v1beta/models/" + m + ":streamGenerateContent?alt=sse"
				}
				resp, err := srv.Client().Post(srv.URL()+path, "application/json", strings.NewReader(genBody("x")))
				if err != nil {
					errc <- err
					return
				}
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					errc <- err
					return
				}
				mu.Lock()
				statuses[resp.StatusCode]++
				mu.Unlock()
				if i == per/2 && w == 0 {
					// Scripts change while requests run.
					srv.SetScript("d", fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.Internal, P: 0.5}}})
					_ = srv.Stats()
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		require.NoError(t, err)
	}
	var total int64
	for m, st := range srv.Stats() {
		var sum int64
		for _, c := range st.Outcomes {
			sum += c
		}
		assert.Equal(t, st.Requests, sum, m)
		assert.Zero(t, st.InFlight, m)
		total += st.Requests
	}
	assert.EqualValues(t, workers*per, total)
	assert.EqualValues(t, srv.Requests("c"), srv.Count("c", fakegemini.Retired))
	assert.Positive(t, statuses[503])
	assert.Positive(t, statuses[429])
	assert.Positive(t, statuses[404])
	assert.Positive(t, statuses[200])
}

func TestKeepAliveAcrossErrors(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript("m", fakegemini.Script{Rules: []fakegemini.Rule{
		{Kind: fakegemini.Unavailable, P: fakegemini.Always, Every: 2},
		{Kind: fakegemini.RateLimited, P: fakegemini.Always, Every: 3},
	}})
	var reused []bool
	for range 4 {
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) }}
		ctx := httptrace.WithClientTrace(context.Background(), trace)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/v1beta/models/m:generateContent", strings.NewReader(genBody("x")))
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	assert.Equal(t, []bool{false, true, true, true}, reused)
	assert.EqualValues(t, 2, srv.Count("m", fakegemini.Unavailable))
	assert.EqualValues(t, 1, srv.Count("m", fakegemini.RateLimited))
}

func TestKindHelpers(t *testing.T) {
	assert.Equal(t, 503, fakegemini.Unavailable.HTTPStatus())
	assert.Equal(t, 0, fakegemini.Drop.HTTPStatus())
	assert.Equal(t, 200, fakegemini.SafetyFinish.HTTPStatus())
	assert.True(t, fakegemini.Stall.Valid())
	assert.False(t, fakegemini.Kind("bogus").Valid())
	for _, k := range fakegemini.ErrorKinds() {
		assert.GreaterOrEqual(t, k.HTTPStatus(), 400, k)
	}
}

// TestQuotaOverASlidingWindow: a quota refuses requests beyond its count
// in any window, with a RetryInfo delay that says when the oldest leaves,
// and limits only the key it names.
func TestQuotaOverASlidingWindow(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	srv := fakegemini.New(fakegemini.WithNow(clock))
	defer srv.Close()
	srv.SetQuota(fakegemini.Quota{Model: "gemini-2.5-pro", Requests: 2, Per: time.Minute})
	srv.SetQuota(fakegemini.Quota{Key: "limited", Requests: 1, Per: time.Minute})
	post := func(model, key string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, srv.URL()+"/v1beta/models/"+model+":generateContent",
			strings.NewReader(`{"contents":[{"parts":[{"text":"hi"}]}]}`))
		require.NoError(t, err)
		req.Header.Set("x-goog-api-key", key)
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, _ := post("gemini-2.5-pro", "k")
	assert.Equal(t, 200, code)
	advance(20 * time.Second)
	code, _ = post("gemini-2.5-pro", "k")
	assert.Equal(t, 200, code)
	code, body := post("gemini-2.5-pro", "k")
	assert.Equal(t, 429, code)
	assert.Contains(t, body, `"retryDelay": "40s"`, "the first request leaves the window in 40 s")
	advance(40 * time.Second)
	code, _ = post("gemini-2.5-pro", "k")
	assert.Equal(t, 200, code)
	code, _ = post("gemini-2.5-flash", "limited")
	assert.Equal(t, 200, code)
	code, _ = post("gemini-2.5-flash", "limited")
	assert.Equal(t, 429, code, "the key's own quota")
	code, _ = post("gemini-2.5-flash", "other")
	assert.Equal(t, 200, code)
	assert.Equal(t, int64(2), srv.Count("gemini-2.5-pro", fakegemini.RateLimited)+srv.Count("gemini-2.5-flash", fakegemini.RateLimited))
}

// TestRuleLimitedToAKey: a rule with a Key fires only for requests made
// with that key — over either way a client sends it, unary or streamed —
// and the per-key counters tell the keys apart where the per-model ones
// add them up.
func TestRuleLimitedToAKey(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	const model = "gemini-2.5-pro"
	srv.SetScript(model, fakegemini.Script{Rules: []fakegemini.Rule{
		{Kind: fakegemini.RateLimited, P: fakegemini.Always, Key: "key-a", Params: fakegemini.Params{RetryDelay: 3 * time.Second}},
	}})
	post := func(method, key string, query bool) (int, string) {
		url := srv.URL() + "/v1beta/models/" + model + ":" + method
		if query {
			url += "?key=" + key
		}
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(genBody("hi")))
		require.NoError(t, err)
		if !query {
			req.Header.Set("x-goog-api-key", key)
		}
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := post("generateContent", "key-a", false)
	assert.Equal(t, 429, code)
	assert.Contains(t, body, `"retryDelay": "3s"`)
	code, _ = post("streamGenerateContent", "key-a", true)
	assert.Equal(t, 429, code, "the key in the query is the same key")
	for range 2 {
		code, _ = post("generateContent", "key-b", false)
		assert.Equal(t, 200, code)
	}
	code, _ = post("streamGenerateContent", "key-b", false)
	assert.Equal(t, 200, code)

	assert.EqualValues(t, 5, srv.Requests(model))
	assert.EqualValues(t, 2, srv.KeyRequests("key-a"))
	assert.EqualValues(t, 2, srv.KeyCount("key-a", fakegemini.RateLimited))
	assert.EqualValues(t, 0, srv.KeyCount("key-a", fakegemini.Success))
	assert.EqualValues(t, 3, srv.KeyRequests("key-b"))
	assert.EqualValues(t, 3, srv.KeyCount("key-b", fakegemini.Success))
	assert.EqualValues(t, 0, srv.KeyRequests("key-c"), "a key never seen")
	srv.ResetStats()
	assert.EqualValues(t, 0, srv.KeyRequests("key-a"), "ResetStats zeroes the per-key counters too")
}
