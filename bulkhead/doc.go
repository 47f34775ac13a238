// Package bulkhead bounds how many calls run at once, so that one slow
// dependency cannot take every worker of a service.
//
// A Bulkhead fails fast by default: when its slots are taken, Acquire returns
// a *FullError (errors.Is(err, ErrFull)) at once. Seed 000's lesson is that
// waiting for a slot only moves the queue into your own workers. An optional
// bounded wait (WithMaxWait) queues acquisitions in FIFO order for at most a
// given time — never past the context's deadline — with a bounded queue
// beyond which it rejects at once.
//
// Acquire and Release are a compare-and-swap each on the fast path, with no
// lock and no allocation. Do and Run hold a slot around a function and
// release it with defer, so a panic leaks no slot. Stats gives accepted,
// rejected, in-flight and waiting figures; an Observer sees every queued
// wait (the queue-wait figure where overload shows first, per seed 002).
//
// A Group gives each key (tenant, feature) its own bulkhead.
package bulkhead
