package redislimit_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback/ratelimit"
	"github.com/tierguard/tierguard/fallback/ratelimit/redislimit"
	"github.com/tierguard/tierguard/internal/testbed/redisserver"
)

// pod is one process of a fleet: its own Redis client, store and limiter.
type pod struct {
	store *redislimit.Store
	lim   *ratelimit.Limiter
}

func newPod(t *testing.T, addr, prefix string, cfg ratelimit.Config, opts redislimit.Options) pod {
	t.Helper()
	opts.Prefix = prefix
	if opts.RequestBound == 0 {
		// Generous, so that a loaded machine does not make the store fail
		// open where the test wants Redis's answer.
		opts.RequestBound = 500 * time.Millisecond
	}
	s, err := redislimit.New(client(t, addr), opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	cfg.Store = s
	l, err := ratelimit.New(cfg)
	require.NoError(t, err)
	t.Cleanup(l.Close)
	return pod{store: s, lim: l}
}

// TestFleetSharesOneQuota: two processes with a limiter of the same name
// admit, together, what one would: the fleet's burst, plus at most the
// turns each holds at hand; alone, each would have admitted the whole
// burst.
func TestFleetSharesOneQuota(t *testing.T) {
	srv := redisserver.Need(t, shared)
	p := prefix(t)
	cfg := ratelimit.Config{Name: "gemini-2.5-pro", Requests: 11, Burst: 10, Per: time.Hour}
	a := newPod(t, srv.Addr, p, cfg, redislimit.Options{Prefetch: 2})
	b := newPod(t, srv.Addr, p, cfg, redislimit.Options{Prefetch: 2})
	admitted := 0
	for range 20 {
		for _, x := range []pod{a, b} {
			if x.lim.Allow(0) {
				admitted++
			}
		}
	}
	assert.LessOrEqual(t, admitted, 10, "never more than the fleet's burst")
	assert.GreaterOrEqual(t, admitted, 10-2*2, "less at most what each holds at hand")
	assert.Positive(t, a.store.Stats().Refused+b.store.Stats().Refused)
	assert.True(t, a.store.Stats().Healthy)
}

// TestFleetRefusalSaysWhenToComeBack: once the fleet's quota is spent, a
// call is refused with the time until the fleet's next turn, and nothing
// is held locally.
func TestFleetRefusalSaysWhenToComeBack(t *testing.T) {
	srv := redisserver.Need(t, shared)
	p := prefix(t)
	cfg := ratelimit.Config{Name: "pro", Requests: 61, Burst: 1} // one a second
	a := newPod(t, srv.Addr, p, cfg, redislimit.Options{})
	b := newPod(t, srv.Addr, p, cfg, redislimit.Options{})
	require.True(t, a.lim.Allow(0))
	r := b.lim.Reserve(0)
	require.True(t, r.OK())
	assert.True(t, r.Retry(), "the fleet's turn is spent")
	assert.Greater(t, r.Delay(), 500*time.Millisecond)
	assert.LessOrEqual(t, r.Delay(), time.Second)
	assert.InDelta(t, 1, b.lim.Stats().Requests, 1e-3, "b's own bucket is untouched")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	require.NoError(t, b.lim.Wait(ctx, 0), "b's turn comes")
}

// TestTokenCorrectionReachesTheFleet: a call that used more tokens than
// its estimate takes them from the fleet's bucket too, so another process
// is refused.
func TestTokenCorrectionReachesTheFleet(t *testing.T) {
	srv := redisserver.Need(t, shared)
	p := prefix(t)
	cfg := ratelimit.Config{Name: "pro", Tokens: 1_000_000, TokenBurst: 1000, Per: time.Hour}
	a := newPod(t, srv.Addr, p, cfg, redislimit.Options{})
	b := newPod(t, srv.Addr, p, cfg, redislimit.Options{})
	require.True(t, a.lim.Allow(100))
	a.lim.Adjust(800) // it used 900
	requireEventually(t, func() bool {
		r := b.lim.Reserve(200)
		if r.Retry() || r.Delay() > 0 {
			r.Cancel()
			return true
		}
		r.Cancel()
		return false
	}, "b sees the fleet's 900 tokens spent")
}

// TestHoldReachesTheFleet: a 429 seen by one process holds the others'
// calls for the wait the server asked for.
func TestHoldReachesTheFleet(t *testing.T) {
	srv := redisserver.Need(t, shared)
	p := prefix(t)
	cfg := ratelimit.Config{Name: "pro", Requests: 6000, Burst: 100}
	a := newPod(t, srv.Addr, p, cfg, redislimit.Options{})
	b := newPod(t, srv.Addr, p, cfg, redislimit.Options{})
	require.True(t, b.lim.Allow(0))
	a.lim.Throttle(30 * time.Second)
	requireEventually(t, func() bool {
		r := b.lim.Reserve(0)
		r.Cancel()
		return r.Retry() && r.Delay() > 20*time.Second
	}, "b is held")
}

// TestRedisDownFailsOpen: with Redis stopped, calls are admitted on the
// local limit without waiting on Redis past the bound (and, once the store
// knows, without waiting at all); when Redis is back, the fleet's limit
// applies again.
func TestRedisDownFailsOpen(t *testing.T) {
	srv := redisserver.Start(t)
	var mu sync.Mutex
	var errs []error
	// Pods: 1, the local limit alone decides while Redis is out (left at
	// 0, it would once a second pod had taken turns).
	opts := redislimit.Options{Pods: 1, RequestBound: 20 * time.Millisecond, RetryHealth: 50 * time.Millisecond,
		OnError: func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }}
	cfg := ratelimit.Config{Name: "tenant-acme", Requests: 1001, Burst: 1000, Per: time.Hour}
	p := prefix(t)
	a := newPod(t, srv.Addr, p, cfg, opts)
	require.True(t, a.lim.Allow(0))
	srv.Kill()
	start := time.Now()
	for range 50 {
		require.True(t, a.lim.Allow(0), "fail open: the local limit decides")
	}
	elapsed := time.Since(start)
	// 50 calls; at most one waits the bound (the dial fails faster). Had
	// they waited on Redis, each would have taken an operation timeout
	// (1 s): 50 s. The margin leaves room for a loaded machine.
	assert.Less(t, elapsed, 5*time.Second)
	st := a.store.Stats()
	assert.False(t, st.Healthy)
	assert.Positive(t, st.FailedOpen)
	requireEventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(errs) > 0 }, "the failure is reported")
	mu.Lock()
	var re *redislimit.Error
	require.True(t, errors.As(errs[0], &re))
	assert.NotContains(t, re.Error(), "acme", "errors name the limit by its hash")
	mu.Unlock()

	require.NoError(t, srv.Restart())
	requireEventually(t, func() bool { a.lim.Allow(0); return a.store.Stats().Healthy }, "healthy again")
	// The fleet's bucket is shared again: another process sees what this
	// one spends.
	// b waits on Redis as long as newPod's default bound, so that a loaded
	// machine does not send it to its local limit while it spends the
	// fleet's quota.
	bopts := opts
	bopts.RequestBound = 0
	b := newPod(t, srv.Addr, p, ratelimit.Config{Name: "tenant-acme", Requests: 1001, Burst: 1000, Per: time.Hour}, bopts)
	for b.lim.Allow(0) {
	}
	assert.GreaterOrEqual(t, a.lim.Stats().Requests, 1.0, "a's own limit has room")
	a.lim.Allow(0) // the turn a holds at hand, if any
	assert.False(t, a.lim.Allow(0), "but the fleet's quota is spent")
}

