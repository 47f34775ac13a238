package anthropic_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback/anthropic"
	"github.com/tierguard/tierguard/internal/testbed/corpus"
)

// secretKey is the API key every test client sends: no error, verdict,
// log line or span may contain it.
const secretKey = "sk-ant-api03-SECRET-never-in-any-signal"

// server is an httptest server that plays Anthropic's Messages API with a
// handler of the test's, and counts the requests that reach it.
type server struct {
	*httptest.Server
	n atomic.Int64
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.n.Add(1)
		// Read the request whole, as a server does: until then net/http
		// does not watch the connection, and a client's cancel would go
		// unseen by the handler.
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path != "/v1/messages" {
			http.Error(w, "unexpected path "+r.URL.Path, http.StatusNotFound)
			return
		}
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// client is a real anthropic-sdk-go client pointed at s. With sdkDefaults
// it is built with anthropic.NewClient (the SDK's two retries on), to show
// that the tier turns them off per request.
func (s *server) client(sdkDefaults bool, opts ...option.RequestOption) *sdk.Client {
	base := []option.RequestOption{option.WithBaseURL(s.URL), option.WithAPIKey(secretKey), option.WithHTTPClient(s.Client())}
	base = append(base, opts...)
	var c sdk.Client
	if sdkDefaults {
		c = sdk.NewClient(base...)
	} else {
		c = anthropic.NewClient(base...)
	}
	return &c
}

// prompt asks one question with a 1024-token budget.
func prompt(q string) sdk.MessageNewParams {
	return sdk.MessageNewParams{MaxTokens: 1024, Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(q))}}
}

func newTier(t *testing.T, name, model string, c *sdk.Client) *anthropic.Tier[string] {
	t.Helper()
	tier, err := anthropic.NewTier(anthropic.TierConfig[string]{Name: name, Model: model, Client: c, Prompt: prompt})
	require.NoError(t, err)
	return tier
}

// jsonReply answers every request with status and body.
func jsonReply(status int, body string, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

// sseReply answers every request with a 200 event stream.
func sseReply(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(body))
	}
}

// corpusCase returns the named corpus case.
func corpusCase(t *testing.T, name string) corpus.Case {
	t.Helper()
	cases, err := corpus.All()
	require.NoError(t, err)
	for _, c := range cases {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("corpus case %s is missing", name)
	return corpus.Case{}
}

// events splits a recorded stream into its events (each with its
// trailing blank line).
func events(body string) []string {
	var out []string
	for _, ev := range strings.SplitAfter(body, "\n\n") {
		if strings.TrimSpace(ev) != "" {
			out = append(out, ev)
		}
	}
	return out
}

// splice is the docs' basic stream with the docs' overloaded error event
// put after its first n events, both as the corpus quotes them: a stream
// cut by an error where the error can be seen, before or after content.
func splice(t *testing.T, n int) string {
	t.Helper()
	basic := events(string(corpusCase(t, "anthropic-stream-basic-end-turn-docs").Body))
	errEvent := string(corpusCase(t, "anthropic-stream-error-overloaded-only-event").Body)
	return strings.Join(basic[:n], "") + errEvent
}

// noSecret fails when s holds the key, the prompt or any text the server
// sent.
func noSecret(t *testing.T, s string, also ...string) {
	t.Helper()
	for _, bad := range append([]string{secretKey, "SECRET"}, also...) {
		require.NotContains(t, s, bad)
	}
}

var _ = context.Background

// optionsFor points a client at ts with the test key.
func optionsFor(ts *httptest.Server) []option.RequestOption {
	return []option.RequestOption{option.WithBaseURL(ts.URL), option.WithAPIKey(secretKey), option.WithHTTPClient(ts.Client())}
}
