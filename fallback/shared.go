package fallback

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/internal/detach"
)

// inFlight marks the context of a shared execution, so that its Do does not
// join its own flight; its value is the execution's *starter.
type inFlight struct{}

// starter is the fate of the request that started a shared execution. The
// execution runs under the starter's context (its values: a spend ticket,
// a span), so its RequestEnded is the starter's: it reports the
// execution's outcome, unless the starter gave up first — then what the
// starter got. Whichever comes first, the execution's end or the
// starter's leaving, decides.
type starter struct {
	state atomic.Int32
	// sum, err and cause are what the starter got when it left.
	sum   Summary
	err   error
	cause classify.Verdict
}

const (
	starterWaiting int32 = iota
	starterServed        // the execution ended first
	starterLeft          // the starter gave up first
)

// leave records that the starter gave up with what it got, unless the
// execution ended first (false: its result is on its way).
func (s *starter) leave(sum Summary, err error) bool {
	s.sum, s.err = sum, err
	var fe *Error
	if errors.As(err, &fe) {
		s.cause = fe.Cause
	}
	return s.state.CompareAndSwap(starterWaiting, starterLeft)
}

// left returns the starter's fate when it gave up before the execution
// ended, and nil when the execution's own outcome stands (it also marks
// the starter served).
func (s *starter) left() *starter {
	if s == nil || s.state.CompareAndSwap(starterWaiting, starterServed) {
		return nil
	}
	return s
}

// flight is one execution shared by the requests of an idempotency key.
type flight[Out any] struct {
	starter starter
	done    chan struct{}
	res     Result[Out]
	err     error
	end     detach.Outcome
	waiters int
	cancel  context.CancelFunc
}

// shared runs in once for every request with key that arrives while the
// first is in flight. The execution runs on its own goroutine, under a
// context that keeps the first caller's values and deadline but not its
// cancellation: one caller giving up must not fail the others. It is
// cancelled when every waiter has given up, and a request arriving after
// that starts a fresh one. A waiter whose own deadline passes first is
// answered from the cache or the default, as a request of its own would be.
// A panic in the execution reaches every waiter as a *PanicError with the
// stack where it happened; a runtime.Goexit ends every waiter's goroutine
// too.
func (c *Chain[In, Out]) shared(ctx context.Context, key string, in In) (Result[Out], error) {
	c.flightMu.Lock()
	f, joined := c.flights[key]
	if !joined {
		f = &flight[Out]{done: make(chan struct{})}
		base := context.WithoutCancel(ctx)
		var ectx context.Context
		if d, ok := ctx.Deadline(); ok {
			ectx, f.cancel = context.WithDeadline(base, d)
		} else {
			ectx, f.cancel = context.WithCancel(base)
		}
		c.flights[key] = f
		go detach.Run(func() { f.res, f.err = c.Do(context.WithValue(ectx, inFlight{}, &f.starter), in) },
			func(o detach.Outcome) { c.landed(key, f, o) })
	}
	f.waiters++
	c.flightMu.Unlock()

	// A caller who joined is a request of its own for observers (a cost
	// ledger, request metrics): it starts when it joins and ends with what
	// it got, with no attempt of its own. The execution's events go to
	// the request that started it.
	var r request
	if joined {
		c.beginAs(ctx, &r, true)
		if r.obs != nil {
			defer c.endOnPanic(&r)
		}
	}
	select {
	case <-f.done:
		if f.end.Ended() {
			reraise(&f.end)
		}
		res := f.res
		res.Shared = joined
		if joined {
			c.endJoined(&r, res.Summary, f.err)
		}
		return res, f.err
	case <-ctx.Done():
		c.flightMu.Lock()
		f.waiters--
		if f.waiters == 0 {
			f.cancel()
			// A cancelled execution must not serve requests that arrive
			// before it winds down: they start their own.
			if c.flights[key] == f {
				delete(c.flights, key)
			}
		}
		c.flightMu.Unlock()
		res, err := c.gaveUp(ctx, in)
		switch {
		case joined:
			c.endJoined(&r, res.Summary, err)
		case !f.starter.leave(res.Summary, err):
			// The execution ended for observers before the starter left:
			// its result is the starter's, and it is on its way.
			<-f.done
			if f.end.Ended() {
				reraise(&f.end)
			}
			return f.res, f.err
		}
		return res, err
	}
}

// gaveUp is what a caller who stopped waiting for a shared execution gets:
// out of time, the cache or the default, as for a request of its own;
// otherwise its context's error.
func (c *Chain[In, Out]) gaveUp(ctx context.Context, in In) (Result[Out], error) {
	v := classify.Verdict{Class: classify.Canceled, Reason: "canceled by caller"}
	if ctx.Err() == context.DeadlineExceeded {
		v = classify.Verdict{Class: classify.DeadlineExhausted, Reason: "deadline exceeded"}
		if out, src, hit, ok := c.localAnswer(ctx, in); ok {
			res := Result[Out]{Value: out}
			res.Source, res.TierIndex, res.Degraded, res.CacheHit = src, -1, true, hit
			return res, nil
		}
	}
	var zero Result[Out]
	zero.TierIndex = -1
	// The key is the caller's data (often the prompt): not in the text.
	return zero, &Error{FailedClosed: v.Class == classify.Canceled, Cause: v, Tiers: []TierFailure{{Tier: "shared", TierIndex: -1, Outcome: TierNotReached, Verdict: v, Err: ctx.Err()}}}
}

// endJoined reports the end of a request that joined another's execution:
// what it got, and no upstream call of its own.
func (c *Chain[In, Out]) endJoined(r *request, sum Summary, err error) {
	if r.obs == nil {
		return
	}
	sum.UpstreamCalls = 0
	r.sum = sum
	var v classify.Verdict
	var fe *Error
	if errors.As(err, &fe) {
		v = fe.Cause
	}
	c.end(r, err, v, 0)
}

// landed publishes a shared execution's outcome to its waiters.
func (c *Chain[In, Out]) landed(key string, f *flight[Out], o detach.Outcome) {
	f.end = o
	c.flightMu.Lock()
	if c.flights[key] == f {
		delete(c.flights, key)
	}
	c.flightMu.Unlock()
	f.cancel()
	close(f.done)
}
