package fallback

import (
	"context"
	"errors"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/deadline"
)

// guards are a stage's bulkhead, breaker and share of the budget, which
// both chains take in the same fixed order.
type guards struct {
	bulkhead *bulkhead.Bulkhead
	breaker  *breaker.Breaker
	try      deadline.Try
}

// entered is what a stage holds once inside its guards.
type entered struct {
	// remaining is the time left when the budget was checked, for the
	// first attempt to reuse; fresh is unset when the clock must be read
	// again (after a wait in the bulkhead's queue).
	remaining time.Duration
	fresh     bool
	// queueWait is the bulkhead wait, when it was measured.
	queueWait time.Duration
	// slot is set when a bulkhead slot is held and must be released.
	slot bool
	// tok is the breaker's permission (inert without a breaker).
	tok breaker.Token
}

// open peeks at the breaker: an open tier is skipped before anything else
// is spent — no clock read, no slot. One atomic load; small enough to
// inline into both chains' stage loops.
func (g *guards) open() error {
	if g.breaker == nil {
		return nil
	}
	return g.breaker.OpenError()
}

// enter takes a stage's guards after the peek: the budget check, a bulkhead
// slot, then the breaker's token. On failure it holds nothing and returns
// why the tier is skipped — NotSkipped when the context ended while queued
// for a slot — with the error. measure times a wait in the bulkhead's
// queue.
func (g *guards) enter(ctx context.Context, b deadline.Budget, measure bool) (entered, Skip, error) {
	var e entered
	// Check the time before taking any guard: a request that cannot make a
	// useful attempt must not hold a slot or a probe someone else could use.
	remaining, err := b.Admit(g.try)
	if err != nil {
		return e, SkipBudget, err
	}
	e.remaining, e.fresh = remaining, true
	if g.bulkhead != nil {
		waits := g.bulkhead.MaxWait() > 0
		if waits {
			e.fresh = false
		}
		var queued time.Time
		if measure && waits {
			queued = time.Now()
		}
		err := g.bulkhead.Acquire(ctx)
		if !queued.IsZero() {
			e.queueWait = time.Since(queued)
		}
		if err != nil {
			if !errors.Is(err, bulkhead.ErrFull) {
				return e, NotSkipped, err
			}
			return e, SkipFull, err
		}
		e.slot = true
	}
	if g.breaker != nil {
		tok, err := g.breaker.Allow()
		if err != nil {
			// Half-open with its probes taken: the slot goes back at once.
			if e.slot {
				g.bulkhead.Release()
				e.slot = false
			}
			return e, SkipOpen, err
		}
		e.tok = tok
	}
	return e, NotSkipped, nil
}

// reserveFor is what an earlier tier keeps back so that a later tier with
// this MinAttempt can still make its attempt: MinAttempt plus a tenth, for
// the time it takes to classify a timed-out attempt and enter the next
// tier's guards. Without the margin, a primary that uses its whole share
// would leave the fallback a hair less than its minimum, and the fallback
// would be skipped exactly when it is needed.
func reserveFor(minAttempt time.Duration) time.Duration {
	return minAttempt + max(minAttempt/10, time.Millisecond)
}
