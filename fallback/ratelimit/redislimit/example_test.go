package redislimit_test

import (
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/tierguard/tierguard/fallback/ratelimit"
	"github.com/tierguard/tierguard/fallback/ratelimit/redislimit"
)

// Every pod builds the same limiter over one store: together they stay
// under the tier's quota of 1,000 requests and 4M tokens a minute. Eight
// pods share it: while Redis is out, each keeps to an eighth.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	store, err := redislimit.New(rdb, redislimit.Options{Prefix: "myservice:ratelimit:", Pods: 8})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	lim, err := ratelimit.New(ratelimit.Config{Name: "gemini-2.5-pro", Requests: 1000, Tokens: 4_000_000, Store: store})
	if err != nil {
		log.Fatal(err)
	}
	_ = lim // fallback.Stage{Tier: ratelimit.Tier(pro, ratelimit.TierConfig[string]{Limiter: lim})}
}
