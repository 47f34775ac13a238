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
//	<prefix>{<id>}:state   hash: state, generation, open-until, decided, chain start
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
// own clock (TIME), and the processes' clocks need not agree: no process
// reads another's clock. Each store measures, per breaker, the offset from
// its monotonic clock to the clock of the Redis server holding that
// breaker's keys, on every reply: Redis's clock was read between sending
// and receiving, so the offset is at least "Redis time − received"; the
// store keeps the highest such bound, which the fastest reply makes tight
// (within that reply's round trip), and starts again from a reply that
// contradicts it (Redis's clock went back, after a failover say). With it a
// proposal states instants in Redis's clock: when its cooldown ends, when
// it was decided, until when it is valid. Redis answers, and publishes,
// durations from its present ("open for 28.4 s more", "decided 3 s ago"),
// which each receiver counts from the moment it reads them.
//
// # Consistency model
//
// Each shared state carries a generation that grows with every change
// (max(previous + 1, Redis's time in ms), so that it keeps growing after
// Redis lost the state). A process proposes each local transition with:
// the generation it last saw (its base), its own id (so that it ignores the
// publication of its own change), the instant it made the transition, and
// an expiry. The script
//
//   - ignores a proposal executed after its expiry (Stats.Expired): the
//     proposer has stopped waiting for the answer by then, because Redis
//     was paused or slow. A transition's expiry is Options.OpTimeout after
//     it was sent, a request for a probe permit's is RequestBound after the
//     request began (so a permit granted too late leaves no lease behind),
//     a batch of fleet counts' is OpTimeout after it was sent. An expired
//     trip is published again by the next poll, with its own end of
//     cooldown: an open state ends at the instant its proposer's cooldown
//     ends, however late Redis executes the proposal;
//   - accepts a proposal only if its base is still the current generation,
//     and only along the breaker's own state machine: closed, half-open or
//     an open state whose cooldown has ended to open; open (cooldown over)
//     to half-open; half-open (or an ended open) to closed. A trip while
//     the shared cooldown runs is agreed without a write: the first trip's
//     end stands. Otherwise it refuses, and the proposer adopts the shared
//     state instead (Stats.Stale);
//   - accepts a reset whatever the base, unless the reset was decided
//     before the current shared state was.
//
// A forced state (ForceOpen, ForceClosed) is a drill of one process and is
// not published, and a forced breaker ignores the fleet.
//
// An absent state (closed at generation 0: never written, expired, or lost
// when Redis restarted empty) has no generation to check a base against,
// so it accepts any proposal, including one queued before Redis lost the
// state, whose proposer knew nothing of what happened since. To tell those
// apart, each state records when its chain of states began (the first
// write onto an absent state); a state decided before its chain began is
// unconfirmed. A process whose breaker is open or half-open does not adopt
// an unconfirmed half-open or closed state that was decided before its own
// state: it keeps its state and, when open, publishes its trip again (its
// base is then that state's generation, so the trip is accepted). Shared
// open states are adopted whatever their age. Decisions that close
// together cannot be ordered across processes (each times its own on its
// clock, converted to Redis's within a round trip), so an unconfirmed
// state decided less than 250 ms after the breaker's own counts as
// concurrent with it, and the open or half-open state wins: a pod that
// closed within a millisecond of another's trip, both while Redis was
// away, does not end that trip. Decision times are read on Redis's clock,
// from a poll or a proposal's answer (a publication of an unconfirmed
// state triggers a poll), not from when a loaded process got to read
// them.
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
// a breaker adopts any newer shared state, and a local trip the fleet does
// not show (a Redis that restarted empty, a dropped queue entry, an
// expired proposal, a stale state kept against) is published again, ending
// when its own cooldown ends. Proposals that were queued while Redis was
// away are written in order when it answers; the rules above keep the old
// ones from undoing newer decisions. A Redis that freezes (SIGSTOP, a
// stalled VM) runs the commands waiting in its sockets when it resumes:
// those past their expiry change nothing, and a trip that runs in time
// still ends when its proposer's cooldown ends. Errors are counted
// (Stats.Errors) and passed to Options.OnError.
//
// This is the opposite of a breaker that holds a Redis lock around each
// call: such a breaker fails closed when Redis is down, and makes every
// call pay a Redis round trip.
//
// # Lifecycle
//
// New does no I/O: Redis need not be up when the service starts. A breaker
// asks Redis for probe permits only once a reply has measured the clock
// offset for it (the poll that Join starts); until then it probes on its
// local limit. Close stops the store and returns the probe leases it
// holds, and returns within twice RequestBound whatever Redis does and
// whatever the client's timeouts and retries; a goroutine still inside a
// Redis call then ends when go-redis returns it (its own timeouts, or
// closing the client) and changes no breaker after Close. The breakers keep
// working on their own. The go-redis client stays the caller's.
//
// The store holds its breakers weakly: a breaker nobody holds any more (one
// made per request or per tenant and then dropped) leaves the store when it
// is garbage collected (breaker.Member.Leave), and its keys expire with
// StateTTL. A breaker.Group holds its breakers for good.
package redisstore
