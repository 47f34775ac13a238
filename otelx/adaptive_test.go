package otelx_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/otelx"
)

// A watched adaptive bulkhead exports its limit as it moves, its calls in
// flight, and, with priorities, its refusals by priority; a bulkhead
// without priorities gets no such series.
func TestAdaptiveBulkheadExported(t *testing.T) {
	h := newHarness(t)
	inst, err := otelx.New(h.options())
	require.NoError(t, err)
	defer inst.Close()
	b, err := bulkhead.New(bulkhead.Config{Name: "pro", Max: 10, Reserve: 0.1,
		Adaptive: &bulkhead.Adaptive{Floor: 2, Ceiling: 20, Window: 1}})
	require.NoError(t, err)
	plain, err := bulkhead.New(bulkhead.Config{Name: "flash", Max: 4})
	require.NoError(t, err)
	inst.WatchBulkhead(b)
	inst.WatchBulkhead(plain)

	for range 3 {
		b.Record(0, bulkhead.Overload) // 10 → 9 → 8.1 → 7.29
	}
	free := bulkhead.WithPriority(context.Background(), bulkhead.Sheddable)
	batch := bulkhead.WithPriority(context.Background(), bulkhead.Batch)
	for b.Acquire(free) == nil {
	}
	require.Error(t, b.Acquire(free))
	require.NoError(t, b.Acquire(batch))
	require.Error(t, b.Acquire(batch))

	rm := h.collect(t)
	pro := kv(otelx.AttrBulkhead.String("pro"))
	assert.Equal(t, int64(7), ints(t, findMetric(t, rm, otelx.MetricBulkheadLimit))[pro])
	assert.Equal(t, int64(5), ints(t, findMetric(t, rm, otelx.MetricBulkheadInFlight))[pro], "7 less three shares of 1: 4 free, then 1 batch")
	byPriority := ints(t, findMetric(t, rm, otelx.MetricBulkheadRejectedPriority))
	assert.Equal(t, map[string]int64{
		kv(otelx.AttrBulkhead.String("pro"), otelx.AttrPriority.String("critical")):    0,
		kv(otelx.AttrBulkhead.String("pro"), otelx.AttrPriority.String("interactive")): 0,
		kv(otelx.AttrBulkhead.String("pro"), otelx.AttrPriority.String("batch")):       1,
		kv(otelx.AttrBulkhead.String("pro"), otelx.AttrPriority.String("sheddable")):   2,
	}, byPriority, "no series for flash, which has no priorities")
	for range 5 {
		b.Release()
	}
}
