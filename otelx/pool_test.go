package otelx_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/pool"
	"github.com/tierguard/tierguard/otelx"
)

// TestPoolMembersAreNamedHashed: attempts on a pool name the member by its
// hashed id — on the attempts metric, the attempt span and the log — never
// by its key, and a member refused for its credentials logs at Error.
func TestPoolMembersAreNamedHashed(t *testing.T) {
	h := newHarness(t)
	revoked := fallback.Tier("pro", func(context.Context, string) (string, error) {
		return "", classify.Wrap(errors.New("API key not valid"), classify.Verdict{Class: classify.Auth, HTTPStatus: 400, Reason: "api key invalid"})
	})
	thePool, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
		{Key: "AIzaSy-revoked-secret", Tier: revoked},
		{Key: "AIzaSy-good-secret", Tier: newTier("pro", ok("answer"))},
	}})
	require.NoError(t, err)
	c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: thePool}}})
	instrument(t, c, h.options())
	// Least in flight, round the members: the second request starts on the
	// revoked key at the latest.
	for range 2 {
		_, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
	}
	rm := h.collect(t)
	got := ints(t, findMetric(t, rm, otelx.MetricAttempts))
	members := thePool.Members()
	assert.Equal(t, int64(1), got[kv(opAttr, proTier, otelx.AttrClass.String("auth"), otelx.AttrMember.String(members[0].ID))])
	assert.Equal(t, int64(2), got[kv(opAttr, proTier, otelx.AttrClass.String("ok"), otelx.AttrMember.String(members[1].ID))])
	errs := h.logsWith(t, "tierguard: pool member refused for its credentials, taken out of rotation")
	require.Len(t, errs, 1)
	assert.Equal(t, "ERROR", errs[0]["level"])
	assert.Equal(t, members[0].ID, errs[0]["member"])
	all := h.logs.String()
	for _, s := range h.spans.Ended() {
		for _, a := range s.Attributes() {
			all += a.Value.String()
		}
	}
	assert.NotContains(t, all, "secret", "no key reaches a signal")
	assert.True(t, strings.Contains(all, members[0].ID))
}

// TestPoolRotationHasASpanOfItsOwn: a member's call that fails and sends
// the attempt to the next member is an attempt span of its own, and the
// next member's call runs under the next attempt's span — two sibling
// client spans under the request's, the first ended before the second
// began.
func TestPoolRotationHasASpanOfItsOwn(t *testing.T) {
	h := newHarness(t)
	// Whichever member is called first is over its rate limit.
	var calls atomic.Int32
	var under trace.SpanContext
	member := fallback.Tier("pro", func(ctx context.Context, _ string) (string, error) {
		if calls.Add(1) == 1 {
			return "", classify.Wrap(errors.New("429"), classify.Verdict{Class: classify.RateLimited, HTTPStatus: 429, Reason: "per-minute rate limit"})
		}
		under = trace.SpanContextFromContext(ctx)
		return "answer", nil
	})
	thePool, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
		{Key: "key-one", Tier: member},
		{Key: "key-two", Tier: member},
	}})
	require.NoError(t, err)
	c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: thePool}}})
	instrument(t, c, h.options())
	res, err := c.Do(context.Background(), "q")
	require.NoError(t, err)
	require.Len(t, res.Attempts(), 2)

	ids := []string{thePool.Members()[0].ID, thePool.Members()[1].ID}
	var root trace.SpanContext
	for _, s := range h.spans.Ended() {
		if !s.Parent().IsValid() {
			root = s.SpanContext()
		}
	}
	require.True(t, root.IsValid())
	var attempts []sdktrace.ReadOnlySpan
	for _, s := range h.spans.Ended() {
		if s.SpanKind() == trace.SpanKindClient {
			assert.Equal(t, root.SpanID(), s.Parent().SpanID(), "attempts are siblings under the request")
			attempts = append(attempts, s)
		}
	}
	require.Len(t, attempts, 2)
	first, second := spanAttrs(attempts[0]), spanAttrs(attempts[1])
	assert.Equal(t, int64(1), first[otelx.AttrAttempt].AsInt64())
	assert.Equal(t, "rate_limited", first[otelx.AttrClass].AsString())
	assert.Equal(t, int64(2), second[otelx.AttrAttempt].AsInt64())
	assert.ElementsMatch(t, ids, []string{first[otelx.AttrMember].AsString(), second[otelx.AttrMember].AsString()})
	assert.Equal(t, attempts[1].SpanContext().SpanID(), under.SpanID(), "the next member's call runs under its own attempt span")
	assert.False(t, attempts[0].EndTime().After(attempts[1].StartTime()))
}
