package fallback_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/ratelimit"
)

// contention is what a run of contendedChain saw: when the primary was
// called, by the bubble's clock, and what answered.
type contention struct {
	calls   []time.Duration
	answers map[string]int
}

// worstWindow is the most calls in any window of per.
func (c contention) worstWindow(per time.Duration) int {
	worst := 0
	for i := range c.calls {
		j, _ := slices.BinarySearch(c.calls[i:], c.calls[i]+per)
		worst = max(worst, j)
	}
	return worst
}

// contendedChain runs callers goroutines, each asking the chain again
// every tick for run (a bubble's clock, so every caller of a tick arrives
// at the same instant and they race for real on the machine's cores), and
// returns when the primary was called.
func contendedChain(t *testing.T, callers int, tick, run time.Duration, stage func(pro fallback.ModelTier[string, string]) fallback.Stage[string, string]) contention {
	start := time.Now()
	var mu sync.Mutex
	var calls []time.Duration
	pro := fallback.Tier("pro", func(context.Context, string) (string, error) {
		mu.Lock()
		calls = append(calls, time.Since(start))
		mu.Unlock()
		return "pro", nil
	})
	c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
		stage(pro), {Tier: newFake("flash", ok("flash"))},
	}})
	answers := make([]map[string]int, callers)
	var wg sync.WaitGroup
	for i := range callers {
		answers[i] = map[string]int{}
		wg.Go(func() {
			for time.Since(start) < run {
				res, err := c.Do(context.Background(), "q")
				if err != nil {
					answers[i]["error"]++
				} else {
					answers[i][res.Tier]++
				}
				time.Sleep(tick)
			}
		})
	}
	wg.Wait()
	out := contention{calls: calls, answers: map[string]int{}}
	for _, a := range answers {
		for k, n := range a {
			out.answers[k] += n
		}
	}
	slices.Sort(out.calls)
	return out
}

// TestStageLimiterPassesItsQuotaUnderContention: 64 callers contend for a
// stage's limiter of 600 requests a minute (a burst of 60, then 540 a
// minute). Over three minutes the limiter lets through what it would let
// one caller take — the burst and its rate — less at most 5 %, and no
// minute ever holds more than 600 calls. Before, the chain reserved a
// turn and cancelled it when the turn was not now; a cancel gives back
// nothing once another caller has reserved behind it, so under contention
// the cancelled turns were lost and the primary was skipped as rate
// limited while its quota went unused.
func TestStageLimiterPassesItsQuotaUnderContention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 600})
		got := contendedChain(t, 64, 20*time.Millisecond, 3*time.Minute, func(pro fallback.ModelTier[string, string]) fallback.Stage[string, string] {
			return fallback.Stage[string, string]{Tier: ratelimit.Tier(pro, ratelimit.TierConfig[string]{Limiter: lim})}
		})
		ceiling := 60 + 540*3
		t.Logf("primary called %d times of %d (%.1f %%), worst minute %d of 600; answers %v",
			len(got.calls), ceiling, 100*float64(len(got.calls))/float64(ceiling), got.worstWindow(time.Minute), got.answers)
		assert.GreaterOrEqual(t, len(got.calls), ceiling*95/100, "the primary gets its quota (ceiling %d); answers %v", ceiling, got.answers)
		assert.LessOrEqual(t, len(got.calls), ceiling+1)
		assert.LessOrEqual(t, got.worstWindow(time.Minute), 600, "never more than the quota in a minute")
		assert.Zero(t, got.answers["error"])
		assert.Equal(t, len(got.calls), got.answers["pro"])
	})
}

// TestTenantAndStageLimitersPassTheirQuotaUnderContention: with a tenant
// limiter in front of the stage's, a call the stage's limiter refuses
// gives the tenant's turn back whole, so neither limiter loses quota to
// the other under contention. The tenant's share (1,200 a minute) is
// above the stage's (600), so the stage's quota is the ceiling.
func TestTenantAndStageLimitersPassTheirQuotaUnderContention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 600, Tokens: 60_000, TokenBurst: 6_000})
		tenant := newLimiter(t, ratelimit.Config{Name: "tenant", Requests: 1200, Burst: 60})
		got := contendedChain(t, 64, 20*time.Millisecond, 3*time.Minute, func(pro fallback.ModelTier[string, string]) fallback.Stage[string, string] {
			return fallback.Stage[string, string]{Tier: ratelimit.Tier(pro, ratelimit.TierConfig[string]{Limiter: lim,
				PerRequest: func(context.Context, string) *ratelimit.Limiter { return tenant }}),
				Tokens: func(string) int64 { return 100 }}
		})
		ceiling := 60 + 540*3
		t.Logf("primary called %d times of %d (%.1f %%), worst minute %d of 600; tenant holds %.1f of its burst of 60",
			len(got.calls), ceiling, 100*float64(len(got.calls))/float64(ceiling), got.worstWindow(time.Minute), tenant.Stats().Requests)
		assert.GreaterOrEqual(t, len(got.calls), ceiling*95/100, "the primary gets its quota (ceiling %d); answers %v", ceiling, got.answers)
		assert.LessOrEqual(t, got.worstWindow(time.Minute), 600, "never more than the quota in a minute")
		tst := tenant.Stats()
		// The tenant's own bucket still holds what the stage did not use
		// of it: every turn the stage refused came back.
		require.Positive(t, tst.Admitted)
		assert.InDelta(t, 60, tst.Requests, 1, "the tenant's burst is back: nothing was lost to refusals")
	})
}
