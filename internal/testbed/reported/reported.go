// Package reported tells what a tier reports to the chain it runs in
// (fallback.Report), for the tests of tiers: the SDK adapters', the test
// bed's REST client's.
package reported

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/retry"
)

// Call calls tier once for in, inside a one-stage chain without retries,
// and returns its answer and what its response reported.
func Call[In, Out any](t testing.TB, tier fallback.ModelTier[In, Out], in In) (Out, fallback.Reply) {
	t.Helper()
	var rep fallback.Reply
	c, err := fallback.New(fallback.Config[In, Out]{
		Stages: []fallback.Stage[In, Out]{{Tier: tier, Retry: retry.Policy{MaxAttempts: 1}}},
		Observer: fallback.ObserverFunc(func(ctx context.Context, e fallback.Event) context.Context {
			if e.Kind == fallback.AttemptEnded {
				rep = fallback.Reply{Usage: e.Usage, HasUsage: e.HasUsage, Response: e.Response}
			}
			return ctx
		}),
	})
	require.NoError(t, err)
	res, err := c.Do(context.Background(), in)
	require.NoError(t, err)
	return res.Value, rep
}
