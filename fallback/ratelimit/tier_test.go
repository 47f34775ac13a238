package ratelimit_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/ratelimit"
)

// TestTierRefusesWithoutACall: over its limit, a limited tier makes no
// call and says so with a SkipError that wraps the limiter's error.
func TestTierRefusesWithoutACall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		inner := fallback.Tier("pro", func(context.Context, string) (string, error) { calls++; return "ok", nil })
		tier := ratelimit.Tier(inner, ratelimit.TierConfig[string]{Limiter: newLimiter(t, ratelimit.Config{Name: "pro", Requests: 61, Burst: 1})})
		assert.Equal(t, "pro", tier.Name())
		assert.IsType(t, inner, tier.(interface{ Unwrap() any }).Unwrap(), "Unwrap gives the limited tier")
		out, err := tier.Call(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "ok", out)
		_, err = tier.Call(context.Background(), "q")
		var skip *fallback.SkipError
		require.ErrorAs(t, err, &skip)
		assert.Equal(t, fallback.SkipRateLimited, skip.Skip)
		assert.ErrorIs(t, err, ratelimit.ErrLimited)
		var limited *ratelimit.LimitedError
		require.ErrorAs(t, err, &limited)
		assert.Equal(t, time.Second, limited.RetryIn)
		assert.Equal(t, classify.Rejected, classify.Classify(err).Class)
		assert.Equal(t, 1, calls, "no call over the limit")
	})
}

// TestTierWaitsWhenItFits: with MaxWait, a turn a second away is waited
// for; one further than the attempt's deadline leaves is refused at once.
func TestTierWaitsWhenItFits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := fallback.Tier("pro", func(context.Context, string) (string, error) { return "ok", nil })
		tier := ratelimit.Tier(inner, ratelimit.TierConfig[string]{Limiter: newLimiter(t, ratelimit.Config{Name: "pro", Requests: 61, Burst: 1}), MaxWait: 5 * time.Second})
		_, err := tier.Call(context.Background(), "q")
		require.NoError(t, err)
		start := time.Now()
		_, err = tier.Call(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, time.Second, time.Since(start), "waited for its turn")

		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		start = time.Now()
		_, err = tier.Call(ctx, "q")
		assert.ErrorIs(t, err, ratelimit.ErrLimited)
		assert.Zero(t, time.Since(start), "decided before waiting")
	})
}

// TestTierThrottlesOnA429: a 429 with a server delay holds the tier's
// limiter for that delay.
func TestTierThrottlesOnA429(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fail := true
		inner := fallback.Tier("pro", func(context.Context, string) (string, error) {
			if fail {
				return "", classify.Wrap(errors.New("429"), classify.Verdict{Class: classify.RateLimited, HTTPStatus: 429, RetryAfter: 10 * time.Second})
			}
			return "ok", nil
		})
		tier := ratelimit.Tier(inner, ratelimit.TierConfig[string]{Limiter: newLimiter(t, ratelimit.Config{Name: "pro", Requests: 6000, Burst: 100})})
		_, err := tier.Call(context.Background(), "q")
		require.Error(t, err)
		fail = false
		_, err = tier.Call(context.Background(), "q")
		assert.ErrorIs(t, err, ratelimit.ErrLimited, "held for the server's delay")
		time.Sleep(10 * time.Second)
		_, err = tier.Call(context.Background(), "q")
		assert.NoError(t, err)
	})
}

// TestTierTakesTheRequestsTurnFirst: the per-request limiter is asked
// first; a refusal there leaves the tier's own turn untaken.
func TestTierTakesTheRequestsTurnFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tenant := newLimiter(t, ratelimit.Config{Name: "tenant", Requests: 61, Burst: 1})
		own := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 60, Burst: 10})
		inner := fallback.Tier("pro", func(context.Context, string) (string, error) { return "ok", nil })
		tier := ratelimit.Tier(inner, ratelimit.TierConfig[string]{Limiter: own,
			PerRequest: func(context.Context, string) *ratelimit.Limiter { return tenant }})
		_, err := tier.Call(context.Background(), "q")
		require.NoError(t, err)
		_, err = tier.Call(context.Background(), "q")
		var limited *ratelimit.LimitedError
		require.ErrorAs(t, err, &limited)
		assert.Equal(t, "tenant", limited.Name)
		assert.InDelta(t, 9, own.Stats().Requests, 0.01, "the tier's bucket gave one turn only")
	})
}

func TestTierRefusesANegativeWait(t *testing.T) {
	inner := fallback.Tier("pro", func(context.Context, string) (string, error) { return "ok", nil })
	assert.PanicsWithValue(t, "ratelimit: TierConfig.MaxWait is negative: -1s", func() {
		ratelimit.Tier(inner, ratelimit.TierConfig[string]{MaxWait: -time.Second})
	})
}
