// Package bulkhead bounds how many calls run at once, so that one slow
// dependency cannot take every worker of a service.
//
// A Bulkhead fails fast by default: when its slots are taken, Acquire returns
// a *FullError (errors.Is(err, ErrFull)) at once, because waiting for a slot
// only moves the queue into your own workers. An optional bounded wait
// (Config.MaxWait) queues acquisitions in FIFO order for at most a given time —
// never past the context's deadline — with a bounded queue beyond which it
// rejects at once.
//
// Acquire and Release are an atomic add each on the fast path, with no
// lock, no retry and no allocation, on one word alone on its cache line,
// and a load of a word on another line that says whether there is more to
// do (a queue, observers, a bulkhead found full). Do holds a slot around a
// function and releases it with defer, so a panic leaks no slot. Stats gives accepted, rejected,
// in-flight and waiting figures; Observe sees every call as an Event
// (permitted, rejected, finished), with the queue wait of those that
// queued (the figure where overload shows first).
//
// A Group gives each key (tenant, feature) its own bulkhead, named so that a
// tenant key never reaches a log or a metric in clear.
//
// # Adaptive limits
//
// A model API's capacity moves by the hour, and a fixed size either queues
// into the deadline or sheds the wrong calls. With Config.Adaptive, the
// limit moves between a floor and a ceiling from the calls reported to
// Record (a chain reports its stages' calls through throttle.Feed): down
// by Backoff on overload signals — 5xx, 529, timeouts, 429s that name no
// delay — in proportion when answers get slower than Tolerance times
// their baseline, up by its square root when answers are fast and the
// limit binds. Where the tier refused is remembered: the limit stays one
// more Backoff below it until answers come faster than they did there,
// so that it does not climb back to the provider's edge, where every
// answer is as slow as the provider gets. A 429 that names its delay is
// a quota, not a busy server, and a rejected answer was served: neither
// lowers the limit. Adaptive documents the rule and its parameters. Acquire and Release are the same
// fast path as a fixed bulkhead's (the limit is one more load); Record is
// one atomic add on the line they write. The bulkhead stays two cache
// lines, and its refusal state the size it was: a Group's member costs
// what it did until it learns, then 64 bytes more, and 48 more while it
// remembers a refusal. An adaptive limit is
// per process: pods sharing Redis each learn their own, and together may
// offer the provider the sum of their limits.
//
// # Priorities
//
// A call's Priority — Critical, Interactive (the default), Batch,
// Sheddable — comes from its context (fallback.Request.Priority, or
// WithPriority). With Config.Reserve, each priority leaves a share of the
// limit to those above it, so that at the limit the lowest are refused
// first and the last share is Critical's alone; waiters (Config.MaxWait)
// are served highest priority first, each within its own wait and
// context. A refused call is a bulkhead refusal like any other: the chain
// moves on to the next tier, the cache or the default. Stats.RejectedAt
// counts refusals by priority. Without a Reserve, priorities are never
// read.
//
// # Differences from failsafe-go, resilience4j and Polly
//
// These are deliberate; the conformance tests assert them.
//
//   - Acquire fails fast unless Config.MaxWait is set, as resilience4j's
//     default maxWaitDuration of 0 does; failsafe-go's AcquirePermit waits
//     for as long as the context lets it, and Polly's bulkhead queues
//     without a time limit.
//   - A wait always has both bounds, a time and a queue length, and never
//     outlasts the context.
//   - A bulkhead has at least one slot: New refuses 0 (resilience4j accepts
//     it and refuses every call). Its size is fixed unless it is adaptive:
//     there is no resilience4j changeConfig.
//   - A rejection carries no retry-after (Polly's concurrency limiter may
//     carry one): it classifies as Rejected, and the fallback chain moves
//     on to the next tier.
//   - A Release without an Acquire panics instead of raising the limit.
//
// # Differences from failsafe-go's adaptivelimiter and Netflix's concurrency-limits
//
// Also deliberate, and asserted by the adaptive tests, each beside the peer
// case it ports.
//
//   - Overload lowers the limit at once (times Backoff, as Netflix's AIMD
//     limit on a drop); failsafe-go's Permit.Drop records nothing, and its
//     limit falls only as latency rises. A provider's 503 is fast: a
//     latency-only rule reads it as health. Netflix's limits fall on any
//     drop; tierguard's when one call in twenty of a window is overload,
//     so that a provider's stray 503 is not read as a lack of capacity.
//   - Which failures are overload is the class table's, not every error:
//     a 429 naming its delay, a 4xx, a cancel or a local refusal count for
//     nothing; an answer a validator rejected is a latency sample.
//   - No clock: a window is a count of calls, the latencies the caller's
//     (Record). failsafe-go times its windows (1 s to 30 s) and measures
//     each permit itself; Netflix's Vegas adjusts on every sample.
//   - The baseline is the lowest window mean, drifting up by 1/32 of the
//     gap each window so that a model that got slower for good is learnt
//     again; Vegas keeps the lowest round trip seen and probes it afresh
//     every 30 × limit samples or so, failsafe-go averages recent p90s.
//   - Where the tier refused is remembered (Backoff² below it at most,
//     until a CUSUM of speed-ups says the capacity came back, or 128
//     windows pass), as TCP CUBIC remembers its W_max; the peers' limits
//     climb back to the edge after each fall, the sawtooth of AIMD.
//   - The limit rises only while it binds (a refusal or a waiter since the
//     last window, or the slots held within √limit of it); Vegas holds
//     while fewer than half the limit are in flight, failsafe-go caps the
//     limit at a factor of those in flight.
//   - Priorities are shares of one limit (Config.Reserve) and an ordered
//     queue; failsafe-go's PriorityLimiter sets a rejection threshold from
//     the queueing of every limiter sharing its Prioritizer.
package bulkhead
