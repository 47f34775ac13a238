package chaos_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/chaos"
)

var boom = chaos.Fail(chaos.GeminiOverloaded)

// hits calls the wrapped tier n times and returns which calls were hit.
func hits(t *testing.T, tier interface {
	Call(context.Context, string) (string, error)
}, ctx context.Context, n int) []bool {
	t.Helper()
	out := make([]bool, n)
	for i := range n {
		_, err := tier.Call(ctx, "q")
		out[i] = errors.Is(err, chaos.ErrInjected)
	}
	return out
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// A rule's rate holds within a percentage point over 10⁴ calls, for every
// rate and seed; over whole blocks of 64 matched calls it is exact.
func TestRateAccuracy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, rate := range []float64{0.001, 0.01, 0.05, 0.2, 1.0 / 3, 0.5, 0.77, 0.95, 0.999, 1} {
			for seed := range uint64(20) {
				var sw chaos.Switch
				up := &upstream{name: "pro"}
				tier := chaos.Tier(up, &sw)
				require.NoError(t, sw.Start(chaos.Drill{For: time.Hour, Seed: seed, Rules: []chaos.Rule{{Fault: boom, Rate: rate}}}))
				got := hits(t, tier, context.Background(), 10_000)
				sw.Stop()
				share := float64(countTrue(got)) / 10_000
				assert.InDelta(t, rate, share, 0.01, "rate %v seed %d", rate, seed)
				// Every prefix of whole blocks hits ⌊rate·n⌋ calls.
				n := 0
				for i, h := range got {
					if h {
						n++
					}
					if (i+1)%64 == 0 {
						want := int(math.Floor(rate*float64(i+1) + 1e-9))
						require.InDelta(t, want, n, 1, "rate %v seed %d after %d calls", rate, seed, i+1)
					}
				}
				assert.Equal(t, int64(10_000-countTrue(got)), up.calls.Load(), "a hit call does not reach the upstream")
				st := sw.Status()
				require.Len(t, st.Rules, 1)
				assert.Equal(t, uint64(10_000), st.Rules[0].Matched)
				assert.Equal(t, uint64(countTrue(got)), st.Rules[0].Injected)
			}
		}
	})
}

// The choice of calls is a function of the seed and the call's rank: the
// same seed hits the same calls, another seed other calls, and hits do not
// come in long streaks.
func TestDeterministicWithSeed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		run := func(seed uint64) []bool {
			var sw chaos.Switch
			tier := chaos.Tier(&upstream{name: "pro"}, &sw)
			require.NoError(t, sw.Start(chaos.Drill{For: time.Hour, Seed: seed, Rules: []chaos.Rule{{Fault: boom, Rate: 0.2}}}))
			defer sw.Stop()
			return hits(t, tier, context.Background(), 2000)
		}
		a, b, c := run(7), run(7), run(8)
		assert.Equal(t, a, b)
		assert.NotEqual(t, a, c)
		longest, cur := 0, 0
		for _, h := range a {
			if h {
				cur++
				longest = max(longest, cur)
			} else {
				cur = 0
			}
		}
		assert.Less(t, longest, 13, "a 20%% rule never hits a whole block's worth in a row")
		// Not every fifth call: the positions vary.
		assert.NotEqual(t, a[:64], a[64:128], "blocks differ")
	})
}

// A drill and its rules act exactly inside their windows: from the start
// (inclusive) to the end (exclusive), to the nanosecond.
func TestWindowsExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sw chaos.Switch
		tier := chaos.Tier(&upstream{name: "pro"}, &sw)
		t0 := time.Now()
		start := t0.Add(time.Hour)
		require.NoError(t, sw.Start(chaos.Drill{Start: start, For: 10 * time.Minute, Rules: []chaos.Rule{
			{Fault: boom, Rate: 1, After: 2 * time.Minute, For: 3 * time.Minute},
			{Fault: chaos.Stall(), Rate: 1, After: 8 * time.Minute},
		}}))
		defer sw.Stop()
		at := func(d time.Duration) error {
			time.Sleep(time.Until(start.Add(d)))
			require.Equal(t, start.Add(d), time.Now())
			ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
			defer cancel()
			_, err := tier.Call(ctx, "q")
			return err
		}
		assert.False(t, sw.Status().Active, "scheduled, not active yet")
		assert.NoError(t, at(-time.Nanosecond), "before the drill")
		assert.NoError(t, at(0), "the drill started, the rule not yet")
		assert.NoError(t, at(2*time.Minute-time.Nanosecond))
		assert.ErrorIs(t, at(2*time.Minute), chaos.ErrInjected, "the rule's first instant")
		assert.ErrorIs(t, at(5*time.Minute-time.Nanosecond), chaos.ErrInjected, "the rule's last instant")
		assert.NoError(t, at(5*time.Minute), "the rule's end")
		assert.NoError(t, at(8*time.Minute-time.Nanosecond))
		err := at(8 * time.Minute)
		assert.ErrorIs(t, err, chaos.ErrInjected, "the second rule starts")
		assert.ErrorIs(t, err, context.DeadlineExceeded, "a stall ends with the context")
		assert.True(t, sw.Status().Active)
		assert.ErrorIs(t, at(10*time.Minute-time.Nanosecond), chaos.ErrInjected, "the drill's last instant")
		assert.NoError(t, at(10*time.Minute), "the drill's end")
		assert.False(t, sw.Status().Active)
		st := sw.Status()
		assert.Equal(t, uint64(2), st.Rules[0].Injected)
		assert.Equal(t, uint64(2), st.Rules[1].Injected)
	})
}

