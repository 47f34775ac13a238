package chaos

import (
	"context"
	"iter"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/internal/budget"
)

// Tier wraps t so that drills on sw inject faults into its calls. While sw
// is off, a call costs one atomic load more than t's and allocates
// nothing. The wrapper keeps t's name; what t's responses report
// (fallback.Report) reaches the chain through the context, as without the
// wrapper.
//
// Answer faults (MalformedJSON, EmptyText, Answer) apply when Out is
// string; for other answer types use TierWithAnswers.
func Tier[In, Out any](t fallback.ModelTier[In, Out], sw *Switch) fallback.ModelTier[In, Out] {
	var answer func(string) Out
	if f, ok := any(func(s string) string { return s }).(func(string) Out); ok {
		answer = f
	}
	return newTier(t, sw, answer)
}

// TierWithAnswers is Tier for answers that are not strings: answer makes
// one from the text of an answer fault (for genai answers, an Answer whose
// Text is text), so that a validator can reject it as it would a real one.
func TierWithAnswers[In, Out any](t fallback.ModelTier[In, Out], sw *Switch, answer func(text string) Out) fallback.ModelTier[In, Out] {
	return newTier(t, sw, answer)
}

func newTier[In, Out any](t fallback.ModelTier[In, Out], sw *Switch, answer func(string) Out) fallback.ModelTier[In, Out] {
	if sw == nil {
		panic("chaos: Tier with a nil *Switch")
	}
	w := &tier[In, Out]{t: t, sw: sw, name: t.Name(), answer: answer, at: atTier}
	if answer != nil {
		w.at |= atTierAnswers
	}
	return w
}

type tier[In, Out any] struct {
	t      fallback.ModelTier[In, Out]
	sw     *Switch
	name   string
	answer func(string) Out
	at     where
}

func (w *tier[In, Out]) Name() string { return w.name }

// Unwrap returns the tier the faults are injected in front of.
func (w *tier[In, Out]) Unwrap() any { return w.t }

func (w *tier[In, Out]) Call(ctx context.Context, in In) (Out, error) {
	r := w.sw.cur.Load()
	if r == nil {
		return w.t.Call(ctx, in)
	}
	return w.inject(ctx, r, in)
}

func (w *tier[In, Out]) inject(ctx context.Context, r *running, in In) (Out, error) {
	f, u, ok := w.sw.pick(ctx, r, w.name, w.at)
	if !ok {
		return w.t.Call(ctx, in)
	}
	var zero Out
	if err := budget.Sleep(ctx, f.delay(u)); err != nil {
		return zero, ctxErr(f, err)
	}
	switch f.kind {
	case kindLatency:
	case kindGap:
		if err := budget.Sleep(ctx, f.gap); err != nil {
			return zero, ctxErr(f, err)
		}
	case kindStall:
		<-ctx.Done()
		return zero, ctxErr(f, ctx.Err())
	case kindAnswer:
		return w.answer(f.text), nil
	default:
		return zero, f.err()
	}
	return w.t.Call(ctx, in)
}

// StreamTier wraps t so that drills on sw inject faults into its streams:
// latency before the first chunk, stalls, error responses before the
// stream starts, cuts and idle gaps after some chunks, a missing or bad
// finish reason, an empty stream. While sw is off, a stream costs one
// atomic load more than t's and allocates nothing more. The wrapper keeps
// t's name and Inspect; what t reports (fallback.Report) reaches the chain
// through the context.
func StreamTier[In, Chunk any](t fallback.StreamTier[In, Chunk], sw *Switch) fallback.StreamTier[In, Chunk] {
	if sw == nil {
		panic("chaos: StreamTier with a nil *Switch")
	}
	return &streamTier[In, Chunk]{t: t, sw: sw, name: t.Name()}
}

type streamTier[In, Chunk any] struct {
	t    fallback.StreamTier[In, Chunk]
	sw   *Switch
	name string
}

func (w *streamTier[In, Chunk]) Name() string { return w.name }

// Unwrap returns the tier the faults are injected in front of.
func (w *streamTier[In, Chunk]) Unwrap() any { return w.t }

func (w *streamTier[In, Chunk]) Inspect(c Chunk) fallback.ChunkInfo { return w.t.Inspect(c) }

func (w *streamTier[In, Chunk]) Stream(ctx context.Context, in In) iter.Seq2[Chunk, error] {
	r := w.sw.cur.Load()
	if r == nil {
		return w.t.Stream(ctx, in)
	}
	f, u, ok := w.sw.pick(ctx, r, w.name, atStream)
	if !ok {
		return w.t.Stream(ctx, in)
	}
	return func(yield func(Chunk, error) bool) {
		var zero Chunk
		if err := budget.Sleep(ctx, f.delay(u)); err != nil {
			yield(zero, ctxErr(f, err))
			return
		}
		switch f.kind {
		case kindStall:
			<-ctx.Done()
			yield(zero, ctxErr(f, ctx.Err()))
			return
		case kindFail:
			yield(zero, f.err())
			return
		case kindAnswer:
			// EmptyText: a stream that ends cleanly with nothing in it.
			return
		case kindCut:
			if f.chunks == 0 {
				yield(zero, f.err())
				return
			}
		case kindGap:
			if f.chunks == 0 {
				if err := budget.Sleep(ctx, f.gap); err != nil {
					yield(zero, ctxErr(f, err))
					return
				}
			}
		}
		w.pass(ctx, f, in, yield)
	}
}

// pass relays the upstream's stream with f applied to it.
func (w *streamTier[In, Chunk]) pass(ctx context.Context, f Fault, in In, yield func(Chunk, error) bool) {
	var zero Chunk
	n := 0
	for c, err := range w.t.Stream(ctx, in) {
		if err != nil {
			yield(c, err)
			return
		}
		info := w.t.Inspect(c)
		if info.FinishReason != "" {
			switch f.kind {
			case kindNoFinish:
				// The finishing chunk never arrives; the stream ends cleanly.
				return
			case kindFinish:
				yield(zero, f.err())
				return
			}
		}
		if !yield(c, nil) {
			return
		}
		n++
		switch {
		case f.kind == kindCut && n == f.chunks:
			yield(zero, f.err())
			return
		case f.kind == kindGap && n == f.chunks:
			if err := budget.Sleep(ctx, f.gap); err != nil {
				yield(zero, ctxErr(f, err))
				return
			}
		}
	}
}
