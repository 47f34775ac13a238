// Package redislimit shares fallback/ratelimit quotas across processes
// through Redis, so that a fleet of pods stays under one upstream quota
// together: each Limiter of the same name, in every process, draws on one
// fleet-wide bucket.
//
//	store, err := redislimit.New(rdb, redislimit.Options{Prefix: "myservice:ratelimit:"})
//	defer store.Close()
//	lim, err := ratelimit.New(ratelimit.Config{Name: "gemini-2.5-pro", Requests: 1000, Tokens: 4_000_000, Store: store})
//
// The fleet's bucket is the local one's twin — the generic cell rate
// algorithm, its arrival time one key per limit, updated by a Lua script
// on Redis's own clock — so no window of Per holds more than the quota
// across the fleet, plus at most Options.Prefetch turns per process.
//
// It is local-first, with the fail-open rules of breaker/redisstore: a
// call is admitted by the process's own limiter first, then takes a fleet
// turn the process already holds (prefetched in the background); only a
// call that finds none waits on Redis, at most Options.RequestBound (5 ms),
// or twice the slowest round trip the store measured lately when that is
// longer (a loaded host reads its replies late), up to 20 times it. A
// call whose reply is later than that is decided by the process's share
// of the quota, and the late reply tells the fleet: one slow reply is no
// outage. After Options.OutageAfter (3) late replies in a row, a take
// unanswered for that many of the longest bounds (Redis paused), or a
// failed operation (Redis down), nothing waits on Redis again until a
// background check finds it answering, and then the fleet limit applies
// again. Meanwhile each process keeps to its share of the quota,
// 1/Options.Pods of it — set Pods to the number of processes — so that
// the fleet stays near its quota (within 110 % in the tests, killed or
// paused). A share is not emptied when Redis goes out: it holds what the
// process has not spent of it lately through the fleet, so a quiet
// process serves a burst at once while a busy one has little left. For a
// window after Redis is back from an outage in which a health check found
// it unreachable, a call needs room in the share too, so the
// processes still out do not add their shares to the fleet's whole rate.
// Without Pods, the share is 1/N of the quota, N the processes Redis last
// saw taking the limit's turns within 30 s; with Pods: 1 each process goes
// on under its local limit alone, the whole quota, and a fleet of N
// processes spends N times it. Keys hold a hash of the limiter's name
// (ID), never the name; the processes are named by a random token of
// each store.
//
//	store, err := redislimit.New(rdb, redislimit.Options{Prefix: "myservice:ratelimit:", Pods: 8})
package redislimit
