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

// releaseOf is what a call left running gives back once it returns:
// st's bulkhead slot, and a half-open probe's token — as a failure, since
// the call ignored its context. A pool member it holds is the pool's to
// release, when the member's call returns.
func releaseOf(st *stage, tok breaker.Token) func() {
	return func() {
		if st.bulkhead != nil {
			st.bulkhead.Release()
		}
		if tok.IsProbe() {
			tok.Done(breaker.Failure)
		}
	}
}

// readDetached reads seq on a goroutine of its own (Config.AbandonAfter),
// so that a tier that ignores ctx is abandoned AbandonAfter after ctx
// ended, and keeps st's guards (see releaseOf) until it returns.
func readDetached[T any](e *engine, st *stage, ctx context.Context, seq iter.Seq2[T, error], tok breaker.Token) *detach.Reader[T] {
	return detach.Read(ctx, e.abandonAfter, &e.counters, seq, releaseOf(st, tok))
}

// nextOf is the next pair a detached reader read: a panic or Goexit of
// the reading goroutine is raised again here, and an abandoned wait ends
// with errAbandoned. ok is false at the end.
func nextOf[T any](rd *detach.Reader[T]) (v T, err error, ok bool) {
	s, ok := rd.Next()
	reraise(s.End)
	if s.Abandoned {
		return s.Value, errAbandoned, true
	}
	return s.Value, s.Err, ok
}
