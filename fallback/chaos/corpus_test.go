package chaos_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback/chaos"
	"github.com/tierguard/tierguard/internal/testbed/corpus"
)

// corpusCase names the conformance corpus case each predefined response
// is quoted from.
var corpusCase = map[string]string{
	"gemini_503_overloaded":           "gemini-api-overloaded-503-pretty",
	"gemini_429_per_minute_retry_26s": "gemini-api-per-minute-input-tokens-429",
	"gemini_429_per_day_quota":        "gemini-api-per-day-429-wrapped",
	"gemini_404_model_not_found":      "gemini-api-model-not-found-404-log",
	"gemini_499_cancelled":            "gemini-code-assist-cancelled-499-array",
	"gemini_400_api_key_invalid":      "gemini-api-api-key-invalid-400",
	"openai_500_server_error":         "other-openai-compatible-litellm-wrapped-503",
	"openai_429_per_minute_try_again": "groq-tpm-429-try-again-in",
	"openai_429_per_day_quota":        "openai-rpd-429-try-again-in",
	"openai_429_insufficient_quota":   "openai-insufficient-quota-429",
	"openai_404_model_not_found":      "openai-model-not-found-404",
	"openai_401_invalid_api_key":      "openai-invalid-api-key-401",
}

func corpusCases(t *testing.T) map[string]corpus.Case {
	t.Helper()
	all, err := corpus.All()
	require.NoError(t, err)
	m := map[string]corpus.Case{}
	for _, c := range all {
		m[c.Name] = c
	}
	return m
}

// realVerdict is how a client without an SDK reads the case's response.
func realVerdict(c corpus.Case) classify.Verdict {
	resp := &http.Response{StatusCode: c.Status, Header: c.Header.Clone(), Body: io.NopCloser(bytes.NewReader(c.ResponseBody()))}
	return classify.Classify(classify.ReadResponse(context.Background(), resp))
}

// Every predefined response is its corpus case byte for byte, and the
// error a wrapped tier returns when it is injected classifies exactly as
// the real response does: the case's expected class, retry-after and
// model, and the whole verdict the raw path gives the real bytes.
func TestResponsesClassifyAsTheRealOnes(t *testing.T) {
	cases := corpusCases(t)
	require.Len(t, chaos.Responses(), len(corpusCase))
	for _, r := range chaos.Responses() {
		t.Run(r.Name(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				name, ok := corpusCase[r.Name()]
				require.True(t, ok, "no corpus case named for %s", r.Name())
				c, ok := cases[name]
				require.True(t, ok, "corpus case %s", name)
				assert.Equal(t, c.Source, r.Source())
				assert.Equal(t, c.Status, r.Status())
				assert.Equal(t, string(c.ResponseBody()), string(r.Body()), "the corpus bytes")

				var sw chaos.Switch
				tier := chaos.Tier(&upstream{name: "pro"}, &sw)
				require.NoError(t, sw.Start(always(chaos.Fail(r))))
				defer sw.Stop()
				_, err := tier.Call(context.Background(), "q")
				require.ErrorIs(t, err, chaos.ErrInjected)
				assert.True(t, strings.HasPrefix(err.Error(), "chaos: injected fail_"+r.Name()+": upstream error: "+strconv.Itoa(r.Status())), err.Error())
				if f, ok := classify.ParseErrorBody(r.Body()); ok && f.Message != "" {
					assert.NotContains(t, err.Error(), f.Message, "no upstream text in the error")
				}

				v := classify.Classify(err)
				assert.Equal(t, c.Class, v.Class.String(), "%v; rule: %s", v, c.ExpectNote)
				assert.Equal(t, c.RetryAfter, v.RetryAfter)
				assert.Equal(t, c.Model, v.Model)
				assert.Equal(t, realVerdict(c), v, "the verdict of the real bytes")
			})
		})
	}
}

// WithModel names another model: the verdict names it, and nothing else
// changes.
func TestWithModel(t *testing.T) {
	cases := corpusCases(t)
	for _, r := range []chaos.Response{chaos.GeminiModelNotFound, chaos.OpenAIModelNotFound} {
		mine := r.WithModel("gemini-2.5-pro")
		assert.Contains(t, string(mine.Body()), "gemini-2.5-pro")
		v := classify.Classify(injectOnce(t, chaos.Fail(mine)))
		want := realVerdict(cases[corpusCase[r.Name()]])
		want.Model = "gemini-2.5-pro"
		assert.Equal(t, want, v)
		assert.Equal(t, r, r.WithModel(`x" injected`), "not a model id: unchanged")
		assert.Equal(t, chaos.GeminiOverloaded, chaos.GeminiOverloaded.WithModel("m"), "names no model: unchanged")
	}
}

// Finish-reason faults classify as the real 200s of the corpus that end
// with that reason and nothing usable.
func TestFinishReasonsClassifyAsTheRealOnes(t *testing.T) {
	n := 0
	for _, c := range corpusCases(t) {
		if c.FinishReason == "" || c.Class == "ok" || c.Stream() {
			continue
		}
		n++
		v := classify.Classify(injectOnce(t, chaos.FinishReason(c.FinishReason)))
		assert.Equal(t, c.Class, v.Class.String(), "%s: %v (source %s)", c.Name, v, c.Source)
	}
	assert.GreaterOrEqual(t, n, 3)
	assert.Equal(t, classify.InvalidOutput, classify.Classify(injectOnce(t, chaos.NoFinishReason())).Class)
}

// injectOnce returns the error a wrapped tier returns for f.
func injectOnce(t *testing.T, f chaos.Fault) error {
	t.Helper()
	var err error
	synctest.Test(t, func(t *testing.T) {
		var sw chaos.Switch
		tier := chaos.Tier(&upstream{name: "pro"}, &sw)
		require.NoError(t, sw.Start(always(f)))
		defer sw.Stop()
		_, err = tier.Call(context.Background(), "q")
	})
	require.ErrorIs(t, err, chaos.ErrInjected)
	return err
}

// NewResponse checks its fields, and a response of your own classifies
// through the same path.
func TestNewResponse(t *testing.T) {
	_, err := chaos.NewResponse("", 42, nil, nil)
	assert.ErrorContains(t, err, "name is empty")
	assert.ErrorContains(t, err, "three-digit")
	r, err := chaos.NewResponse("retry_after_2s", 503, http.Header{"Retry-After": {"2"}}, []byte("<html>busy</html>"))
	require.NoError(t, err)
	assert.Equal(t, "text/html; charset=UTF-8", r.Header().Get("Content-Type"))
	v := classify.Classify(injectOnce(t, chaos.Fail(r)))
	assert.Equal(t, classify.Transient, v.Class)
	assert.Equal(t, int64(2e9), int64(v.RetryAfter))
}
