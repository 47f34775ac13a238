package fallback_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/chaos"
	"github.com/tierguard/tierguard/fallback/pool"
	"github.com/tierguard/tierguard/fallback/ratelimit"
	"github.com/tierguard/tierguard/internal/testbed/reported"
	"github.com/tierguard/tierguard/retry"
)

// The answer of a hedge that won is marked as the hedge's, in the trail and
// in its AttemptEnded, with its pool member: dashboards see the hedges that
// won, not only those that lost.
func TestWinningHedgeIsMarked(t *testing.T) {
	t.Run("next tier", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var proCalls, flashCalls atomic.Int64
			var obs events
			c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
				{Tier: slowTier("pro", &proCalls, func() time.Duration { return 5 * time.Second }), Hedge: fallback.Hedge{Delay: 100 * time.Millisecond, MaxExtra: 1}},
				{Tier: slowTier("flash", &flashCalls, func() time.Duration { return 50 * time.Millisecond })},
			}, Observer: &obs})
			res, err := c.Do(context.Background(), "q")
			require.NoError(t, err)
			require.Equal(t, "flash", res.Tier)
			a := res.Attempts()
			require.Len(t, a, 2)
			assert.False(t, a[0].Hedge, "pro's own call lost")
			assert.True(t, a[1].Hedge, "flash answered as the hedge")
			assert.Equal(t, 1, a[1].N, "the hedge is part of the first attempt")
			var won []fallback.AttemptEnd
			for _, e := range reported.Of[fallback.AttemptEnd](&obs) {
				if e.Verdict.Class == classify.OK {
					won = append(won, e)
				}
			}
			require.Len(t, won, 1)
			assert.True(t, won[0].Hedge)
			assert.Equal(t, "flash", won[0].Stage.Tier)
			synctest.Wait()
		})
	})
	t.Run("pool member", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var aCalls, bCalls, calls atomic.Int64
			// Whichever member is asked first hangs; the other answers.
			lat := func() time.Duration {
				if calls.Add(1) == 1 {
					return 5 * time.Second
				}
				return 50 * time.Millisecond
			}
			thePool, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
				{Key: "key-a", Tier: slowTier("a", &aCalls, lat)},
				{Key: "key-b", Tier: slowTier("b", &bCalls, lat)},
			}})
			require.NoError(t, err)
			var obs events
			c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
				{Tier: thePool, Hedge: fallback.Hedge{Delay: 100 * time.Millisecond, MaxExtra: 1}},
			}, Observer: &obs})
			res, err := c.Do(context.Background(), "q")
			require.NoError(t, err)
			a := res.Attempts()
			require.Len(t, a, 2)
			slow, fast := a[0].Member, a[1].Member
			assert.NotEmpty(t, slow)
			assert.NotEmpty(t, fast)
			assert.NotEqual(t, slow, fast)
			assert.True(t, a[1].Hedge)
			assert.Equal(t, classify.OK, a[1].Verdict.Class)
			ended := reported.Of[fallback.AttemptEnd](&obs)
			require.Len(t, ended, 2)
			assert.Equal(t, fast, ended[1].Member)
			assert.True(t, ended[1].Hedge)
			synctest.Wait()
		})
	})
}

// A hedge on another member of a pool runs in a window of its own, as the
// first call does: the stage's TryTimeout bounds it, with a request
// deadline and without one, so a hung member cannot hold the request (and
// eat the later tiers' reserve) or leak its goroutines.
func TestPoolMemberHedgeHonoursTryTimeout(t *testing.T) {
	for _, total := range []time.Duration{10 * time.Second, 0} {
		t.Run("total="+total.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var aCalls, bCalls, flashCalls atomic.Int64
				hung := func() time.Duration { return time.Hour }
				thePool, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
					{Key: "key-a", Tier: slowTier("a", &aCalls, hung)},
					{Key: "key-b", Tier: slowTier("b", &bCalls, hung)},
				}})
				require.NoError(t, err)
				c := newChain(t, fallback.Config[string, string]{Total: total, Stages: []fallback.Stage[string, string]{
					{Tier: thePool, TryTimeout: 100 * time.Millisecond, Retry: retry.Policy{MaxAttempts: 1}, Hedge: fallback.Hedge{Delay: 20 * time.Millisecond, MaxExtra: 1}},
					{Tier: slowTier("flash", &flashCalls, func() time.Duration { return 10 * time.Millisecond })},
				}})
				start := time.Now()
				res, err := c.Do(context.Background(), "q")
				require.NoError(t, err)
				assert.Equal(t, "flash", res.Tier)
				assert.Equal(t, 130*time.Millisecond, time.Since(start),
					"the first call's 100 ms; the hedge's own 100 ms from 20 ms; flash's 10 ms")
				assert.Equal(t, int64(1), aCalls.Load()+bCalls.Load()-1, "one call on each member")
				synctest.Wait()
			})
		})
	}
}

