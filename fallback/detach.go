package fallback

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/classify"
)

// ErrAbandoned reports a tier call that did not return within
// Config.AbandonAfter of its context ending.
var ErrAbandoned = errors.New("tierguard: call abandoned: the tier ignored its context")

var errAbandoned = classify.Wrap(ErrAbandoned, classify.Verdict{Class: classify.Transient, Reason: "call abandoned after its deadline"})

// outcome is how a function run on another goroutine ended.
type outcome[T any] struct {
	val    T
	err    error
	panic  *PanicError
	goexit bool
}

// run calls fn and hands report how it ended: a return, a panic (with the
// stack where it happened), or runtime.Goexit — told apart with two
// defers, as singleflight does, since Goexit runs deferred calls without a
// panic and never returns. report runs in a deferred call, so it runs on
// every path, Goexit included.
func run[T any](fn func() (T, error), report func(outcome[T])) {
	var o outcome[T]
	returned := false
	defer func() {
		if !returned && o.panic == nil {
			o.goexit = true
		}
		report(o)
	}()
	func() {
		defer func() {
			if !returned {
				if p := recover(); p != nil {
					o.panic = carried(p)
				}
			}
		}()
		o.val, o.err = fn()
		returned = true
	}()
}

// reraise ends the caller's goroutine the way the call's goroutine ended:
// the panic again, with its original stack, or runtime.Goexit.
func reraise[T any](o outcome[T]) {
	switch {
	case o.panic != nil:
		panic(o.panic)
	case o.goexit:
		runtime.Goexit()
	}
}

// Detached-call states: running, answered (the waiter takes the result),
// abandoned (the call cleans up after itself).
const (
	callRunning int32 = iota
	callAnswered
	callAbandoned
)

// detached runs fn on its own goroutine and waits for it until
// e.abandonAfter past the end of ctx. When it gives up, the call is
// abandoned: release runs once it really returns (it releases the slot the
// call kept), and the error is errAbandoned. A panic or Goexit before
// abandonment is re-raised on the caller's goroutine; after it, it is
// dropped, as there is no one left to receive it.
func detached[T any](e *engine, ctx context.Context, fn func() (T, error), release func()) (val T, err error, abandoned bool) {
	var state atomic.Int32
	done := make(chan outcome[T], 1)
	go run(fn, func(o outcome[T]) {
		if state.CompareAndSwap(callRunning, callAnswered) {
			done <- o
			return
		}
		if release != nil {
			release()
		}
		e.stuck.Add(-1)
	})

	var o outcome[T]
	select {
	case o = <-done:
	case <-ctx.Done():
		grace := time.NewTimer(e.abandonAfter)
		select {
		case o = <-done:
			grace.Stop()
		case <-grace.C:
			e.stuck.Add(1)
			if state.CompareAndSwap(callRunning, callAbandoned) {
				e.abandoned.Add(1)
				var zero T
				return zero, errAbandoned, true
			}
			// It answered just now.
			e.stuck.Add(-1)
			o = <-done
		}
	}
	reraise(o)
	return o.val, o.err, false
}
