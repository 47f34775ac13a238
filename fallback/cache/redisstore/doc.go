// Package redisstore shares the entries of a tierguard cache (package
// github.com/tierguard/tierguard/fallback/cache), embeddings included,
// among processes through Redis: an answer one pod's models gave serves
// every pod once their models are down, and each pod's semantic index is
// fed with the vectors the writing pod already paid for.
//
// It is a nested module, so that importing the cache never pulls a Redis
// client into a build. Lookups never touch Redis: each process looks up in
// its own memory, which the store keeps fed (a publication per save, a
// resync every Config.Resync). When Redis is down, every process keeps
// serving what it holds and its new answers stay local until Redis is
// back.
package redisstore
