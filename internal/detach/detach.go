// Package detach runs a tier's work on a goroutine of its own, so that a
// tier that ignores its context cannot hold the request: the reader waits
// for the work only until its context has ended and a grace period has
// passed, then abandons it. The abandoned work keeps what it holds (a
// bulkhead slot) until it really returns, and is counted while it runs.
//
// It tells a return from a panic (kept with the stack where it happened)
// and from runtime.Goexit, with two defers as singleflight does, so that
// the reader can end the way the work ended.
package detach

import (
	"context"
	"iter"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// Outcome is how a function run on another goroutine ended.
type Outcome struct {
	// Panicked is set when it panicked with Panic; Stack is the stack
	// where it did.
	Panicked bool
	Panic    any
	Stack    []byte
	// Goexit is set when it called runtime.Goexit.
	Goexit bool
}

// Ended reports whether the function did not return normally.
func (o Outcome) Ended() bool { return o.Panicked || o.Goexit }

// Run calls fn and hands report how it ended. report runs in a deferred
// call, so it runs on every path, Goexit included (which never returns).
func Run(fn func(), report func(Outcome)) {
	var o Outcome
	returned := false
	defer func() {
		if !returned && !o.Panicked {
			o.Goexit = true
		}
		report(o)
	}()
	func() {
		defer func() {
			if !returned {
				if p := recover(); p != nil {
					o.Panicked, o.Panic, o.Stack = true, p, debug.Stack()
				}
			}
		}()
		fn()
		returned = true
	}()
}

// Counters count abandoned work: Abandoned since the start, Stuck while it
// still runs.
type Counters struct {
	Abandoned atomic.Uint64
	Stuck     atomic.Int64
}

// Reader states: running, answered (the reader takes the end), abandoned
// (the work cleans up after itself).
const (
	running int32 = iota
	answered
	abandoned
)

type item[T any] struct {
	v    T
	err  error
	last *Outcome // set on the item that reports the sequence's end
}

// Reader reads a sequence on its own goroutine.
type Reader[T any] struct {
	ctx       context.Context
	grace     time.Duration
	counters  *Counters
	release   func()
	items     chan item[T]
	quit      chan struct{}
	state     atomic.Int32
	ended     bool
	stopped   bool
	abandoned bool
}

// Read starts reading seq on a goroutine of its own. A wait for an item
// that outlasts ctx by grace abandons the work; release then runs when the
// work really returns.
func Read[T any](ctx context.Context, grace time.Duration, counters *Counters, seq iter.Seq2[T, error], release func()) *Reader[T] {
	r := &Reader[T]{ctx: ctx, grace: grace, counters: counters, release: release, items: make(chan item[T]), quit: make(chan struct{})}
	go Run(func() {
		for v, err := range seq {
			select {
			case r.items <- item[T]{v: v, err: err}:
			case <-r.quit:
				return
			}
		}
	}, r.finished)
	return r
}

// finished runs when the reading goroutine ends, however it ends: it hands
// the end to the reader, or, if the reader abandoned the work, releases
// what the work kept.
func (r *Reader[T]) finished(o Outcome) {
	if r.state.CompareAndSwap(running, answered) {
		select {
		case r.items <- item[T]{last: &o}:
		case <-r.quit:
		}
		return
	}
	if r.release != nil {
		r.release()
	}
	r.counters.Stuck.Add(-1)
}

// Step is what one Next returns.
type Step[T any] struct {
	// Value and Err are the sequence's next pair, when Next's ok is true.
	Value T
	Err   error
	// End is set when the sequence ended by a panic or Goexit, for the
	// caller to re-raise.
	End *Outcome
	// Abandoned is set when this wait gave up on the work.
	Abandoned bool
}

// Next returns the next item; ok is false at the end, when the step may
// carry End or Abandoned.
func (r *Reader[T]) Next() (s Step[T], ok bool) {
	if r.ended || r.abandoned {
		return s, false
	}
	var it item[T]
	select {
	case it = <-r.items:
	case <-r.ctx.Done():
		grace := time.NewTimer(r.grace)
		select {
		case it = <-r.items:
			grace.Stop()
		case <-grace.C:
			if r.state.CompareAndSwap(running, abandoned) {
				r.counters.Stuck.Add(1)
				r.counters.Abandoned.Add(1)
				r.abandoned = true
				return Step[T]{Abandoned: true}, false
			}
			it = <-r.items
		}
	}
	if it.last != nil {
		r.ended = true
		if it.last.Ended() {
			return Step[T]{End: it.last}, false
		}
		return s, false
	}
	return Step[T]{Value: it.v, Err: it.err}, true
}

// Stop ends the reading and reports whether the work was abandoned. It may
// be called more than once.
func (r *Reader[T]) Stop() bool {
	if !r.stopped {
		r.stopped = true
		close(r.quit)
	}
	return r.abandoned
}
