// Package fallback composes tierguard's guards into a chain of model tiers:
// the part of the library a service calls.
//
// A Chain runs one request through its stages in order. Around each tier
// the order is fixed — bulkhead → breaker → retry → call — and all of it
// happens inside one deadline, the earlier of the context's and the chain's
// Total:
//
//	for each stage (model tier) in order:
//	    preflight: skip a tier whose model is retired, or parked (quota, a server's delay)
//	    bulkhead:  take a slot or skip (no upstream call)
//	    breaker:   allow, or skip (no upstream call)
//	    retry:     attempt 1..N, each with min(TryTimeout, remaining − reserve)
//	        call tier (its decorators first: a rate limit's turn or a skip,
//	                   a pool's member, rotating on 429) → validate output → classify error
//	        decide from the class table: retry here / next tier / local / fail closed
//	cache lookup, then the default answer
//	otherwise an *Error that says why each tier failed
//
// What a tier knows travels with its call: the code that receives an
// upstream response reports its usage, model and finish reason with
// Report; a tier decorator (a pool of keys, a rate limit) reports the
// member each call went to, a rotation, a refusal or a wait on the call's
// Record (RecordOf). Both travel in the call's context — so any wrapper
// passes them on, and a response nobody waits for any more still reaches
// observers (LateReply). The engine knows no decorator by name: package
// pool, ratelimit.Tier, chaos.Tier and MapTier are tiers like any other,
// and a decorator's Unwrap() any lets the chain see the tier it wraps.
//
// Where to read what happens on a 429 with RetryInfo of 30 s: classify
// (classify.go, hints.go) makes it RateLimited with RetryAfter 30 s;
// retry.Policy.Decide (retry/retry.go) retries only if the wait fits the
// deadline; stage.go (stageRun.failed) gives the tier up when it does not
// and cools it down (parking.go) so that later requests skip it until the
// server's time, one request probing at its end; package pool (pool.go)
// does the same for the member whose key got the 429 and rotates to
// another at once; ratelimit (tier.go, limiter.go) holds and slows the
// tier's limiter; engine.go (decide) says how it counts for the breaker.
//
// Retries live inside the breaker, so a request counts once toward tripping
// it; the breaker lives inside the bulkhead, so an open circuit frees its
// slot at once. Each tier's attempts leave a reserve for the later tiers
// — by default what each has been seen to need (a high quantile of its
// latency, within its MinAttempt and TryTimeout, plus a tenth), and for
// tiers not seen yet half of what remains — so a slow primary cannot eat
// the fallback's chance to answer; when less than a useful attempt is
// left the tier is skipped (Stage.Reserve sets the reserve by hand).
//
// Errors follow classify's table, overridable per chain (Config.Table):
// Transient and RateLimited retry in place within the budget; QuotaExhausted,
// Retired, ContextTooLong, InvalidOutput and local rejections move to the
// next tier; Auth, Safety, InvalidRequest and the caller's cancel fail
// closed and return at once with their cause — switching models must not
// hide a configuration error or route around a policy decision. A 404 parks
// the tier (or marks its model retired in the Catalog) and an exhausted
// quota parks it for a cooldown, so later requests skip it without an
// upstream call.
//
// Answers pass the stage's validator before they count: a rejected answer
// moves on to the next tier and does not count against the breaker. Only
// validated tier answers are written back to a cache.
//
// Capacity: ratelimit.Tier keeps a tier's calls under its requests and
// tokens per minute, skipping the tier (SkipRateLimited) or waiting for
// its turn when the wait fits; a pool.Pool puts
// several keys, projects or regions behind one tier, rotating on a member's
// 429, quota or Auth failure before the next tier; Stage.Hedge starts a
// second call when the first is slow, within a budget of extra calls; and
// Stage.InvalidOutputRetries asks the same tier again when its answer is
// rejected.
//
// The success path allocates nothing but what the attempt needs: its
// per-try context when it has its own deadline, and, when an observer or
// a rate limiter listens, the call record that carries what the tier
// reports (one each, a stage whose tier turned out plain making no record
// when nothing listens). It reads the clock only where a decision needs it
// (once per attempt when the request has a deadline, once per limit). Result carries the answer, its source, the tier, whether it is degraded,
// the upstream calls made and the trail of attempts.
//
// An Observer sees every decision, as typed events: one method per kind
// of event (RequestStarted, AttemptStarted, AttemptEnded, TierSkipped,
// LocalAnswered, RequestEnded, FirstChunkReceived, ChunkReceived,
// LateReplyReceived), each with a type that holds only what that kind has
// (RequestStart, AttemptStart, AttemptEnd, TierSkip, LocalAnswer,
// RequestEnd, FirstChunk, NextChunk, LateReply). What is constant about a
// stage travels as a pointer to the chain's StageInfo, built once, so an
// event copies no names. An observer embeds NopObserver and implements the
// events it handles; Observers combines several. Observing costs no
// allocation of its own: the events are passed by value on the request's
// goroutine. Package otelx exports them as metrics, spans and logs;
// package spend turns them into a cost ledger.
package fallback