// A retry that its stage's rate limiter refuses is on the trail
// (SkipRateLimited after the failure), reaches observers as a TierSkip, and the request's error matches ErrLimited.
func TestRetryRefusedByTheLimiterIsTraced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pro := newFake("pro", fails(classify.Transient))
		lim := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 1})
		var obs events
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: ratelimit.Tier(pro, ratelimit.TierConfig[string]{Limiter: lim}), Retry: retry.Policy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}},
		}, Observer: &obs})
		res, err := c.Do(context.Background(), "q")
		require.Error(t, err)
		assert.ErrorIs(t, err, ratelimit.ErrLimited)
		assert.Equal(t, 1, res.UpstreamCalls)
		a := res.Attempts()
		require.Len(t, a, 2)
		assert.Equal(t, classify.Transient, a[0].Verdict.Class)
		assert.Equal(t, fallback.SkipRateLimited, a[1].Skip)
		skipped := reported.Of[fallback.TierSkip](&obs)
		require.Len(t, skipped, 1)
		assert.Equal(t, fallback.SkipRateLimited, skipped[0].Skip)
		var fe *fallback.Error
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, fallback.TierFailed, fe.Tiers[0].Outcome)
		assert.Equal(t, 1, fe.Tiers[0].Attempts)
		assert.Equal(t, fallback.SkipRateLimited, fe.Tiers[0].Skip)
		assert.Equal(t, classify.Transient, fe.Tiers[0].Verdict.Class, "the failure decided; the refusal is named with it")
	})
}

// A response that arrives after the chain stopped waiting for its call is
// reported on its own, as a LateReply with its usage: a call abandoned
// for ignoring its context, and the first call of a hedged attempt whose
// hedge won but that the provider finished all the same. A reply in time
// rides its AttemptEnded: each response is reported once.
func TestLateRepliesAreReported(t *testing.T) {
	ignoring := func(name string, d time.Duration, tokens int64) fallback.ModelTier[string, string] {
		return fallback.Tier(name, func(ctx context.Context, _ string) (string, error) {
			time.Sleep(d) // ignores ctx
			fallback.Report(ctx, fallback.Reply{Usage: fallback.Usage{InputTokens: tokens}, HasUsage: true})
			return name, nil
		})
	}
	cases := map[string]fallback.Config[string, string]{
		"abandoned": {AbandonAfter: 10 * time.Millisecond, Stages: []fallback.Stage[string, string]{
			{Tier: ignoring("pro", time.Second, 7), TryTimeout: 100 * time.Millisecond, Retry: retry.Policy{MaxAttempts: 1}},
			{Tier: ignoring("flash", 0, 3)},
		}},
		"hedge loser": {Stages: []fallback.Stage[string, string]{
			{Tier: ignoring("pro", time.Second, 7), Hedge: fallback.Hedge{Delay: 100 * time.Millisecond, MaxExtra: 1}},
			{Tier: ignoring("flash", 0, 3)},
		}},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var obs events
				cfg.Observer = &obs
				c := newChain(t, cfg)
				res, err := c.Do(context.Background(), "q")
				require.NoError(t, err)
				assert.Equal(t, "flash", res.Tier)
				assert.Empty(t, reported.Of[fallback.LateReply](&obs), "pro has not answered yet")
				time.Sleep(2 * time.Second)
				synctest.Wait()
				late := reported.Of[fallback.LateReply](&obs)
				require.Len(t, late, 1)
				assert.Equal(t, "pro", late[0].Stage.Tier)
				assert.Equal(t, 1, late[0].Attempt)
				assert.True(t, late[0].Reply.HasUsage)
				assert.Equal(t, int64(7), late[0].Reply.Usage.InputTokens)
				var inTime int64
				for _, e := range reported.Of[fallback.AttemptEnd](&obs) {
					inTime += e.Reply.Usage.InputTokens
				}
				assert.Equal(t, int64(3), inTime, "flash's reply rode its attempt; pro's is not counted twice")
			})
		})
	}
}