// A drill always ends: Start refuses a drill without an end, with an end
// too far or already passed, or with nothing to do, naming every field;
// once it ends the switch is off and another drill may start.
func TestDrillAlwaysEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sw chaos.Switch
		rule := []chaos.Rule{{Fault: boom, Rate: 1}}
		for _, c := range []struct {
			name string
			d    chaos.Drill
			want []string
		}{
			{"no end", chaos.Drill{Rules: rule}, []string{"End or a positive For is required"}},
			{"both", chaos.Drill{Rules: rule, For: time.Minute, End: time.Now().Add(time.Hour)}, []string{"End and For are both set"}},
			{"too long", chaos.Drill{Rules: rule, For: 25 * time.Hour}, []string{"more than MaxDrill"}},
			{"over", chaos.Drill{Rules: rule, Start: time.Now().Add(-time.Hour), For: time.Minute}, []string{"has passed"}},
			{"empty", chaos.Drill{For: time.Minute}, []string{"would do nothing"}},
			{"bad rules", chaos.Drill{For: time.Minute, Rules: []chaos.Rule{
				{Rate: 1}, {Fault: boom, Rate: 0}, {Fault: boom, Rate: math.NaN()}, {Fault: boom, Rate: 1.5},
				{Fault: boom, Rate: 1, After: -1}, {Fault: chaos.RandomLatency(2, 1), Rate: 1},
				{Fault: chaos.FinishReason(""), Rate: 1}, {Fault: chaos.IdleGap(1, 0), Rate: 1},
			}}, []string{"Rules[0]: Fault: no fault", "Rules[1]: Rate 0", "Rules[2]: Rate NaN", "Rules[3]: Rate 1.5",
				"Rules[4]: After", "Rules[5]: Fault: delay bounds", "Rules[6]: Fault: finish reason is empty",
				"Rules[7]: Fault: idle gap"}},
			{"bad open", chaos.Drill{For: time.Minute, Open: []chaos.Open{{}, {Tier: "pro"}}}, []string{"Open[0]: Breaker is required", "Open[1]: Breaker is nil"}},
		} {
			err := sw.Start(c.d)
			require.Error(t, err, c.name)
			for _, w := range c.want {
				assert.ErrorContains(t, err, w, c.name)
			}
		}
		assert.Equal(t, chaos.Status{}, sw.Status(), "nothing started")

		tier := chaos.Tier(&upstream{name: "pro"}, &sw)
		require.NoError(t, sw.Start(chaos.Drill{Name: "a", For: time.Minute, Rules: rule}))
		assert.ErrorIs(t, sw.Start(chaos.Drill{Name: "b", For: time.Minute, Rules: rule}), chaos.ErrRunning)
		_, err := tier.Call(context.Background(), "q")
		assert.ErrorIs(t, err, chaos.ErrInjected)
		time.Sleep(time.Minute)
		_, err = tier.Call(context.Background(), "q")
		assert.NoError(t, err, "the drill ended by itself")
		assert.False(t, sw.Status().Active)
		require.NoError(t, sw.Start(chaos.Drill{Name: "b", For: time.Minute, Rules: rule}), "a new drill after the last ended")
		assert.Equal(t, "b", sw.Status().Name)
		sw.Stop()
		_, err = tier.Call(context.Background(), "q")
		assert.NoError(t, err, "stopped")
		require.NoError(t, sw.Start(chaos.Drill{Name: "c", For: time.Minute, Rules: rule}), "a new drill after a stop")
		sw.Stop()
	})
}

