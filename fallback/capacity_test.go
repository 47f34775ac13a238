package fallback_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/pool"
	"github.com/tierguard/tierguard/fallback/ratelimit"
	"github.com/tierguard/tierguard/internal/testbed/reported"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

func newLimiter(t testing.TB, cfg ratelimit.Config) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(cfg)
	require.NoError(t, err)
	return l
}

func rateLimited(after time.Duration) error {
	return classify.Wrap(errors.New("429"), classify.Verdict{Class: classify.RateLimited, HTTPStatus: 429, RetryAfter: after, Reason: "scripted"})
}

// perMinute429 is a 429 whose details named a per-minute quota, as
// Gemini's do (classify's tests read it from real payloads): evidence
// that the key's quota is spent for every caller.
func perMinute429(after time.Duration) error {
	return classify.Wrap(errors.New("429"), classify.Verdict{Class: classify.RateLimited, PerMinute: true, HTTPStatus: 429, RetryAfter: after, Reason: "scripted"})
}

// TestOverTheLimitSkipsWithoutACall: a tier over its local limit is
// skipped without an upstream call — SkipRateLimited in the trail — and
// the next tier answers.
func TestOverTheLimitSkipsWithoutACall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pro, flash := newFake("pro", ok("pro")), newFake("flash", ok("flash"))
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: ratelimit.Tier(pro, ratelimit.TierConfig[string]{Limiter: newLimiter(t, ratelimit.Config{Name: "pro", Requests: 20, Burst: 2})})},
			{Tier: flash},
		}})
		var tiers []string
		for range 5 {
			res, err := c.Do(context.Background(), "q")
			require.NoError(t, err)
			tiers = append(tiers, res.Tier)
		}
		assert.Equal(t, []string{"pro", "pro", "flash", "flash", "flash"}, tiers)
		assert.Equal(t, int64(2), pro.calls.Load())
		res, _ := c.Do(context.Background(), "q")
		a := res.Attempts()
		require.Len(t, a, 2)
		assert.Equal(t, fallback.SkipRateLimited, a[0].Skip)
		assert.Equal(t, "rate_limited", a[0].Skip.String())
		assert.ErrorIs(t, a[0].Err, ratelimit.ErrLimited)
		assert.Equal(t, classify.Rejected, a[0].Verdict.Class)
		time.Sleep(20 * time.Second) // 18 a minute: one back every 3.33 s
		res, _ = c.Do(context.Background(), "q")
		assert.Equal(t, "pro", res.Tier)
	})
}

// TestLimitWaitIsDecidedLikeARetry: a tier that allows waiting waits for
// its turn when the wait fits what the deadline leaves after the reserve,
// and skips at once, without waiting, when it does not.
func TestLimitWaitIsDecidedLikeARetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pro, flash := newFake("pro", ok("pro")), newFake("flash", ok("flash"))
		lim := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 61, Burst: 1}) // one a second
		var obs reported.Recorder
		waits := func() []time.Duration {
			var out []time.Duration
			for _, e := range reported.Of[fallback.AttemptEnd](&obs) {
				if e.Stage.Tier == "pro" {
					out = append(out, e.LimitWait)
				}
			}
			return out
		}
		c := newChain(t, fallback.Config[string, string]{
			Stages: []fallback.Stage[string, string]{
				{Tier: ratelimit.Tier(pro, ratelimit.TierConfig[string]{Limiter: lim, MaxWait: 5 * time.Second})},
				{Tier: flash, MinAttempt: 200 * time.Millisecond},
			},
			Observer: &obs,
		})
		do := func(total time.Duration) (fallback.Result[string], time.Duration) {
			ctx, cancel := context.WithTimeout(context.Background(), total)
			defer cancel()
			start := time.Now()
			res, err := c.Do(ctx, "q")
			require.NoError(t, err)
			return res, time.Since(start)
		}
		res, took := do(3 * time.Second)
		assert.Equal(t, "pro", res.Tier)
		assert.Zero(t, took)
		res, took = do(3 * time.Second)
		assert.Equal(t, "pro", res.Tier, "a second's wait fits 3 s")
		assert.Equal(t, time.Second, took)
		res, took = do(1100 * time.Millisecond)
		assert.Equal(t, "flash", res.Tier, "1 s + the flash reserve does not fit 1.1 s")
		assert.Zero(t, took, "decided before waiting")
		assert.Equal(t, fallback.SkipRateLimited, res.Attempts()[0].Skip)
		assert.Equal(t, []time.Duration{0, time.Second}, waits())
	})
}

// TestRateLimitedThrottlesTheTier: a 429 with a retry delay holds the
// tier's limiter: later requests skip it without a call until the delay
// has passed, and the rate is lowered.
func TestRateLimitedThrottlesTheTier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pro := newFake("pro", ok("pro"), step{err: rateLimited(30 * time.Second)})
		flash := newFake("flash", ok("flash"))
		lim := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 600})
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: ratelimit.Tier(pro, ratelimit.TierConfig[string]{Limiter: lim}), Retry: retry.Policy{MaxAttempts: 1}}, {Tier: flash},
		}})
		for range 10 {
			res, err := c.Do(context.Background(), "q")
			require.NoError(t, err)
			assert.Equal(t, "flash", res.Tier)
		}
		assert.Equal(t, int64(1), pro.calls.Load(), "one 429, then no call during its delay")
		assert.Equal(t, 2.0, lim.Stats().Slowdown)
		time.Sleep(30 * time.Second)
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "pro", res.Tier)
	})
}

// reportingTier reports a usage of 1,000 tokens with each answer.
type reportingTier struct{ *fake }

func (u reportingTier) Call(ctx context.Context, in string) (string, error) {
	out, err := u.fake.Call(ctx, in)
	if err == nil {
		fallback.Report(ctx, fallback.Reply{Usage: fallback.Usage{InputTokens: 400, OutputTokens: 600}, HasUsage: true})
	}
	return out, err
}

