package redislimit_test

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/ratelimit"
	"github.com/tierguard/tierguard/fallback/ratelimit/redislimit"
	"github.com/tierguard/tierguard/internal/testbed/redisserver"
)

// TestCancelGivesTheFleetItsTurnBack: a call the fleet granted and that
// is not made after all (a tenant's limiter in front of a tier's that
// refuses it, a caller that gives up) gives its turn back to the turns at
// hand, so twenty reserved and cancelled calls cost the fleet no more
// than the turns one process holds. Before, each one spent a fleet turn
// for good: another process found the fleet's burst gone.
func TestCancelGivesTheFleetItsTurnBack(t *testing.T) {
	srv := redisserver.Need(t, shared)
	p := prefix(t)
	cfg := ratelimit.Config{Name: "tenant-acme", Requests: 11, Burst: 10, Per: time.Hour}
	a := newPod(t, srv.Addr, p, cfg, redislimit.Options{})
	b := newPod(t, srv.Addr, p, cfg, redislimit.Options{})
	for range 20 {
		r := a.lim.Reserve(0)
		require.False(t, r.Retry())
		require.Zero(t, r.Delay())
		r.Cancel()
	}
	n := 0
	for b.lim.Allow(0) {
		n++
	}
	// a holds its given-back turn and a prefetch at hand; b may stop with
	// a prefetch of its own on the way.
	assert.GreaterOrEqual(t, n, 10-(redislimit.DefaultPrefetch+1)-redislimit.DefaultPrefetch, "the fleet's burst, less what is at hand")
}

