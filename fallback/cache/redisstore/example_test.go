package redisstore_test

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/tierguard/tierguard/fallback/cache"
	"github.com/tierguard/tierguard/fallback/cache/redisstore"
)

// Every pod builds the same cache over its own Store: an answer one pod
// caches is served by all of them.
func ExampleNew() {
	client := redis.NewClient(&redis.Options{Addr: "redis:6379"})
	defer client.Close()
	store, err := redisstore.New(redisstore.Config{Client: client, Prefix: "myservice:cache:"})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	answers, err := cache.New(cache.Config[string, string]{
		Prompt: func(q string) string { return q },
		Store:  store,
	})
	if err != nil {
		panic(err)
	}
	defer answers.Close() // before the store: deferred calls run last first
	answers.Put(context.Background(), "What are your opening hours?", "9 to 5, Monday to Friday.")
}
