// Package breaker is a circuit breaker for calls to a model API.
//
// A Breaker is Closed while calls succeed. It trips Open after
// ConsecutiveFailures counted failures in a row, or when the failure ratio
// (or, optionally, the slow-call ratio) over a rolling window of at least
// MinCalls calls reaches its threshold. Open rejects every call with an
// *OpenError (errors.Is(err, ErrOpen)) that says when the next probe may
// pass. When the cooldown ends, a timer moves the breaker to HalfOpen — the
// reject path stays a single atomic load, and hooks and metrics see the
// change when it happens rather than on the next call. HalfOpen admits at
// most HalfOpenProbes concurrent probes; ProbeSuccesses successes in a row
// close it, a counted failure reopens it, with a cooldown that may double on
// each repeated trip up to MaxCooldown, with optional jitter.
//
// Only counted outcomes decide: by default (OutcomeOf) a Transient,
// RateLimited or Unknown error is a failure, while a 4xx, a safety block, a
// rejected output or the caller's cancel is Ignored — it frees a probe slot
// and decides nothing. Each state is a generation: a call reports its
// outcome to the state that admitted it, so a slow call admitted while
// closed can neither close nor reopen a later half-open breaker, nor raise
// the number of probes above the limit.
//
// Use Allow and Token.Done directly (what the fallback chain does), or
// Execute around a function. ForceOpen, ForceClosed and Reset serve drills.
// A Group keeps one breaker per key (model × endpoint). A Store shares state
// across processes (see the nested module breaker/redisstore); it is
// local-first and fails open to local state.
package breaker