// TestTokenEstimateIsCorrectedByUsage: a call is admitted on its estimate
// and the limiter is corrected with the usage the answer reports.
func TestTokenEstimateIsCorrectedByUsage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := newLimiter(t, ratelimit.Config{Name: "pro", Tokens: 100_000, TokenBurst: 10_000})
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: ratelimit.Tier(reportingTier{newFake("pro", ok("x"))}, ratelimit.TierConfig[string]{Limiter: lim}), Tokens: func(q string) int64 { return int64(len(q)) }},
		}})
		_, err := c.Do(context.Background(), strings.Repeat("x", 300))
		require.NoError(t, err)
		assert.InDelta(t, 9_000, lim.Stats().Tokens, 1, "the real 1,000 tokens, not the estimated 300")
		_, err = c.Do(context.Background(), strings.Repeat("x", 10_001))
		var fe *fallback.Error
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, fallback.SkipTooLarge, fe.Tiers[0].Skip, "an estimate above the burst is never admitted")
		assert.ErrorIs(t, err, fallback.ErrTooLarge)
	})
}

type tenantKey struct{}

// TestTenantCannotSpendAnothersShare: per-tenant limiters on a tier let a
// tenant over its share fall back without a call, while another tenant
// is still served by the tier.
func TestTenantCannotSpendAnothersShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		group, err := ratelimit.NewGroup(ratelimit.Config{Name: "pro-tenant", Requests: 30, Burst: 3}, 100)
		require.NoError(t, err)
		pro, flash := newFake("pro", ok("pro")), newFake("flash", ok("flash"))
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: ratelimit.Tier(pro, ratelimit.TierConfig[string]{Limiter: newLimiter(t, ratelimit.Config{Name: "pro", Requests: 1000}),
				PerRequest: func(ctx context.Context, _ string) *ratelimit.Limiter {
					return group.Get(ctx.Value(tenantKey{}).(string))
				}})},
			{Tier: flash},
		}})
		from := func(tenant string) string {
			res, err := c.Do(context.WithValue(context.Background(), tenantKey{}, tenant), "q")
			require.NoError(t, err)
			return res.Tier
		}
		for range 3 {
			assert.Equal(t, "pro", from("noisy"))
		}
		assert.Equal(t, "flash", from("noisy"), "noisy spent its share")
		assert.Equal(t, "pro", from("quiet"), "quiet still has its own")
		assert.Equal(t, int64(4), pro.calls.Load())
	})
}

// TestRateLimitedSuccessAllocatesOnce: the success path with a tier
// limiter (requests and tokens) and a tenant limiter allocates one call
// record, which carries the usage the tier reports back to correct the
// token estimate (through any wrapper of the tier).
func TestRateLimitedSuccessAllocatesOnce(t *testing.T) {
	lim := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 1 << 30, Tokens: 1 << 40})
	tenant := newLimiter(t, ratelimit.Config{Name: "tenant", Requests: 1 << 30})
	c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{
		Tier: ratelimit.Tier(newFake("pro", ok("x")), ratelimit.TierConfig[string]{Limiter: lim,
			PerRequest: func(context.Context, string) *ratelimit.Limiter { return tenant }}),
		Breaker: newBreaker(t, breaker.Config{Name: "pro"}), Bulkhead: newBulkhead(t, "pro", 8),
		Tokens: func(q string) int64 { return int64(len(q)) },
	}}})
	assert.Equal(t, 1.0, testing.AllocsPerRun(500, func() { _, _ = c.Do(context.Background(), "q") }))
}

// TestInvalidOutputRetriesTheSameTier: with InvalidOutputRetries, a
// rejected answer is asked again on the same tier with the adjusted
// prompt; the retries are in the trail and never count against the
// breaker; when they run out the next tier answers.
func TestInvalidOutputRetriesTheSameTier(t *testing.T) {
	var prompts []string
	fixable := true
	pro := fallback.Tier("pro", func(_ context.Context, q string) (string, error) {
		prompts = append(prompts, q)
		if fixable && len(prompts) == 3 {
			return `{"ok":true}`, nil
		}
		return "not json", nil
	})
	br := newBreaker(t, breaker.Config{Name: "pro", ConsecutiveFailures: 1})
	c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
		{Tier: pro, Breaker: br, Validate: validate.JSON(), InvalidOutputRetries: 2,
			Reprompt: func(q string, err error) string { return q + " Answer in valid JSON!" }},
		{Tier: newFake("flash", ok(`{"flash":true}`))},
	}})
	res, err := c.Do(context.Background(), "q")
	require.NoError(t, err)
	assert.Equal(t, "pro", res.Tier)
	assert.Equal(t, []string{"q", "q Answer in valid JSON!", "q Answer in valid JSON! Answer in valid JSON!"}, prompts)
	a := res.Attempts()
	require.Len(t, a, 3)
	assert.Equal(t, classify.InvalidOutput, a[0].Verdict.Class)
	assert.Equal(t, 3, a[2].N)
	assert.Equal(t, breaker.Closed, br.State(), "invalid answers never count")
	prompts, fixable = nil, false
	res, err = c.Do(context.Background(), "again")
	require.NoError(t, err)
	assert.Equal(t, "flash", res.Tier, "two retries, then the next tier")
	assert.Len(t, prompts, 3)
}

// keyTier is one API key of a pool: it answers, or fails with err.
func keyTier(name string, calls *atomic.Int64, err func() error) fallback.ModelTier[string, string] {
	return fallback.Tier(name, func(context.Context, string) (string, error) {
		calls.Add(1)
		if err != nil {
			if e := err(); e != nil {
				return "", e
			}
		}
		return name, nil
	})
}

func authErr() error {
	return classify.Wrap(errors.New("API key not valid"), classify.Verdict{Class: classify.Auth, HTTPStatus: 400, Reason: "scripted"})
}