// TestChainStageUnderContentionThroughRedis: 64 callers, over two pods
// that share a stage's quota of 600 calls per 2 s through Redis, ask
// again every 5 ms through a fallback.Chain. The fleet passes what the
// quota allows over the run — the burst and the rate — less at most 5 %,
// and no window of 2 s holds more than the quota plus the turns each pod
// holds at hand (Prefetch). The clock is the machine's (Redis keeps the
// fleet's time); what is counted is calls per window of the limiter's
// own Per, never how long anything took.
func TestChainStageUnderContentionThroughRedis(t *testing.T) {
	srv := redisserver.Need(t, shared)
	p := prefix(t)
	const quota, burst, per = 600, 60, 2 * time.Second
	cfg := ratelimit.Config{Name: "gemini-2.5-pro", Requests: quota, Per: per}
	start := time.Now()
	var mu sync.Mutex
	var calls []time.Duration
	pro := fallback.Tier("pro", func(context.Context, string) (string, error) {
		at := time.Since(start)
		mu.Lock()
		calls = append(calls, at)
		mu.Unlock()
		return "pro", nil
	})
	flash := fallback.Tier("flash", func(context.Context, string) (string, error) { return "flash", nil })
	var chains []*fallback.Chain[string, string]
	var pods []pod
	var emu sync.Mutex
	var firstErr error
	for range 2 {
		// Each caller without a turn at hand asks Redis: 32 at once per
		// pod. A client with room for them, and timeouts a loaded machine
		// keeps to, so that what is measured is the fleet's limit, not
		// the client's pool. Pods: should Redis still be slower than the
		// bound, the pod keeps to its half meanwhile, and tells the fleet
		// after.
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, PoolSize: 64, ReadTimeout: 2 * time.Second,
			WriteTimeout: 2 * time.Second, PoolTimeout: 2 * time.Second, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = rdb.Close() })
		store, err := redislimit.New(rdb, redislimit.Options{Prefix: p, Pods: 2, RequestBound: 500 * time.Millisecond,
			OnError: func(err error) {
				emu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				emu.Unlock()
			}})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, store.Close()) })
		lcfg := cfg
		lcfg.Store = store
		lim, err := ratelimit.New(lcfg)
		require.NoError(t, err)
		t.Cleanup(lim.Close)
		x := pod{store: store, lim: lim}
		pods = append(pods, x)
		c, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: ratelimit.Tier(pro, ratelimit.TierConfig[string]{Limiter: x.lim})}, {Tier: flash},
		}})
		require.NoError(t, err)
		chains = append(chains, c)
	}
	const run = 3 * per
	lag, stopLag := probeLag()
	var wg sync.WaitGroup
	for i := range 64 {
		c := chains[i%2]
		wg.Go(func() {
			for time.Since(start) < run {
				_, err := c.Do(context.Background(), "q")
				assert.NoError(t, err)
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopLag()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(calls)
	worst, _ := worstWindow(calls, per)
	ceiling := burst + float64(quota-burst)*elapsed.Seconds()/per.Seconds()
	// A call is timed after its turn was granted: a caller the scheduler
	// held in between is timed late, so a window of the calls' times may
	// hold what the quota granted over Per and the lag measured in this
	// run.
	lagAllowance := int(math.Ceil(float64(quota) * lag.Load().Seconds() / per.Seconds()))
	t.Logf("%d calls in %v, %.0f allowed (%.1f %%); worst window %d of %d (scheduler lag %v: %d more allowed); stores %+v, %+v", len(calls), elapsed.Round(time.Millisecond), ceiling,
		100*float64(len(calls))/ceiling, worst, quota, lag.Load(), lagAllowance, pods[0].store.Stats(), pods[1].store.Stats())
	emu.Lock()
	if firstErr != nil {
		t.Logf("first Redis error: %v", firstErr)
	}
	emu.Unlock()
	// Callers the scheduler held for as long as the lag measured could
	// not take the turns of that time: the same allowance, the other way.
	assert.GreaterOrEqual(t, float64(len(calls)), 0.95*ceiling-float64(lagAllowance), "the fleet passes its quota")
	assert.LessOrEqual(t, worst, quota+2*redislimit.DefaultPrefetch+lagAllowance, "never more than the quota and the turns at hand")
	// Each refused ask used to send every caller of the pod to Redis for
	// the same next turn: 26 takes per granted one here.
	for i, x := range pods {
		st := x.store.Stats()
		assert.LessOrEqual(t, st.Takes, 12*st.Granted, "pod %d: takes per granted turn", i)
	}
}

// TestCallersOfOneProcessShareOneAsk: 32 callers of one process find
// nothing at hand at once while the fleet's turn is spent. One asks Redis;
// the others wait for its answer, and are refused by it, with the time
// the fleet's next turn comes. Before, each of them asked Redis.
func TestCallersOfOneProcessShareOneAsk(t *testing.T) {
	srv := redisserver.Need(t, shared)
	p := prefix(t)
	// b's own bucket admits all 32; the fleet's burst is a's to spend.
	cfg := ratelimit.Config{Name: "pro", Requests: 1000, Burst: 50, Per: time.Hour}
	a := newPod(t, srv.Addr, p, cfg, redislimit.Options{})
	b := newPod(t, srv.Addr, p, cfg, redislimit.Options{})
	for n := 0; a.lim.Allow(0); n++ {
		require.Less(t, n, 50, "a spends the fleet's burst")
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	var admitted atomic.Int64
	for range 32 {
		wg.Go(func() {
			<-start
			if b.lim.Allow(0) {
				admitted.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	assert.Zero(t, admitted.Load(), "the fleet's turn was spent")
	st := b.store.Stats()
	assert.Equal(t, uint64(1), st.Takes, "one ask for the 32 callers: %+v", st)
	assert.Equal(t, uint64(1), st.Refused)
}

// probeLag measures, until stop is called, how late a 1 ms ticker fires:
// the scheduler lag a loaded machine adds to every wake-up, in this run.
func probeLag() (worst *atomicDuration, stop func()) {
	worst = new(atomicDuration)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		prev := time.Now()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				now := time.Now()
				worst.raise(now.Sub(prev) - time.Millisecond)
				prev = now
			}
		}
	}()
	return worst, func() { close(done); <-finished }
}

// atomicDuration is a duration that only grows.
type atomicDuration struct{ v atomic.Int64 }

func (d *atomicDuration) raise(x time.Duration) {
	for {
		cur := d.v.Load()
		if int64(x) <= cur || d.v.CompareAndSwap(cur, int64(x)) {
			return
		}
	}
}

func (d *atomicDuration) Load() time.Duration { return time.Duration(d.v.Load()) }
