// Package retry retries a failed call on the same tier, within the request's
// deadline and a budget shared by all callers of the tier.
//
// A Policy decides, after each failure, from the failure's class (only
// classes whose action says "retry" are retried — Transient and RateLimited
// by default), the attempts left, the shared Budget, and the time left. The
// wait before attempt n+1 is the larger of the server's retry-after and a
// backoff of min(MaxDelay, BaseDelay·2ⁿ⁻¹) with full jitter by default. The
// decision is made before sleeping: if the wait plus a minimum useful
// attempt does not fit before the deadline (minus the reserve the caller
// keeps for later tiers), retrying stops at once so the caller can fall back
// instead of sleeping into a timeout. A cancelled context ends a sleep at
// once.
//
// The Budget follows gRPC's retry throttling (a token bucket that stops all
// retries after a burst of failures and lets them back as successes return),
// so that retries cannot multiply an outage's load.
//
// Do and Run are the standalone forms; the fallback chain uses Decide
// directly so that its per-call state stays on the stack.
package retry