// TestPoolRotatesKeysBeforeTheNextTier: a pool of three keys, one revoked
// and one rate-limited: every request is answered from the thePool, the next
// tier is never called, the revoked key is reported once and taken out,
// the rate-limited one throttled, and the trail names members by hash.
func TestPoolRotatesKeysBeforeTheNextTier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var revoked, limited, good, flashCalls atomic.Int64
		lim := newLimiter(t, ratelimit.Config{Name: "key-b", Requests: 1000})
		thePool, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
			{Key: "AIza-revoked-key", Tier: keyTier("a", &revoked, authErr)},
			{Key: "AIza-limited-key", Tier: keyTier("b", &limited, func() error { return rateLimited(10 * time.Second) }), Limiter: lim},
			{Key: "AIza-good-key", Tier: keyTier("c", &good, nil)},
		}})
		require.NoError(t, err)
		var events []pool.MemberEvent
		defer thePool.Observe(func(e pool.MemberEvent) { events = append(events, e) })()
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: thePool, Retry: retry.Policy{MaxAttempts: 1}}, {Tier: keyTier("flash", &flashCalls, nil)},
		}})
		var members []string
		for range 30 {
			res, err := c.Do(context.Background(), "q")
			require.NoError(t, err)
			assert.Equal(t, "pro", res.Tier)
			for _, a := range res.Attempts() {
				members = append(members, a.Member)
				assert.NotContains(t, a.Member, "AIza")
			}
		}
		assert.Zero(t, flashCalls.Load(), "the next tier is never touched")
		assert.Equal(t, int64(1), revoked.Load(), "the revoked key is called once, then out")
		assert.Equal(t, int64(1), limited.Load(), "the rate-limited key is held for its delay")
		assert.Equal(t, int64(30), good.Load())
		require.Len(t, events, 1)
		assert.Equal(t, pool.MemberAuth, events[0].Out)
		assert.Regexp(t, `^#[0-9a-f]{12}$`, events[0].Member)
		assert.Contains(t, members, events[0].Member)
		out := map[pool.MemberOut]int{}
		for _, m := range thePool.Members() {
			out[m.Out]++
		}
		assert.Equal(t, 1, out[pool.MemberAuth])
		assert.True(t, thePool.Restore(events[0].Member))
		assert.Equal(t, pool.MemberIn, thePool.Members()[0].Out)
	})
}

// TestPoolAuthOnEveryMemberFailsClosed: when every member's credentials
// are refused, the request fails closed with Auth, as a single tier's
// would — now and for later requests, without a call.
func TestPoolAuthOnEveryMemberFailsClosed(t *testing.T) {
	var a, b, flash atomic.Int64
	thePool, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
		{Key: "k1", Tier: keyTier("a", &a, authErr)}, {Key: "k2", Tier: keyTier("b", &b, authErr)},
	}})
	require.NoError(t, err)
	c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: thePool}, {Tier: keyTier("flash", &flash, nil)}}})
	for range 2 {
		_, err := c.Do(context.Background(), "q")
		var fe *fallback.Error
		require.ErrorAs(t, err, &fe)
		assert.True(t, fe.FailedClosed)
		assert.Equal(t, classify.Auth, fe.Cause.Class)
	}
	assert.Equal(t, int64(1), a.Load())
	assert.Equal(t, int64(1), b.Load())
	assert.Zero(t, flash.Load())
}

// TestPoolStickyAndQuota: requests with the same key go to the same
// member; a member whose quota is exhausted is parked and its keys move.
func TestPoolStickyAndQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls [3]atomic.Int64
		var quotaFor atomic.Value
		quotaFor.Store("")
		members := make([]pool.Member[string, string], 3)
		for i := range members {
			name := string(rune('a' + i))
			members[i] = pool.Member[string, string]{Key: "key-" + name, Tier: keyTier(name, &calls[i], func() error {
				if quotaFor.Load() == name {
					return classify.Wrap(errors.New("429"), classify.Verdict{Class: classify.QuotaExhausted, HTTPStatus: 429})
				}
				return nil
			})}
		}
		thePool, err := pool.New(pool.Config[string, string]{Name: "pro", Members: members, Sticky: func(q string) string { return q }})
		require.NoError(t, err)
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: thePool}}})
		first, err := c.Do(context.Background(), "conversation-7")
		require.NoError(t, err)
		for range 10 {
			res, err := c.Do(context.Background(), "conversation-7")
			require.NoError(t, err)
			assert.Equal(t, first.Value, res.Value, "sticky")
		}
		quotaFor.Store(first.Value)
		res, err := c.Do(context.Background(), "conversation-7")
		require.NoError(t, err, "the next member answers at once")
		assert.NotEqual(t, first.Value, res.Value)
		assert.Len(t, res.Attempts(), 2)
		moved := res.Value
		for range 5 {
			res, err := c.Do(context.Background(), "conversation-7")
			require.NoError(t, err)
			assert.Equal(t, moved, res.Value, "its member is parked: the key stays where it moved")
		}
		parked := 0
		for _, m := range thePool.Members() {
			if m.Out == pool.MemberQuota {
				parked++
			}
		}
		assert.Equal(t, 1, parked)
	})
}

