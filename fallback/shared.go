package fallback

import (
	"context"
	"fmt"

	"github.com/tierguard/tierguard/classify"
)

// inFlight marks the context of a shared execution, so that its Do does not
// join its own flight.
type inFlight struct{}

// flight is one execution shared by the requests of an idempotency key.
type flight[Out any] struct {
	done    chan struct{}
	res     Result[Out]
	err     error
	panic   any
	waiters int
	cancel  context.CancelFunc
}

// shared runs in once for every request with key that arrives while the
// first is in flight. The execution runs on its own goroutine, under a
// context that keeps the first caller's values and deadline but not its
// cancellation: one caller giving up must not fail the others. It is
// cancelled when every waiter has given up.
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
		go c.fly(ectx, key, f, in)
	}
	f.waiters++
	c.flightMu.Unlock()

	select {
	case <-f.done:
		if f.panic != nil {
			panic(f.panic)
		}
		res := f.res
		res.Shared = joined
		return res, f.err
	case <-ctx.Done():
		c.flightMu.Lock()
		f.waiters--
		if f.waiters == 0 {
			f.cancel()
		}
		c.flightMu.Unlock()
		v := classify.InContext(ctx, classify.Verdict{})
		var zero Result[Out]
		zero.TierIndex = -1
		return zero, &Error{FailedClosed: true, Cause: v, Tiers: []TierFailure{{Tier: "shared:" + key, Index: -1, Outcome: TierNotReached, Verdict: v, Err: ctx.Err()}}}
	}
}

func (c *Chain[In, Out]) fly(ctx context.Context, key string, f *flight[Out], in In) {
	defer func() {
		if p := recover(); p != nil {
			f.panic = fmt.Errorf("tierguard: panic in shared execution: %v", p)
		}
		c.flightMu.Lock()
		delete(c.flights, key)
		c.flightMu.Unlock()
		f.cancel()
		close(f.done)
	}()
	f.res, f.err = c.Do(context.WithValue(ctx, inFlight{}, true), in)
}
