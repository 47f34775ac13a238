package fallback

import (
	"context"
	"errors"
	"iter"
	"runtime"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/internal/detach"
)

// ErrAbandoned reports a tier call that did not return within
// Config.AbandonAfter of its context ending.
var ErrAbandoned = errors.New("tierguard: call abandoned: the tier ignored its context")

// errAbandonedVerdict is the verdict of an abandoned call.
var errAbandonedVerdict = classify.Verdict{Class: classify.Transient, Reason: "call abandoned after its deadline"}

var errAbandoned = classify.Wrap(ErrAbandoned, errAbandonedVerdict)

// reraise ends the caller's goroutine the way the work's goroutine ended:
// its panic again, as a *PanicError with the stack where it happened, or
// runtime.Goexit.
func reraise(o *detach.Outcome) {
	switch {
	case o == nil:
	case o.Panicked:
		if pe, ok := o.Panic.(*PanicError); ok && pe.Stack != nil {
			panic(pe)
		}
		panic(&PanicError{Value: o.Panic, Stack: o.Stack})
	case o.Goexit:
		runtime.Goexit()
	}
}

// outcomeError is how work that did not return (o.Ended) is reported
// where it cannot be raised again: a *PanicError with the stack where it
// happened (for runtime.Goexit, a value saying so).
func outcomeError(o detach.Outcome) *PanicError {
	if o.Goexit {
		return &PanicError{Value: "runtime.Goexit called"}
	}
	return &PanicError{Value: o.Panic, Stack: o.Stack}
}

// source is a stream being read: the tier's sequence, pulled one chunk at a
// time.
type source[Chunk any] interface {
	// next returns the next chunk or error; ok is false at the end.
	next() (ch Chunk, err error, ok bool)
	// stop ends the reading and reports whether the tier was abandoned
	// because it ignored its context. It may be called more than once.
	stop() (abandoned bool)
}

// read starts reading seq: on the caller's goroutine (iter.Pull2), or,
// with AbandonAfter, on a goroutine of its own, so that a tier that ignores
// its context is abandoned AbandonAfter after ctx ended and keeps st's
// bulkhead slot until it returns. A stuck half-open probe also keeps its
// breaker token, so that it still counts against the probe limit, and
// reports its failure when it returns; a pool member it holds is the
// pool's to release, when the member's call returns.
func read[T any](e *engine, st *stage, ctx context.Context, seq iter.Seq2[T, error], tok breaker.Token) source[T] {
	if e.abandonAfter <= 0 {
		next, stop := iter.Pull2(seq)
		return pulled[T]{pull: next, end: stop}
	}
	release := func() {
		if st.bulkhead != nil {
			st.bulkhead.Release()
		}
		if tok.IsProbe() {
			tok.Done(breaker.Failure)
		}
	}
	return detached[T]{detach.Read(ctx, e.abandonAfter, &e.counters, seq, release)}
}

// pulled reads a stream on the caller's goroutine.
type pulled[T any] struct {
	pull func() (T, error, bool)
	end  func()
}

func (p pulled[T]) next() (T, error, bool) { return p.pull() }
func (p pulled[T]) stop() bool             { p.end(); return false }

// detached reads a stream on its own goroutine.
type detached[T any] struct{ r *detach.Reader[T] }

func (d detached[T]) next() (T, error, bool) {
	s, ok := d.r.Next()
	reraise(s.End)
	if s.Abandoned {
		return s.Value, errAbandoned, true
	}
	return s.Value, s.Err, ok
}

func (d detached[T]) stop() bool { return d.r.Stop() }
