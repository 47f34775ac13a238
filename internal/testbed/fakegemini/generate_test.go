package fakegemini_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
)

func TestGenerateContentSuccess(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()

	for _, version := range []string{"v1beta", "v1"} {
		t.Run(version, func(t *testing.T) {
			res := do(t, srv, http.MethodPost, "/"+version+"/models/gemini-2.5-pro:generateContent?key=k", genBody("Why is the sky blue?"))
			require.Equal(t, http.StatusOK, res.status)
			assert.Equal(t, "application/json; charset=UTF-8", res.header.Get("Content-Type"))

			g := decode[genResponse](t, res.body)
			require.Len(t, g.Candidates, 1)
			c := g.Candidates[0]
			require.NotNil(t, c.Content)
			assert.Equal(t, "model", c.Content.Role)
			assert.Equal(t, "STOP", c.FinishReason)
			assert.Equal(t, 0, c.Index)
			assert.Equal(t, "answer from gemini-2.5-pro: Why is the sky blue?", g.text())
			require.NotNil(t, g.UsageMetadata)
			assert.Equal(t, 5, g.UsageMetadata.PromptTokenCount)
			assert.Positive(t, g.UsageMetadata.CandidatesTokenCount)
			assert.Equal(t, g.UsageMetadata.PromptTokenCount+g.UsageMetadata.CandidatesTokenCount, g.UsageMetadata.TotalTokenCount)
			assert.Equal(t, "gemini-2.5-pro", g.ModelVersion)
			assert.NotEmpty(t, g.ResponseID)

			// camelCase field names on the wire.
			var raw map[string]any
			require.NoError(t, json.Unmarshal(res.body, &raw))
			assert.Contains(t, raw, "usageMetadata")
			assert.Contains(t, raw, "modelVersion")
			assert.Contains(t, raw, "responseId")
		})
	}
	assert.EqualValues(t, 2, srv.Count("gemini-2.5-pro", fakegemini.Success))
	assert.EqualValues(t, 2, srv.Requests("gemini-2.5-pro"))
}

func TestGenerateContentReplies(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()

	t.Run("default JSON mode", func(t *testing.T) {
		res := do(t, srv, http.MethodPost, "/v1beta/models/m1:generateContent", genJSONBody("list three colours"))
		require.Equal(t, http.StatusOK, res.status)
		text := decode[genResponse](t, res.body).text()
		assert.JSONEq(t, `{"model":"m1","answer":"list three colours"}`, text)
	})
	t.Run("Text", func(t *testing.T) {
		srv.SetScript("m2", fakegemini.Script{Reply: fakegemini.Text("fixed")})
		assert.Equal(t, "fixed", decode[genResponse](t, generate(t, srv, "m2", "x").body).text())
	})
	t.Run("JSON", func(t *testing.T) {
		srv.SetScript("m3", fakegemini.Script{Reply: fakegemini.JSON(map[string]any{"ok": true, "n": 3})})
		assert.JSONEq(t, `{"ok":true,"n":3}`, decode[genResponse](t, generate(t, srv, "m3", "x").body).text())
	})
	t.Run("func of the request", func(t *testing.T) {
		srv.SetScript("m4", fakegemini.Script{Reply: func(r fakegemini.Request) string {
			return fmt.Sprintf("%s#%d:%s", r.Model, r.N, strings.ToUpper(r.Prompt))
		}})
		assert.Equal(t, "m4#1:HI", decode[genResponse](t, generate(t, srv, "m4", "hi").body).text())
		assert.Equal(t, "m4#2:YO", decode[genResponse](t, generate(t, srv, "m4", "yo").body).text())
	})
	t.Run("system instruction and turns", func(t *testing.T) {
		seenc := make(chan fakegemini.Request, 1)
		srv.SetScript("m5", fakegemini.Script{Reply: func(r fakegemini.Request) string { seenc <- r; return "ok" }})
		body := `{"systemInstruction":{"parts":[{"text":"be brief"}]},"contents":[{"role":"user","parts":[{"text":"a"},{"text":"b"}]},{"role":"model","parts":[{"text":"c"}]}],"generationConfig":{"responseSchema":{"type":"OBJECT"}}}`
		res := do(t, srv, http.MethodPost, "/v1beta/models/m5:generateContent", body)
		require.Equal(t, http.StatusOK, res.status)
		seen := <-seenc
		assert.Equal(t, "be brief\na\nb\nc", seen.Prompt)
		assert.True(t, seen.JSON)
		assert.False(t, seen.Stream)
	})
}

