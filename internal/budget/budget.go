// Package budget is the time accounting behind a request: the earlier of
// its context's deadline and a total, the share of it one attempt may use,
// and the attempt's context (see Context). The public deadline package and
// the fallback chain are built on it.
package budget

import (
	"context"
	"math"
	"time"
)

// Unlimited is what Remaining returns for a budget without a deadline.
const Unlimited = time.Duration(math.MaxInt64)

// Budget is the time one request may spend. It is a small value, computed
// once per request, with no allocation.
type Budget struct {
	deadline time.Time
	limited  bool
	// ctxBound is set when the context's own deadline is the budget's, so
	// an attempt that may run to the end of the budget needs no context of
	// its own.
	ctxBound bool
}

// New returns the budget of a request running under ctx with an optional
// total (0 means none). It reads the clock only when total is set.
// Deadlines carry Go's monotonic reading, so wall-clock jumps do not move
// the budget.
func New(ctx context.Context, total time.Duration) Budget {
	b, _, _ := NewLeft(ctx, total)
	return b
}

// NewLeft is New, and the time left as of the clock reading New made —
// ok is false when it made none (no total) — so that a request's first
// look at its budget needs no second reading. The figure ages as the
// request runs: it may stand for Remaining only in the moments after New.
func NewLeft(ctx context.Context, total time.Duration) (b Budget, left time.Duration, ok bool) {
	var now time.Time
	if total > 0 {
		now = time.Now()
	}
	return NewLeftAt(ctx, total, now)
}

// NewLeftAt is NewLeft with the clock reading now given (read only when
// total is set): a caller that reads the clock for the request's start
// anyway makes one reading serve both.
func NewLeftAt(ctx context.Context, total time.Duration, now time.Time) (b Budget, left time.Duration, ok bool) {
	ctxDeadline, hasCtx := ctx.Deadline()
	if total > 0 {
		own := now.Add(total)
		if !hasCtx || own.Before(ctxDeadline) {
			return Budget{deadline: own, limited: true}, total, true
		}
		return Budget{deadline: ctxDeadline, limited: true, ctxBound: true}, ctxDeadline.Sub(now), true
	}
	if hasCtx {
		return Budget{deadline: ctxDeadline, limited: true, ctxBound: true}, 0, false
	}
	return Budget{}, Unlimited, true
}

// Deadline returns the budget's deadline, and false when it has none.
func (b Budget) Deadline() (time.Time, bool) { return b.deadline, b.limited }

// Limited reports whether the budget has a deadline.
func (b Budget) Limited() bool { return b.limited }

// Remaining returns the time left, negative once the deadline has passed,
// or Unlimited for a budget without a deadline (which reads no clock).
func (b Budget) Remaining() time.Duration {
	if !b.limited {
		return Unlimited
	}
	return time.Until(b.deadline)
}

// Over reports whether the deadline has passed.
func (b Budget) Over() bool { return b.limited && !time.Now().Before(b.deadline) }

// Try describes one attempt's share of the budget.
type Try struct {
	// Cap is the per-try timeout; 0 means the attempt may use all the time
	// that the reserve leaves.
	Cap time.Duration
	// Reserve is kept back for later tiers.
	Reserve time.Duration
	// MinUseful is the least time worth starting an attempt with.
	MinUseful time.Duration
}

// Window returns how long an attempt of t may run when remaining is left:
// min(Cap, remaining − Reserve), or Unlimited with neither a deadline nor a
// cap. ok is false when less than MinUseful (or nothing) is left after the
// reserve.
func (b Budget) Window(remaining time.Duration, t Try) (per time.Duration, ok bool) {
	if !b.limited {
		if t.Cap > 0 {
			return t.Cap, true
		}
		return Unlimited, true
	}
	avail := Sub(remaining, t.Reserve)
	if avail <= 0 || avail < t.MinUseful {
		return 0, false
	}
	if t.Cap > 0 && t.Cap < avail {
		return t.Cap, true
	}
	return avail, true
}

// Context returns the context for an attempt of window per (from Window,
// with the same remaining): parent itself when the attempt may run to the
// context's own deadline or has no deadline at all — no allocation — and
// otherwise a Context ending at now+per, computed from the budget's
// deadline so that no clock is read. The *Context is nil when parent is
// returned; otherwise Cancel it when the attempt ends.
func (b Budget) Context(parent context.Context, per, remaining time.Duration) (context.Context, *Context) {
	d, ok := b.AttemptDeadline(per, remaining)
	if !ok {
		return parent, nil
	}
	c := NewContext(parent, d)
	return c, c
}

// AttemptDeadline is the deadline of the Context that Context would make,
// for a caller that holds a Context inside a value of its own (Init); ok
// is false when the attempt needs no context of its own.
func (b Budget) AttemptDeadline(per, remaining time.Duration) (time.Time, bool) {
	switch {
	case per == Unlimited:
		return time.Time{}, false
	case b.ctxBound && per >= remaining:
		return time.Time{}, false
	case !b.limited:
		return time.Now().Add(per), true
	}
	return b.deadline.Add(per - remaining), true
}

// Fits reports whether, after waiting wait, an attempt of at least
// t.MinUseful still fits before the deadline minus t.Reserve. A retry is
// decided with it before sleeping, never after.
func (b Budget) Fits(wait time.Duration, t Try) bool {
	if !b.limited {
		return true
	}
	return Sub(b.Remaining(), t.Reserve) >= Add(max(wait, 0), max(t.MinUseful, 1))
}

// Sub returns a minus a reserve r (negative counts as none), saturating
// instead of wrapping when a is far in the past and r huge.
func Sub(a, r time.Duration) time.Duration {
	r = max(r, 0)
	if a < math.MinInt64+r {
		return math.MinInt64
	}
	return a - r
}

// Add returns a+b for non-negative a and b, saturating at Unlimited: a
// server's absurd retry-after must not wrap around into a short wait.
func Add(a, b time.Duration) time.Duration {
	if a > Unlimited-b {
		return Unlimited
	}
	return a + b
}

// Sleep waits d or until ctx ends, whichever comes first, and returns
// ctx's error if it ended first (at once when d is not positive).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