// Rules are scoped by tier, tenant, scenario and enrolment; the first rule
// that matches and picks a call gives it its fault.
func TestScopes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sw chaos.Switch
		pro := chaos.Tier(&upstream{name: "pro"}, &sw)
		flash := chaos.Tier(&upstream{name: "flash"}, &sw)
		require.NoError(t, sw.Start(chaos.Drill{For: time.Hour, Rules: []chaos.Rule{
			{Fault: chaos.Fail(chaos.GeminiInvalidKey), Rate: 1, Tenant: "acme"},
			{Fault: chaos.Fail(chaos.GeminiCancelled), Rate: 1, Scenario: "report"},
			{Fault: chaos.Fail(chaos.GeminiDailyQuota), Rate: 1, Enrolled: true},
			{Fault: chaos.Fail(chaos.GeminiOverloaded), Rate: 1, Tier: "pro"},
		}}))
		defer sw.Stop()
		fault := func(tier interface {
			Call(context.Context, string) (string, error)
		}, ctx context.Context) string {
			_, err := tier.Call(ctx, "q")
			var ie *chaos.InjectedError
			if errors.As(err, &ie) {
				return ie.Fault
			}
			return "none"
		}
		bg := context.Background()
		assert.Equal(t, "fail_gemini_503_overloaded", fault(pro, bg))
		assert.Equal(t, "none", fault(flash, bg), "the last rule is pro's")
		req := func(tenant, scenario string) context.Context {
			return fallback.WithRequest(bg, fallback.Request{Tenant: tenant, Scenario: scenario})
		}
		assert.Equal(t, "fail_gemini_400_api_key_invalid", fault(flash, req("acme", "")))
		assert.Equal(t, "none", fault(flash, req("other", "")))
		assert.Equal(t, "fail_gemini_499_cancelled", fault(flash, req("", "report")))
		assert.Equal(t, "fail_gemini_429_per_day_quota", fault(flash, chaos.Enroll(bg)))
		both := chaos.Enroll(req("acme", "report"))
		assert.Equal(t, "fail_gemini_400_api_key_invalid", fault(pro, both), "first rule wins; the request's labels and enrolment combine")
		assert.Equal(t, "fail_gemini_499_cancelled", fault(pro, fallback.WithRequest(both, fallback.Request{Tenant: "other", Scenario: "report"})), "a later request replaces")

		st := sw.Status()
		assert.Equal(t, []uint64{2, 2, 1, 1}, []uint64{st.Rules[0].Injected, st.Rules[1].Injected, st.Rules[2].Injected, st.Rules[3].Injected})
	})
}

// A fault that does not fit a wrapper lets the call through and is
// counted as unsupported.
func TestUnsupportedFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sw chaos.Switch
		type answer struct{ text string }
		up := fallback.Tier("pro", func(context.Context, string) (answer, error) { return answer{"real"}, nil })
		tier := chaos.Tier(up, &sw) // answers are not strings: no answer faults
		require.NoError(t, sw.Start(chaos.Drill{For: time.Hour, Rules: []chaos.Rule{
			{Fault: chaos.Keepalive(), Rate: 1},
			{Fault: chaos.MalformedJSON(), Rate: 1},
		}}))
		defer sw.Stop()
		out, err := tier.Call(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, answer{"real"}, out)
		st := sw.Status()
		assert.Equal(t, uint64(1), st.Rules[0].Unsupported)
		assert.Equal(t, uint64(1), st.Rules[1].Unsupported)
		assert.Zero(t, st.Rules[0].Matched+st.Rules[1].Matched)

		// With a way to make answers, the answer fault applies.
		tier = chaos.TierWithAnswers(up, &sw, func(text string) answer { return answer{text} })
		out, err = tier.Call(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, answer{`{"answer": "this JSON is cut off`}, out)
	})
}

