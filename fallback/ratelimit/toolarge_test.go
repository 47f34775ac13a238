package ratelimit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/ratelimit"
)

// tooLargeChain is a chain of two tiers behind limiters of a token burst
// of 1,000, with a default answer, whose stages estimate a request's
// tokens as its length; calls counts the upstream calls.
func tooLargeChain(t *testing.T, calls *int) *fallback.Chain[string, string] {
	t.Helper()
	stage := func(name string) fallback.Stage[string, string] {
		l := newLimiter(t, ratelimit.Config{Name: name, Requests: 61, Burst: 1, Tokens: 100_000, TokenBurst: 1_000})
		tier := fallback.Tier(name, func(context.Context, string) (string, error) { *calls++; return name, nil })
		return fallback.Stage[string, string]{
			Tier:   ratelimit.Tier(tier, ratelimit.TierConfig[string]{Limiter: l}),
			Tokens: func(q string) int64 { return int64(len(q)) },
		}
	}
	c, err := fallback.New(fallback.Config[string, string]{
		Stages:  []fallback.Stage[string, string]{stage("pro"), stage("flash")},
		Default: func(context.Context, string) (string, bool) { return "please retry in a minute", true },
	})
	require.NoError(t, err)
	return c
}

// TestTooLargeRequestFailsClosed: a request whose token estimate exceeds
// every tier's TokenBurst can never be admitted. Each tier skips it as
// too large (SkipTooLarge), and the chain fails closed — no default
// answer — with an error that matches ErrTooLarge (a gateway answers
// 413), fallback.ErrTooLarge being the same error. Before, it was
// skipped as rate-limited and got the default answer, "please retry in a
// minute", forever.
func TestTooLargeRequestFailsClosed(t *testing.T) {
	calls := 0
	c := tooLargeChain(t, &calls)
	huge := string(make([]byte, 1<<20)) // a 1 MiB prompt
	res, err := c.Do(context.Background(), huge)
	require.Error(t, err)
	assert.NotEqual(t, fallback.SourceDefault, res.Source, "no default answer")
	assert.ErrorIs(t, err, ratelimit.ErrTooLarge)
	assert.ErrorIs(t, err, fallback.ErrTooLarge)
	assert.Same(t, fallback.ErrTooLarge, ratelimit.ErrTooLarge)
	var fe *fallback.Error
	require.ErrorAs(t, err, &fe)
	assert.True(t, fe.FailedClosed)
	assert.Equal(t, classify.InvalidRequest, fe.Cause.Class)
	for _, tf := range fe.Tiers {
		assert.Equal(t, fallback.TierSkipped, tf.Outcome, tf.Tier)
		assert.Equal(t, fallback.SkipTooLarge, tf.Skip, tf.Tier)
	}
	assert.Contains(t, err.Error(), "skipped (too_large)")
	var limited *ratelimit.LimitedError
	require.ErrorAs(t, err, &limited)
	assert.True(t, limited.TooLarge)
	assert.Zero(t, calls)
	for _, a := range res.Attempts() {
		assert.Equal(t, fallback.SkipTooLarge, a.Skip)
		assert.Equal(t, "too_large", a.Skip.String())
	}
}

// TestRateLimitedRequestStillGetsTheDefault: a request that fits the
// burst, but finds both tiers' turns spent, is skipped as rate-limited
// and answered by the default, as before; its error would not match
// ErrTooLarge.
func TestRateLimitedRequestStillGetsTheDefault(t *testing.T) {
	calls := 0
	c := tooLargeChain(t, &calls)
	res, err := c.Do(context.Background(), "q")
	require.NoError(t, err)
	assert.Equal(t, fallback.SourceTier, res.Source)
	res, err = c.Do(context.Background(), "q") // pro's turn is spent
	require.NoError(t, err)
	assert.Equal(t, "flash", res.Value)
	res, err = c.Do(context.Background(), "q")
	require.NoError(t, err)
	assert.Equal(t, fallback.SourceDefault, res.Source, "both over their rate: the default answers")
	for _, a := range res.Attempts() {
		assert.Equal(t, fallback.SkipRateLimited, a.Skip)
		assert.False(t, errors.Is(a.Err, ratelimit.ErrTooLarge))
		assert.ErrorIs(t, a.Err, ratelimit.ErrLimited)
	}
	assert.Equal(t, 2, calls)
}

// TestTooLargeForOneTierOnly: a request too large for the first tier but
// within the second's burst is answered by the second; too large for one
// and rate-limited on the other, it gets the default answer — it may be
// admitted later.
func TestTooLargeForOneTierOnly(t *testing.T) {
	small := newLimiter(t, ratelimit.Config{Name: "small", Requests: 61, Burst: 1, Tokens: 100_000, TokenBurst: 10})
	big := newLimiter(t, ratelimit.Config{Name: "big", Requests: 61, Burst: 1, Tokens: 100_000, TokenBurst: 10_000})
	tier := func(name string, l *ratelimit.Limiter) fallback.Stage[string, string] {
		return fallback.Stage[string, string]{
			Tier:   ratelimit.Tier(fallback.Tier(name, func(context.Context, string) (string, error) { return name, nil }), ratelimit.TierConfig[string]{Limiter: l}),
			Tokens: func(q string) int64 { return int64(len(q)) },
		}
	}
	c, err := fallback.New(fallback.Config[string, string]{
		Stages:  []fallback.Stage[string, string]{tier("small", small), tier("big", big)},
		Default: func(context.Context, string) (string, bool) { return "default", true },
	})
	require.NoError(t, err)
	q := string(make([]byte, 100))
	res, err := c.Do(context.Background(), q)
	require.NoError(t, err)
	assert.Equal(t, "big", res.Value)
	res, err = c.Do(context.Background(), q)
	require.NoError(t, err)
	assert.Equal(t, fallback.SourceDefault, res.Source)
	skips := []fallback.Skip{}
	for _, a := range res.Attempts() {
		skips = append(skips, a.Skip)
	}
	assert.Equal(t, []fallback.Skip{fallback.SkipTooLarge, fallback.SkipRateLimited}, skips)
}

// TestWaitSaysTooLarge: Wait and Do refuse a call over the token burst
// with an error that matches ErrTooLarge (and ErrLimited), without
// waiting; one merely over the rate does not match ErrTooLarge.
func TestWaitSaysTooLarge(t *testing.T) {
	l := newLimiter(t, ratelimit.Config{Name: "pro", Tokens: 1000, TokenBurst: 100})
	assert.True(t, l.Admissible(100))
	assert.False(t, l.Admissible(101))
	err := l.Wait(context.Background(), 101)
	assert.ErrorIs(t, err, ratelimit.ErrTooLarge)
	assert.ErrorIs(t, err, ratelimit.ErrLimited)
	assert.Contains(t, err.Error(), "never admissible")
	require.NoError(t, l.Wait(context.Background(), 100))
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	err = l.Wait(ctx, 100)
	assert.ErrorIs(t, err, ratelimit.ErrLimited)
	assert.NotErrorIs(t, err, ratelimit.ErrTooLarge)
}
