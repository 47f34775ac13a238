package chaos_test

// The drills in this file are meant to be copied: each builds a chain the
// way a service does, wraps its primary tier with chaos.Tier, and runs a
// drill against it inside testing/synctest, so that minutes of traffic take
// a fraction of a second of CPU and no real time. Replace the fake tiers
// with your own (or with tiers over an httptest server) and the checks
// with your service's objectives.

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/chaos"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// drillChain is a service's chain: pro → flash → default, pro behind a
// breaker and a bulkhead, both tiers with retries and per-try timeouts,
// pro wrapped so that drills reach it.
func drillChain(t *testing.T, sw *chaos.Switch) (*fallback.Chain[string, string], *breaker.Breaker) {
	t.Helper()
	pro := chaos.Tier(&upstream{name: "pro", take: 400 * time.Millisecond}, sw)
	flash := &upstream{name: "flash", take: 150 * time.Millisecond}
	proBreaker, err := breaker.New(breaker.Config{Name: "pro", FailureRatio: 0.5, MinCalls: 20, Window: 10 * time.Second, Cooldown: 30 * time.Second})
	require.NoError(t, err)
	proSlots, err := bulkhead.New(bulkhead.Config{Name: "pro", Max: 64})
	require.NoError(t, err)
	chain, err := fallback.New(fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{
			{Tier: pro, Model: "gemini-2.5-pro", Breaker: proBreaker, Bulkhead: proSlots, TryTimeout: 2 * time.Second,
				Retry: retry.Policy{MaxAttempts: 2}, Validate: validate.NonEmpty()},
			{Tier: flash, Model: "gemini-2.5-flash", TryTimeout: time.Second, Retry: retry.Policy{MaxAttempts: 2}, Validate: validate.NonEmpty()},
		},
		Total:   5 * time.Second,
		Default: func(context.Context, string) (string, bool) { return "We are busy, please retry.", true },
	})
	require.NoError(t, err)
	return chain, proBreaker
}

// 20% of the primary's calls answer Gemini's real 503 "The model is
// overloaded": with a healthy fallback, at least 99.9% of the requests are
// answered, none after its deadline.
func TestDrillTwentyPercent503OnThePrimary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var drills chaos.Switch
		chain, _ := drillChain(t, &drills)

		rep, err := chaos.Run(context.Background(), chain, chaos.RunConfig[string]{
			Name:   "20% 503 on pro",
			Load:   chaos.Load{RPS: 50, Duration: 2 * time.Minute, Concurrency: 200},
			Input:  func(n int) string { return fmt.Sprintf("question %d", n) },
			Switch: &drills,
			Drill: chaos.Drill{Seed: 1, Rules: []chaos.Rule{
				{Tier: "pro", Rate: 0.2, Fault: chaos.Fail(chaos.GeminiOverloaded)},
			}},
			Checks: []chaos.Check{
				chaos.MinSuccess(0.999),
				chaos.MaxOverrun(0),
				chaos.MaxLatency(0.99, 2*time.Second),
			},
		})
		require.NoError(t, err)
		t.Log(rep)
		require.NoError(t, rep.Err())

		assert.Equal(t, 6000, rep.Requests)
		assert.InDelta(t, 0.2, float64(rep.Rules[0].Injected)/float64(rep.Rules[0].Matched), 0.01)
		assert.Zero(t, rep.BreakerTrips, "a 20%% error rate stays under the 50%% failure ratio")
		assert.Less(t, rep.FallbackRate, 0.06, "the retry answers most failures on pro (0.2² = 4%% fail twice)")
	})
}

// Chaos Week, compressed: pro's breaker is forced open for ten minutes, as
// a feature flag in production would force it. The fallback carries the
// whole load, at least 95% of the requests are answered, and afterwards pro
// is back and serving.
func TestDrillProForcedOpenForTenMinutes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var drills chaos.Switch
		chain, proBreaker := drillChain(t, &drills)

		rep, err := chaos.Run(context.Background(), chain, chaos.RunConfig[string]{
			Name:  "pro forced open for 10 minutes",
			Load:  chaos.Load{RPS: 10, Duration: 10 * time.Minute, Concurrency: 50},
			Input: func(n int) string { return fmt.Sprintf("question %d", n) },
			Drill: chaos.Drill{Open: []chaos.Open{{Tier: "pro"}}},
			Checks: []chaos.Check{
				chaos.MinSuccess(0.95),
				chaos.MaxBreakerTrips(0),
				chaos.MaxOverrun(0),
			},
		})
		require.NoError(t, err)
		t.Log(rep)
		require.NoError(t, rep.Err())

		assert.Equal(t, 6000, rep.Requests)
		assert.Equal(t, 1, rep.ForcedOpens)
		assert.Equal(t, 1.0, rep.FallbackRate, "flash answered everything")
		assert.Equal(t, 150*time.Millisecond, rep.Latency.P50, "flash's latency: pro is skipped without a call")
		assert.Equal(t, breaker.Closed, proBreaker.State(), "the drill gave the breaker back")
		res, err := chain.Do(context.Background(), "after the drill")
		require.NoError(t, err)
		assert.Equal(t, "pro", res.Tier)
	})
}