// slowTier answers after d, or when its context ends.
func slowTier(name string, calls *atomic.Int64, d func() time.Duration) fallback.ModelTier[string, string] {
	return fallback.Tier(name, func(ctx context.Context, _ string) (string, error) {
		calls.Add(1)
		select {
		case <-time.After(d()):
			return name, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
}

// TestHedgeOnTheNextTier: a primary slower than the hedge delay gets a
// hedge on the next tier; the first answer wins, the loser is cancelled,
// its breaker counts nothing, its bulkhead slot comes back when it
// returns, and the trail shows both calls.
func TestHedgeOnTheNextTier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var proCalls, flashCalls atomic.Int64
		slow := atomic.Bool{}
		pro := slowTier("pro", &proCalls, func() time.Duration {
			if slow.Load() {
				return 5 * time.Second
			}
			return 100 * time.Millisecond
		})
		flash := slowTier("flash", &flashCalls, func() time.Duration { return 200 * time.Millisecond })
		proBr := newBreaker(t, breaker.Config{Name: "pro", ConsecutiveFailures: 1})
		proBh := newBulkhead(t, "pro", 4)
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: pro, Breaker: proBr, Bulkhead: proBh, Hedge: fallback.Hedge{Delay: 300 * time.Millisecond, MaxExtra: 1}},
			{Tier: flash, Breaker: newBreaker(t, breaker.Config{Name: "flash", ConsecutiveFailures: 1})},
		}})
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "pro", res.Tier, "fast: no hedge")
		assert.Equal(t, 1, res.UpstreamCalls)
		slow.Store(true)
		start := time.Now()
		res, err = c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "flash", res.Tier)
		assert.True(t, res.Degraded)
		assert.Equal(t, 500*time.Millisecond, time.Since(start), "hedged at 300 ms, answered 200 ms later")
		assert.Equal(t, 2, res.UpstreamCalls)
		a := res.Attempts()
		require.Len(t, a, 2)
		assert.Equal(t, "pro", a[0].Tier)
		assert.Equal(t, classify.Canceled, a[0].Verdict.Class)
		assert.Equal(t, "flash", a[1].Tier)
		synctest.Wait()
		assert.Zero(t, proBh.Stats().InFlight, "the loser gave its slot back when it returned")
		assert.Equal(t, breaker.Closed, proBr.State(), "a lost race counts for nothing")
		assert.Equal(t, int64(1), flashCalls.Load())
	})
}

// TestHedgeBudgetBoundsExtraCalls: hedges never exceed MaxExtra of the
// tier's attempts (plus the bank it starts with), however slow the
// primary.
func TestHedgeBudgetBoundsExtraCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var proCalls, flashCalls atomic.Int64
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: slowTier("pro", &proCalls, func() time.Duration { return time.Second }), Hedge: fallback.Hedge{Delay: 100 * time.Millisecond, MaxExtra: 0.1}},
			{Tier: slowTier("flash", &flashCalls, func() time.Duration { return 10 * time.Millisecond })},
		}})
		for range 100 {
			_, err := c.Do(context.Background(), "q")
			require.NoError(t, err)
		}
		assert.Equal(t, int64(100), proCalls.Load())
		assert.LessOrEqual(t, flashCalls.Load(), int64(30), "a tenth of 100 attempts, and the bank of twenty")
		assert.GreaterOrEqual(t, flashCalls.Load(), int64(28))
	})
}

// TestHedgeOnAnotherMemberAtAQuantile: a pool stage hedges on another
// member once the first call has run longer than the tier's observed
// 90th percentile.
func TestHedgeOnAnotherMemberAtAQuantile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var aCalls, bCalls, n, k atomic.Int64
		// Fast calls take 20–99 ms; a is slow one call in five, b never is.
		fast := func() time.Duration { return time.Duration(20+k.Add(1)*7919%80) * time.Millisecond }
		slowA := func() time.Duration {
			if n.Add(1)%5 == 0 {
				return 2 * time.Second
			}
			return fast()
		}
		thePool, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
			{Key: "a", Tier: slowTier("a", &aCalls, slowA)}, {Key: "b", Tier: slowTier("b", &bCalls, fast)},
		}})
		require.NoError(t, err)
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: thePool, Hedge: fallback.Hedge{Quantile: 0.9, Delay: 10 * time.Millisecond, MaxExtra: 0.2}},
		}})
		var worst time.Duration
		for i := range 300 {
			start := time.Now()
			res, err := c.Do(context.Background(), "q")
			require.NoError(t, err)
			assert.Equal(t, "pro", res.Tier)
			if i >= 50 {
				// Once the quantile has learnt the latencies.
				worst = max(worst, time.Since(start))
			}
		}
		assert.Less(t, worst, time.Second, "every slow call was hedged")
		assert.LessOrEqual(t, aCalls.Load()+bCalls.Load(), int64(300*1.2+5))
	})
}

// TestHedgeSettingsAreChecked: invalid hedge settings are refused with
// the others, each named.
func TestHedgeSettingsAreChecked(t *testing.T) {
	_, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
		{Tier: newFake("pro", ok("x")), Hedge: fallback.Hedge{Delay: time.Second, Quantile: 2}, InvalidOutputRetries: -1},
	}})
	require.Error(t, err)
	for _, f := range []string{"Hedge.Quantile", "InvalidOutputRetries"} {
		assert.Contains(t, err.Error(), f)
	}
}

// TestHedgeWithNowhereToGo: a hedge goes to another member of the tier
// when its call names one (a thePool, however wrapped), or else to the next
// tier; on the last tier of plain calls it never starts, and the slow call
// is simply waited for.
func TestHedgeWithNowhereToGo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: slowTier("pro", &calls, func() time.Duration { return time.Second }), Hedge: fallback.Hedge{Delay: 100 * time.Millisecond, MaxExtra: 1}},
		}})
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "pro", res.Tier)
		assert.Equal(t, int64(1), calls.Load())
		assert.Equal(t, 1, res.UpstreamCalls)
	})
}

