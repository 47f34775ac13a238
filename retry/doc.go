// Package retry retries a failed call on the same tier, within the request's
// deadline and a budget shared by all callers of the tier.
//
// A Policy decides, after each failure, from the failure's class (only
// classes whose action says "retry" are retried — Transient and RateLimited
// by default), the attempts left, the shared Budget, and the time left. The
// wait after failed attempt n (n ≥ 1), before attempt n+1, is the larger of
// the server's retry-after and a backoff of min(MaxDelay, BaseDelay·2ⁿ⁻¹)
// — BaseDelay before the second attempt — with full jitter by default. The
// decision is made before sleeping: if the wait plus a minimum useful
// attempt does not fit before the deadline (minus the reserve the caller
// keeps for later tiers), retrying stops at once so the caller can fall back
// instead of sleeping into a timeout. A context that ends, during an attempt
// or the wait, stops retrying at once, and the *StoppedError says whether it
// was canceled or its deadline passed. A negative MaxAttempts sets no limit
// on attempts: the deadline and the budget bound them.
//
// The Budget follows gRPC's retry throttling (a token bucket that stops all
// retries after a burst of failures and lets them back as successes return),
// so that retries cannot multiply an outage's load. It was chosen over
// Envoy's cap on the share of requests in flight that are retries because it
// needs no count of requests in flight and costs one atomic load on the
// success path.
//
// Do (DoWith for a class table and a classifier of its own) is the
// standalone form; the fallback chain decides with the same Policy.Decide
// (its table says which classes retry, its stage's classifier classifies)
// so that its per-call state stays on the stack. The zero Policy works:
// every method applies the defaults to zero fields.
//
// # Differences from failsafe-go, resilience4j and Polly
//
// These are deliberate; the conformance tests assert them.
//
//   - Errors are classified and only retryable classes are retried; the
//     peers retry every error unless told otherwise. A value returned with
//     a nil error is a success: there is no retry on results (validation
//     is the fallback chain's job).
//   - The default backoff is exponential with full jitter, 200ms doubling
//     to 10s. resilience4j waits a fixed 500ms, failsafe-go not at all, and
//     Polly a constant 2s, unless configured.
//   - MaxAttempts counts attempts, the first included, as resilience4j's
//     maxAttempts and failsafe-go's WithMaxAttempts do (Polly's
//     MaxRetryAttempts counts retries). A negative value means no limit,
//     like failsafe-go's -1.
//   - A wait is decided before it starts: one that would not leave a useful
//     attempt before the deadline is not slept (DeadlineTooClose). The peers
//     sleep and then find the time gone (failsafe-go's MaxDuration, a
//     canceled delay in Polly and resilience4j).
//   - A server's retry-after wins over the backoff when longer and is not
//     capped by MaxDelay; Polly and resilience4j need a delay generator or
//     an interval function for that.
//   - When retrying stops, Do returns a *StoppedError that wraps the
//     last error (errors.Is and errors.As reach it), or the error as it was
//     if its class is not retried. resilience4j rethrows the last exception,
//     Polly returns the last outcome, failsafe-go returns an ExceededError.
//   - Do makes the first attempt even on a context that has already ended
//     (the function sees it), then stops with ContextCanceled or
//     DeadlineExceeded; Polly does not execute at all.
//   - The Budget is shared by every caller of a tier; resilience4j and Polly
//     have no equivalent, and failsafe-go's budget is a separate policy.
package retry
