package otelx

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/tierguard/tierguard/fallback"
)

// TestRequestStateFitsItsSizeClass: every observed request allocates its
// state, so its size is part of the observed path's cost: 128 bytes, one
// of the allocator's size classes, with the labels out of line.
func TestRequestStateFitsItsSizeClass(t *testing.T) {
	assert.LessOrEqual(t, unsafe.Sizeof(reqState{}), uintptr(128))
}

// A request without labels shares the read-only noLabels; one with labels
// gets its own, and leaves noLabels empty for the next.
func TestRequestLabelsAreTheRequestsOwn(t *testing.T) {
	inst, err := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MetricAttributes: []attribute.Key{KeyScenario, "feature"}})
	require.NoError(t, err)
	chain := &fallback.ChainInfo{Operation: "answer"}
	labelled := WithAttributes(fallback.WithRequest(context.Background(), fallback.Request{ID: "r-1", Scenario: "support"}), attribute.String("feature", "faq"))

	for range 2 {
		a := inst.RequestStarted(labelled, fallback.RequestStart{Chain: chain}).(*reqState)
		b := inst.RequestStarted(context.Background(), fallback.RequestStart{Chain: chain}).(*reqState)

		assert.NotSame(t, &noLabels, a.reqLabels)
		assert.Equal(t, "r-1", a.id)
		assert.Equal(t, "support", a.scenario)
		assert.Equal(t, []attribute.KeyValue{KeyScenario.String("support"), attribute.String("feature", "faq")}, a.extra)
		assert.Same(t, &noLabels, b.reqLabels)
		assert.Equal(t, reqLabels{}, noLabels, "noLabels is never written")
		inst.RequestEnded(a, fallback.RequestEnd{Chain: chain})
		inst.RequestEnded(b, fallback.RequestEnd{Chain: chain})
	}
}
