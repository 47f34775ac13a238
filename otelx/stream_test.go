package otelx_test

import (
	"context"
	"io"
	"iter"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/otelx"
	"github.com/tierguard/tierguard/retry"
)

type chunk struct {
	text, finish string
}

// streamTier streams chunks 10ms apart, then ends with err (nil for a
// clean end).
func streamTier(name string, first time.Duration, chunks []chunk, err error) fallback.StreamTier[string, chunk] {
	return fallback.StreamTierFunc(name, func(ctx context.Context, _ string) iter.Seq2[chunk, error] {
		return func(yield func(chunk, error) bool) {
			time.Sleep(first)
			for _, c := range chunks {
				if !yield(c, nil) {
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err != nil {
				yield(chunk{}, err)
			}
		}
	}, func(c chunk) fallback.ChunkInfo { return fallback.ChunkInfo{Text: c.text, FinishReason: c.finish} })
}

func drain(s *fallback.Stream[string, chunk]) (n int, err error) {
	for _, e := range s.Chunks() {
		if e != nil {
			return n, e
		}
		n++
	}
	return n, nil
}

// A stream: the primary fails before its first chunk, the fallback
// commits; another request's stream breaks after two chunks and fails for
// its caller.
func TestStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		answer := []chunk{{text: "a"}, {text: "b"}, {text: "c", finish: "STOP"}}
		c, err := fallback.NewStream(fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{
			{Tier: streamTier("pro", 0, nil, http503()), Model: "gemini-2.5-pro", Provider: "gcp.gemini", Retry: retry.Policy{MaxAttempts: 1}},
			{Tier: streamTier("flash", 300*time.Millisecond, answer, nil), Model: "gemini-2.5-flash", Provider: "gcp.gemini"},
		}})
		require.NoError(t, err)
		broken, err := fallback.NewStream(fallback.StreamConfig[string, chunk]{Operation: "chat", Stages: []fallback.StreamStage[string, chunk]{
			{Tier: streamTier("pro", 50*time.Millisecond, answer[:2], io.ErrUnexpectedEOF), Model: "gemini-2.5-pro", Provider: "gcp.gemini"},
		}})
		require.NoError(t, err)
		inst := instrument(t, c, h.options())
		inst.Attach(broken)

		s := c.Stream(context.Background(), "q")
		n, err := drain(s)
		require.NoError(t, err)
		require.Equal(t, 3, n)
		require.Equal(t, "flash", s.Result().Tier)
		n, err = drain(broken.Stream(context.Background(), "q"))
		require.ErrorIs(t, err, fallback.ErrIncomplete)
		require.Equal(t, 2, n)

		rm := h.collect(t)
		m := findMetric(t, rm, otelx.MetricTimeToFirstChunk)
		assert.Equal(t, "s", m.Unit)
		ttfc := hist(t, m)
		got := ttfc[kv(opAttr, gemini, flashModel, flashTier)]
		assert.Equal(t, uint64(1), got.Count)
		assert.InDelta(t, 0.3, got.Sum, 1e-9)
		assert.Equal(t, wantDurationBuckets, got.Bounds, "the conventions' buckets")
		// The chunks after the first: two for flash's answer (10ms each),
		// one for the broken stream's second chunk.
		m = findMetric(t, rm, otelx.MetricTimePerOutputChunk)
		assert.Equal(t, "s", m.Unit)
		per := hist(t, m)
		assert.Equal(t, uint64(2), per[kv(opAttr, gemini, flashModel, flashTier)].Count)
		assert.InDelta(t, 0.02, per[kv(opAttr, gemini, flashModel, flashTier)].Sum, 1e-9)
		assert.Equal(t, uint64(1), per[kv(otelx.AttrOperation.String("chat"), gemini, proModel, proTier)].Count)
		assert.Equal(t, wantDurationBuckets, per[kv(opAttr, gemini, flashModel, flashTier)].Bounds)
		chat := otelx.AttrOperation.String("chat")
		assert.Equal(t, map[string]int64{
			kv(opAttr, otelx.AttrSource.String("tier"), flashTier, otelx.AttrDegraded.Bool(true)):                               1,
			kv(chat, otelx.AttrSource.String("error"), otelx.AttrDegraded.Bool(false), otelx.AttrErrorType.String("transient")): 1,
		}, nonZero(ints(t, findMetric(t, rm, otelx.MetricRequests))))
		assert.Equal(t, map[string]int64{
			kv(opAttr, proTier, otelx.AttrClass.String("transient")): 1,
			kv(opAttr, flashTier, otelx.AttrClass.String("ok")):      1,
			kv(chat, proTier, otelx.AttrClass.String("transient")):   1,
		}, ints(t, findMetric(t, rm, otelx.MetricAttempts)))

		var flashAttempt, brokenAttempt, brokenRoot map[string]any
		for _, sp := range h.spans.Ended() {
			a := spanAttrs(sp)
			switch {
			case sp.Name() == "generate_content gemini-2.5-flash":
				flashAttempt = map[string]any{"chunks": a[otelx.AttrChunks].AsInt64(), "events": len(sp.Events()), "event": sp.Events()[0].Name,
					"stream": a[otelx.AttrRequestStream].AsBool(), "ttfc": a[otelx.AttrTimeToFirstChunk].AsFloat64(),
					"finish": a[otelx.AttrFinishReasons].AsStringSlice(), "status": sp.Status().Code.String()}
			case sp.Name() == "chat gemini-2.5-pro":
				brokenAttempt = map[string]any{"stream": a[otelx.AttrRequestStream].AsBool(), "finish": a[otelx.AttrFinishReasons].AsStringSlice(),
					"error": a[otelx.AttrErrorType].AsString(), "status": sp.Status().Code.String()}
			case sp.Name() == "tierguard chat":
				brokenRoot = map[string]any{"status": sp.Status().Code.String(), "incomplete": a[otelx.AttrIncomplete].AsBool(), "chunks": a[otelx.AttrChunks].AsInt64(),
					"stream": a[otelx.AttrStream].AsBool(), "kind": sp.SpanKind().String()}
			}
		}
		assert.Equal(t, map[string]any{"chunks": int64(3), "events": 1, "event": "tierguard.first_chunk", "stream": true, "ttfc": 0.3,
			"finish": []string{"STOP"}, "status": "Unset"}, flashAttempt)
		assert.Equal(t, map[string]any{"stream": true, "finish": []string{"error"}, "error": "transient", "status": "Error"}, brokenAttempt,
			"a stream that broke expected a finish reason")
		assert.Equal(t, map[string]any{"status": "Error", "incomplete": true, "chunks": int64(2), "stream": true, "kind": "internal"}, brokenRoot)
		for _, sp := range h.spans.Ended() {
			assert.NotEqual(t, "stream_generate_content", spanAttrs(sp)[otelx.AttrOperation].AsString(), "streams keep their operation name")
		}

		require.Len(t, h.logsWith(t, "first chunk received"), 2)
		broke := h.logsWith(t, "stream broke after its first chunk")
		require.Len(t, broke, 1)
		assert.Equal(t, "WARN", broke[0]["level"])
		assert.Equal(t, 2.0, broke[0]["chunks"])
		assert.Equal(t, true, broke[0]["incomplete"])
		assert.NotContains(t, broke[0], "route", "a committed stream has no route")
		failed := h.logsWith(t, "request failed")
		require.Len(t, failed, 1)
		assert.Equal(t, true, failed[0]["incomplete"])
	})
}
