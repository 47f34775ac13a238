// Package redisspend shares tierguard's tenant limits across processes
// through Redis: it implements spend.Store.
//
// It is a nested module, so that importing fallback/spend never pulls a
// Redis client into a build. Pass a Store as spend.Config.Store in every
// process (pod) with the same Prefix and the same tenants' allowances:
//
//	rdb := redis.NewClient(&redis.Options{Addr: "redis:6379", ContextTimeoutEnabled: true, MaxRetries: -1})
//	store, err := redisspend.New(rdb, redisspend.Options{Prefix: "myservice:spend:"})
//	ledger, err := spend.New(spend.Config{Prices: prices, Tenants: allowances, Store: store})
//	defer ledger.Close()
//
// # How the figures are shared
//
// Requests never wait on Redis: the ledger decides on the fleet's figures
// as of its last exchange plus its own spending since, and exchanges them
// every spend.Config.SyncInterval (500ms by default) in one pipelined round
// trip — asynchronous, batched writes: zero Redis round trips on a
// request's path, one per interval per process (per node with a Cluster
// client).
//
// Each exchange writes, per tenant and current period (day, month), this
// process's cumulative tokens and cost in that period, with a Lua script
// that keeps the larger of the stored and the sent value, and reads the
// values of every process back; the fleet's total is their sum, computed
// exactly in Go. Writing a cumulative figure rather than an increment
// makes every write idempotent: a write retried after a lost reply, sent
// twice, or replayed into a Redis that restarted empty never counts a
// token twice, and after a restart the totals rebuild themselves from
// each process's next exchange.
//
// # Staleness and failure
//
// A process sees another's spending within two SyncIntervals (the other's
// exchange, then its own) plus a round trip. While it cannot see it, the
// fleet may overshoot a limit by what the other processes spend in that
// window. When Redis is down or slow, each exchange fails within
// spend.Config.SyncTimeout; the ledger keeps admitting on its own figures
// (fail open, the default) or, for an allowance with FailClosed, refuses
// once the figures are older than spend.Config.MaxStaleness. When Redis
// answers again, the next exchange (at most one SyncInterval later, plus
// the client's reconnection) writes each process's cumulative figures,
// and every process agrees on the exact totals one exchange later. What a
// process spent while Redis was away counts in full; what other processes
// spent meanwhile was invisible to it, which is the overshoot bound above
// for the length of the outage. A process that dies while Redis is down
// and empty loses the part of its figures Redis had not kept; with Redis
// persistence (AOF or RDB) nothing is lost.
//
// # Keys
//
// One hash per tenant and period, <prefix>{<tenant hash>}:<d|m>:<period
// id>, with fields t:<process> and c:<process> (tokens and cost, in
// nano-units); it expires KeepAfterEnd after its period ends. The tenant
// id appears only hashed. A Cluster client puts each tenant's keys in one
// slot. Each process adds two fields per tenant and period, so a hash
// grows with the processes that served the tenant in the period (pod
// restarts included) and is read whole by each exchange.
package redisspend