// TestStreamTierIsRateLimited: a streaming tier over its limit is skipped
// without a call and the next tier streams; the usage a stream reports at
// its end corrects the token estimate.
func TestStreamTierIsRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := newLimiter(t, ratelimit.Config{Name: "pro", Requests: 11, Burst: 1, Tokens: 1000, TokenBurst: 100})
		pro := &streamFake{name: "pro", def: streamScript{chunks: words("a", "b"), finishing: true}}
		flash := &streamFake{name: "flash", def: streamScript{chunks: words("c"), finishing: true}}
		c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{
			{Tier: ratelimit.StreamTier(usageTier{pro.tier()}, ratelimit.TierConfig[string]{Limiter: lim}), Tokens: func(string) int64 { return 50 }},
			{Tier: flash.tier()},
		}})
		text, err := collect(c.Stream(context.Background(), "q"))
		require.NoError(t, err)
		assert.Equal(t, "ab", text)
		assert.InDelta(t, 90, lim.Stats().Tokens, 1e-3, "the stream's 10 tokens, not the estimated 50")
		s := c.Stream(context.Background(), "q")
		text, err = collect(s)
		require.NoError(t, err)
		assert.Equal(t, "c", text)
		assert.Equal(t, fallback.SkipRateLimited, s.Result().Attempts()[0].Skip)
		assert.Equal(t, int64(1), pro.calls.Load())
	})
}

// TestHedgeLosersReleaseTheirGuards: whichever call loses a hedged race —
// the first call or the hedge — its bulkhead slot and breaker token come
// back when it returns, and nothing is left running.
func TestHedgeLosersReleaseTheirGuards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var proCalls, flashCalls atomic.Int64
		proSlow, flashSlow := atomic.Bool{}, atomic.Bool{}
		lat := func(slow *atomic.Bool) func() time.Duration {
			return func() time.Duration {
				if slow.Load() {
					return 2 * time.Second
				}
				return 50 * time.Millisecond
			}
		}
		proBh, flashBh := newBulkhead(t, "pro", 4), newBulkhead(t, "flash", 4)
		proBr := newBreaker(t, breaker.Config{Name: "pro", ConsecutiveFailures: 1, Cooldown: time.Minute})
		flashBr := newBreaker(t, breaker.Config{Name: "flash", ConsecutiveFailures: 1, Cooldown: time.Minute})
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: slowTier("pro", &proCalls, lat(&proSlow)), Bulkhead: proBh, Breaker: proBr, Hedge: fallback.Hedge{Delay: 100 * time.Millisecond, MaxExtra: 1}},
			{Tier: slowTier("flash", &flashCalls, lat(&flashSlow)), Bulkhead: flashBh, Breaker: flashBr},
		}})
		for _, slow := range []*atomic.Bool{&proSlow, &flashSlow} {
			proSlow.Store(false)
			flashSlow.Store(false)
			slow.Store(true)
			for range 3 {
				// Fill the hedge budget: one hedge per attempt at MaxExtra 1.
				_, err := c.Do(context.Background(), "q")
				require.NoError(t, err)
			}
			synctest.Wait()
			assert.Zero(t, proBh.Stats().InFlight)
			assert.Zero(t, flashBh.Stats().InFlight)
		}
		assert.Equal(t, breaker.Closed, proBr.State())
		assert.Equal(t, breaker.Closed, flashBr.State(), "a hedge that lost counts for nothing")
		assert.Positive(t, flashCalls.Load())
	})
}

// recoveringTier fails while failing is set, then answers after latency,
// ignoring its context (a hedge's cancellation does not stop it).
func recoveringTier(name string, calls *atomic.Int64, failing *atomic.Bool, latency time.Duration) fallback.ModelTier[string, string] {
	return fallback.Tier(name, func(context.Context, string) (string, error) {
		calls.Add(1)
		if failing.Load() {
			return "", classErr(classify.Transient)
		}
		time.Sleep(latency)
		return name, nil
	})
}

// TestHedgeLosingProbeKeepsItsSlot: a half-open probe whose call loses a
// hedged race and ignores its cancellation is still a probe in flight
// until it returns: the next request may not start a second probe
// (HalfOpenProbes holds), and once the loser returns the slot is free.
func TestHedgeLosingProbeKeepsItsSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var proCalls, flashCalls atomic.Int64
		failing := atomic.Bool{}
		failing.Store(true)
		pro := recoveringTier("pro", &proCalls, &failing, 2*time.Second)
		flash := slowTier("flash", &flashCalls, func() time.Duration { return 50 * time.Millisecond })
		proBr := newBreaker(t, breaker.Config{Name: "pro", ConsecutiveFailures: 1, Cooldown: time.Second, HalfOpenProbes: 1})
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: pro, Breaker: proBr, Retry: retry.Policy{MaxAttempts: 1}, Hedge: fallback.Hedge{Delay: 100 * time.Millisecond, MaxExtra: 1}},
			{Tier: flash},
		}})
		_, err := c.Do(context.Background(), "trip")
		require.NoError(t, err)
		require.Equal(t, breaker.Open, proBr.State())
		failing.Store(false)
		time.Sleep(1500 * time.Millisecond)
		require.Equal(t, breaker.HalfOpen, proBr.State())

		res, err := c.Do(context.Background(), "probe")
		require.NoError(t, err)
		assert.Equal(t, "flash", res.Tier, "the hedge won the probe's race")
		require.Equal(t, int64(2), proCalls.Load())

		res, err = c.Do(context.Background(), "while the loser runs")
		require.NoError(t, err)
		assert.Equal(t, "flash", res.Tier)
		assert.Equal(t, fallback.SkipOpen, res.Attempts()[0].Skip, "the losing probe still holds the only probe slot")
		assert.Equal(t, int64(2), proCalls.Load(), "no second probe while the first runs")

		time.Sleep(3 * time.Second) // the loser returns
		synctest.Wait()
		_, err = c.Do(context.Background(), "after")
		require.NoError(t, err)
		assert.Equal(t, int64(3), proCalls.Load(), "the slot came back when the loser returned")
		time.Sleep(3 * time.Second)
		synctest.Wait()
	})
}

