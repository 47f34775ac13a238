package throttle_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/throttle"
	"github.com/tierguard/tierguard/retry"
)

var (
	errOverloaded = classify.Wrap(errors.New("503 UNAVAILABLE"), classify.Verdict{Class: classify.Transient, HTTPStatus: 503})
	errBadRequest = classify.Wrap(errors.New("400"), classify.Verdict{Class: classify.InvalidRequest, HTTPStatus: 400})
	ok            = classify.Verdict{}
	overloaded    = classify.Verdict{Class: classify.Transient, HTTPStatus: 503}
)

func newThrottle(t *testing.T, cfg throttle.Config) *throttle.Throttle {
	t.Helper()
	th, err := throttle.New(cfg)
	require.NoError(t, err)
	return th
}

// The rule, counted exactly: max(0, (requests − K·accepts) / (requests +
// 1)). Ported from failsafe-go's adaptivethrottler
// TestAdaptiveThrottler_AcquirePermit "should calculate rejection rate
// after failures" and TestComputeRejectionRate "with zero successes",
// without its success-rate threshold and rejection cap (see the package
// doc):
// https://github.com/failsafe-go/failsafe-go/blob/main/adaptivethrottler/adaptivethrottler_test.go
func TestThrottleProbability(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		draw := 0.99
		th := newThrottle(t, throttle.Config{Rand: func() float64 { return draw }})
		for i := range 10 {
			require.True(t, th.Admit(), "the rate stays below 0.99")
			if i < 4 {
				th.Done(ok)
			} else {
				th.Done(overloaded)
			}
		}
		s := th.Stats()
		assert.Equal(t, uint64(10), s.Requests)
		assert.Equal(t, uint64(4), s.Accepts)
		assert.InDelta(t, 2.0/11, s.Probability, 1e-12, "(10 − 2·4) / 11")
		draw = 0.3
		assert.True(t, th.Admit(), "0.3 ≥ 2/11: admitted (with K = 1 the rate would be 6/11)")
		draw = 0.1
		assert.False(t, th.Admit(), "0.1 < 3/12 after one more request")
		s = th.Stats()
		assert.Equal(t, uint64(12), s.Requests, "a throttled call counts as a request")
		assert.Equal(t, uint64(11), s.Allowed)
		assert.Equal(t, uint64(1), s.Throttled)
		th.Done(classify.Verdict{Class: classify.InvalidRequest})
		th.Done(classify.Verdict{Class: classify.InvalidRequest})
		assert.InDelta(t, 0, th.Stats().Probability, 1e-12, "a 400 was the tier working: (12 − 2·6) / 13")
	})
}

// A failing tier gets fewer calls in proportion, and all of them again
// once it accepts: the window forgets the failures.
func TestThrottleShedsAndRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th := newThrottle(t, throttle.Config{Window: 8 * time.Second, Rand: func() float64 { return 0.5 }})
		admitted := 0
		for range 100 {
			if th.Admit() {
				admitted++
				th.Done(overloaded)
			}
		}
		s := th.Stats()
		assert.Equal(t, uint64(admitted), s.Allowed)
		assert.Equal(t, uint64(100-admitted), s.Throttled)
		assert.Equal(t, 2, admitted, "p is 1/2 after one refusal (the draw of 0.5 passes), 2/3 after two")
		time.Sleep(8 * time.Second)
		assert.Zero(t, th.Stats().Probability, "the window has forgotten")
		for range 10 {
			require.True(t, th.Admit())
			th.Done(ok)
		}
	})
}

func TestThrottleConfigChecked(t *testing.T) {
	_, err := throttle.New(throttle.Config{K: 0.5})
	assert.Error(t, err)
	_, err = throttle.New(throttle.Config{Window: -time.Second})
	assert.Error(t, err)
}

// In a chain, a throttled call is a skip with its own reason, on the
// trail and for observers, and the next tier answers; the throttled tier
// sees no call.
func TestThrottleTierInAChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		pro := fallback.Tier("pro", func(context.Context, string) (string, error) { calls.Add(1); return "", errOverloaded })
		flash := fallback.Tier("flash", func(context.Context, string) (string, error) { return "flash", nil })
		th := newThrottle(t, throttle.Config{Rand: func() float64 { return 0.5 }})
		skips := &skipped{}
		chain, err := fallback.New(fallback.Config[string, string]{
			Stages:   []fallback.Stage[string, string]{{Tier: throttle.Tier(pro, th), Retry: oneTry}, {Tier: flash}},
			Observer: skips,
		})
		require.NoError(t, err)
		for range 4 {
			res, err := chain.Do(context.Background(), "q")
			require.NoError(t, err)
			assert.Equal(t, "flash", res.Value)
		}
		assert.Equal(t, int64(2), calls.Load(), "two 503s, then p ≥ 2/3: the fixed draw of 0.5 throttles the rest")
		assert.Equal(t, []fallback.Skip{fallback.SkipThrottled, fallback.SkipThrottled}, skips.got)
		assert.Equal(t, "throttled", fallback.SkipThrottled.String())

		bad := throttle.Tier(fallback.Tier("bad", func(context.Context, string) (string, error) { return "", errBadRequest }), newThrottle(t, throttle.Config{}))
		_, err = bad.Call(context.Background(), "q")
		assert.ErrorIs(t, err, errBadRequest)
	})
}

// oneTry makes one attempt a tier: each Do is one upstream call.
var oneTry = retry.Policy{MaxAttempts: 1}

type skipped struct {
	fallback.NopObserver
	got []fallback.Skip
}

func (s *skipped) TierSkipped(_ context.Context, e fallback.TierSkip) { s.got = append(s.got, e.Skip) }

// Feed teaches a stage's adaptive bulkhead from the chain's calls: 503s
// lower its limit. Without Feed (or with a fixed bulkhead) nothing does.
func TestFeedTeachesTheStagesBulkhead(t *testing.T) {
	for _, fed := range []bool{true, false} {
		b, err := bulkhead.New(bulkhead.Config{Name: "pro", Max: 20, Adaptive: &bulkhead.Adaptive{Floor: 2, Ceiling: 40, Window: 1}})
		require.NoError(t, err)
		pro := fallback.Tier("pro", func(context.Context, string) (string, error) { return "", errOverloaded })
		flash := fallback.Tier("flash", func(context.Context, string) (string, error) { return "flash", nil })
		cfg := fallback.Config[string, string]{
			Stages: []fallback.Stage[string, string]{{Tier: pro, Bulkhead: b, Retry: oneTry}, {Tier: flash}},
		}
		if fed {
			cfg.Observer = throttle.Feed()
		}
		chain, err := fallback.New(cfg)
		require.NoError(t, err)
		for range 3 {
			_, err := chain.Do(context.Background(), "q")
			require.NoError(t, err)
		}
		if fed {
			assert.Equal(t, 14, b.Limit(), "20 × 0.9³ = 14.6")
		} else {
			assert.Equal(t, 20, b.Limit())
		}
	}
}
