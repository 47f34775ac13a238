package fallback

import (
	"context"

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
// cancelled when every waiter has given up, and a request arriving after
// that starts a fresh one. A waiter whose own deadline passes first is
// answered from the cache or the default, as a request of its own would be.
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
			// A cancelled execution must not serve requests that arrive
			// before it winds down: they start their own.
			if c.flights[key] == f {
				delete(c.flights, key)
			}
		}
		c.flightMu.Unlock()
		v := classify.InContext(ctx, classify.Verdict{})
		if v.Class == classify.DeadlineExhausted {
			// Out of time while waiting: the cache and the default answer
			// at once, as they would for a request of its own.
			if res, ok := c.localOnly(ctx, in); ok {
				return res, nil
			}
		}
		var zero Result[Out]
		zero.TierIndex = -1
		// The key is the caller's data (often the prompt): not in the text.
		return zero, &Error{FailedClosed: v.Class == classify.Canceled, Cause: v, Tiers: []TierFailure{{Tier: "shared", Index: -1, Outcome: TierNotReached, Verdict: v, Err: ctx.Err()}}}
	}
}

func (c *Chain[In, Out]) fly(ctx context.Context, key string, f *flight[Out], in In) {
	defer func() {
		if p := recover(); p != nil {
			// Every waiter re-panics with the tier's own value, as a
			// request of its own would have.
			f.panic = p
		}
		c.flightMu.Lock()
		if c.flights[key] == f {
			delete(c.flights, key)
		}
		c.flightMu.Unlock()
		f.cancel()
		close(f.done)
	}()
	f.res, f.err = c.Do(context.WithValue(ctx, inFlight{}, true), in)
}

// localOnly answers a waiter whose deadline passed from the cache or the
// default.
func (c *Chain[In, Out]) localOnly(ctx context.Context, in In) (Result[Out], bool) {
	res := Result[Out]{TierIndex: -1, Degraded: true}
	if c.cache != nil {
		if out, ok := c.cache.Get(ctx, in); ok {
			res.Value, res.Source = out, SourceCache
			return res, true
		}
	}
	if c.def != nil {
		if out, ok := c.def(ctx, in); ok {
			res.Value, res.Source = out, SourceDefault
			return res, true
		}
	}
	return res, false
}
