package otelx

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tierguard/tierguard/fallback"
)

// spanAttrs returns the attributes of the recorded spans, one map per
// span, in the order they ended.
func spanAttrs(rec *tracetest.SpanRecorder) []map[attribute.Key]attribute.Value {
	var out []map[attribute.Key]attribute.Value
	for _, s := range rec.Ended() {
		m := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			m[kv.Key] = kv.Value
		}
		out = append(out, m)
	}
	return out
}

// TestSpanBufferGoesBackWhenTheRequestSpanEnds pins the pooled buffer of
// a request's span attributes: a request gives it back when its span
// ends, the next request's spans carry only their own attributes, and a
// buffer an attempt span still uses stays with the request.
func TestSpanBufferGoesBackWhenTheRequestSpanEnds(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	inst, err := New(Options{TracerProvider: tp})
	require.NoError(t, err)
	chain := &fallback.ChainInfo{Operation: "answer", Stages: []fallback.StageInfo{{Operation: "answer", Tier: "pro", Model: "m"}}}
	st := &chain.Stages[0]

	t.Run("released", func(t *testing.T) {
		ctx := fallback.WithRequest(context.Background(), fallback.Request{ID: "r-1"})
		r := inst.RequestStarted(ctx, fallback.RequestStart{Chain: chain}).(*reqState)
		require.NotNil(t, r.opened, "a recording request has a buffer")
		actx := inst.AttemptStarted(r, fallback.AttemptStart{Stage: st, Model: "m", Attempt: 1})
		inst.AttemptEnded(actx, fallback.AttemptEnd{Stage: st, Model: "m", Attempt: 1, Member: "#m1"})
		inst.RequestEnded(r, fallback.RequestEnd{Chain: chain, Stage: st, Answered: true, UpstreamCalls: 1})
		assert.Nil(t, r.opened, "given back with the request span")

		// The next request, most likely on the same buffer, carries no
		// attribute of the first.
		r2 := inst.RequestStarted(context.Background(), fallback.RequestStart{Chain: chain}).(*reqState)
		actx2 := inst.AttemptStarted(r2, fallback.AttemptStart{Stage: st, Model: "m", Attempt: 1})
		inst.AttemptEnded(actx2, fallback.AttemptEnd{Stage: st, Model: "m", Attempt: 1})
		inst.RequestEnded(r2, fallback.RequestEnd{Chain: chain, Stage: st, Answered: true, UpstreamCalls: 1})
		spans := spanAttrs(rec)
		require.Len(t, spans, 4)
		assert.Equal(t, "r-1", spans[1][KeyRequestID].AsString(), "the first request's span")
		assert.Equal(t, "#m1", spans[0][attrMember].AsString(), "the first attempt's span")
		for _, s := range spans[2:] {
			assert.NotContains(t, s, KeyRequestID)
			assert.NotContains(t, s, attrMember)
		}
	})

	t.Run("kept by an open attempt span", func(t *testing.T) {
		r := inst.RequestStarted(context.Background(), fallback.RequestStart{Chain: chain}).(*reqState)
		actx := inst.AttemptStarted(r, fallback.AttemptStart{Stage: st, Model: "m", Attempt: 1})
		buf := r.opened
		inst.RequestEnded(r, fallback.RequestEnd{Chain: chain})
		assert.Same(t, buf, r.opened, "the attempt span's buffer stays")
		inst.AttemptEnded(actx, fallback.AttemptEnd{Stage: st, Model: "m", Attempt: 1, Member: "#m2"})
		spans := spanAttrs(rec)
		assert.Equal(t, "#m2", spans[len(spans)-1][attrMember].AsString())
	})
}
