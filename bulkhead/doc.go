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
//     it and refuses every call). Its size is fixed: there is no
//     resilience4j changeConfig.
//   - A rejection carries no retry-after (Polly's concurrency limiter may
//     carry one): it classifies as Rejected, and the fallback chain moves
//     on to the next tier.
//   - A Release without an Acquire panics instead of raising the limit.
package bulkhead
