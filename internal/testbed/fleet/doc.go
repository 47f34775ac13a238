// Package fleet runs 50 pods against one redis-server: each pod is a set
// of goroutines with its own go-redis clients, its own breaker, rate-limit
// and spend stores (breaker/redisstore, fallback/ratelimit/redislimit,
// fallback/spend/redisspend) and its own clocks (each store measures its
// own offset to Redis's). The pods share one upstream that the test
// breaks, and go through a 503 storm, a 429 storm, a Redis restart and a
// Redis pause (SIGSTOP, SIGCONT) under load, then through restart drills
// in which a trip and closes race while Redis is away.
//
// Run measures, and Report.Print tabulates: how long a trip takes to reach
// every pod, how far each tenant's spend went past its limit, the most
// calls the limiters admitted in any window of the quota's period with
// Redis up and across the outages, the Redis round trips per request of
// each store, and the trips lost in the drills. The package's test runs a
// short version in the normal suite; `make fleet` runs the full one.
//
// It is a nested module so that the root module requires no Redis client.
package fleet
