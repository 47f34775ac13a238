package deadline

import (
	"context"
	"errors"
	"time"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/internal/budget"
)

// ErrExhausted reports that the request's budget cannot fit another useful
// attempt. Errors returned by this package match it with errors.Is.
var ErrExhausted = errors.New("tierguard: deadline budget exhausted")

// Unlimited is what Remaining returns for a budget without a deadline.
const Unlimited = budget.Unlimited

// ExhaustedError is the ErrExhausted that carries the last real failure, so
// that "we ran out of time" never hides why time ran out.
type ExhaustedError struct {
	// Remaining is the budget left when no attempt could start (it may be
	// positive but smaller than the attempt needed); never negative.
	Remaining time.Duration
	// Cause is the failure that preceded exhaustion, if any.
	Cause error
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
type Budget struct{ b budget.Budget }

// New returns the budget of a request running under ctx with an optional
// total (0 means none). It reads the clock only when total is set. Deadlines
// carry Go's monotonic reading, so wall-clock jumps do not move the budget.
func New(ctx context.Context, total time.Duration) Budget { return Budget{budget.New(ctx, total)} }

// Deadline returns the budget's deadline, and false when it has none.
func (b Budget) Deadline() (time.Time, bool) { return b.b.Deadline() }

// Remaining returns the time left, which is negative once the deadline has
// passed, or Unlimited for a budget without a deadline.
func (b Budget) Remaining() time.Duration { return b.b.Remaining() }

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

func (t Try) internal() budget.Try {
	return budget.Try{Cap: t.Cap, Reserve: t.Reserve, MinUseful: t.MinUseful}
}

// Attempt returns the context for one attempt: it ends at
// min(now+Cap, deadline−Reserve). When the request's context already ends
// then, Attempt returns it unchanged with a no-op cancel and allocates
// nothing; otherwise the context costs one allocation until something waits
// on it. When less than MinUseful (or nothing) is left after the reserve,
// it returns an *ExhaustedError and no context. Call the cancel function
// when the attempt ends.
func (b Budget) Attempt(ctx context.Context, t Try) (context.Context, context.CancelFunc, error) {
	remaining := b.b.Remaining()
	per, ok := b.b.Window(remaining, t.internal())
	if !ok {
		return nil, nil, &ExhaustedError{Remaining: max(remaining, 0)}
	}
	actx, c := b.b.Context(ctx, per, remaining)
	if c == nil {
		return actx, func() {}, nil
	}
	return actx, c.Cancel, nil
}
