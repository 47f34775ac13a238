package fallback_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/retry"
)

// TestStreamStopOnEveryChunkThenError: Vertex AI marks every chunk STOP; an
// error event after them means the answer was cut. The stream is
// incomplete, with the text received so far and the error's class, and
// the chain does not switch tiers after the commit point.
func TestStreamStopOnEveryChunkThenError(t *testing.T) {
	stopped := []chunk{{text: "The sky ", finish: "STOP"}, {text: "is ", finish: "STOP"}}
	pro := &streamFake{name: "pro", def: streamScript{chunks: stopped, after: classErr(classify.Transient)}}
	flash := &streamFake{name: "flash", def: streamScript{chunks: words("blue."), finishing: true}}
	c := newStreamChain(t, fallback.StreamConfig[string, chunk]{
		Stages: []fallback.StreamStage[string, chunk]{{Tier: pro.tier()}, {Tier: flash.tier()}},
	})
	s := c.Stream(context.Background(), "q")
	text, err := collect(s)
	assert.Equal(t, "The sky is ", text, "the text received before the error")
	var ie *fallback.IncompleteError
	require.True(t, errors.As(err, &ie), "want an *IncompleteError, got %v", err)
	assert.Equal(t, classify.Transient, ie.V.Class)
	assert.Equal(t, "STOP", ie.FinishReason)
	assert.Equal(t, 2, ie.Chunks)
	assert.False(t, s.Result().Complete)
	assert.Zero(t, flash.calls.Load(), "no silent switch after the commit point")
}

// TestStreamStopOnEveryChunkCompletes: the same stream that closes cleanly
// after its last STOP is complete.
func TestStreamStopOnEveryChunkCompletes(t *testing.T) {
	stopped := []chunk{{text: "The sky ", finish: "STOP"}, {text: "is blue.", finish: "STOP"}}
	pro := &streamFake{name: "pro", def: streamScript{chunks: stopped}}
	c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: pro.tier()}}})
	s := c.Stream(context.Background(), "q")
	text, err := collect(s)
	require.NoError(t, err)
	assert.Equal(t, "The sky is blue.", text)
	assert.True(t, s.Result().Complete)
}

// TestStreamWithoutContentOrFinishIsCut: a stream of chunks without content
// (a role-only delta, reasoning) that closes without a finish reason was
// cut: Transient, so the tier is retried before the next one answers.
// With a finish reason it is an empty answer: InvalidOutput, next tier.
func TestStreamWithoutContentOrFinishIsCut(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tail  chunk
		class classify.Class
	}{
		{name: "no finish reason", tail: chunk{text: " "}, class: classify.Transient},
		{name: "finish reason", tail: chunk{text: "", finish: "STOP"}, class: classify.InvalidOutput},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pro := &streamFake{name: "pro", def: streamScript{chunks: []chunk{{}, tc.tail}}}
			flash := &streamFake{name: "flash", def: streamScript{chunks: words("blue."), finishing: true}}
			c := newStreamChain(t, fallback.StreamConfig[string, chunk]{
				Stages: []fallback.StreamStage[string, chunk]{{Tier: pro.tier(), Retry: retry.Policy{MaxAttempts: 2}}, {Tier: flash.tier()}},
			})
			s := c.Stream(context.Background(), "q")
			text, err := collect(s)
			require.NoError(t, err)
			assert.Equal(t, "blue.", text)
			attempts := s.Result().Attempts()
			require.NotEmpty(t, attempts)
			assert.ErrorIs(t, attempts[0].Err, fallback.ErrEmptyStream)
			assert.Equal(t, tc.class, attempts[0].Verdict.Class)
			want := int64(1)
			if tc.class == classify.Transient {
				want = 2
			}
			assert.Equal(t, want, pro.calls.Load(), "a cut stream is retried, an empty answer is not")
		})
	}
}