// TestHedgeLosingProbeOnAPoolCountsTheTiersAnswer: when the race is lost
// to another member of the same thePool, the tier did answer: the probe left
// running reports a success when it returns, and the breaker closes.
func TestHedgeLosingProbeOnAPoolCountsTheTiersAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var aCalls, bCalls atomic.Int64
		failing := atomic.Bool{}
		failing.Store(true)
		a := recoveringTier("a", &aCalls, &failing, 2*time.Second)
		b := recoveringTier("b", &bCalls, &failing, 50*time.Millisecond)
		thePool, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{{Key: "a", Tier: a}, {Key: "b", Tier: b}}})
		require.NoError(t, err)
		proBr := newBreaker(t, breaker.Config{Name: "pro", ConsecutiveFailures: 1, Cooldown: time.Second, HalfOpenProbes: 1})
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: thePool, Breaker: proBr, Retry: retry.Policy{MaxAttempts: 1}, Hedge: fallback.Hedge{Delay: 100 * time.Millisecond, MaxExtra: 1}},
		}, Default: func(context.Context, string) (string, bool) { return "default", true }})
		_, _ = c.Do(context.Background(), "trip")
		require.Equal(t, breaker.Open, proBr.State())
		failing.Store(false)
		time.Sleep(1500 * time.Millisecond)
		require.Equal(t, breaker.HalfOpen, proBr.State())
		before := aCalls.Load() + bCalls.Load()

		res, err := c.Do(context.Background(), "probe")
		require.NoError(t, err)
		require.Equal(t, fallback.SourceTier, res.Source)
		assert.Equal(t, 2, res.UpstreamCalls, "the first member's call and the hedge on the other")
		assert.Equal(t, breaker.HalfOpen, proBr.State(), "the probe's call still runs")
		res, err = c.Do(context.Background(), "while the loser runs")
		require.NoError(t, err)
		assert.Equal(t, fallback.SourceDefault, res.Source, "no second probe while the first runs")
		assert.Equal(t, before+2, aCalls.Load()+bCalls.Load())

		time.Sleep(3 * time.Second) // the loser returns, with the tier's success
		synctest.Wait()
		assert.Equal(t, breaker.Closed, proBr.State())
	})
}

// TestHedgedCallPanicReachesTheCaller: a panic in either call of a hedged
// attempt runs on a goroutine of the chain's; it is raised again on the
// caller's goroutine as a *PanicError with the stack where it happened,
// and every guard comes back (the first call's once it returns).
func TestHedgedCallPanicReachesTheCaller(t *testing.T) {
	for _, who := range []string{"first call", "hedge"} {
		t.Run(who, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				proBh, flashBh := newBulkhead(t, "pro", 2), newBulkhead(t, "flash", 2)
				proBr := newBreaker(t, breaker.Config{Name: "pro", ConsecutiveFailures: 1})
				pro := fallback.Tier("pro", func(ctx context.Context, _ string) (string, error) {
					if who == "first call" {
						time.Sleep(200 * time.Millisecond)
						panic("tier exploded")
					}
					time.Sleep(time.Second) // ignores its context
					return "pro", nil
				})
				flash := fallback.Tier("flash", func(context.Context, string) (string, error) {
					if who == "hedge" {
						panic("tier exploded")
					}
					time.Sleep(time.Second)
					return "flash", nil
				})
				c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
					{Tier: pro, Bulkhead: proBh, Breaker: proBr, Hedge: fallback.Hedge{Delay: 100 * time.Millisecond, MaxExtra: 1}},
					{Tier: flash, Bulkhead: flashBh},
				}})
				assertCarriedPanic(t, "tier exploded", func() { _, _ = c.Do(context.Background(), "q") })
				time.Sleep(2 * time.Second)
				synctest.Wait()
				assert.Zero(t, proBh.Stats().InFlight)
				assert.Zero(t, flashBh.Stats().InFlight)
				assert.Equal(t, breaker.Closed, proBr.State(), "a panic decides nothing")
			})
		})
	}
}

// doTimed runs c on "q" within a 10 s deadline and says how long it took.
func doTimed(t *testing.T, c *fallback.Chain[string, string]) (fallback.Result[string], time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	res, err := c.Do(ctx, "q")
	require.NoError(t, err)
	return res, time.Since(start)
}

// TestHedgedAttemptAbandonsAStuckCall: with AbandonAfter, a hedged
// attempt whose calls ignore their context ends AbandonAfter after its
// window, as an unhedged one does; the stuck first call is counted and
// keeps its slot until it returns, and the hedge gives back its own.
func TestHedgedAttemptAbandonsAStuckCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		never := make(chan struct{})
		stuck := func(name string) fallback.ModelTier[string, string] {
			return fallback.Tier(name, func(context.Context, string) (string, error) {
				<-never
				return name, nil
			})
		}
		proBh, flashBh := newBulkhead(t, "pro", 2), newBulkhead(t, "flash", 2)
		c := newChain(t, fallback.Config[string, string]{
			Stages: []fallback.Stage[string, string]{
				{Tier: stuck("pro"), Bulkhead: proBh, Retry: retry.Policy{MaxAttempts: 1}, TryTimeout: 300 * time.Millisecond, Hedge: fallback.Hedge{Delay: 100 * time.Millisecond, MaxExtra: 1}},
				{Tier: stuck("flash"), Bulkhead: flashBh, Retry: retry.Policy{MaxAttempts: 1}, TryTimeout: 200 * time.Millisecond},
			},
			Default:      func(context.Context, string) (string, bool) { return "default", true },
			AbandonAfter: 50 * time.Millisecond,
		})
		res, took := doTimed(t, c)
		assert.Equal(t, "default", res.Value)
		assert.Equal(t, 600*time.Millisecond, took, "each window, then AbandonAfter")
		a := res.Attempts()
		require.Len(t, a, 3)
		assert.True(t, a[0].Hedge, "the hedge on flash, left behind with the first call")
		assert.ErrorIs(t, a[0].Err, fallback.ErrAbandoned)
		assert.Equal(t, "pro", a[1].Tier)
		assert.ErrorIs(t, a[1].Err, fallback.ErrAbandoned)
		assert.Equal(t, fallback.Stats{Abandoned: 2, Stuck: 2}, c.Stats(), "pro's first call and flash's own call")
		assert.Equal(t, 1, proBh.Stats().InFlight, "the stuck call keeps its slot")
		assert.Equal(t, 2, flashBh.Stats().InFlight, "the hedge and flash's own call")
		close(never)
		synctest.Wait()
		assert.Equal(t, fallback.Stats{Abandoned: 2}, c.Stats())
		assert.Zero(t, proBh.Stats().InFlight)
		assert.Zero(t, flashBh.Stats().InFlight)
	})
}

