package retry

import (
	"fmt"
	"math"
	"sync/atomic"
)

// Budget limits retries across all the callers of one tier, so that during an
// outage retries cannot multiply the load on a struggling upstream. It
// follows gRPC's retry throttling: the bucket starts full at MaxTokens, every
// retryable failure takes one token, every success gives back TokenRatio
// tokens, and retries are allowed only while more than half the tokens
// remain. Errors that are not retried (a 400, a retired model) leave it
// alone.
//
// Why this rather than Envoy's "retries ≤ X% of active requests": the token
// bucket needs no count of requests in flight, costs one atomic load on the
// success path once it is full, and behaves the way an outage needs — after
// MaxTokens/2 failures in a row retries stop entirely and the fallback tier
// answers at once, and they come back gradually as successes return.
//
// Budget is safe for concurrent use. Tokens are kept in thousandths, as gRPC
// does.
type Budget struct {
	max   int64 // milli-tokens
	ratio int64 // milli-tokens per success
	// tokens is the bucket's content in milli-tokens.
	tokens atomic.Int64
}

// NewBudget returns a full budget of maxTokens tokens, refilled by
// tokenRatio per success. gRPC's defaults are 10 and 0.1: at most five
// failures' worth of retries in a burst, and one more retry allowed per ten
// successes.
func NewBudget(maxTokens, tokenRatio float64) (*Budget, error) {
	if math.IsNaN(maxTokens) || maxTokens < 1 || maxTokens > 1e6 {
		return nil, fmt.Errorf("retry budget: maxTokens must be within [1, 1e6], got %v", maxTokens)
	}
	if math.IsNaN(tokenRatio) || tokenRatio <= 0 || tokenRatio > maxTokens {
		return nil, fmt.Errorf("retry budget: tokenRatio must be within (0, maxTokens], got %v", tokenRatio)
	}
	b := &Budget{max: int64(maxTokens * 1000), ratio: max(int64(tokenRatio*1000), 1)}
	b.tokens.Store(b.max)
	return b, nil
}

// Allow reports whether a retry may be made now.
func (b *Budget) Allow() bool {
	return b.tokens.Load() > b.max/2
}

// Failure takes one token for a retryable failure.
func (b *Budget) Failure() {
	for {
		t := b.tokens.Load()
		if t <= 0 {
			return
		}
		if b.tokens.CompareAndSwap(t, max(t-1000, 0)) {
			return
		}
	}
}

// Success gives back TokenRatio tokens, up to the maximum. When the bucket
// is full this is a single atomic load.
func (b *Budget) Success() {
	for {
		t := b.tokens.Load()
		if t >= b.max {
			return
		}
		if b.tokens.CompareAndSwap(t, min(t+b.ratio, b.max)) {
			return
		}
	}
}

// Tokens returns the current number of tokens.
func (b *Budget) Tokens() float64 { return float64(b.tokens.Load()) / 1000 }
