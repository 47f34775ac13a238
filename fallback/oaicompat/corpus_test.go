package oaicompat_test

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/oaicompat"
	"github.com/tierguard/tierguard/internal/testbed/corpus"
	"github.com/tierguard/tierguard/retry"
)

// TestCorpusThroughOpenAIGo serves every real OpenAI-shaped response of the
// conformance corpus (OpenAI, Azure OpenAI, vLLM, DeepSeek, OpenRouter,
// Groq, gateways, Gemini's OpenAI-compatible endpoint) from an httptest
// server to the real openai-go SDK, through the adapter's Tier inside a
// chain — unary, and streaming for error responses and event streams — and
// judges the class, the retry-after, the model a 404 names and what the
// chain did.
func TestCorpusThroughOpenAIGo(t *testing.T) {
	cases, err := corpus.All()
	require.NoError(t, err)
	n := 0
	for _, c := range cases {
		if !c.OpenAIShaped() {
			continue
		}
		n++
		t.Run(c.Name, func(t *testing.T) {
			ts := serveCase(t, c)
			if !c.Stream() {
				t.Run("unary", func(t *testing.T) { corpus.Check(t, c, unaryThroughSDK(t, c, ts)) })
			}
			if c.Stream() || c.Status != http.StatusOK {
				t.Run("stream", func(t *testing.T) { streamThroughSDK(t, c, ts) })
			}
		})
	}
	assert.GreaterOrEqual(t, n, 64)
}

func serveCase(t *testing.T, c corpus.Case) *httptest.Server {
	ts := httptest.NewServer(c.Handler("application/json", nil))
	t.Cleanup(ts.Close)
	return ts
}

func caseTier(t *testing.T, c corpus.Case, ts *httptest.Server) *oaicompat.Tier[string] {
	client := oaicompat.NewClient(option.WithBaseURL(ts.URL), option.WithAPIKey("k"))
	model := "gpt-4o-mini"
	if c.Model != "" {
		model = c.Model
	}
	tier, err := oaicompat.NewTier(oaicompat.TierConfig[string]{Name: "pro", Model: model, Client: &client,
		Prompt: func(q string) oai.ChatCompletionNewParams {
			return oai.ChatCompletionNewParams{Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage(q)}}
		}})
	require.NoError(t, err)
	return tier
}

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

func unaryThroughSDK(t *testing.T, c corpus.Case, ts *httptest.Server) corpus.Seen {
	var seen corpus.Seen
	pro := caseTier(t, c, ts).Stage()
	pro.Retry = retry.Policy{MaxAttempts: 1}
	next := fallback.Tier("next", func(context.Context, string) (oaicompat.Answer, error) { return oaicompat.Answer{Text: "next"}, nil })
	chain, err := fallback.New(fallback.Config[string, oaicompat.Answer]{
		Stages:     []fallback.Stage[string, oaicompat.Answer]{pro, {Tier: next}},
		Total:      10 * time.Second,
		Classifier: oaicompat.Classifier,
		Observer:   watch(&seen),
	})
	require.NoError(t, err)
	res, err := chain.Do(context.Background(), "hi")
	seen.Tier, seen.Err = res.Tier, err
	if err == nil && res.Tier == "pro" {
		assert.NotEmpty(t, strings.TrimSpace(res.Value.Text), "an answer that stands is never empty")
	}
	if again, _ := chain.Do(context.Background(), "hi"); len(again.Attempts()) > 0 {
		seen.Again = again.Attempts()[0].Skip
	}
	return seen
}

func streamThroughSDK(t *testing.T, c corpus.Case, ts *httptest.Server) {
	var seen corpus.Seen
	pro := caseTier(t, c, ts).StreamStage()
	pro.Retry = retry.Policy{MaxAttempts: 1}
	next := fallback.StreamTierFunc("next", func(context.Context, string) iter.Seq2[oaicompat.Answer, error] {
		return func(yield func(oaicompat.Answer, error) bool) {
			yield(oaicompat.Answer{Text: "next", FinishReason: "stop"}, nil)
		}
	}, func(a oaicompat.Answer) fallback.ChunkInfo {
		return fallback.ChunkInfo{Text: a.Text, FinishReason: a.FinishReason}
	})
	chain, err := fallback.NewStream(fallback.StreamConfig[string, oaicompat.Answer]{
		Stages:     []fallback.StreamStage[string, oaicompat.Answer]{pro, {Tier: next}},
		Total:      10 * time.Second,
		Classifier: oaicompat.Classifier,
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
	seen.Tier, seen.Err = res.Tier, err
	if again, _ := run(); len(again.Attempts()) > 0 {
		seen.Again = again.Attempts()[0].Skip
	}
	corpus.Check(t, c, seen)
}