func TestMalformedRequestBody(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()

	for name, body := range map[string]string{
		"not JSON":       `{"contents": [`,
		"no contents":    `{}`,
		"empty contents": `{"contents": []}`,
	} {
		t.Run(name, func(t *testing.T) {
			res := do(t, srv, http.MethodPost, "/v1beta/models/gemini-2.5-flash:generateContent", body)
			require.Equal(t, http.StatusBadRequest, res.status)
			e := decode[apiError](t, res.body)
			assert.Equal(t, 400, e.Error.Code)
			assert.Equal(t, "INVALID_ARGUMENT", e.Error.Status)
			assert.NotEmpty(t, e.Error.Message)
		})
	}
	assert.EqualValues(t, 3, srv.Count("gemini-2.5-flash", fakegemini.BadRequest))
}

func TestNotFoundRoutes(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	for _, path := range []string{"/", "/v2/models", "/v1beta/models/x:countTokens", "/v1beta/other"} {
		res := do(t, srv, http.MethodPost, path, `{}`)
		assert.Equal(t, http.StatusNotFound, res.status, path)
		assert.Equal(t, "NOT_FOUND", decode[apiError](t, res.body).Error.Status)
	}
}

func TestRetireAndRevive(t *testing.T) {
	srv := fakegemini.New(fakegemini.WithRetired("gemini-1.5-pro"))
	defer srv.Close()

	res := generate(t, srv, "gemini-1.5-pro", "hi")
	require.Equal(t, http.StatusNotFound, res.status)
	e := decode[apiError](t, res.body)
	assert.Equal(t, "models/gemini-1.5-pro is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.", e.Error.Message)
	assert.Equal(t, "NOT_FOUND", e.Error.Status)
	assert.Equal(t, 404, e.Error.Code)

	res = do(t, srv, http.MethodPost, "/v1/models/gemini-1.5-pro:streamGenerateContent?alt=sse", genBody("hi"))
	require.Equal(t, http.StatusNotFound, res.status)
	assert.Contains(t, decode[apiError](t, res.body).Error.Message, "for API version v1, or is not supported for StreamGenerateContent.")

	srv.Revive("gemini-1.5-pro")
	assert.Equal(t, http.StatusOK, generate(t, srv, "gemini-1.5-pro", "hi").status)

	srv.Retire("gemini-2.5-pro")
	assert.Equal(t, http.StatusNotFound, generate(t, srv, "gemini-2.5-pro", "hi").status)
	assert.EqualValues(t, 3, srv.Count("gemini-1.5-pro", fakegemini.Retired)+srv.Count("gemini-1.5-pro", fakegemini.Success))
	assert.EqualValues(t, 1, srv.Count("gemini-2.5-pro", fakegemini.Retired))
}

func TestStrictModels(t *testing.T) {
	srv := fakegemini.New(fakegemini.WithStrictModels())
	defer srv.Close()
	assert.Equal(t, http.StatusNotFound, generate(t, srv, "no-such-model", "hi").status)
	assert.Equal(t, http.StatusOK, generate(t, srv, "gemini-2.5-flash", "hi").status)
}

func TestAPIKeys(t *testing.T) {
	srv := fakegemini.New(fakegemini.WithAPIKeys("good"))
	defer srv.Close()
	path := "/v1beta/models/gemini-2.5-flash:generateContent"

	assert.Equal(t, http.StatusOK, do(t, srv, http.MethodPost, path, genBody("x"), "x-goog-api-key", "good").status)
	assert.Equal(t, http.StatusOK, do(t, srv, http.MethodPost, path+"?key=good", genBody("x")).status)

	res := do(t, srv, http.MethodPost, path, genBody("x"), "x-goog-api-key", "bad")
	require.Equal(t, http.StatusBadRequest, res.status)
	e := decode[apiError](t, res.body)
	assert.Equal(t, "INVALID_ARGUMENT", e.Error.Status)
	assert.Equal(t, "API key not valid. Please pass a valid API key.", e.Error.Message)
	require.NotEmpty(t, e.Error.Details)
	assert.Equal(t, "type.googleapis.com/google.rpc.ErrorInfo", e.Error.Details[0]["@type"])
	assert.Equal(t, "API_KEY_INVALID", e.Error.Details[0]["reason"])
	assert.Equal(t, "googleapis.com", e.Error.Details[0]["domain"])

	res = do(t, srv, http.MethodPost, path, genBody("x"))
	require.Equal(t, http.StatusForbidden, res.status)
	assert.Equal(t, "PERMISSION_DENIED", decode[apiError](t, res.body).Error.Status)

	// The model list checks keys too.
	assert.Equal(t, http.StatusBadRequest, do(t, srv, http.MethodGet, "/v1beta/models?key=bad", "").status)
	assert.Equal(t, http.StatusOK, do(t, srv, http.MethodGet, "/v1beta/models?key=good", "").status)

	assert.EqualValues(t, 1, srv.Count("gemini-2.5-flash", fakegemini.InvalidAPIKey))
	assert.EqualValues(t, 1, srv.Count("gemini-2.5-flash", fakegemini.PermissionDenied))
}

