package otelx_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/pool"
	"github.com/tierguard/tierguard/fallback/route"
	"github.com/tierguard/tierguard/otelx"
)

// TestInstrumentRouterWatchesEveryRoute: one call instruments every
// route's chain: requests on each route are counted, and each route's
// breakers are watched.
func TestInstrumentRouterWatchesEveryRoute(t *testing.T) {
	h := newHarness(t)
	brk := func(name string) *breaker.Breaker {
		b, err := breaker.New(breaker.Config{Name: name})
		require.NoError(t, err)
		return b
	}
	r, err := route.New(route.Config[string, string]{Routes: []route.Route[string, string]{
		{Scenario: "support", Candidates: []route.Candidate[string, string]{{Stage: fallback.Stage[string, string]{Tier: newTier("pro", ok("pro")), Breaker: brk("support-pro")}}}},
		{Scenario: "batch", Candidates: []route.Candidate[string, string]{{Stage: fallback.Stage[string, string]{Tier: newTier("flash", ok("flash")), Breaker: brk("batch-flash")}}}},
	}})
	require.NoError(t, err)
	require.Len(t, r.Chains(), 2)
	inst, err := otelx.InstrumentRouter(r, h.options())
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Close() })
	for _, sc := range []string{"support", "batch"} {
		_, err := r.Do(fallback.WithRequest(context.Background(), fallback.Request{Scenario: sc}), "q")
		require.NoError(t, err)
	}
	rm := h.collect(t)
	var requests int64
	for _, n := range ints(t, findMetric(t, rm, otelx.MetricRequests)) {
		requests += n
	}
	assert.Equal(t, int64(2), requests, "both routes' requests are counted")
	states := ints(t, findMetric(t, rm, otelx.MetricBreakerState))
	assert.Contains(t, states, kv(otelx.AttrBreaker.String("support-pro")))
	assert.Contains(t, states, kv(otelx.AttrBreaker.String("batch-flash")))
}

// TestOneInstrumentationOverUnaryAndStreamRoutes: InstrumentRouter and
// AttachRouter put a unary router and a stream router under one
// Instrumentation: both kinds of request are counted, and the breakers
// of both are watched.
func TestOneInstrumentationOverUnaryAndStreamRoutes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		unary, err := route.New(route.Config[string, string]{Routes: []route.Route[string, string]{
			{Scenario: "support", Candidates: []route.Candidate[string, string]{{Stage: fallback.Stage[string, string]{Tier: newTier("pro", ok("pro")), Breaker: newBreaker(t, breaker.Config{Name: "pro"})}}}},
		}})
		require.NoError(t, err)
		streams, err := route.NewStream(route.StreamConfig[string, chunk]{Base: fallback.StreamConfig[string, chunk]{Operation: "chat"}, Routes: []route.StreamRoute[string, chunk]{
			{Scenario: "support", Candidates: []route.StreamCandidate[string, chunk]{{Stage: fallback.StreamStage[string, chunk]{
				Tier: streamTier("flash", 0, []chunk{{text: "a"}, {text: "b", finish: "STOP"}}, nil), Breaker: newBreaker(t, breaker.Config{Name: "flash"})}}}},
		}})
		require.NoError(t, err)
		inst, err := otelx.InstrumentRouter(unary, h.options())
		require.NoError(t, err)
		t.Cleanup(func() { _ = inst.Close() })
		otelx.AttachRouter(inst, streams)

		ctx := fallback.WithRequest(context.Background(), fallback.Request{Tenant: "acme", Scenario: "support"})
		_, err = unary.Do(ctx, "q")
		require.NoError(t, err)
		s, err := streams.Stream(ctx, "q")
		require.NoError(t, err)
		for _, err := range s.Chunks() {
			require.NoError(t, err)
		}

		rm := h.collect(t)
		chat, answered := otelx.AttrOperation.String("chat"), otelx.AttrSource.String("tier")
		assert.Equal(t, map[string]int64{
			kv(opAttr, answered, proTier, otelx.AttrDegraded.Bool(false)): 1,
			kv(chat, answered, flashTier, otelx.AttrDegraded.Bool(false)): 1,
		}, nonZero(ints(t, findMetric(t, rm, otelx.MetricRequests))), "one request of each kind, no tenant")
		states := ints(t, findMetric(t, rm, otelx.MetricBreakerState))
		assert.Contains(t, states, kv(otelx.AttrBreaker.String("pro")))
		assert.Contains(t, states, kv(otelx.AttrBreaker.String("flash")))
	})
}

// TestPoolMembersBreakersAreWatchedWithTheirStage: instrumenting a chain
// whose stage is a pool — wrapped, here, in MapTier — watches the members'
// own breakers with it.
func TestPoolMembersBreakersAreWatchedWithTheirStage(t *testing.T) {
	h := newHarness(t)
	ba, err := breaker.New(breaker.Config{Name: "pro-key-a"})
	require.NoError(t, err)
	bb, err := breaker.New(breaker.Config{Name: "pro-key-b"})
	require.NoError(t, err)
	keys, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
		{Key: "key-a", Tier: newTier("pro", ok("a")), Breaker: ba},
		{Key: "key-b", Tier: newTier("pro", ok("b")), Breaker: bb},
	}})
	require.NoError(t, err)
	c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
		{Tier: fallback.MapTier(keys, func(s string) string { return s })},
	}})
	assert.Equal(t, []*breaker.Breaker{ba, bb}, c.Stages()[0].MemberBreakers)
	instrument(t, c, h.options())
	states := ints(t, findMetric(t, h.collect(t), otelx.MetricBreakerState))
	assert.Contains(t, states, kv(otelx.AttrBreaker.String("pro-key-a")))
	assert.Contains(t, states, kv(otelx.AttrBreaker.String("pro-key-b")))
}