// TestPoolMemberStaysHeldByAStuckCall: a pool member whose call ignores
// its context and is abandoned stays in flight until the call returns,
// and its breaker's probe stays taken; a member whose call panics is
// released.
func TestPoolMemberStaysHeldByAStuckCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		never := make(chan struct{})
		var aCalls atomic.Int64
		a := fallback.Tier("a", func(context.Context, string) (string, error) {
			if aCalls.Add(1) == 1 {
				panic("tier exploded")
			}
			<-never
			return "a", nil
		})
		thePool, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{{Key: "a", Tier: a}}})
		require.NoError(t, err)
		c := newChain(t, fallback.Config[string, string]{
			Stages:       []fallback.Stage[string, string]{{Tier: thePool, Retry: retry.Policy{MaxAttempts: 1}, TryTimeout: 100 * time.Millisecond}},
			Default:      func(context.Context, string) (string, bool) { return "default", true },
			AbandonAfter: 50 * time.Millisecond,
		})
		inFlight := func() int { return thePool.Members()[0].InFlight }

		assert.Panics(t, func() { _, _ = c.Do(context.Background(), "q") })
		assert.Zero(t, inFlight(), "a panic releases the member")

		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "default", res.Value)
		assert.Equal(t, 1, inFlight(), "the stuck call still holds its member")
		close(never)
		synctest.Wait()
		assert.Zero(t, inFlight(), "released when the call returned")
	})
}

// TestHedgeWonAfterTheFirstCallFailed: a first call that fails while its
// hedge runs still counts that failure for its tier (breaker and trail),
// though the hedge answers the request.
func TestHedgeWonAfterTheFirstCallFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pro := fallback.Tier("pro", func(context.Context, string) (string, error) {
			time.Sleep(150 * time.Millisecond)
			return "", classErr(classify.Transient)
		})
		var flashCalls atomic.Int64
		flash := slowTier("flash", &flashCalls, func() time.Duration { return 100 * time.Millisecond })
		proBr := newBreaker(t, breaker.Config{Name: "pro", ConsecutiveFailures: 1, Cooldown: time.Minute})
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: pro, Breaker: proBr, Retry: retry.Policy{MaxAttempts: 1}, Hedge: fallback.Hedge{Delay: 100 * time.Millisecond, MaxExtra: 1}},
			{Tier: flash},
		}})
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "flash", res.Tier, "the hedge answered")
		assert.Equal(t, int64(1), flashCalls.Load())
		a := res.Attempts()
		require.Len(t, a, 2)
		assert.Equal(t, "pro", a[0].Tier)
		assert.Equal(t, classify.Transient, a[0].Verdict.Class, "the first call's own failure, not a lost race")
		assert.Equal(t, breaker.Open, proBr.State(), "pro's failure counted")
	})
}

// TestHedgeOutlivesTheFirstCallsWindowWithAbandonAfter: with
// AbandonAfter, a hedge that runs past the end of the first call's window
// is not cut short when that window ends: it has a window of its own.
func TestHedgeOutlivesTheFirstCallsWindowWithAbandonAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var proCalls, flashCalls atomic.Int64
		c := newChain(t, fallback.Config[string, string]{
			Stages: []fallback.Stage[string, string]{
				{Tier: slowTier("pro", &proCalls, func() time.Duration { return time.Hour }), Retry: retry.Policy{MaxAttempts: 1}, TryTimeout: 300 * time.Millisecond,
					Hedge: fallback.Hedge{Delay: 100 * time.Millisecond, MaxExtra: 1}},
				{Tier: slowTier("flash", &flashCalls, func() time.Duration { return 500 * time.Millisecond })},
			},
			AbandonAfter: 50 * time.Millisecond,
		})
		res, took := doTimed(t, c)
		assert.Equal(t, "flash", res.Tier)
		assert.Equal(t, 600*time.Millisecond, took, "the hedge's own answer, after pro's window ended")
		assert.Equal(t, int64(1), flashCalls.Load(), "answered by the hedge, not by flash's own stage")
		assert.Equal(t, fallback.Stats{}, c.Stats(), "nothing abandoned")
	})
}

// TestStuckHedgeIsAbandonedAfterTheFirstCallFailed: once the first call
// has failed, a hedge that ignores its context is abandoned AbandonAfter
// after its own window, and the first call's failure stands.
func TestStuckHedgeIsAbandonedAfterTheFirstCallFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		never := make(chan struct{})
		pro := fallback.Tier("pro", func(context.Context, string) (string, error) {
			time.Sleep(150 * time.Millisecond)
			return "", classErr(classify.Transient)
		})
		flashBh := newBulkhead(t, "flash", 2)
		flash := fallback.Tier("flash", func(context.Context, string) (string, error) {
			<-never
			return "flash", nil
		})
		c := newChain(t, fallback.Config[string, string]{
			Stages: []fallback.Stage[string, string]{
				{Tier: pro, Retry: retry.Policy{MaxAttempts: 1}, Hedge: fallback.Hedge{Delay: 100 * time.Millisecond, MaxExtra: 1}},
				{Tier: flash, Bulkhead: flashBh, Retry: retry.Policy{MaxAttempts: 1}, TryTimeout: 200 * time.Millisecond},
			},
			Default:      func(context.Context, string) (string, bool) { return "default", true },
			AbandonAfter: 50 * time.Millisecond,
		})
		res, took := doTimed(t, c)
		assert.Equal(t, "default", res.Value)
		assert.Equal(t, 600*time.Millisecond, took, "the hedge's window (100+200 ms) and AbandonAfter, then flash's own")
		a := res.Attempts()
		require.Len(t, a, 3)
		assert.True(t, a[0].Hedge)
		assert.ErrorIs(t, a[0].Err, fallback.ErrAbandoned)
		assert.Equal(t, classify.Transient, a[1].Verdict.Class, "pro's own failure stands")
		close(never)
		synctest.Wait()
		assert.Zero(t, flashBh.Stats().InFlight)
	})
}

