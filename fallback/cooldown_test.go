package fallback_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/pool"
	"github.com/tierguard/tierguard/internal/testbed/reported"
	"github.com/tierguard/tierguard/retry"
)

// One 429 with a 20 s delay that names no quota is its request's own
// business: the request moves to flash, and the next request calls pro
// again instead of skipping it for 20 s.
func TestOneSporadic429DoesNotSidelineTheTier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pro := newFake("pro", ok("pro"), step{err: rateLimited(20 * time.Second)})
		c := newChain(t, fallback.Config[string, string]{Total: 10 * time.Second, Stages: []fallback.Stage[string, string]{
			{Tier: pro}, {Tier: newFake("flash", ok("flash"))},
		}})
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "flash", res.Tier, "the 20 s delay is longer than MaxRetryWait: flash answers")
		assert.Nil(t, res.Attempts()[0].Cooling, "one 429 takes nothing out")
		time.Sleep(time.Second)
		res, err = c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "pro", res.Tier, "the next request calls pro")
		until, why := c.ParkedUntil(0)
		assert.True(t, until.IsZero())
		assert.Equal(t, fallback.NotSkipped, why)
	})
}

// A busy tier's few 429s add up to CoolDown.Count within the window, but
// they are a small share of its calls: it stays in rotation.
func TestFew429sAmongManyAnswersKeepTheTier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		pro := fallback.Tier("pro", func(context.Context, string) (string, error) {
			if n.Add(1)%4 == 1 {
				return "", rateLimited(20 * time.Second)
			}
			return "pro", nil
		})
		flash := newFake("flash", ok("flash"))
		c := newChain(t, fallback.Config[string, string]{Total: 10 * time.Second, Stages: []fallback.Stage[string, string]{
			{Tier: pro}, {Tier: flash},
		}})
		for range 40 {
			res, err := c.Do(context.Background(), "q")
			require.NoError(t, err)
			for _, a := range res.Attempts() {
				assert.Equal(t, fallback.NotSkipped, a.Skip, "pro is never skipped")
				assert.Nil(t, a.Cooling)
			}
			time.Sleep(100 * time.Millisecond)
		}
		assert.Equal(t, int64(40), n.Load(), "every request called pro")
		assert.Equal(t, int64(10), flash.calls.Load(), "flash answered the requests whose pro call got a 429")
	})
}