// A drill forces breakers open for its window and gives them back after:
// a fresh closed breaker, unless someone else took it over meanwhile, or
// had forced it open before.
func TestOpenBreakers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		newBreaker := func(name string) *breaker.Breaker {
			b, err := breaker.New(breaker.Config{Name: name, Cooldown: time.Second})
			require.NoError(t, err)
			return b
		}
		pro, flash, held := newBreaker("pro"), newBreaker("flash"), newBreaker("held")
		held.ForceOpen() // an operator's, before the drill
		var sw chaos.Switch
		start := time.Now()
		require.NoError(t, sw.Start(chaos.Drill{For: 10 * time.Minute, Open: []chaos.Open{
			{Breaker: pro},
			{Breaker: flash, After: time.Minute, For: 2 * time.Minute},
			{Breaker: held},
		}}))
		assert.Equal(t, breaker.Open, pro.State(), "due at once: open before Start returns")
		assert.Equal(t, breaker.Closed, flash.State())
		time.Sleep(time.Minute - time.Nanosecond)
		assert.Equal(t, breaker.Closed, flash.State())
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		assert.Equal(t, breaker.Open, flash.State(), "opened on time")
		_, err := flash.Allow()
		assert.ErrorIs(t, err, breaker.ErrOpen)
		time.Sleep(2*time.Minute - time.Nanosecond)
		assert.Equal(t, breaker.Open, flash.State())
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		assert.Equal(t, breaker.Closed, flash.State(), "given back on time")
		assert.Equal(t, breaker.Open, pro.State(), "forced open through its cooldowns")

		time.Sleep(time.Until(start.Add(10 * time.Minute)))
		synctest.Wait()
		assert.Equal(t, breaker.Closed, pro.State(), "the drill's end gives it back")
		assert.Equal(t, breaker.Open, held.State(), "the operator's stays")
		assert.False(t, sw.Status().Active)

		// Taken over during the drill: left as the new owner set it.
		require.NoError(t, sw.Start(chaos.Drill{For: time.Minute, Open: []chaos.Open{{Breaker: pro}}}))
		assert.Equal(t, breaker.Open, pro.State())
		pro.ForceClosed()
		pro.ForceOpen() // someone's own drill
		sw.Stop()
		assert.Equal(t, breaker.Open, pro.State(), "not the drill's to give back")
		pro.Reset()

		// Stop gives back at once, and cancels what was scheduled.
		require.NoError(t, sw.Start(chaos.Drill{For: time.Hour, Open: []chaos.Open{{Breaker: pro}, {Breaker: flash, After: time.Minute}}}))
		sw.Stop()
		assert.Equal(t, breaker.Closed, pro.State())
		time.Sleep(2 * time.Minute)
		assert.Equal(t, breaker.Closed, flash.State(), "the scheduled opening was cancelled")
	})
}

// Under concurrent calls the rate is still exact — each matched call takes
// a rank atomically — and flipping the switch while calls run is safe.
func TestConcurrentCalls(t *testing.T) {
	var sw chaos.Switch
	tier := chaos.Tier(&upstream{name: "pro"}, &sw)
	require.NoError(t, sw.Start(chaos.Drill{For: time.Hour, Seed: 9, Rules: []chaos.Rule{{Fault: boom, Rate: 0.2}}}))
	var wg sync.WaitGroup
	var injected atomic.Int64
	for range 8 {
		wg.Go(func() {
			for range 1280 {
				if _, err := tier.Call(context.Background(), "q"); errors.Is(err, chaos.ErrInjected) {
					injected.Add(1)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(2048), injected.Load(), "⌊0.2 × 10240⌋")
	sw.Stop()

	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if sw.Start(chaos.Drill{For: time.Hour, Rules: []chaos.Rule{{Fault: boom, Rate: 0.5}}}) == nil {
				_ = sw.Status()
				sw.Stop()
			}
		}
	})
	for range 4 {
		wg.Go(func() {
			for range 2000 {
				_, _ = tier.Call(context.Background(), "q")
			}
		})
	}
	time.Sleep(10 * time.Millisecond)
	close(stop)
	wg.Wait()
}

// A drill is scheduled at most MaxLead ahead: one ten years out would
// hold its switch (ErrRunning for every other drill) for ten years.
func TestDrillScheduledTooFarAheadIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sw chaos.Switch
		rule := []chaos.Rule{{Fault: boom, Rate: 1}}
		for _, start := range []time.Time{time.Now().AddDate(10, 0, 0), time.Now().Add(chaos.MaxLead + time.Nanosecond)} {
			err := sw.Start(chaos.Drill{Rules: rule, Start: start, For: time.Minute})
			require.Error(t, err, "a drill starting %v ahead", time.Until(start))
			assert.ErrorContains(t, err, "Start")
			assert.ErrorContains(t, err, "MaxLead")
			assert.False(t, sw.Status().Active)
		}
		require.NoError(t, sw.Start(chaos.Drill{Name: "now", Rules: rule, For: time.Minute}), "the switch is free")
		sw.Stop()

		start := time.Now().Add(chaos.MaxLead)
		require.NoError(t, sw.Start(chaos.Drill{Name: "tomorrow", Rules: rule, Start: start, End: start.Add(time.Minute)}))
		assert.ErrorIs(t, sw.Start(chaos.Drill{Rules: rule, For: time.Minute}), chaos.ErrRunning, "a scheduled drill holds its switch")
		sw.Stop()
		require.NoError(t, sw.Start(chaos.Drill{Rules: rule, For: time.Minute}), "until it is stopped")
		sw.Stop()
	})
}
