package anthropic_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/anthropic"
	reportedpkg "github.com/tierguard/tierguard/internal/testbed/reported"
	"github.com/tierguard/tierguard/retry"
)

// streamChain is pro (one attempt, body) → next (the docs' basic stream),
// both real SDK clients over httptest, in one stream chain.
func streamChain(t *testing.T, body string, rec fallback.Observer) (*fallback.StreamChain[string, anthropic.Answer], *server, *server) {
	t.Helper()
	pro := newServer(t, sseReply(body))
	next := newServer(t, sseReply(string(corpusCase(t, "anthropic-stream-basic-end-turn-docs").Body)))
	ps := newTier(t, "pro", "claude-opus-5", pro.client(false)).StreamStage()
	ps.Retry = retry.Policy{MaxAttempts: 1}
	ns := newTier(t, "next", "claude-sonnet-5-5", next.client(false)).StreamStage()
	c, err := fallback.NewStream(fallback.StreamConfig[string, anthropic.Answer]{
		Stages: []fallback.StreamStage[string, anthropic.Answer]{ps, ns}, Total: 10 * time.Second,
		Classifier: anthropic.Classifier, Observer: rec,
	})
	require.NoError(t, err)
	return c, pro, next
}

// drain reads a stream: its text, and its last error.
func drain(s *fallback.Stream[string, anthropic.Answer]) (text string, last error) {
	for ch, err := range s.Chunks() {
		if err != nil {
			last = err
			continue
		}
		text += ch.Text
	}
	return text, last
}

// A clean stream: text deltas, then message_stop with the held stop reason
// and the usage of message_start and message_delta.
func TestStreamComplete(t *testing.T) {
	var rec reportedpkg.Recorder
	c, pro, next := streamChain(t, string(corpusCase(t, "anthropic-stream-basic-end-turn-docs").Body), &rec)
	s := c.Stream(context.Background(), "hi")
	text, err := drain(s)
	require.NoError(t, err)
	assert.Equal(t, "Hello!", text)
	res := s.Result()
	assert.True(t, res.Complete)
	assert.Equal(t, "end_turn", res.FinishReason)
	assert.Equal(t, "pro", res.Tier)
	assert.EqualValues(t, 1, pro.n.Load())
	assert.Zero(t, next.n.Load())
	ended := reportedpkg.Of[fallback.AttemptEnd](&rec)
	require.Len(t, ended, 1)
	require.NotNil(t, ended[0].Reply)
	assert.Equal(t, fallback.Usage{InputTokens: 25, OutputTokens: 15}, ended[0].Reply.Usage, "message_delta's output_tokens over message_start's")
	assert.Equal(t, fallback.ResponseInfo{ID: "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY", Model: "claude-opus-4-20250514", FinishReason: "end_turn"}, ended[0].Reply.Response)
}

// Thinking is not text: only the text block reaches the consumer.
func TestStreamThinkingIsNotText(t *testing.T) {
	c, _, _ := streamChain(t, string(corpusCase(t, "anthropic-stream-thinking-end-turn-docs").Body), nil)
	text, err := drain(c.Stream(context.Background(), "hi"))
	require.NoError(t, err)
	assert.Equal(t, "27 * 453 = 12,231", text)
}

// event: error (overloaded_error) before the first text delta falls back
// like any failure before content: the consumer sees the next tier's
// answer only. The stream is the docs' basic stream cut by the docs' error
// event after message_start, content_block_start and ping (both pieces as
// the corpus quotes them).
func TestStreamErrorBeforeContentFallsBack(t *testing.T) {
	c, pro, next := streamChain(t, splice(t, 3), nil)
	s := c.Stream(context.Background(), "hi")
	text, err := drain(s)
	require.NoError(t, err)
	assert.Equal(t, "Hello!", text)
	res := s.Result()
	assert.Equal(t, "next", res.Tier)
	assert.True(t, res.Complete)
	assert.Equal(t, classify.Transient, res.Attempts()[0].Verdict.Class)
	assert.EqualValues(t, 1, pro.n.Load())
	assert.EqualValues(t, 1, next.n.Load())
}

