package deadline

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/tierguard/tierguard/classify"
)

// ErrExhausted reports that the request's budget cannot fit another useful
// attempt. Errors returned by this package match it with errors.Is.
var ErrExhausted = errors.New("tierguard: deadline budget exhausted")

// Unlimited is what Remaining returns for a budget without a deadline.
const Unlimited = time.Duration(math.MaxInt64)

// ExhaustedError is the ErrExhausted that carries the last real failure, so
// that "we ran out of time" never hides why time ran out.
type ExhaustedError struct {
	// Remaining is the budget left when no attempt could start (it may be
	// positive but smaller than the attempt needed).
	Remaining time.Duration
	// Cause is the failure that preceded exhaustion, if any.
	Cause error
}

// Exhausted returns an *ExhaustedError wrapping cause.
func Exhausted(remaining time.Duration, cause error) error {
	return &ExhaustedError{Remaining: max(remaining, 0), Cause: cause}
}

// Error says that the budget ran out, and after what.
func (e *ExhaustedError) Error() string {
	if e.Cause == nil {
		return ErrExhausted.Error()
	}
	return ErrExhausted.Error() + " (last error: " + e.Cause.Error() + ")"
}

// Is reports whether target is ErrExhausted.
func (e *ExhaustedError) Is(target error) bool { return target == ErrExhausted }

// Unwrap returns the cause.
func (e *ExhaustedError) Unwrap() error { return e.Cause }

// Verdict classifies exhaustion as DeadlineExhausted.
func (e *ExhaustedError) Verdict() classify.Verdict {
	return classify.Verdict{Class: classify.DeadlineExhausted, Reason: "deadline budget exhausted"}
}

// Budget is the time one request may spend on all its attempts and tiers:
// the earlier of its context's deadline and an optional total. It is a small
// value, computed once per request, with no allocation.
type Budget struct {
	deadline time.Time
	limited  bool
	// ctxBound is set when the context's own deadline is the budget's, so an
	// attempt that may run to the end of the budget needs no new context.
	ctxBound bool
}

// New returns the budget of a request running under ctx with an optional
// total (0 means none). It reads the clock only when total is set. Deadlines
// carry Go's monotonic reading, so wall-clock jumps do not move the budget.
func New(ctx context.Context, total time.Duration) Budget {
	ctxDeadline, hasCtx := ctx.Deadline()
	if total > 0 {
		own := time.Now().Add(total)
		if !hasCtx || own.Before(ctxDeadline) {
			return Budget{deadline: own, limited: true}
		}
	}
	if hasCtx {
		return Budget{deadline: ctxDeadline, limited: true, ctxBound: true}
	}
	return Budget{}
}

// Deadline returns the budget's deadline, and false when it has none.
func (b Budget) Deadline() (time.Time, bool) { return b.deadline, b.limited }

// Remaining returns the time left, which is negative once the deadline has
// passed, or Unlimited for a budget without a deadline.
func (b Budget) Remaining() time.Duration {
	if !b.limited {
		return Unlimited
	}
	return time.Until(b.deadline)
}

// Try describes one attempt's share of the budget.
type Try struct {
	// Cap is the per-try timeout; 0 means the attempt may use all the time
	// that the reserve leaves.
	Cap time.Duration
	// Reserve is kept back for later tiers so that a slow tier cannot eat
	// their chance to answer; 0 on the last tier.
	Reserve time.Duration
	// MinUseful is the least time worth starting an attempt with. Below it
	// the attempt is not made: a call that cannot finish only adds load.
	MinUseful time.Duration
}

// Attempt returns the context for one attempt: it ends at
// min(now+Cap, deadline-Reserve). When the request's context already ends
// then, Attempt returns it unchanged with a no-op cancel and allocates
// nothing. When less than MinUseful (or nothing) is left after the reserve,
// it returns an error matching ErrExhausted and no context.
//
// Attempt reads the clock once if the budget or Cap needs it, never
// otherwise — and only the monotonic clock, the cheaper one. The returned
// cancel must be called when the attempt ends.
func (b Budget) Attempt(ctx context.Context, t Try) (context.Context, context.CancelFunc, error) {
	if !b.limited {
		return b.AttemptWithin(ctx, t, Unlimited)
	}
	return b.AttemptWithin(ctx, t, b.Remaining())
}

// Admit checks that an attempt of t fits now, before the caller takes any
// guard (a bulkhead slot, a breaker probe) for it. It returns the time
// remaining — Unlimited for a budget without a deadline, which reads no
// clock — to be passed to AttemptWithin, so that checking and starting cost
// one clock read.
func (b Budget) Admit(t Try) (time.Duration, error) {
	if !b.limited {
		return Unlimited, nil
	}
	remaining := b.Remaining()
	if avail := sub(remaining, t.Reserve); avail <= 0 || avail < t.MinUseful {
		return remaining, Exhausted(remaining, nil)
	}
	return remaining, nil
}

// AttemptWithin is Attempt with the time remaining supplied by the caller
// (from Admit). remaining is ignored for a budget without a deadline.
func (b Budget) AttemptWithin(ctx context.Context, t Try, remaining time.Duration) (context.Context, context.CancelFunc, error) {
	if !b.limited {
		if t.Cap <= 0 {
			return ctx, noop, nil
		}
		c, cancel := context.WithTimeout(ctx, t.Cap)
		return c, cancel, nil
	}
	avail := sub(remaining, t.Reserve)
	if avail <= 0 || avail < t.MinUseful {
		return nil, nil, Exhausted(remaining, nil)
	}
	per := avail
	if t.Cap > 0 && t.Cap < per {
		per = t.Cap
	}
	if per >= remaining && b.ctxBound {
		return ctx, noop, nil
	}
	// now+per, computed from the deadline so that no wall clock is read:
	// the deadline carries the monotonic reading remaining came from.
	c, cancel := context.WithDeadline(ctx, b.deadline.Add(per-remaining))
	return c, cancel, nil
}

// Fits reports whether, after waiting wait, an attempt of at least
// t.MinUseful still fits before the deadline minus t.Reserve. Retry uses it
// to decide before sleeping, never after.
func (b Budget) Fits(wait time.Duration, t Try) bool {
	if !b.limited {
		return true
	}
	return sub(b.Remaining(), t.Reserve) >= add(max(wait, 0), max(t.MinUseful, 1))
}

// sub returns a minus a reserve r (negative counts as none), saturating
// instead of wrapping when a is far in the past and r huge.
func sub(a, r time.Duration) time.Duration {
	r = max(r, 0)
	if a < math.MinInt64+r {
		return math.MinInt64
	}
	return a - r
}

// add returns a+b for non-negative a and b, saturating at Unlimited: a
// server's absurd retry-after must not wrap around into a short wait.
func add(a, b time.Duration) time.Duration {
	if a > Unlimited-b {
		return Unlimited
	}
	return a + b
}

func noop() {}
