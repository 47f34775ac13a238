package otelx_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/otelx"
)

// A tier's panic still ends the request's span and brings the in-flight
// gauge back down; the panic reaches the caller.
func TestPanicEndsTheRequest(t *testing.T) {
	h := newHarness(t)
	boom := fallback.Tier("pro", func(context.Context, string) (string, error) { panic("tier exploded") })
	c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: boom, Model: "gemini-2.5-pro"}}})
	instrument(t, c, h.options())
	assert.Panics(t, func() { _, _ = c.Do(context.Background(), "q") })

	active := ints(t, findMetric(t, h.collect(t), otelx.MetricActiveRequests))
	for _, v := range active {
		assert.Zero(t, v)
	}
	spans := h.spansNamed("tierguard generate_content")
	require.NotEmpty(t, spans)
	var ended bool
	for _, s := range spans {
		if s.Parent().IsValid() {
			continue
		}
		ended = true
		assert.Equal(t, codes.Error, s.Status().Code)
		assert.NotContains(t, s.Status().Description, "tier exploded")
	}
	assert.True(t, ended, "the request span ended")
}

func TestGroupsAreWatchedAsMembersAppear(t *testing.T) {
	h := newHarness(t)
	inst, err := otelx.New(h.options())
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Close() })

	bg, err := breaker.NewGroup(breaker.Config{Name: "gemini", KeysInNames: true}, 8)
	require.NoError(t, err)
	hg, err := bulkhead.NewGroup(bulkhead.Config{Name: "tenant", Max: 2}, 8)
	require.NoError(t, err)
	bg.Get("pro")
	inst.WatchBreakerGroup(bg)
	inst.WatchBulkheadGroup(hg)
	bg.Get("flash").ForceOpen()
	require.True(t, hg.Get("acme").TryAcquire())

	rm := h.collect(t)
	states := ints(t, findMetric(t, rm, otelx.MetricBreakerState))
	assert.Equal(t, int64(2), states[kv(otelx.AttrBreaker.String("gemini/flash"))])
	assert.Contains(t, states, kv(otelx.AttrBreaker.String("gemini/pro")))
	accepted := ints(t, findMetric(t, rm, otelx.MetricBulkheadAccepted))
	assert.Equal(t, int64(1), accepted[kv(otelx.AttrBulkhead.String(hg.Get("acme").Name()))])
	assert.Equal(t, "tenant/#822b33ad87c1", hg.Get("acme").Name(), "a tenant key reaches metrics hashed")
}

// Close detaches the Instrumentation from its chain.
func TestCloseDetaches(t *testing.T) {
	h := newHarness(t)
	c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: newTier("pro", ok("x"))}}})
	inst := instrument(t, c, h.options())
	require.NoError(t, inst.Close())
	allocs := testing.AllocsPerRun(100, func() { _, _ = c.Do(context.Background(), "q") })
	assert.Zero(t, allocs, "a detached chain is back on its allocation-free path")
}
