// Package fleet runs 50 pods against one redis-server: each pod is a set
// of goroutines with its own go-redis clients, its own breaker, rate-limit
// and spend stores (breaker/redisstore, fallback/ratelimit/redislimit,
// fallback/spend/redisspend, the latter twice: a local-first ledger and a
// strict one) and its own clocks (each store measures its own offset to
// Redis's). The pods share one upstream that the test breaks, and go
// through a 503 storm, a 429 storm, a Redis restart and a Redis pause
// (SIGSTOP, SIGCONT) under load, then through restart drills in which a
// trip and closes race while Redis is away.
//
// Each pod's worker asks for one call per Interval through its
// local-first ledger. The strict tenants are billed by Config.InFlight
// callers per pod (64) through the strict ledger, each with one request
// in flight, held Config.Hold by the upstream: with Redis healthy until
// the limit refuses every caller ("strict", and "strict-short", whose
// estimates fall short of what it bills), and through each outage.
//
// Run measures, and Report.Print tabulates: how long a trip takes to reach
// every pod; how far each tenant's spend, as the upstream counted what it
// billed, went past its limit, and for the tenants billed while Redis was
// away the bound the pods' shares put on it, computed from each pod's
// last view of the fleet's figures (TenantReport.Bound); the alerts
// (thresholds, first refusal) the fleet raised per tenant; the most calls
// the limiters admitted in any window of the quota's period with Redis up
// and across the outages; the Redis round trips per request of each
// store, the spend stores' in both modes; and the trips lost in the
// drills. The package's test runs a short version in the normal suite;
// `make fleet` runs the full one.
//
// It is a nested module so that the root module requires no Redis client.
package fleet