// trailOf is what a request's trail says, without timings or errors'
// identities: tier, attempt, member, hedge, class and skip of each entry.
func trailOf(res fallback.Summary) []string {
	var out []string
	for _, a := range res.Attempts() {
		out = append(out, fmt.Sprintf("%s/%d member=%s hedge=%v %s skip=%s", a.Tier, a.N, a.Member, a.Hedge, a.Verdict.Class, a.Skip))
	}
	return out
}

// observed is what observers see of a request's attempts: each
// AttemptEnded's tier, member, hedge, class and usage.
func observed(obs *events) []string {
	var out []string
	for _, e := range reported.Of[fallback.AttemptEnd](obs) {
		out = append(out, fmt.Sprintf("%s/%d member=%s hedge=%v %s tokens=%d", e.Stage.Tier, e.Attempt, e.Member, e.Hedge, e.Verdict.Class, e.Reply.Usage.InputTokens))
	}
	return out
}

// Wrapping a pool keeps what the pool reports: whichever wrappers stand
// around it (chaos.Tier, MapTier, ratelimit.Tier, in any order), the trail names each
// member, shows each rotation after a member's 429 as an upstream call,
// counts upstream calls as the members received them, and observers see
// the same attempts and usage as without the wrapper; a hedge on the
// wrapped pool goes to another member, as on the bare one.
func TestWrappedPoolKeepsItsMembers(t *testing.T) {
	var sw chaos.Switch
	limited := func(t fallback.ModelTier[string, string]) fallback.ModelTier[string, string] {
		lim, err := ratelimit.New(ratelimit.Config{Name: "pro", Requests: 1 << 30, Tokens: 1 << 40})
		if err != nil {
			panic(err)
		}
		return ratelimit.Tier(t, ratelimit.TierConfig[string]{Limiter: lim})
	}
	wrappers := map[string]func(fallback.ModelTier[string, string]) fallback.ModelTier[string, string]{
		"bare": func(t fallback.ModelTier[string, string]) fallback.ModelTier[string, string] { return t },
		"chaos": func(t fallback.ModelTier[string, string]) fallback.ModelTier[string, string] {
			return chaos.Tier(t, &sw)
		},
		"map": func(t fallback.ModelTier[string, string]) fallback.ModelTier[string, string] {
			return fallback.MapTier(t, strings.ToUpper)
		},
		"chaos(map)": func(t fallback.ModelTier[string, string]) fallback.ModelTier[string, string] {
			return chaos.Tier(fallback.MapTier(t, strings.ToUpper), &sw)
		},
		"map(chaos)": func(t fallback.ModelTier[string, string]) fallback.ModelTier[string, string] {
			return fallback.MapTier(chaos.Tier(t, &sw), strings.ToUpper)
		},
		"chaos(chaos(·))": func(t fallback.ModelTier[string, string]) fallback.ModelTier[string, string] {
			return chaos.Tier(chaos.Tier(t, &sw), &sw)
		},
		"limit": limited,
		"limit(chaos)": func(t fallback.ModelTier[string, string]) fallback.ModelTier[string, string] {
			return limited(chaos.Tier(t, &sw))
		},
		"map(limit)": func(t fallback.ModelTier[string, string]) fallback.ModelTier[string, string] {
			return fallback.MapTier(limited(t), strings.ToUpper)
		},
		"chaos(limit(map))": func(t fallback.ModelTier[string, string]) fallback.ModelTier[string, string] {
			return chaos.Tier(limited(fallback.MapTier(t, strings.ToUpper)), &sw)
		},
	}
	type run struct {
		trail, events []string
		calls, served int
	}
	rotation := func(t *testing.T, wrap func(fallback.ModelTier[string, string]) fallback.ModelTier[string, string]) run {
		var served atomic.Int64
		member := func(name string, limited bool) fallback.ModelTier[string, string] {
			return fallback.Tier(name, func(ctx context.Context, _ string) (string, error) {
				served.Add(1)
				if limited {
					return "", rateLimited(0)
				}
				fallback.Report(ctx, fallback.Reply{Usage: fallback.Usage{InputTokens: 42}, HasUsage: true})
				return "answer", nil
			})
		}
		thePool, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
			// The pool starts at b, then c: both answer 429, and a answers.
			{Key: "key-a", Tier: member("a", false)}, {Key: "key-b", Tier: member("b", true)}, {Key: "key-c", Tier: member("c", true)},
		}})
		require.NoError(t, err)
		var obs events
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: wrap(thePool), Retry: retry.Policy{MaxAttempts: 1}}, {Tier: newFake("flash", ok("flash"))},
		}, Observer: &obs})
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		require.Equal(t, "pro", res.Tier, "the pool's last member answered")
		return run{trail: trailOf(res.Summary), events: observed(&obs), calls: res.UpstreamCalls, served: int(served.Load())}
	}
	hedged := func(t *testing.T, wrap func(fallback.ModelTier[string, string]) fallback.ModelTier[string, string]) (r run) {
		synctest.Test(t, func(t *testing.T) {
			var n, served atomic.Int64
			member := func(name string) fallback.ModelTier[string, string] {
				return slowTier(name, &served, func() time.Duration {
					if n.Add(1) == 1 {
						return time.Second // the first call hangs; the hedge answers
					}
					return 10 * time.Millisecond
				})
			}
			thePool, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
				{Key: "key-a", Tier: member("a")}, {Key: "key-b", Tier: member("b")},
			}})
			require.NoError(t, err)
			var obs events
			c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
				{Tier: wrap(thePool), Hedge: fallback.Hedge{Delay: 100 * time.Millisecond, MaxExtra: 1}},
			}, Observer: &obs})
			res, err := c.Do(context.Background(), "q")
			require.NoError(t, err)
			synctest.Wait()
			r = run{trail: trailOf(res.Summary), events: observed(&obs), calls: res.UpstreamCalls, served: int(served.Load())}
		})
		return r
	}
	t.Run("rotation", func(t *testing.T) {
		want := rotation(t, wrappers["bare"])
		require.Len(t, want.trail, 3, "two 429s, then the answer: %v", want.trail)
		assert.Equal(t, 3, want.calls)
		assert.Equal(t, want.served, want.calls, "upstream calls as the members counted them")
		for name, wrap := range wrappers {
			assert.Equal(t, want, rotation(t, wrap), name)
		}
	})
	t.Run("hedge", func(t *testing.T) {
		want := hedged(t, wrappers["bare"])
		require.Len(t, want.trail, 2, "%v", want.trail)
		assert.Contains(t, want.trail[1], "hedge=true")
		assert.NotEqual(t, want.trail[0][strings.Index(want.trail[0], "member="):], want.trail[1][strings.Index(want.trail[1], "member="):], "the hedge went to the other member")
		assert.Equal(t, 2, want.calls)
		for name, wrap := range wrappers {
			assert.Equal(t, want, hedged(t, wrap), name)
		}
	})
}

