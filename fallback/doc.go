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
// and cools it down (parking.go, internal/park) so that later requests skip it until the
// server's time, one request probing at its end; package pool (pool.go)
// does the same for the member whose key got the 429 and rotates to
// another at once; ratelimit (tier.go, limiter.go) holds and slows the
// tier's limiter; engine.go (decide) says how it counts for the breaker.
//
// Retries live inside the breaker, so a request counts once toward tripping
// it; the breaker lives inside the bulkhead, so an open circuit frees its
// slot at once.
//
// # One deadline
//
// Each tier's attempts leave a reserve for the later tiers, so that a
// stalled primary cannot eat the fallback's chance to answer and a healthy
// primary is not cut short for a fallback that would be skipped anyway:
//
//   - a later tier whose breaker is open, or that is parked, needs nothing;
//   - a later tier that has been observed (an answer, or an attempt the
//     deadline cut) needs its estimate — a running high quantile of its
//     answer latency, near the 90th percentile, raised to one and a half
//     times any attempt the deadline cut at or past it, within
//     [MinAttempt, TryTimeout] — plus a tenth, at least 1 ms;
//   - the later tiers never observed share half of what remains after the
//     observed ones' needs, at least their MinAttempts and, when each has a
//     TryTimeout, at most their TryTimeouts (each plus a tenth);
//   - Stage.Reserve > 0 fixes the reserve, < 0 leaves none.
//
// A retry is decided before sleeping: if the wait (the larger of the
// server's delay and the jittered backoff) plus a useful attempt does not
// fit, the chain moves on at once. When less than a useful attempt is left
// the tier is skipped (SkipBudget) and the cache and default answer. An
// attempt the request's deadline cut after its useful minimum counts as a
// timeout against its tier's breaker, so a hung last tier trips too.
//
// # One cool-down story
//
// A tier is kept out of rotation for three reasons, each skipped without an
// upstream call and named on the trail:
//
//   - failures the class table counts (5xx, timeouts, 429s) trip the
//     breaker: the tier (or a pool member, with its own breaker) is out for
//     the breaker's Cooldown, then probed half-open (SkipOpen);
//   - an exhausted quota parks the tier, or the pool member, for
//     max(QuotaCooldown, the server's delay), at most MaxQuotaCooldown
//     (SkipQuota). A quota's parking is never shortened by a shorter delay;
//   - a 429 with a server delay (RetryInfo, Retry-After, retry-after-ms)
//     cools the tier, or the pool member whose key got it, down until the
//     server's time (at most classify.LongRetryAfter), then lets one
//     request through while the others keep skipping until it returns
//     (SkipRateLimited) — but only on evidence that the quota is spent for
//     every caller (Stage.CoolDown): a per-minute quota named, a storm of
//     429s that are most of the tier's calls, or a probe that got a 429
//     again. A 429 storm whose RetryInfo names a per-minute quota, as
//     Gemini's does, sends one request per delay per key to the primary.
//
// Any other 429 is its request's own: the request waits for the server's
// delay when it is at most Stage.MaxRetryWait (1 s) and fits the budget,
// or moves to the next tier at once (the last tier that can serve waits
// what fits), while other requests keep calling the tier. The attempt
// that took a tier out, and every skip while it cools, name the rule and
// its end (Cooling).
//
// # More of the chain
//
// Preflight: with Config.Catalog (package catalog keeps the list of served
// models), a tier whose model is missing is skipped without a call and a
// 404 marks the model retired until the next refresh; without one a 404
// retires the model for RetiredRecheck. Stage.ModelFor names the model a
// call will use, so a 404 retires only that model. A 404 on a stage with
// neither Model nor ModelFor, whose message names no model either, retires
// nothing: that request moves to the next tier and the tier stays in
// rotation, since it cannot say which of the models it serves is gone.
//
// Idempotency: with Config.Key, requests with the same key in flight
// together share one execution; each waiter gets the result, a waiter that
// gives up does not cancel the others, and the last one leaving cancels
// the work. Observers see each waiter as a request (RequestStart.Shared
// and RequestEnd.Shared, no upstream call of its own), so a ledger bills
// the execution once, to the request that started it.
//
// Panics in a tier propagate to the caller after its bulkhead slot and
// breaker probe are released; code tierguard runs on a goroutine of its own
// (an abandoned call, a hedge, a cache's embedder) reaches the caller as a
// *PanicError with the original stack. With Config.AbandonAfter a call
// that ignores its context is abandoned that long after its deadline: the
// request moves on, the stuck call keeps its bulkhead slot (and a probe its
// probe slot) until it really returns, and Stats counts it. Off by default:
// it costs a goroutine per call.
//
// Streaming (NewStream): before the first chunk with content a StreamChain
// does everything a Chain does, plus a FirstChunkTimeout per attempt. That
// chunk is the commit point: afterwards a cut connection, an IdleTimeout
// gap, a missing finish reason, a safety stop or the deadline end the
// stream with an *IncompleteError — never a silent switch to another
// model, unless StreamConfig.Continue opts in. Breaking out of the loop
// cancels the upstream call and releases the slot and probe. Streams take
// no idempotency key.
//
// Hedging (Stage.Hedge) starts a second call when the first is slow — after
// a fixed Delay or at a Quantile of the tier's latency — on another member
// of the stage's pool, or else on the next tier, within a budget of extra
// calls (MaxExtra, 10 %) shared by every request. The first valid answer
// wins; the loser is cancelled and keeps its slot and probe until it
// returns; each breaker counts the request once. Stage.InvalidOutputRetries
// asks the same tier again when its validator rejects an answer, with
// Stage.Reprompt to adjust the input, outside the breaker and the retry
// policy. Hedging and invalid-output retries are for unary chains.
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
// tokens per minute, skipping the tier (SkipRateLimited) or waiting for its
// turn when the wait fits; a pool.Pool puts several keys, projects or
// regions behind one tier, rotating on a member's 429, quota or Auth
// failure before the next tier.
//
// The success path allocates nothing but what the attempt needs: its
// per-try context when it has its own deadline, or, when an observer or
// a rate limiter listens, the call record that carries what the tier
// reports — which is then the per-try context too (one allocation either
// way, of 128 or 256 bytes; a stage whose tier turned out plain makes no
// record when nothing listens; a tier's first Report and a pool's first
// member report each add a small one). Falling
// through up to eight tiers that are skipped allocates nothing more: the
// trail holds skips apart, as small marks. It reads the
// clock only where a decision needs it (once per attempt when the request
// has a deadline, once per limit), and, observed, twice per attempt for
// its latency.
//
// Result carries the answer, its source, the tier, whether it is degraded,
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
