package benchcmp

import (
	"runtime"
	"strconv"
	"sync"

	"github.com/sony/gobreaker/v2"
	"golang.org/x/time/rate"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/fallback/ratelimit"
)

// TierguardBreakerGroup is a breaker.Group of TierguardBreaker's settings
// with room for keys keys of their own.
func TierguardBreakerGroup(keys int) *breaker.Group {
	g, err := breaker.NewGroup(breaker.Config{Name: "pro", ConsecutiveFailures: TripAfter, Cooldown: OpenFor}, keys)
	if err != nil {
		panic(err)
	}
	return g
}

// TierguardBulkheadGroup is a bulkhead.Group of TierguardBulkhead's
// settings with room for keys keys of their own.
func TierguardBulkheadGroup(keys int) *bulkhead.Group {
	g, err := bulkhead.NewGroup(bulkhead.Config{Name: "pro", Max: Slots}, keys)
	if err != nil {
		panic(err)
	}
	return g
}

// TierguardLimiterGroup is a ratelimit.Group of TierguardLimiter's
// settings for q with room for keys keys of their own.
func TierguardLimiterGroup(q RateQuota, keys int) *ratelimit.Group {
	g, err := ratelimit.NewGroup(ratelimit.Config{Name: "pro", Requests: q.Requests, Per: q.Per, Burst: q.Burst}, keys)
	if err != nil {
		panic(err)
	}
	return g
}

// SyncMapGroup is the floor of a group: a sync.Map of one T per key,
// made by New on first use. Unlike tierguard's groups it has no bound on
// its keys, and its members are named by their keys in clear.
type SyncMapGroup[T any] struct {
	m   sync.Map
	New func(key string) T
}

// Get returns key's member, creating it on first use.
func (g *SyncMapGroup[T]) Get(key string) T {
	if v, ok := g.m.Load(key); ok {
		return v.(T)
	}
	v, _ := g.m.LoadOrStore(key, g.New(key))
	return v.(T)
}

// GoBreakerGroup is a SyncMapGroup of gobreaker breakers of
// GoBreakerSettings, each named by its key.
func GoBreakerGroup() *SyncMapGroup[*gobreaker.CircuitBreaker[string]] {
	return &SyncMapGroup[*gobreaker.CircuitBreaker[string]]{New: func(key string) *gobreaker.CircuitBreaker[string] {
		st := GoBreakerSettings(false)
		st.Name = key
		return gobreaker.NewCircuitBreaker[string](st)
	}}
}

// Semaphore is the floor of a bulkhead: a buffered channel of Slots.
type Semaphore chan struct{}

// TryAcquire takes a slot if one is free.
func (s Semaphore) TryAcquire() bool {
	select {
	case s <- struct{}{}:
		return true
	default:
		return false
	}
}

// Release returns a slot.
func (s Semaphore) Release() { <-s }

// SemaphoreGroup is a SyncMapGroup of Semaphores of Slots slots.
func SemaphoreGroup() *SyncMapGroup[Semaphore] {
	return &SyncMapGroup[Semaphore]{New: func(string) Semaphore { return make(Semaphore, Slots) }}
}

// XRateGroup is a SyncMapGroup of XRateLimiter limiters of q.
func XRateGroup(q RateQuota) *SyncMapGroup[*rate.Limiter] {
	return &SyncMapGroup[*rate.Limiter]{New: func(string) *rate.Limiter { return XRateLimiter(q) }}
}

// GroupKeys returns n distinct keys shaped as tenant ids.
func GroupKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "tenant-" + strconv.Itoa(1_000_000_000+i)
	}
	return keys
}

// BytesPerKey creates a member for every key with get and returns the
// heap the members hold, per key: HeapAlloc after a collection, before and
// after, divided by the keys. The keys themselves were allocated before
// and are not counted; whatever get's group copies of them is. Nothing
// else should allocate meanwhile.
func BytesPerKey(keys []string, get func(key string)) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, k := range keys {
		get(k)
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(get)
	runtime.KeepAlive(keys)
	return (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(len(keys))
}