// TestRedisPausedBoundsTheWait: a Redis that holds its connections but
// answers nothing costs a call at most the bound, and later calls nothing.
func TestRedisPausedBoundsTheWait(t *testing.T) {
	srv := redisserver.Start(t)
	cfg := ratelimit.Config{Name: "pro", Requests: 1001, Burst: 1000, Per: time.Hour}
	a := newPod(t, srv.Addr, prefix(t), cfg, redislimit.Options{RequestBound: 20 * time.Millisecond, OpTimeout: 10 * time.Second})
	require.True(t, a.lim.Allow(0))
	require.NoError(t, srv.Freeze())
	defer func() { _ = srv.Thaw() }()
	var worst time.Duration
	for range 20 {
		start := time.Now()
		require.True(t, a.lim.Allow(0))
		worst = max(worst, time.Since(start))
	}
	// A call waiting on the frozen Redis would take the 10 s operation
	// timeout; the bound is 20 ms, and the margin is for a loaded machine.
	assert.Less(t, worst, 3*time.Second, "bounded by RequestBound, not by the operation timeout")
	assert.False(t, a.store.Stats().Healthy)
	require.NoError(t, srv.Thaw())
}

func TestOptionsAreChecked(t *testing.T) {
	_, err := redislimit.New(nil, redislimit.Options{})
	assert.Error(t, err)
	_, err = redislimit.New(client(t, redisserver.Need(t, shared).Addr), redislimit.Options{Prefix: "a b{", RequestBound: -1, Prefetch: -1, Pods: -1})
	require.Error(t, err)
	for _, f := range []string{"Prefix", "RequestBound", "Prefetch", "Pods"} {
		assert.Contains(t, err.Error(), f)
	}
	assert.Len(t, redislimit.ID("tenant/acme"), 32)
}
