package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
)

func TestMain(m *testing.M) {
	// go.opencensus.io, which genai pulls in, starts a worker goroutine in
	// an init function.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// The story the program tells against the fake server.
func TestStory(t *testing.T) {
	var buf bytes.Buffer
	out = &buf
	srv := fakegemini.New()
	defer srv.Close()
	claude := newFakeClaude(answer)
	defer claude.Close()
	ctx := context.Background()
	chain, err := newChain(ctx, config{
		geminiKey: "k", geminiBaseURL: srv.URL(), geminiModel: "gemini-2.5-flash",
		claudeKey: "k", claudeBaseURL: claude.URL(), claudeModel: "claude-sonnet-5-5",
		openaiKey: "k", openaiBaseURL: srv.OpenAIURL(), openaiModel: "gpt-4o-mini",
		httpClient: srv.Client(), claudeClient: claude.Client(),
	})
	require.NoError(t, err)

	story(ctx, srv, claude, chain, "gemini-2.5-flash", "gpt-4o-mini")
	s := buf.String()
	assert.Contains(t, s, `answer (gemini): "Air scatters blue sunlight`)
	assert.Contains(t, s, "error: tierguard: failed closed (safety: prompt blocked by a safety policy): gemini failed: safety; claude not reached; gateway not reached")
	assert.Contains(t, s, "gemini  attempt 1: quota_exhausted (429 RESOURCE_EXHAUSTED, retry after 37.38s): per-day quota exhausted")
	assert.Contains(t, s, `answer (anthropic): "At sunset light crosses more air`)
	assert.Contains(t, s, "gemini  skipped (quota)")
	assert.Contains(t, s, "claude  attempt 2: transient (529): overloaded")
	assert.Contains(t, s, `answer (openai-compatible): "Chlorophyll absorbs`)
	assert.EqualValues(t, 4, claude.requests.Load(), "Claude: two answers, then two attempts at the 529; never after the safety block")
	assert.EqualValues(t, 1, srv.Requests("gpt-4o-mini"), "the gateway is asked only once Claude is overloaded")
}