// A server's retry delay outlasts the request that was told it when the
// 429s say the quota is spent for everyone: after a 429 naming a
// per-minute quota with RetryInfo of 30 s and a 10 s deadline, later
// requests skip the tier (or the pool's member whose key got the 429)
// without a call until the delay has passed — one upstream call per 30 s,
// not one per request — with no rate limiter attached, and the tier
// answers again once the server does. A storm of bare 429s takes it out
// once CoolDown.Count of them have come.
func TestServerRetryDelayIsHonouredAcrossRequests(t *testing.T) {
	// storm answers 429 with a 30 s delay for its first 65 s, and logs
	// the second of each call.
	storm := func(start time.Time, name string, calls *[]int) fallback.ModelTier[string, string] {
		var mu sync.Mutex
		return fallback.Tier(name, func(ctx context.Context, _ string) (string, error) {
			mu.Lock()
			*calls = append(*calls, int(time.Since(start)/time.Second))
			mu.Unlock()
			if time.Since(start) < 65*time.Second {
				return "", perMinute429(30 * time.Second)
			}
			return name, nil
		})
	}
	t.Run("bare 429s", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var proCalls []int
			start := time.Now()
			pro := fallback.Tier("pro", func(ctx context.Context, _ string) (string, error) {
				proCalls = append(proCalls, int(time.Since(start)/time.Second))
				if time.Since(start) < 65*time.Second {
					return "", rateLimited(30 * time.Second)
				}
				return "pro", nil
			})
			rec := &reported.Recorder{}
			c := newChain(t, fallback.Config[string, string]{Total: 10 * time.Second, Observer: rec, Stages: []fallback.Stage[string, string]{
				{Tier: pro}, {Tier: newFake("flash", ok("flash"))},
			}})
			for range 100 {
				_, err := c.Do(context.Background(), "q")
				require.NoError(t, err)
				time.Sleep(time.Second)
			}
			assert.Equal(t, []int{0, 1, 2, 32, 62, 92, 93, 94, 95, 96, 97, 98, 99}, proCalls,
				"three 429s in a row before the storm takes pro out, then one call per delay")
			var rules []fallback.CoolRule
			for _, e := range reported.Of[fallback.AttemptEnd](rec) {
				if e.Cooling != nil {
					rules = append(rules, e.Cooling.Rule)
				}
			}
			assert.Equal(t, []fallback.CoolRule{fallback.CoolStorm, fallback.CoolProbe, fallback.CoolProbe}, rules)
		})
	})
	t.Run("tier", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var proCalls []int
			c := newChain(t, fallback.Config[string, string]{Total: 10 * time.Second, Stages: []fallback.Stage[string, string]{
				{Tier: storm(time.Now(), "pro", &proCalls)}, {Tier: newFake("flash", ok("flash"))},
			}})
			skipped := 0
			for i := range 100 {
				res, err := c.Do(context.Background(), "q")
				require.NoError(t, err)
				if i < 90 {
					assert.Equal(t, "flash", res.Tier, "request %d: in the storm, or in its last delay", i)
				} else {
					assert.Equal(t, "pro", res.Tier, "request %d: back on the primary once the server is", i)
				}
				if a := res.Attempts(); a[0].Skip == fallback.SkipRateLimited {
					skipped++
					assert.Zero(t, a[0].N)
				}
				time.Sleep(time.Second)
			}
			assert.Equal(t, []int{0, 30, 60, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99}, proCalls,
				"one call per delay in the storm, then every request")
			assert.Equal(t, 100-13, skipped)
		})
	})
	t.Run("pool member", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var aCalls []int
			var bCalls atomic.Int64
			thePool, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
				{Key: "key-a", Tier: storm(time.Now(), "a", &aCalls)}, {Key: "key-b", Tier: slowTier("b", &bCalls, func() time.Duration { return 0 })},
			}})
			require.NoError(t, err)
			c := newChain(t, fallback.Config[string, string]{Total: 10 * time.Second, Stages: []fallback.Stage[string, string]{
				{Tier: thePool}, {Tier: newFake("flash", ok("flash"))},
			}})
			for i := range 60 {
				res, err := c.Do(context.Background(), "q")
				require.NoError(t, err)
				assert.Equal(t, "pro", res.Tier, "key b answers")
				if i == 10 {
					assert.Equal(t, pool.MemberCooling, thePool.Members()[0].Out, "key a cools down")
				}
				time.Sleep(time.Second)
			}
			require.Len(t, aCalls, 2, "key a, once per 30 s: %v", aCalls)
			assert.GreaterOrEqual(t, aCalls[1]-aCalls[0], 30)
			assert.Equal(t, pool.MemberIn, thePool.Members()[1].Out)
		})
	})
}

