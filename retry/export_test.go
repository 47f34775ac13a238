package retry

import (
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/deadline"
)

// Decide exposes decide to the tests.
func (p Policy) Decide(n int, v classify.Verdict, b deadline.Budget, t deadline.Try) Attempt {
	return p.decide(n, v, b, t)
}
