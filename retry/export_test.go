package retry

import (
	"context"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/deadline"
	"github.com/tierguard/tierguard/internal/budget"
)

// Decide exposes decide to the tests, with the budget and try as the
// deadline package states them.
func (p Policy) Decide(n int, v classify.Verdict, b deadline.Budget, t deadline.Try) Attempt {
	ctx := context.Background()
	if d, ok := b.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d)
		defer cancel()
	}
	return p.decide(n, v, budget.New(ctx, 0), budget.Try{Cap: t.Cap, Reserve: t.Reserve, MinUseful: t.MinUseful})
}

// The defaults, for the tests.
const (
	DefaultMaxAttempts = defaultMaxAttempts
	DefaultBaseDelay   = defaultBaseDelay
	DefaultMaxDelay    = defaultMaxDelay
)
