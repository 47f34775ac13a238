package otelx_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
