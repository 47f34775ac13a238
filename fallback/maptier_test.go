package fallback_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/internal/testbed/reported"
)

type reply struct {
	text   string
	tokens int64
}

func TestMapTier(t *testing.T) {
	inner := fallback.Tier("pro", func(ctx context.Context, q string) (int, error) {
		if q == "fail" {
			return 0, classErr(classify.Transient)
		}
		fallback.Report(ctx, fallback.Reply{Usage: fallback.Usage{OutputTokens: int64(len(q))}, HasUsage: true})
		return len(q), nil
	})
	mapped := fallback.MapTier(inner, func(n int) reply { return reply{text: "len", tokens: int64(n)} })
	assert.Equal(t, "pro", mapped.Name())
	out, err := mapped.Call(context.Background(), "abcd")
	require.NoError(t, err)
	assert.Equal(t, reply{text: "len", tokens: 4}, out)

	_, err = mapped.Call(context.Background(), "fail")
	assert.Equal(t, classify.Transient, classify.Classify(err).Class)
	assert.False(t, errors.Is(err, context.Canceled))

	// The wrapped tier's report reaches the chain through the mapping.
	var obs events
	c, err := fallback.New(fallback.Config[string, reply]{Stages: []fallback.Stage[string, reply]{{Tier: mapped}}, Observer: &obs})
	require.NoError(t, err)
	_, err = c.Do(context.Background(), "abcdef")
	require.NoError(t, err)
	ended := reported.Of[fallback.AttemptEnd](&obs)
	require.Len(t, ended, 1)
	assert.True(t, ended[0].Reply.HasUsage)
	assert.Equal(t, int64(6), ended[0].Reply.Usage.OutputTokens)
}

// A stage's own classifier classifies its tier's errors.
func TestStageClassifier(t *testing.T) {
	type vendorErr struct{ error }
	rule := func(err error) (classify.Verdict, bool) {
		var v vendorErr
		if errors.As(err, &v) {
			return classify.Verdict{Class: classify.Auth}, true
		}
		return classify.Verdict{}, false
	}
	pro := fallback.Tier("pro", func(context.Context, string) (string, error) { return "", vendorErr{errors.New("401")} })
	c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
		{Tier: pro, Classifier: classify.New(rule)},
		{Tier: newFake("flash", ok("quick"))},
	}})
	_, err := c.Do(context.Background(), "q")
	var fe *fallback.Error
	require.ErrorAs(t, err, &fe)
	assert.True(t, fe.FailedClosed, "the stage's classifier saw Auth")
}
