package retry

import (
	"context"
	"time"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/deadline"
	"github.com/tierguard/tierguard/internal/budget"
)

// DecideIn is Decide with the default table, and the budget and try as
// the deadline package states them.
func (p Policy) DecideIn(n int, v classify.Verdict, b deadline.Budget, t deadline.Try) Attempt {
	ctx := context.Background()
	if d, ok := b.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d)
		defer cancel()
	}
	bb, try := budget.New(ctx, 0), budget.Try{Cap: t.Cap, Reserve: t.Reserve, MinUseful: t.MinUseful}
	return p.Decide(n, v, defaultTable.Action(v.Class).Retry, func(wait time.Duration) bool { return bb.Fits(wait, try) })
}

// The defaults, for the tests.
const (
	DefaultMaxAttempts = defaultMaxAttempts
	DefaultBaseDelay   = defaultBaseDelay
	DefaultMaxDelay    = defaultMaxDelay
)