// The rule that took a tier out, and until when, is on the attempt whose
// 429 did it, on its AttemptEnd, and on every skip while it cools: a
// per-minute quota at once, a storm of bare 429s on its third.
func TestCoolingNamesItsRuleAndItsEnd(t *testing.T) {
	t.Run("per-minute quota", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			rec := &reported.Recorder{}
			c := newChain(t, fallback.Config[string, string]{Total: 10 * time.Second, Observer: rec, Stages: []fallback.Stage[string, string]{
				{Tier: newFake("pro", ok("pro"), step{err: perMinute429(20 * time.Second)})}, {Tier: newFake("flash", ok("flash"))},
			}})
			res, err := c.Do(context.Background(), "q")
			require.NoError(t, err)
			want := &fallback.Cooling{Rule: fallback.CoolPerMinuteQuota, Until: start.Add(20 * time.Second)}
			assert.Equal(t, want, res.Attempts()[0].Cooling)
			ends := reported.Of[fallback.AttemptEnd](rec)
			require.NotEmpty(t, ends)
			assert.Equal(t, want, ends[0].Cooling)

			time.Sleep(time.Second)
			res, err = c.Do(context.Background(), "q")
			require.NoError(t, err)
			assert.Equal(t, "flash", res.Tier)
			a := res.Attempts()[0]
			assert.Equal(t, fallback.SkipRateLimited, a.Skip)
			var se *fallback.SkipError
			require.ErrorAs(t, a.Err, &se)
			assert.Equal(t, *want, se.Cooling)
			assert.Contains(t, se.Error(), "per_minute_quota")
			skips := reported.Of[fallback.TierSkip](rec)
			require.Len(t, skips, 1)
			assert.Equal(t, want, skips[0].Cooling)
		})
	})
	t.Run("storm", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			c := newChain(t, fallback.Config[string, string]{Total: 10 * time.Second, Stages: []fallback.Stage[string, string]{
				{Tier: newFake("pro", step{err: rateLimited(20 * time.Second)}), Retry: retry.Policy{MaxAttempts: 1}}, {Tier: newFake("flash", ok("flash"))},
			}})
			var rules []fallback.CoolRule
			for range 3 {
				res, err := c.Do(context.Background(), "q")
				require.NoError(t, err)
				if cl := res.Attempts()[0].Cooling; cl != nil {
					rules = append(rules, cl.Rule)
					assert.Equal(t, start.Add(2*time.Second+20*time.Second), cl.Until)
				}
				time.Sleep(time.Second)
			}
			assert.Equal(t, []fallback.CoolRule{fallback.CoolStorm}, rules, "the third 429 in a row, 100% of the calls")
			_, why := c.ParkedUntil(0)
			assert.Equal(t, fallback.SkipRateLimited, why)
		})
	})
	t.Run("off", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			pro := newFake("pro", step{err: perMinute429(20 * time.Second)})
			c := newChain(t, fallback.Config[string, string]{Total: 10 * time.Second, Stages: []fallback.Stage[string, string]{
				{Tier: pro, Retry: retry.Policy{MaxAttempts: 1}, CoolDown: fallback.CoolDown{Off: true}}, {Tier: newFake("flash", ok("flash"))},
			}})
			for range 5 {
				_, err := c.Do(context.Background(), "q")
				require.NoError(t, err)
			}
			assert.Equal(t, int64(5), pro.calls.Load(), "no 429 takes pro out")
		})
	})
}

// Inside one request, a server delay longer than the stage's MaxRetryWait
// (1 s by default) sends the request to a healthy next tier at once; with
// the cap raised above the delay, the request waits it and retries. The
// last tier waits whatever fits the budget.
func TestMaxRetryWaitCapsTheWaitInsideARequest(t *testing.T) {
	chain := func(t *testing.T, maxWait time.Duration, pro *fake, later ...fallback.Stage[string, string]) *fallback.Chain[string, string] {
		return newChain(t, fallback.Config[string, string]{Total: 10 * time.Second,
			Stages: append([]fallback.Stage[string, string]{{Tier: pro, MaxRetryWait: maxWait}}, later...)})
	}
	t.Run("default: the next tier answers without waiting", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			pro := newFake("pro", ok("pro"), step{err: rateLimited(3 * time.Second)})
			rec := &reported.Recorder{}
			c := newChain(t, fallback.Config[string, string]{Total: 10 * time.Second, Observer: rec, Stages: []fallback.Stage[string, string]{
				{Tier: pro}, {Tier: newFake("flash", ok("flash"))},
			}})
			start := time.Now()
			res, err := c.Do(context.Background(), "q")
			require.NoError(t, err)
			assert.Equal(t, "flash", res.Tier)
			assert.Zero(t, time.Since(start), "no wait for the 3 s delay")
			assert.Equal(t, int64(1), pro.calls.Load())
			ends := reported.Of[fallback.AttemptEnd](rec)
			require.NotEmpty(t, ends)
			assert.Equal(t, retry.DelayTooLong, ends[0].Stop)
			assert.False(t, ends[0].Retry)
		})
	})
	t.Run("raised: waits and retries", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			pro := newFake("pro", ok("pro"), step{err: rateLimited(3 * time.Second)})
			c := chain(t, 5*time.Second, pro, fallback.Stage[string, string]{Tier: newFake("flash", ok("flash"))})
			start := time.Now()
			res, err := c.Do(context.Background(), "q")
			require.NoError(t, err)
			assert.Equal(t, "pro", res.Tier)
			assert.Equal(t, 3*time.Second, time.Since(start))
			assert.Equal(t, int64(2), pro.calls.Load())
			assert.Equal(t, 3*time.Second, res.Attempts()[0].Wait)
		})
	})
	t.Run("last tier waits what fits", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			pro := newFake("pro", ok("pro"), step{err: rateLimited(3 * time.Second)})
			c := chain(t, 0, pro)
			res, err := c.Do(context.Background(), "q")
			require.NoError(t, err)
			assert.Equal(t, "pro", res.Tier, "no later tier: waiting is the way to an answer")
			assert.Equal(t, int64(2), pro.calls.Load())
		})
	})
	t.Run("later tier out: waits", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			pro := newFake("pro", ok("pro"), step{err: rateLimited(3 * time.Second)})
			br, err := breaker.New(breaker.Config{Name: "flash"})
			require.NoError(t, err)
			br.ForceOpen()
			c := chain(t, 0, pro, fallback.Stage[string, string]{Tier: newFake("flash", ok("flash")), Breaker: br})
			res, err := c.Do(context.Background(), "q")
			require.NoError(t, err)
			assert.Equal(t, "pro", res.Tier, "flash's breaker is open: pro's delay is worth waiting")
			assert.Equal(t, int64(2), pro.calls.Load())
		})
	})
	t.Run("invalid", func(t *testing.T) {
		_, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: newFake("pro", ok("pro")), CoolDown: fallback.CoolDown{Count: -1, Share: 2, Window: -time.Second}},
		}})
		require.Error(t, err)
		for _, s := range []string{"CoolDown.Count", "CoolDown.Share", "CoolDown.Window"} {
			assert.Contains(t, err.Error(), s)
		}
	})
}

