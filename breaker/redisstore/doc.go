// Package redisstore shares the state of tierguard circuit breakers across
// processes through Redis, so that a fleet of pods behaves as one breaker
// per model instead of "one lung" (pod A open, pod B still hammering a dead
// model). It implements breaker.Store:
//
//	store, err := redisstore.New(rdb, redisstore.Options{})
//	b, err := breaker.New(breaker.Config{Name: "gemini/pro", Store: store})
//
// # Local first
//
// A breaker always decides from its own in-memory state; the store only
// feeds that state, in the background. On the request path:
//
//   - Allow and Done on a closed or open breaker never touch the store,
//     except Done's Record, which is an atomic add (and nothing at all
//     unless fleet thresholds are enabled).
//   - A transition (trip, half-open, close, reset) is queued for
//     publication without waiting; a full queue drops it and counts the
//     drop (Stats.Dropped).
//   - A half-open breaker asks Redis for a fleet-wide probe permit and
//     waits at most Options.RequestBound (default 5 ms) for the answer;
//     past the bound, or when Redis is known to be unreachable, it gets the
//     permit on its local limit alone (fail open).
//
// So no request waits on Redis longer than RequestBound, only half-open
// probes can wait at all, and no request fails because of Redis: the only
// error a breaker returns is its own ErrOpen.
//
// # What is shared
//
// Per breaker name, three keys under the prefix (default
// "tierguard:breaker:"), in one Redis Cluster hash slot:
//
//	<prefix>{<id>}:state   hash: state, generation, open-until
//	<prefix>{<id>}:win     hash: fleet-wide calls and failures per time bucket
//	<prefix>{<id>}:probes  sorted set: probe leases and their ends
//
// and one channel, <prefix>events, on which every change is published.
// The id is a hash of the breaker's name (see ID): neither keys nor values
// nor messages hold a name, so a breaker.Group keyed by tenant puts no
// tenant in Redis. Values are numbers only. Every key expires: the state
// Options.StateTTL after its last write (an open state after its cooldown
// plus that), the window a tenth more than its span after its last count,
// the probe leases after Options.LeaseDuration.
//
// All writes are Lua scripts, so each change is atomic. Times are Redis's
// own clock: processes exchange durations ("open for 28.4 s more"), never
// instants, so their clocks need not agree.
//
// # Consistency model
//
// Each shared state carries a generation that grows with every change.
// A process proposes its local transitions together with the generation it
// last saw; the script accepts a proposal only if that generation is still
// current, and only along the breaker's own state machine: closed or
// half-open to open, open (cooldown over) to half-open, half-open to
// closed. Otherwise it refuses, and the proposer adopts the shared state
// instead (Stats.Stale). A reset is accepted whatever the state; a forced
// state (ForceOpen, ForceClosed) is a drill of one process and is not
// published, and a forced breaker ignores the fleet.
//
// Accepted changes are published. Every other process applies them to its
// breaker through ApplyShared (the transition's reason is "shared"), in
// generation order, within the network delay — typically a millisecond.
// Every Options.PollInterval (default 1 s) each store also reads the state
// of all its breakers, which bounds the delay when a message is lost (a
// reconnect of the subscription also triggers a poll at once).
//
// The result is eventual consistency with bounded staleness, not a lock: a
// few requests may still pass in one process in the milliseconds after
// another tripped, as they would within one process between two failures.
// When the cooldown ends, every process's timer moves it to half-open; the
// first proposal wins and the fleet as a whole admits at most
// Options.FleetProbes probes at once (default: the breaker's
// HalfOpenProbes), each holding a lease that expires after LeaseDuration if
// its process dies. The first process whose probes decide (ProbeSuccesses
// successes, or a failure) decides for everyone: its close closes every
// breaker, its reopening reopens every breaker.
//
// A closed breaker ignores a shared half-open state (it has seen nothing
// wrong); its own failures would reopen the fleet.
//
// # Fleet thresholds
//
// Besides sharing trips, the store can trip the fleet from counts that no
// single process sees: with Options.FleetFailures, when that many counted
// failures fall within the breaker's Window across all processes; with a
// failure ratio (the breaker's FailureRatio, or Options.FleetFailureRatio)
// over at least MinCalls fleet-wide calls. Outcomes are batched per breaker
// every Options.FlushInterval into a rolling window of ten buckets.
//
// # When Redis fails
//
// Unreachable, slow or restarted, Redis never makes a request wait beyond
// RequestBound or fail: every process carries on with its own breaker,
// which trips, cools down and probes on its local limits. Transitions made
// meanwhile cannot be published; the store retries in the background
// (go-redis reconnects), and when Redis answers again each poll re-syncs:
// a breaker adopts any newer shared state, and a local trip the fleet never
// heard of (a Redis that restarted empty, a dropped queue entry) is
// published again, with what is left of its cooldown. Errors are counted
// (Stats.Errors) and passed to Options.OnError.
//
// This is the opposite of a breaker that holds a Redis lock around each
// call: such a breaker fails closed when Redis is down, and makes every
// call pay a Redis round trip.
//
// # Lifecycle
//
// New does no I/O: Redis need not be up when the service starts. Close
// stops the store's goroutines and returns the probe leases it holds; the
// breakers keep working on their own. The go-redis client stays the
// caller's. Breakers cannot leave a store (breaker.Member has no such
// method): keep the number of breaker names bounded, as breaker.Group does.
package redisstore
