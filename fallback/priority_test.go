package fallback_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/fallback"
)

// The request's context carries its priority, set once with the rest of
// who is asking, to bulkheads that cannot know of Request; reading it
// allocates nothing.
func TestRequestCarriesPriority(t *testing.T) {
	ctx := fallback.WithRequest(context.Background(), fallback.Request{Tenant: "t1", Priority: bulkhead.Batch})
	assert.Equal(t, bulkhead.Batch, bulkhead.PriorityFrom(ctx))
	assert.Equal(t, bulkhead.Batch, fallback.RequestFrom(ctx).Priority)
	assert.Equal(t, "t1", fallback.RequestFrom(ctx).Tenant)
	assert.Equal(t, bulkhead.Interactive, bulkhead.PriorityFrom(fallback.WithRequest(context.Background(), fallback.Request{})))
	assert.NotContains(t, ctx.(interface{ String() string }).String(), "t1", "a tenant never reaches a log through a context")
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = bulkhead.PriorityFrom(ctx) }))
	// Other keys go to the parent.
	type k struct{}
	inner := context.WithValue(context.Background(), k{}, 7)
	assert.Equal(t, 7, fallback.WithRequest(inner, fallback.Request{}).Value(k{}))
}

// At a bulkhead with a Reserve, a lower priority is refused first and
// falls to the next tier as any bulkhead refusal does (SkipFull), while a
// higher one still gets the tier.
func TestPriorityRefusalFallsToNextTier(t *testing.T) {
	b, err := bulkhead.New(bulkhead.Config{Name: "pro", Max: 4, Reserve: 0.25})
	require.NoError(t, err)
	require.NoError(t, b.Acquire(context.Background())) // Interactive: 3 of 4, Sheddable: 1
	pro := fallback.Tier("pro", func(context.Context, string) (string, error) { return "pro", nil })
	flash := fallback.Tier("flash", func(context.Context, string) (string, error) { return "flash", nil })
	chain, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: pro, Bulkhead: b}, {Tier: flash}}})
	require.NoError(t, err)

	free := fallback.WithRequest(context.Background(), fallback.Request{Priority: bulkhead.Sheddable})
	res, err := chain.Do(free, "q")
	require.NoError(t, err)
	assert.Equal(t, "flash", res.Value)
	assert.Equal(t, fallback.SkipFull, res.Attempts()[0].Skip)

	paying := fallback.WithRequest(context.Background(), fallback.Request{Priority: bulkhead.Interactive})
	res, err = chain.Do(paying, "q")
	require.NoError(t, err)
	assert.Equal(t, "pro", res.Value)
	b.Release()
}
