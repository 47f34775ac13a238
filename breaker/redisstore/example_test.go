package redisstore_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/breaker/redisstore"
)

// Every pod of a service runs the same code: one Store per Redis client,
// and the breakers (here a group keyed by model) joined to it. When one pod
// trips the breaker of a model, the others stop calling that model within
// milliseconds; when Redis is away, each pod keeps its own breaker.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	store, err := redisstore.New(rdb, redisstore.Options{
		Prefix:       "myservice:breaker:",
		RequestBound: 5 * time.Millisecond,
		OnError:      func(err error) { log.Print(err) },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	models, err := breaker.NewGroup(breaker.Config{
		Name:                "gemini",
		ConsecutiveFailures: 5,
		Cooldown:            30 * time.Second,
		Store:               store,
	}, 16)
	if err != nil {
		log.Fatal(err)
	}

	answer, err := breaker.Do(context.Background(), models.Get("gemini-2.5-pro"), func(context.Context) (string, error) {
		return "", errors.New("503 UNAVAILABLE") // the model call
	})
	if errors.Is(err, breaker.ErrOpen) {
		answer = "fallback" // the circuit is open fleet-wide: no call was made
	}
	_ = answer
}
