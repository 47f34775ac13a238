package gemini_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/gemini"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	reportedpkg "github.com/tierguard/tierguard/internal/testbed/reported"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

const (
	proModel   = "gemini-2.5-pro"
	flashModel = "gemini-2.5-flash"
	// tryCap is the primary's per-try timeout: short, so stall tests are
	// fast, yet far above a loopback round trip.
	tryCap = 200 * time.Millisecond
)

// counter counts the HTTP requests that leave the SDK, below the
// gemini.Transport: what the network sees.
type counter struct {
	base http.RoundTripper
	n    atomic.Int64
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.base.RoundTrip(r)
}

// env is a fake Gemini server and a real genai client pointed at it.
type env struct {
	srv    *fakegemini.Server
	client *genai.Client
	sent   *counter
}

func newEnv(t *testing.T, cc genai.ClientConfig, opts ...fakegemini.Option) *env {
	t.Helper()
	srv := fakegemini.New(opts...)
	tr := &http.Transport{}
	sent := &counter{base: tr}
	t.Cleanup(func() {
		srv.Close()
		tr.CloseIdleConnections()
	})
	cc.APIKey = "test-key"
	cc.HTTPClient = &http.Client{Transport: sent}
	cc.HTTPOptions.BaseURL = srv.URL()
	client, err := gemini.NewClient(context.Background(), cc)
	require.NoError(t, err)
	return &env{srv: srv, client: client, sent: sent}
}

// question is the chain's input; each tier builds its own prompt from it.
type question struct {
	Text string
	JSON bool
}

func prompt(prefix string) gemini.PromptFunc[question] {
	return func(q question) ([]*genai.Content, *genai.GenerateContentConfig) {
		cfg := &genai.GenerateContentConfig{}
		if q.JSON {
			cfg.ResponseMIMEType = "application/json"
		}
		return genai.Text(prefix + q.Text), cfg
	}
}

func (e *env) tier(t *testing.T, name, model string) *gemini.Tier[question] {
	t.Helper()
	tier, err := gemini.NewTier(gemini.TierConfig[question]{Name: name, Model: model, Client: e.client, Prompt: prompt(name + ": ")})
	require.NoError(t, err)
	return tier
}

// chain is pro (two attempts, tryCap each) → flash (one attempt), both
// checked by v when it is not nil.
func (e *env) chain(t *testing.T, v validate.Validator[gemini.Answer], edit ...func(*fallback.Config[question, gemini.Answer])) *fallback.Chain[question, gemini.Answer] {
	t.Helper()
	pro := e.tier(t, "pro", proModel).Stage()
	pro.TryTimeout = tryCap
	pro.Retry = retry.Policy{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond}
	pro.Validate = v
	flash := e.tier(t, "flash", flashModel).Stage()
	flash.TryTimeout = 2 * time.Second
	flash.Retry = retry.Policy{MaxAttempts: 1}
	flash.Validate = v
	cfg := fallback.Config[question, gemini.Answer]{
		Stages:     []fallback.Stage[question, gemini.Answer]{pro, flash},
		Total:      5 * time.Second,
		Classifier: gemini.Classifier,
	}
	for _, f := range edit {
		f(&cfg)
	}
	c, err := fallback.New(cfg)
	require.NoError(t, err)
	return c
}

func always(k fakegemini.Kind, p fakegemini.Params) fakegemini.Script {
	return fakegemini.Script{Rules: []fakegemini.Rule{{Kind: k, P: fakegemini.Always, Params: p}}}
}

// jsonText checks that an answer's text is well-formed JSON.
var jsonText = validate.Field(func(a gemini.Answer) string { return a.Text }, validate.JSON())

// reported calls tier once inside a chain and returns its answer and what
// its response reported to the chain (fallback.Report).
func reported[In any](t *testing.T, tier fallback.ModelTier[In, gemini.Answer], in In) (gemini.Answer, fallback.Reply) {
	t.Helper()
	return reportedpkg.Call(t, tier, in)
}
