package oaicompat_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/oaicompat"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	reportedpkg "github.com/tierguard/tierguard/internal/testbed/reported"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

const (
	primaryModel  = "gpt-4o"
	fallbackModel = "gpt-4o-mini"
	tryCap        = 200 * time.Millisecond
)

// counter counts the HTTP requests that leave the SDK.
type counter struct {
	base http.RoundTripper
	n    atomic.Int64
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.base.RoundTrip(r)
}

// env is a fake server and a real openai-go client pointed at its
// OpenAI-compatible endpoint.
type env struct {
	srv    *fakegemini.Server
	client oai.Client
	sent   *counter
}

// newEnv builds the client with opts after the test's own; pass
// option.WithMaxRetries to change the SDK's retries.
func newEnv(t *testing.T, opts ...option.RequestOption) *env {
	t.Helper()
	srv := fakegemini.New()
	tr := &http.Transport{}
	sent := &counter{base: tr}
	t.Cleanup(func() {
		srv.Close()
		tr.CloseIdleConnections()
	})
	base := []option.RequestOption{
		option.WithAPIKey("test-key"),
		option.WithBaseURL(srv.OpenAIURL()),
		option.WithHTTPClient(&http.Client{Transport: sent}),
	}
	return &env{srv: srv, client: oai.NewClient(append(base, opts...)...), sent: sent}
}

type question struct {
	Text string
	JSON bool
}

func prompt(system string) oaicompat.PromptFunc[question] {
	return func(q question) oai.ChatCompletionNewParams {
		p := oai.ChatCompletionNewParams{Messages: []oai.ChatCompletionMessageParamUnion{
			oai.SystemMessage(system),
			oai.UserMessage(q.Text),
		}}
		if q.JSON {
			p.ResponseFormat = oai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
		}
		return p
	}
}

func (e *env) tier(t *testing.T, name, model string) *oaicompat.Tier[question] {
	t.Helper()
	tier, err := oaicompat.NewTier(oaicompat.TierConfig[question]{Name: name, Model: model, Client: &e.client, Prompt: prompt("You are " + name + ".")})
	require.NoError(t, err)
	return tier
}

// chain is primary (two attempts, tryCap each) → fallback (one attempt).
func (e *env) chain(t *testing.T, v validate.Validator[oaicompat.Answer]) *fallback.Chain[question, oaicompat.Answer] {
	t.Helper()
	primary := e.tier(t, "primary", primaryModel).Stage()
	primary.TryTimeout = tryCap
	primary.Retry = retry.Policy{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond}
	primary.Validate = v
	secondary := e.tier(t, "fallback", fallbackModel).Stage()
	secondary.TryTimeout = 2 * time.Second
	secondary.Retry = retry.Policy{MaxAttempts: 1}
	secondary.Validate = v
	c, err := fallback.New(fallback.Config[question, oaicompat.Answer]{
		Stages:     []fallback.Stage[question, oaicompat.Answer]{primary, secondary},
		Total:      5 * time.Second,
		Classifier: oaicompat.Classifier,
	})
	require.NoError(t, err)
	return c
}

func always(k fakegemini.Kind, p fakegemini.Params) fakegemini.Script {
	return fakegemini.Script{Rules: []fakegemini.Rule{{Kind: k, P: fakegemini.Always, Params: p}}}
}

var jsonText = validate.Field(func(a oaicompat.Answer) string { return a.Text }, validate.JSON())

// reported calls tier once inside a chain and returns its answer and what
// its response reported to the chain (fallback.Report).
func reported[In any](t *testing.T, tier fallback.ModelTier[In, oaicompat.Answer], in In) (oaicompat.Answer, fallback.Reply) {
	t.Helper()
	return reportedpkg.Call(t, tier, in)
}
