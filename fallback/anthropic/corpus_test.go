package anthropic_test

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/anthropic"
	"github.com/tierguard/tierguard/internal/testbed/corpus"
	"github.com/tierguard/tierguard/retry"
)

// TestCorpusThroughTheSDK serves every real Anthropic response of the
// conformance corpus from an httptest server to the real anthropic-sdk-go,
// through the adapter's Tier inside a chain — unary for answers and error
// responses, streaming for error responses and event streams — and judges
// the class, the retry-after, the model a 404 names and what the chain
// did.
func TestCorpusThroughTheSDK(t *testing.T) {
	cases, err := corpus.All()
	require.NoError(t, err)
	n := 0
	for _, c := range cases {
		if !c.AnthropicShaped() {
			continue
		}
		n++
		t.Run(c.Name, func(t *testing.T) {
			ts := httptest.NewServer(c.Handler("application/json", nil))
			t.Cleanup(ts.Close)
			if !c.Stream() {
				t.Run("unary", func(t *testing.T) { corpus.Check(t, c, unaryThroughSDK(t, c, ts)) })
			}
			if c.Stream() || c.Status != http.StatusOK {
				t.Run("stream", func(t *testing.T) { streamThroughSDK(t, c, ts) })
			}
		})
	}
	assert.Equal(t, 29, n)
}

func caseTier(t *testing.T, c corpus.Case, ts *httptest.Server) *anthropic.Tier[string] {
	client := anthropic.NewClient(optionsFor(ts)...)
	model := "claude-sonnet-5-5"
	if c.Model != "" {
		model = c.Model
	}
	return newTier(t, "pro", model, &client)
}

func watch(seen *corpus.Seen) fallback.Observer { return watcher{seen: seen} }

// watcher keeps pro's verdict and the decision after it.
type watcher struct {
	fallback.NopObserver
	seen *corpus.Seen
}

func (w watcher) AttemptEnded(_ context.Context, e fallback.AttemptEnd) {
	if e.Stage.Tier == "pro" {
		w.seen.Verdict, w.seen.Stop = e.Verdict, e.Stop
	}
}

func unaryThroughSDK(t *testing.T, c corpus.Case, ts *httptest.Server) corpus.Seen {
	var seen corpus.Seen
	pro := caseTier(t, c, ts).Stage()
	pro.Retry = retry.Policy{MaxAttempts: 1}
	next := fallback.Tier("next", func(context.Context, string) (anthropic.Answer, error) { return anthropic.Answer{Text: "next"}, nil })
	chain, err := fallback.New(fallback.Config[string, anthropic.Answer]{
		Stages:     []fallback.Stage[string, anthropic.Answer]{pro, {Tier: next}},
		Total:      10 * time.Second,
		Classifier: anthropic.Classifier,
		Observer:   watch(&seen),
	})
	require.NoError(t, err)
	res, err := chain.Do(context.Background(), "hi")
	seen.Tier, seen.Err = res.Tier, err
	if err == nil && res.Tier == "pro" {
		assert.NotEmpty(t, strings.TrimSpace(res.Value.Text+toolName(res.Value)), "an answer that stands is never empty")
	}
	if err != nil {
		noSecret(t, err.Error())
	}
	if again, _ := chain.Do(context.Background(), "hi"); len(again.Attempts()) > 0 {
		seen.Again = again.Attempts()[0].Skip
	}
	return seen
}

func toolName(a anthropic.Answer) string {
	if a.Message == nil {
		return ""
	}
	for _, b := range a.Message.Content {
		if b.Type == "tool_use" {
			return b.Name
		}
	}
	return ""
}

func streamThroughSDK(t *testing.T, c corpus.Case, ts *httptest.Server) {
	var seen corpus.Seen
	pro := caseTier(t, c, ts).StreamStage()
	pro.Retry = retry.Policy{MaxAttempts: 1}
	next := fallback.StreamTierFunc("next", func(context.Context, string) iter.Seq2[anthropic.Answer, error] {
		return func(yield func(anthropic.Answer, error) bool) {
			yield(anthropic.Answer{Text: "next", StopReason: "end_turn"}, nil)
		}
	}, func(a anthropic.Answer) fallback.ChunkInfo {
		return fallback.ChunkInfo{Text: a.Text, FinishReason: a.StopReason}
	})
	chain, err := fallback.NewStream(fallback.StreamConfig[string, anthropic.Answer]{
		Stages:     []fallback.StreamStage[string, anthropic.Answer]{pro, {Tier: next}},
		Total:      10 * time.Second,
		Classifier: anthropic.Classifier,
		Observer:   watch(&seen),
	})
	require.NoError(t, err)
	run := func() (fallback.StreamResult, error) {
		s := chain.Stream(context.Background(), "hi")
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
	if err != nil {
		noSecret(t, err.Error())
	}
	seen.Tier, seen.Err = res.Tier, err
	if again, _ := run(); len(again.Attempts()) > 0 {
		seen.Again = again.Attempts()[0].Skip
	}
	corpus.Check(t, c, seen)
}
