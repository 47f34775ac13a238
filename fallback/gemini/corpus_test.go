package gemini_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/gemini"
	"github.com/tierguard/tierguard/internal/testbed/corpus"
	"github.com/tierguard/tierguard/retry"
)

// TestCorpusThroughGenai serves every real Gemini-shaped response of the
// conformance corpus from an httptest server to the real genai SDK, through
// the adapter's Tier inside a chain, unary and streaming where the shape
// exists in both, and judges the class, the retry-after, the model a 404
// names and what the chain did. The same cases run without an SDK in
// classify's tests.
func TestCorpusThroughGenai(t *testing.T) {
	cases, err := corpus.All()
	require.NoError(t, err)
	n := 0
	for _, c := range cases {
		if !c.GeminiShaped() {
			continue
		}
		n++
		t.Run(c.Name, func(t *testing.T) {
			ts := serveCase(t, c)
			if !c.Stream() {
				t.Run("unary", func(t *testing.T) { corpus.Check(t, c, unaryThroughGenai(t, c, ts)) })
			}
			if c.Stream() || c.Status != http.StatusOK || isAnswer(c.Body) {
				t.Run("stream", func(t *testing.T) { streamThroughGenai(t, c, ts) })
			}
		})
	}
	assert.GreaterOrEqual(t, n, 57)
}

// serveCase answers every generateContent and streamGenerateContent
// request with the case's status, headers and body. A 200 answer asked for
// as a stream is sent as one server-sent event.
func serveCase(t *testing.T, c corpus.Case) *httptest.Server {
	ts := httptest.NewServer(c.Handler("application/json; charset=UTF-8", func(r *http.Request) bool {
		return strings.HasSuffix(r.URL.Path, ":streamGenerateContent")
	}))
	t.Cleanup(ts.Close)
	return ts
}

func isAnswer(body []byte) bool {
	var probe struct {
		Candidates     []json.RawMessage `json:"candidates"`
		PromptFeedback json.RawMessage   `json:"promptFeedback"`
	}
	return json.Unmarshal(body, &probe) == nil && (probe.Candidates != nil || probe.PromptFeedback != nil)
}

// caseTier is the adapter's tier over a genai client pointed at ts, for the
// model the case names (or a current one).
func caseTier(t *testing.T, c corpus.Case, ts *httptest.Server) *gemini.Tier[question] {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client, err := gemini.NewClient(context.Background(), genai.ClientConfig{
		APIKey: "k", HTTPClient: &http.Client{Transport: tr}, HTTPOptions: genai.HTTPOptions{BaseURL: ts.URL},
	})
	require.NoError(t, err)
	model := proModel
	if c.Model != "" {
		model = c.Model
	}
	tier, err := gemini.NewTier(gemini.TierConfig[question]{Name: "pro", Model: model, Client: client, Prompt: prompt("")})
	require.NoError(t, err)
	return tier
}

// watch records pro's verdict and the decision after it.
func watch(seen *corpus.Seen) fallback.Observer { return watcher{seen: seen} }

// watcher is watch's observer: it handles the ends of attempts only.
type watcher struct {
	fallback.NopObserver
	seen *corpus.Seen
}

func (w watcher) AttemptEnded(_ context.Context, e fallback.AttemptEnd) {
	if e.Stage.Tier == "pro" {
		w.seen.Verdict, w.seen.Stop = e.Verdict, e.Stop
	}
}

func nextTier() fallback.ModelTier[question, gemini.Answer] {
	return fallback.Tier("next", func(context.Context, question) (gemini.Answer, error) { return gemini.Answer{Text: "next"}, nil })
}

func unaryThroughGenai(t *testing.T, c corpus.Case, ts *httptest.Server) corpus.Seen {
	var seen corpus.Seen
	pro := caseTier(t, c, ts).Stage()
	pro.Retry = retry.Policy{MaxAttempts: 1}
	chain, err := fallback.New(fallback.Config[question, gemini.Answer]{
		Stages:     []fallback.Stage[question, gemini.Answer]{pro, {Tier: nextTier()}},
		Total:      10 * time.Second,
		Classifier: gemini.Classifier,
		Observer:   watch(&seen),
	})
	require.NoError(t, err)
	res, err := chain.Do(context.Background(), question{Text: "hi"})
	seen.Tier, seen.Err = res.Tier, err
	if err == nil && res.Tier == "pro" {
		assert.NotEmpty(t, strings.TrimSpace(res.Value.Text), "an answer that stands is never empty")
	}
	if again, _ := chain.Do(context.Background(), question{Text: "hi"}); len(again.Attempts()) > 0 {
		seen.Again = again.Attempts()[0].Skip
	}
	return seen
}

// streamThroughGenai streams the case. A stream that failed after showing
// content is incomplete and classified by its cause; one that failed
// before is judged like a unary call.
func streamThroughGenai(t *testing.T, c corpus.Case, ts *httptest.Server) {
	var seen corpus.Seen
	pro := caseTier(t, c, ts).StreamStage()
	pro.Retry = retry.Policy{MaxAttempts: 1}
	next := fallback.StreamTierFunc("next", func(context.Context, question) iter.Seq2[gemini.Answer, error] {
		return func(yield func(gemini.Answer, error) bool) {
			yield(gemini.Answer{Text: "next", FinishReason: genai.FinishReasonStop}, nil)
		}
	}, func(a gemini.Answer) fallback.ChunkInfo {
		return fallback.ChunkInfo{Text: a.Text, FinishReason: string(a.FinishReason)}
	})
	chain, err := fallback.NewStream(fallback.StreamConfig[question, gemini.Answer]{
		Stages:     []fallback.StreamStage[question, gemini.Answer]{pro, {Tier: next}},
		Total:      10 * time.Second,
		Classifier: gemini.Classifier,
		Observer:   watch(&seen),
	})
	require.NoError(t, err)
	run := func() (fallback.StreamResult, error) {
		s := chain.Stream(context.Background(), question{Text: "hi"})
		var last error
		for _, err := range s.Chunks() {
			if err != nil {
				last = err
			}
		}
		return s.Result(), last
	}
	res, err := run()
	var ie *fallback.IncompleteError
	if errors.As(err, &ie) {
		assert.Equal(t, c.Class, ie.V.Class.String(), "incomplete after %d chunks: %v\nsource: %s", ie.Chunks, ie.V, c.Source)
		return
	}
	seen.Tier, seen.Err = res.Tier, err
	if c.Class == "ok" {
		assert.True(t, res.Complete, "complete: %v", err)
	}
	if again, _ := run(); len(again.Attempts()) > 0 {
		seen.Again = again.Attempts()[0].Skip
	}
	corpus.Check(t, c, seen)
}
