package fallback

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/classify"
)

// ErrAbandoned reports a tier call that did not return within
// Config.AbandonAfter of its context ending.
var ErrAbandoned = errors.New("tierguard: call abandoned: the tier ignored its context")

var errAbandoned = classify.Wrap(ErrAbandoned, classify.Verdict{Class: classify.Transient, Reason: "call abandoned after its deadline"})

// Stats are a chain's running figures.
type Stats struct {
	// Abandoned counts calls abandoned since the chain was built.
	Abandoned uint64
	// Stuck is the number of abandoned calls that have not returned yet;
	// each holds its tier's bulkhead slot.
	Stuck int64
}

// Stats returns the chain's running figures.
func (c *Chain[In, Out]) Stats() Stats {
	return Stats{Abandoned: c.abandoned.Load(), Stuck: c.stuck.Load()}
}

type detached[Out any] struct {
	out   Out
	err   error
	panic any
}

// Detached-call states: running, answered (the waiter takes the result),
// abandoned (the call cleans up after itself).
const (
	callRunning int32 = iota
	callAnswered
	callAbandoned
)

// callDetached runs one call on its own goroutine and waits for it until
// AbandonAfter past the end of ctx. A panic before abandonment is re-raised
// on the caller's goroutine; after abandonment it is dropped, as there is no
// one left to receive it.
func (c *Chain[In, Out]) callDetached(ctx context.Context, st *stage[In, Out], in In) (out Out, err error, abandoned bool) {
	var state atomic.Int32
	done := make(chan detached[Out], 1)
	go func() {
		var res detached[Out]
		defer func() {
			if p := recover(); p != nil {
				res = detached[Out]{panic: p}
			}
			if state.CompareAndSwap(callRunning, callAnswered) {
				done <- res
				return
			}
			// Abandoned: release what the request left to this call.
			if st.Bulkhead != nil {
				st.Bulkhead.Release()
			}
			c.stuck.Add(-1)
		}()
		res.out, res.err = st.Tier.Call(ctx, in)
	}()

	var res detached[Out]
	select {
	case res = <-done:
	case <-ctx.Done():
		grace := time.NewTimer(c.abandonAfter)
		select {
		case res = <-done:
			grace.Stop()
		case <-grace.C:
			c.stuck.Add(1)
			if state.CompareAndSwap(callRunning, callAbandoned) {
				c.abandoned.Add(1)
				var zero Out
				return zero, errAbandoned, true
			}
			// It answered just now.
			c.stuck.Add(-1)
			res = <-done
		}
	}
	if res.panic != nil {
		panic(res.panic)
	}
	return res.out, res.err, false
}