// A pool's rotation is told as it happens: the failed member call's
// AttemptEnded, then an AttemptStarted for the next member's call, before
// that call is made — each member call an attempt of its own in the
// events as in the trail.
func TestPoolRotationStartsAnAttempt(t *testing.T) {
	var calls atomic.Int32
	var seenBefore []string
	rec := &reported.Recorder{}
	member := fallback.Tier("pro", func(context.Context, string) (string, error) {
		seenBefore = append(seenBefore, strings.Join(rec.Names(), ","))
		if calls.Add(1) == 1 {
			return "", classify.Wrap(fmt.Errorf("429"), classify.Verdict{Class: classify.RateLimited, HTTPStatus: 429})
		}
		return "ok", nil
	})
	thePool, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
		{Key: "key-one", Tier: member}, {Key: "key-two", Tier: member},
	}})
	require.NoError(t, err)
	c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: thePool}}, Observer: rec})
	res, err := c.Do(context.Background(), "q")
	require.NoError(t, err)
	assert.Equal(t, []string{"request_started", "attempt_started", "attempt_ended", "attempt_started", "attempt_ended", "request_ended"}, rec.Names())
	assert.Equal(t, []string{"request_started,attempt_started", "request_started,attempt_started,attempt_ended,attempt_started"}, seenBefore)
	starts := reported.Of[fallback.AttemptStart](rec)
	ends := reported.Of[fallback.AttemptEnd](rec)
	assert.Equal(t, []int{1, 2}, []int{starts[0].Attempt, starts[1].Attempt})
	assert.Equal(t, []int{1, 2}, []int{ends[0].Attempt, ends[1].Attempt})
	assert.True(t, ends[0].Retry)
	assert.NotEqual(t, ends[0].Member, ends[1].Member)
	trail := res.Attempts()
	require.Len(t, trail, 2)
	assert.Equal(t, ends[0].Member, trail[0].Member)
	assert.Equal(t, ends[1].Member, trail[1].Member)
	assert.Equal(t, 2, res.UpstreamCalls)
}