func TestAutomaticTokenLimit(t *testing.T) {
	srv := fakegemini.New(fakegemini.WithModels(fakegemini.Model{ID: "small", InputTokenLimit: 10}))
	defer srv.Close()

	assert.Equal(t, http.StatusOK, generate(t, srv, "small", "short").status)
	res := generate(t, srv, "small", strings.Repeat("a", 400))
	require.Equal(t, http.StatusBadRequest, res.status)
	e := decode[apiError](t, res.body)
	assert.Equal(t, "INVALID_ARGUMENT", e.Error.Status)
	assert.Equal(t, "The input token count (100) exceeds the maximum number of tokens allowed (10).", e.Error.Message)
	assert.EqualValues(t, 1, srv.Count("small", fakegemini.TokenLimit))

	// A scripted TokenLimit names the model's window.
	srv.SetScript("small", fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.TokenLimit, P: fakegemini.Always}}})
	e = decode[apiError](t, generate(t, srv, "small", "hi").body)
	assert.Equal(t, "The input token count (11) exceeds the maximum number of tokens allowed (10).", e.Error.Message)
}

func TestRuleConditions(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := &clock{t: t0}
	srv := fakegemini.New(fakegemini.WithNow(clk.Now))
	defer srv.Close()

	t.Run("window", func(t *testing.T) {
		srv.SetScript("w", fakegemini.Script{Rules: []fakegemini.Rule{{
			Kind: fakegemini.Unavailable, P: fakegemini.Always, From: t0.Add(time.Minute), Until: t0.Add(2 * time.Minute),
		}}})
		for _, tc := range []struct {
			at   time.Duration
			want int
		}{
			{0, 200}, {59 * time.Second, 200}, {time.Minute, 503}, {119 * time.Second, 503}, {2 * time.Minute, 200},
		} {
			clk.Set(t0.Add(tc.at))
			assert.Equal(t, tc.want, generate(t, srv, "w", "x").status, "at %v", tc.at)
		}
	})
	t.Run("first N", func(t *testing.T) {
		srv.SetScript("f", fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.Internal, P: fakegemini.Always, FirstN: 2}}})
		got := []int{}
		for range 4 {
			got = append(got, generate(t, srv, "f", "x").status)
		}
		assert.Equal(t, []int{500, 500, 200, 200}, got)
		// Setting the script again re-arms it.
		srv.SetScript("f", fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.Internal, P: fakegemini.Always, FirstN: 1}}})
		assert.Equal(t, 500, generate(t, srv, "f", "x").status)
	})
	t.Run("every Nth, first match wins", func(t *testing.T) {
		srv.SetScript("e", fakegemini.Script{Rules: []fakegemini.Rule{
			{Kind: fakegemini.DeadlineExceeded, P: fakegemini.Always, Every: 3},
			{Kind: fakegemini.Unavailable, P: fakegemini.Always, Every: 2},
		}})
		got := []int{}
		for range 6 {
			got = append(got, generate(t, srv, "e", "x").status)
		}
		assert.Equal(t, []int{200, 503, 504, 503, 200, 504}, got)
	})
	t.Run("zero probability never fires", func(t *testing.T) {
		srv.SetScript("z", fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.Internal}}})
		for range 5 {
			assert.Equal(t, 200, generate(t, srv, "z", "x").status)
		}
	})
	t.Run("default script and clear", func(t *testing.T) {
		srv.SetDefaultScript(fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.Unavailable, P: fakegemini.Always}}})
		assert.Equal(t, 503, generate(t, srv, "any-model", "x").status)
		srv.SetScript("any-model", fakegemini.Script{})
		assert.Equal(t, 200, generate(t, srv, "any-model", "x").status)
		srv.ClearScript("any-model")
		assert.Equal(t, 503, generate(t, srv, "any-model", "x").status)
		srv.SetDefaultScript(fakegemini.Script{})
		assert.Equal(t, 200, generate(t, srv, "any-model", "x").status)
	})
}