// A pool judges each member by the same evidence: a member's one bare 429
// moves that request to another member and leaves it in rotation; a 429
// naming its per-minute quota cools it alone, told to Observe with the
// rule; a member with CoolDown.Off of its own is never cooled.
func TestPoolMemberCoolsOnEvidence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var aCalls, bCalls, cCalls atomic.Int64
		count := func(n *atomic.Int64, err error) fallback.ModelTier[string, string] {
			return fallback.Tier("m", func(context.Context, string) (string, error) {
				if n.Add(1) == 1 {
					return "", err
				}
				return "ok", nil
			})
		}
		thePool, err := pool.New(pool.Config[string, string]{Name: "pro", Sticky: func(s string) string { return s }, Members: []pool.Member[string, string]{
			{Key: "key-a", Tier: count(&aCalls, rateLimited(20*time.Second))},
			{Key: "key-b", Tier: count(&bCalls, perMinute429(20*time.Second))},
			{Key: "key-c", Tier: count(&cCalls, perMinute429(20*time.Second)), CoolDown: &fallback.CoolDown{Off: true}},
		}})
		require.NoError(t, err)
		var events []pool.MemberEvent
		defer thePool.Observe(func(e pool.MemberEvent) { events = append(events, e) })()
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: thePool}, {Tier: newFake("flash", ok("flash"))}}})
		for i := range 30 {
			_, err := c.Do(context.Background(), string(rune('a'+i)))
			require.NoError(t, err)
		}
		out := map[pool.MemberOut]int{}
		for _, m := range thePool.Members() {
			out[m.Out]++
		}
		assert.Equal(t, map[pool.MemberOut]int{pool.MemberIn: 2, pool.MemberCooling: 1}, out, "b cools; a after one bare 429, and c by its own rule, do not")
		require.Len(t, events, 1)
		assert.Equal(t, pool.MemberCooling, events[0].Out)
		assert.Equal(t, fallback.CoolPerMinuteQuota, events[0].Rule)
		assert.Equal(t, 20*time.Second, events[0].For)
		assert.Greater(t, aCalls.Load(), int64(1), "a is called again")
		assert.Greater(t, cCalls.Load(), int64(1), "c is called again")
		assert.Equal(t, int64(1), bCalls.Load(), "b is not, until its delay has passed")
	})
}