// TestHedgeEndsWithTheCaller: a caller that gives up ends both calls of a
// hedged attempt; none is left behind.
func TestHedgeEndsWithTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var proCalls, flashCalls atomic.Int64
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: slowTier("pro", &proCalls, func() time.Duration { return time.Hour }), Hedge: fallback.Hedge{Delay: 10 * time.Millisecond, MaxExtra: 1}},
			{Tier: slowTier("flash", &flashCalls, func() time.Duration { return time.Hour })},
		}})
		_, _ = c.Do(context.Background(), "warm") // earns the budget; answers after an hour
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := c.Do(ctx, "q")
		require.Error(t, err)
		synctest.Wait()
		assert.Equal(t, int64(2), flashCalls.Load(), "both requests hedged")
	})
}

// TestPoolWeightedSpreadsByWeight: with Weighted balance calls spread over
// the members in proportion to their weights.
func TestPoolWeightedSpreadsByWeight(t *testing.T) {
	var a, b atomic.Int64
	thePool, err := pool.New(pool.Config[string, string]{Name: "pro", Balance: pool.Weighted, Members: []pool.Member[string, string]{
		{Key: "a", Tier: keyTier("a", &a, nil), Weight: 3}, {Key: "b", Tier: keyTier("b", &b, nil), Weight: 1},
	}})
	require.NoError(t, err)
	c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: thePool}}})
	for range 4000 {
		_, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
	}
	assert.InDelta(t, 3000, a.Load(), 200)
	assert.InDelta(t, 1000, b.Load(), 200)
	assert.Equal(t, "weighted", pool.Weighted.String())
}

// TestPoolLatencyAwarePrefersTheFasterMember: with LatencyAware, members
// are weighed by their observed latency: concurrent requests go mostly to
// the faster region.
func TestPoolLatencyAwarePrefersTheFasterMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var near, far atomic.Int64
		thePool, err := pool.New(pool.Config[string, string]{Name: "pro", LatencyAware: true, Members: []pool.Member[string, string]{
			{Key: "near", Tier: slowTier("near", &near, func() time.Duration { return 10 * time.Millisecond })},
			{Key: "far", Tier: slowTier("far", &far, func() time.Duration { return 100 * time.Millisecond })},
		}})
		require.NoError(t, err)
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: thePool}}})
		done := make(chan struct{})
		for range 4 {
			go func() {
				defer func() { done <- struct{}{} }()
				for range 50 {
					_, _ = c.Do(context.Background(), "q")
				}
			}()
		}
		for range 4 {
			<-done
		}
		assert.Greater(t, near.Load(), 3*far.Load(), "near %d, far %d", near.Load(), far.Load())
	})
}

// TestPoolCalledOnItsOwn: outside a chain, a pool's Call rotates past a
// rate-limited member and a revoked one, and fails with Auth once every
// member is refused.
func TestPoolCalledOnItsOwn(t *testing.T) {
	var a, b, c atomic.Int64
	thePool, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
		{Key: "a", Tier: keyTier("a", &a, func() error { return rateLimited(time.Second) })},
		{Key: "b", Tier: keyTier("b", &b, authErr)},
		{Key: "c", Tier: keyTier("c", &c, nil)},
	}})
	require.NoError(t, err)
	for range 3 {
		out, err := thePool.Call(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "c", out)
	}
	all, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
		{Key: "x", Tier: keyTier("x", &a, authErr)},
	}})
	require.NoError(t, err)
	_, err = all.Call(context.Background(), "q")
	assert.Equal(t, classify.Auth, classify.Classify(err).Class)
	_, err = all.Call(context.Background(), "q")
	assert.Equal(t, classify.Auth, classify.Classify(err).Class, "out of rotation: refused without a call")
	_, err = pool.New(pool.Config[string, string]{Members: []pool.Member[string, string]{{Key: "k"}, {Key: "k"}}})
	require.Error(t, err)
	for _, f := range []string{"Name", "Tier is required", "used twice"} {
		assert.Contains(t, err.Error(), f)
	}
	assert.NotContains(t, err.Error(), `"k"`, "keys stay out of errors")
}

// TestHedgeOnALimitedNextTierTakesItsTurn: a hedge on the next tier goes
// through that tier's rate limit like any call: over the limit, the hedge
// makes no upstream call and the first call's answer stands.
func TestHedgeOnALimitedNextTierTakesItsTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var proCalls, flashCalls atomic.Int64
		pro := slowTier("pro", &proCalls, func() time.Duration { return time.Second })
		flash := slowTier("flash", &flashCalls, func() time.Duration { return 10 * time.Millisecond })
		lim := newLimiter(t, ratelimit.Config{Name: "flash", Requests: 61, Burst: 1}) // one a second
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: pro, Hedge: fallback.Hedge{Delay: 100 * time.Millisecond, MaxExtra: 1}},
			{Tier: ratelimit.Tier(flash, ratelimit.TierConfig[string]{Limiter: lim})},
		}})
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "flash", res.Tier, "the hedge had a turn and answered first")
		res, err = c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "pro", res.Tier, "no turn for the second hedge: the first call answers")
		assert.Equal(t, int64(1), flashCalls.Load(), "the refused hedge made no upstream call")
		assert.Equal(t, 1, res.UpstreamCalls)
		synctest.Wait()
	})
}
