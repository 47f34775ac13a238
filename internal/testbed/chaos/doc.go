// Package chaos is tierguard's soak test: it proves, under load and
// injected faults, the invariants the rest of the library promises one unit
// test at a time: an untested resilience pattern is indistinguishable from a
// prayer.
//
// [Run] drives thousands of goroutines through one fallback chain of three
// fake tiers ("pro", "flash", "lite": fallback.Tier functions, no network)
// guarded by shared bulkheads, circuit breakers (half-open probes limited)
// and retry budgets, with a cache, a default answer, idempotency keys and
// Config.AbandonAfter. Every upstream call draws a fault from a table that
// changes with time, in cycles of four phases: light (a few transient and
// permanent errors), storm (every fault kind), outage (the primary answers
// only 503 or stalls) and recovery (only faults that say nothing about the
// upstream's health). The fault kinds are transient 503s, 429s with
// RetryInfo delays (some of 10⁹ s), custom verdicts with absurd retry-after,
// per-day quotas and retired models (which park a tier), unknown errors,
// auth and invalid-request errors (which fail closed), stalls past the
// per-try cap, tiers that ignore their context for a while or until the run
// ends, panics, answers a validator rejects, zero values returned with a nil
// error, slow successes; callers add short and absent deadlines and cancel
// some requests. Every upstream error message echoes the prompt, which
// carries a marker, so any library error that quotes it is caught.
//
// # What is checked
//
// Continuously, from inside the tier calls and the chain's observer:
//
//   - calls in flight per tier never exceed its bulkhead's size (calls that
//     ignore their context included: they keep their slot);
//   - half-open probe calls in flight never exceed HalfOpenProbes, across
//     half-open periods as well as within one (Config.ShortCooldowns makes
//     the probes of successive periods overlap). Which call is a probe is
//     known exactly: the breakers have a breaker.Store whose Member sees
//     every probe permit taken and returned, on the goroutine that takes
//     it, and the observer marks that goroutine's next attempt context. A
//     probe call counts from its start until it returns or, if it ignores
//     its context, until its context ends: the chain reports such a call to
//     the breaker when it abandons it (AbandonAfter later), which frees the
//     probe's slot while the call itself may run on;
//   - no request makes more upstream calls than its tiers' MaxAttempts
//     allow, per tier and in total;
//   - a retry is never planned with a wait that does not fit the time left.
//
// Per call, when it returns:
//
//   - it returns exactly once, with an answer, an error, or the tier's panic
//     (re-raised in every waiter of a shared execution); none is lost;
//   - an answer is the right one for its input (no cross-delivery between
//     requests, or between the waiters of an idempotency key), comes from
//     where Result says, and passed validation;
//   - Result.UpstreamCalls equals the upstream calls the tiers saw for that
//     request (no hidden calls);
//   - an error is a *fallback.Error whose text is valid UTF-8 and quotes no
//     prompt; a request fails without failing closed only if no default
//     answer existed for it;
//   - it returns by its deadline (or its caller's cancel) plus
//     AbandonAfter when a tier ignored its context, plus a scheduling slack
//     that is zero under testing/synctest.
//
// At the end:
//
//   - retries per tier never exceed what the retry budget allows:
//     MaxTokens/2 + TokenRatio × successes (+1 for concurrency);
//   - after each outage, each breaker is closed within its cooldown bound
//     (the last failure, the longest cooldown with jitter, the probes needed)
//     and stays closed through the recovery phase (liveness);
//   - stuck calls are counted in Chain.Stats().Stuck while they hold their
//     slots, and once released Stuck is 0; no bulkhead slot, probe permit or
//     in-flight count is left, panics included;
//   - no goroutine is left (goleak in TestMain; under synctest the bubble
//     must also drain) and, under synctest, no breaker timer fires after
//     the breakers are reset.
//
// Run under testing/synctest the whole soak is deterministic in time: the
// fake clock only moves when every goroutine waits, so a deadline overrun
// or a late breaker close is a logic error, not scheduling noise, and a
// long fault schedule costs only CPU. Run on the real clock it measures the
// scheduling slack a loaded machine adds. The tests run both at CI size;
// the long run is
//
//	go test ./internal/testbed/chaos -run 'TestSoak$' -soak.calls=1000000 -timeout 60m
//
// which runs it with the profile's cooldowns and with short ones.
//
// or TIERGUARD_SOAK_CALLS=1000000 (see the tests for -soak.clock=real and
// the other knobs).
package chaos
