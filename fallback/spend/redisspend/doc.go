// Package redisspend shares tierguard's tenant limits across processes
// through Redis: it implements spend.Store.
//
// It is a nested module, so that importing fallback/spend never pulls a
// Redis client into a build. Pass a Store as spend.Config.Store in every
// process (pod) with the same Prefix and the same tenants' allowances:
//
//	rdb := redis.NewClient(&redis.Options{Addr: "redis:6379", ContextTimeoutEnabled: true, MaxRetries: -1})
//	store, err := redisspend.New(rdb, redisspend.Options{Prefix: "myservice:spend:", Strict: true})
//	ledger, err := spend.New(spend.Config{Prices: prices, Tenants: allowances, Store: store})
//	defer ledger.Close()
//
// # Two modes
//
// Local-first (the default): requests never wait on Redis. The ledger
// decides on the fleet's figures as of its last exchange plus its own
// spending since, and exchanges them every spend.Config.SyncInterval
// (500ms by default) in one pipelined round trip — zero Redis round trips
// on a request's path, one per interval per process. A process sees
// another's spending within two SyncIntervals (the other's exchange,
// then its own) plus a round trip; meanwhile the fleet may pass a limit
// by what the other processes spend in that window (RELIABILITY.md
// measures it).
//
// Strict (Options.Strict): a tenant's spend never passes its limit across
// any number of processes while Redis answers, as long as each request's
// estimate covers what it spends. Admit reserves the estimate in Redis
// before it admits the request, one round trip to a Lua script that
// checks, atomically, the processes' stored figures plus the estimates
// reserved and not released, plus this one, against every limited
// meter; the request's end releases the reservation in the same atomic
// step that stores what it used, sent at once by the ledger's own
// goroutine, several ends in one pipelined round trip. What a request
// spends beyond its estimate is the only overshoot: the estimates the
// fleet admits never pass the limit, so the fleet passes it by no more
// than the estimates' shortfall. A reservation whose process dies before
// its request ends is freed when its Lease ends (10 minutes by default:
// make it longer than your longest request). Admit waits at most
// spend.Config.ReserveTimeout (250ms); a request whose reservation Redis
// did not answer in time is decided on the process's share (below), and
// if admitted, the next exchange makes its reservation whatever the
// figures, under the same number, so that one Redis made after all is
// neither made twice nor left to its lease. Three late replies in a row,
// or any failure, and Redis counts as away until an exchange succeeds.
// A reservation counts at least the process's own view of the fleet's
// use, should Redis hold less. Use it where a limit is money you must not
// pass; a model call lasts hundreds of times a loopback round trip.
//
// Both modes write, per tenant and current period (day, month), this
// process's cumulative tokens and cost in that period, with a Lua script
// that keeps the larger of the stored and the sent value, and read the
// values of every process back; the fleet's total is their sum, computed
// exactly in Go. Writing a cumulative figure rather than an increment
// makes every write idempotent: a write retried after a lost reply, sent
// twice, or replayed into a Redis that restarted empty never counts a
// token twice, and after a restart the totals rebuild themselves from
// each process's next exchange. Releases are idempotent too: a
// reservation is a member of a sorted set, released once.
//
// # While Redis is away
//
// When an exchange (or a reservation) fails, each process may spend, until
// an exchange succeeds, its share of what its tenants had left when it
// last saw Redis: (limit − the fleet's use − the estimates reserved) ÷
// the number of processes, that number Options.Pods, or else the
// processes that exchanged with Redis in the last 30 s. The fleet then
// passes a limit by no more than what the processes spent between their
// last exchanges (about one SyncInterval of the fleet's spending, and in
// strict mode the shortfall of estimates in flight), instead of each
// process spending the whole limit. A process that never saw Redis
// admits on its own figures. An allowance with FailClosed refuses
// instead, once the figures are older than spend.Config.MaxStaleness.
// When Redis answers again, the next exchange writes each process's
// cumulative figures, and every process agrees on the exact totals one
// exchange later. Until then Redis may not hold what the others spent on
// their shares: for two exchanges after it is back, and for as long as
// it holds less of the other processes' use than the process saw before
// (it restarted empty and they have not all written theirs again),
// requests keep to the share as well as to Redis's figures, so that no
// process spends the same money twice. A process that dies while Redis is down and empty loses
// the part of its figures Redis had not kept; with Redis persistence (AOF
// or RDB) nothing is lost.
//
// # Alerts once per fleet
//
// The Store is a spend.Claimer: a threshold's event (ThresholdReached at
// 70 %, 90 % and the limit, FirstRefusal) is reported by the first
// process that claims it in Redis, in its next exchange (it waits for one
// SyncInterval at most, or less: a process pokes its exchange when it
// finds one); the others stay silent. A fleet of 50 pods pages once.
// While Redis is away the claims wait for it (StoreFailed reports the
// outage at once): an alert comes late rather than once per pod. A
// ledger closed before Redis is back reports its waiting events
// unclaimed. The claims live in the period's hash: a Redis that restarts empty forgets
// them, and a threshold crossed again by a process that had not crossed
// it yet is reported again.
//
// # Keys
//
// One hash per tenant and period, <prefix>{<tenant hash>}:<d|m>:<period
// id>, with fields t:<process> and c:<process> (tokens and cost, in
// nano-units), r:t and r:c (the estimates reserved, strict mode) and
// e:<event> (the claims); it expires KeepAfterEnd after its period ends.
// Beside it, <the hash's key>:r, a sorted set of the reservations by
// expiry, and <prefix>pods, the processes seen in the last 30 s (without
// Options.Pods). The tenant id appears only hashed. A Cluster client puts
// each tenant's keys in one slot. Each process adds two fields per tenant
// and period, so a hash grows with the processes that served the tenant
// in the period (pod restarts included) and is read whole by each
// exchange and each reservation. The strict check compares sums as Lua
// numbers, exact to 2^53 nano-units (9 million in the currency) per
// tenant and period.
package redisspend