// outcomes runs n sequential requests and returns their statuses.
func outcomes(t *testing.T, seed uint64, n int) []int {
	srv := fakegemini.New(fakegemini.WithSeed(seed))
	defer srv.Close()
	srv.SetScript("m", fakegemini.Script{Rules: []fakegemini.Rule{
		{Kind: fakegemini.Unavailable, P: 0.2},
		{Kind: fakegemini.RateLimited, P: 0.2},
	}})
	var got []int
	for range n {
		got = append(got, generate(t, srv, "m", "x").status)
	}
	return got
}

func TestSeededDeterminism(t *testing.T) {
	a, b := outcomes(t, 7, 60), outcomes(t, 7, 60)
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, outcomes(t, 8, 60))

	counts := map[int]int{}
	for _, s := range a {
		counts[s]++
	}
	assert.Positive(t, counts[503])
	assert.Positive(t, counts[429])
	assert.Positive(t, counts[200])
}

func TestDeterminismIgnoresOtherModels(t *testing.T) {
	run := func(noise bool) []int {
		srv := fakegemini.New(fakegemini.WithSeed(3))
		defer srv.Close()
		srv.SetDefaultScript(fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.Unavailable, P: 0.5}}})
		var got []int
		for i := range 30 {
			if noise && i%2 == 0 {
				generate(t, srv, "other", "x")
			}
			got = append(got, generate(t, srv, "m", "x").status)
		}
		return got
	}
	assert.Equal(t, run(false), run(true))
}

func TestLatency(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	seen := make(chan float64, 10)
	srv.SetScript("m", fakegemini.Script{
		Latency: fakegemini.Latency{Func: func(u float64) time.Duration {
			seen <- u
			return time.Millisecond
		}},
		FaultLatency: fakegemini.Latency{Fixed: time.Millisecond, Jitter: time.Millisecond},
		Rules:        []fakegemini.Rule{{Kind: fakegemini.Internal, P: fakegemini.Always, Every: 2}},
	})
	start := time.Now()
	assert.Equal(t, 200, generate(t, srv, "m", "x").status)
	assert.Equal(t, 500, generate(t, srv, "m", "x").status)
	assert.GreaterOrEqual(t, time.Since(start), 2*time.Millisecond)
	require.Len(t, seen, 1)
	u := <-seen
	assert.GreaterOrEqual(t, u, 0.0)
	assert.Less(t, u, 1.0)
}

func TestScriptValidate(t *testing.T) {
	bad := []fakegemini.Script{
		{Rules: []fakegemini.Rule{{Kind: "nope", P: 1}}},
		{Rules: []fakegemini.Rule{{Kind: fakegemini.Success, P: 1}}},
		{Rules: []fakegemini.Rule{{Kind: fakegemini.Canceled, P: 1}}},
		{Rules: []fakegemini.Rule{{Kind: fakegemini.Internal, P: 1.5}}},
		{Rules: []fakegemini.Rule{{Kind: fakegemini.Internal, P: 1, From: time.Unix(10, 0), Until: time.Unix(5, 0)}}},
		{Rules: []fakegemini.Rule{{Kind: fakegemini.Internal, P: 1, FirstN: -1}}},
		{Chunks: -1},
	}
	srv := fakegemini.New()
	defer srv.Close()
	for i, sc := range bad {
		require.Error(t, sc.Validate(), i)
		assert.Panics(t, func() { srv.SetScript("m", sc) }, i)
	}
	require.NoError(t, fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.Drop, P: 0.5}}}.Validate())
}

func TestResetStats(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	generate(t, srv, "m", "x")
	st := srv.Stats()
	require.Contains(t, st, "m")
	assert.EqualValues(t, 1, st["m"].Requests)
	assert.EqualValues(t, 0, st["m"].InFlight)
	assert.EqualValues(t, 1, st["m"].Outcomes[fakegemini.Success])

	srv.ResetStats()
	assert.EqualValues(t, 0, srv.Requests("m"))
	assert.EqualValues(t, 0, srv.Count("m", fakegemini.Success))
	assert.EqualValues(t, 0, srv.Count("never-seen", fakegemini.Success))
	assert.EqualValues(t, 0, srv.InFlight())
}