// After the first text delta the same error ends the stream as an
// *IncompleteError with the text so far; no other tier is asked.
func TestStreamErrorAfterContentIsIncomplete(t *testing.T) {
	c, _, next := streamChain(t, splice(t, 4), nil)
	s := c.Stream(context.Background(), "hi")
	text, err := drain(s)
	assert.Equal(t, "Hello", text)
	var ie *fallback.IncompleteError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, "pro", ie.Tier)
	assert.Equal(t, 1, ie.Chunks)
	assert.Equal(t, 5, ie.Bytes)
	assert.Equal(t, classify.Transient, ie.V.Class)
	var re *anthropic.ResponseError
	require.ErrorAs(t, ie.Cause, &re)
	assert.Equal(t, "anthropic: upstream error 529 overloaded_error", re.Error())
	assert.False(t, s.Result().Complete)
	assert.Zero(t, next.n.Load(), "past the commit point no tier is switched")
	noSecret(t, err.Error(), "Overloaded")
}

// message_stop is the only clean end: a stream cut after its message_delta
// (stop_reason end_turn already said) is incomplete; one cut before any
// content is a cut stream, which moves on.
func TestStreamEndsOnlyAtMessageStop(t *testing.T) {
	basic := events(string(corpusCase(t, "anthropic-stream-basic-end-turn-docs").Body))
	t.Run("cut after message_delta", func(t *testing.T) {
		c, _, next := streamChain(t, strings.Join(basic[:7], ""), nil)
		s := c.Stream(context.Background(), "hi")
		text, err := drain(s)
		assert.Equal(t, "Hello!", text)
		var ie *fallback.IncompleteError
		require.ErrorAs(t, err, &ie)
		assert.ErrorIs(t, ie.Cause, fallback.ErrNoFinishReason)
		assert.False(t, s.Result().Complete)
		assert.Zero(t, next.n.Load())
	})
	t.Run("cut before content", func(t *testing.T) {
		c, _, next := streamChain(t, strings.Join(basic[:3], ""), nil)
		s := c.Stream(context.Background(), "hi")
		text, err := drain(s)
		require.NoError(t, err)
		assert.Equal(t, "Hello!", text)
		assert.Equal(t, "next", s.Result().Tier)
		assert.ErrorIs(t, s.Result().Attempts()[0].Err, fallback.ErrEmptyStream)
		assert.EqualValues(t, 1, next.n.Load())
	})
}

// A refusal in the stream's message_delta (where the streaming-refusals
// docs say stop_reason "refusal" arrives) ends it at once as Safety: the
// docs' basic stream with that message_delta in place of its own.
func TestStreamRefusal(t *testing.T) {
	basic := events(string(corpusCase(t, "anthropic-stream-basic-end-turn-docs").Body))
	refusal := "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"refusal\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":3}}\n\n"
	c, _, next := streamChain(t, strings.Join(basic[:6], "")+refusal+basic[7], nil)
	_, err := drain(c.Stream(context.Background(), "hi"))
	var ie *fallback.IncompleteError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, classify.Safety, ie.V.Class)
	assert.True(t, errors.Is(ie.Cause, anthropic.ErrRefusal))
	assert.Zero(t, next.n.Load())
}

// An error response before the stream starts is the same *ResponseError
// as a unary call's.
func TestStreamErrorResponse(t *testing.T) {
	c := corpusCase(t, "anthropic-not-found-model-404-trailing-space")
	srv := newServer(t, jsonReply(c.Status, string(c.Body)))
	tier := newTier(t, "claude", "claude-3-5-sonnet-20241022", srv.client(false))
	for _, err := range tier.Stream(context.Background(), "hi") {
		var re *anthropic.ResponseError
		require.ErrorAs(t, err, &re)
		v := anthropic.Classifier.Classify(err)
		assert.Equal(t, classify.Retired, v.Class)
		assert.Equal(t, "claude-3-5-sonnet-20241022", v.Model)
		assert.Equal(t, "anthropic: upstream error 404 not_found_error", err.Error())
	}
}

// An event the SDK cannot decode, or an error event that is not
// Anthropic's error object, is ErrMalformedEvent: Transient, and no
// upstream text in the error.
func TestStreamMalformedEvents(t *testing.T) {
	for _, body := range []string{
		"event: message_start\ndata: {\"type\": \"message_start\", \"message\": SECRET-TEXT\n\n",
		"event: error\ndata: SECRET-TEXT not json\n\n",
		"event: error\ndata: {\"detail\":\"SECRET-TEXT\"}\n\n",
	} {
		srv := newServer(t, sseReply(body))
		tier := newTier(t, "claude", "claude-opus-5", srv.client(false))
		n := 0
		for _, err := range tier.Stream(context.Background(), "hi") {
			n++
			require.ErrorIs(t, err, anthropic.ErrMalformedEvent, "%q", body)
			assert.Equal(t, classify.Transient, anthropic.Classifier.Classify(err).Class)
			noSecret(t, err.Error())
		}
		assert.Equal(t, 1, n)
	}
}
