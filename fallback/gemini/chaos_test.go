package gemini_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/chaos"
	"github.com/tierguard/tierguard/fallback/gemini"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	"github.com/tierguard/tierguard/retry"
)

// chaosClient is a genai client whose HTTP requests go through a
// chaos.Transport on sw (as tier name) to a fake Gemini server; with sdk
// set it is built with genai.NewClient alone, without gemini.Transport.
func chaosClient(t *testing.T, sw *chaos.Switch, name string, srv *fakegemini.Server, sdk bool) *genai.Client {
	t.Helper()
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	cc := genai.ClientConfig{APIKey: "test-key", Backend: genai.BackendGeminiAPI,
		HTTPClient: &http.Client{Transport: chaos.Transport(base, sw, name)}, HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL()}}
	var client *genai.Client
	var err error
	if sdk {
		client, err = genai.NewClient(context.Background(), &cc)
	} else {
		client, err = gemini.NewClient(context.Background(), cc)
	}
	require.NoError(t, err)
	return client
}

// Gemini's real error responses, injected below the genai SDK: the SDK
// parses the real bytes into its APIError, and gemini.Classifier gives the
// verdict that the same response injected above the SDK (a wrapped tier's
// *classify.HTTPError) gets — one fault vocabulary at either level.
func TestChaosTransportUnderTheSDK(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	var sw chaos.Switch
	tier, err := gemini.NewTier(gemini.TierConfig[question]{Name: "pro", Model: proModel, Client: chaosClient(t, &sw, "pro", srv, false), Prompt: prompt("")})
	require.NoError(t, err)
	for _, r := range chaos.Responses() {
		if !strings.HasPrefix(r.Name(), "gemini_") {
			continue
		}
		t.Run(r.Name(), func(t *testing.T) {
			require.NoError(t, sw.Start(chaos.Drill{For: time.Hour, Rules: []chaos.Rule{{Tier: "pro", Rate: 1, Fault: chaos.Fail(r)}}}))
			defer sw.Stop()
			_, err := tier.Call(context.Background(), question{Text: "hi"})
			require.Error(t, err)
			var api genai.APIError
			require.True(t, errors.As(err, &api), "the SDK's own error: %v", err)
			assert.Equal(t, r.Status(), api.Code)

			above := classify.Classify(&classify.HTTPError{Facts: factsOf(t, r)})
			got := gemini.Classifier.Classify(err)
			assert.Equal(t, above.Class, got.Class, "%v", got)
			assert.Equal(t, above.RetryAfter, got.RetryAfter)
			assert.Equal(t, above.Model, got.Model)
		})
	}
	assert.Zero(t, srv.Requests(proModel), "every response was injected, none reached the server")
}

func factsOf(t *testing.T, r chaos.Response) classify.Facts {
	t.Helper()
	f, ok := classify.ParseErrorBody(r.Body())
	require.True(t, ok)
	f.HTTPStatus = r.Status()
	return f
}

// A keepalive drill finds the client that cannot read SSE comments: with
// gemini.NewClient the streams complete; a bare genai client fails each
// stream (ErrStreamComment), which the chain falls back from.
func TestChaosKeepaliveDrill(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript(proModel, fakegemini.Script{Chunks: 3, Reply: fakegemini.Text("0123456789")})
	var sw chaos.Switch
	require.NoError(t, sw.Start(chaos.Drill{For: time.Hour, Rules: []chaos.Rule{{Tier: "pro", Rate: 1, Fault: chaos.Keepalive()}}}))
	defer sw.Stop()
	for _, c := range []struct {
		name string
		sdk  bool
		tier string
	}{{"gemini.NewClient", false, "pro"}, {"genai.NewClient alone", true, "flash"}} {
		t.Run(c.name, func(t *testing.T) {
			pro, err := gemini.NewTier(gemini.TierConfig[question]{Name: "pro", Model: proModel, Client: chaosClient(t, &sw, "pro", srv, c.sdk), Prompt: prompt("")})
			require.NoError(t, err)
			flash, err := gemini.NewTier(gemini.TierConfig[question]{Name: "flash", Model: flashModel, Client: chaosClient(t, &sw, "flash", srv, false), Prompt: prompt("")})
			require.NoError(t, err)
			first, second := pro.StreamStage(), flash.StreamStage()
			first.Retry, second.Retry = retry.Policy{MaxAttempts: 1}, retry.Policy{MaxAttempts: 1}
			chain, err := fallback.NewStream(fallback.StreamConfig[question, gemini.Answer]{
				Stages: []fallback.StreamStage[question, gemini.Answer]{first, second}, Total: 5 * time.Second, Classifier: gemini.Classifier,
			})
			require.NoError(t, err)
			s := chain.Stream(context.Background(), question{Text: "hi"})
			_, err = consume(s)
			require.NoError(t, err)
			assert.Equal(t, c.tier, s.Result().Tier)
			if c.sdk {
				a := s.Result().Attempts()
				require.NotEmpty(t, a)
				assert.ErrorIs(t, a[0].Err, gemini.ErrStreamComment)
			}
		})
	}
}
