package redisstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/breaker/redisstore"
	"github.com/tierguard/tierguard/internal/testbed/redisserver"
)

const (
	// maxRequestLatency is what 99% of requests (Allow plus Done) may take
	// on a loaded two-core machine with the race detector.
	maxRequestLatency = 50 * time.Millisecond
	// maxStall is what the slowest request may take: a thread descheduled
	// on a busy machine, but far below Redis's stall (2 s) and go-redis's
	// timeouts (5 s), so a request that waited on Redis would show.
	maxStall = 500 * time.Millisecond
)

// latencies collects request latencies.
type latencies []time.Duration

// timed runs one request on b, records how long Allow and Done took, and
// returns Allow's error.
func (l *latencies) timed(b *breaker.Breaker, o breaker.Outcome) error {
	start := time.Now()
	tok, err := b.Allow()
	if err == nil {
		tok.Done(o)
	}
	*l = append(*l, time.Since(start))
	return err
}

func (l latencies) check(t *testing.T, what string, bound time.Duration) {
	t.Helper()
	s := slices.Clone(l)
	slices.Sort(s)
	p99, worst := s[len(s)*99/100], s[len(s)-1]
	t.Logf("%s: %d requests, p50 %v, p99 %v, max %v", what, len(s), s[len(s)/2], p99, worst)
	assert.Less(t, p99, bound, "%s: p99", what)
	assert.Less(t, worst, bound+maxStall, "%s: no request waited on Redis", what)
}

// TestRedisKilled: Redis dies mid-run. No request fails or waits because
// of it, the breakers keep protecting locally, and when Redis comes back
// (empty) the fleet re-learns the trip made meanwhile.
func TestRedisKilled(t *testing.T) {
	srv := redisserver.Start(t)
	opts := redisstore.Options{PollInterval: 50 * time.Millisecond, OpTimeout: 200 * time.Millisecond}
	sa, sb := newStore(t, srv.Addr, opts), newStore(t, srv.Addr, opts)
	cfg := breaker.Config{ConsecutiveFailures: 3, Cooldown: 20 * time.Second}
	a, _ := newBreaker(t, sa, cfg)
	b, hb := newBreaker(t, sb, cfg)
	quick := breaker.Config{Name: "flash", ConsecutiveFailures: 1, Cooldown: 30 * time.Millisecond}
	fa, _ := newBreaker(t, sa, quick)
	waitSubscribed(t, srv.Addr, sa.Channel(), 2)

	srv.Kill()

	var lat latencies
	// A's model fails: A trips on its own.
	for i := range 3 {
		require.NoError(t, lat.timed(a, breaker.Failure), "call %d: Redis is down, the breaker is closed", i)
	}
	require.Equal(t, breaker.Open, a.State(), "the local breaker still protects")
	var oe *breaker.OpenError
	require.ErrorAs(t, lat.timed(a, breaker.Success), &oe, "the only error a request sees is the local rejection")
	// B's model is fine: B serves.
	for range 200 {
		require.NoError(t, lat.timed(b, breaker.Success))
	}
	// A half-open breaker probes without a fleet permit (the first may wait
	// RequestBound, before the store knows Redis is down).
	for range 3 {
		fail(t, fa, 1)
		require.Eventually(t, state(fa, breaker.HalfOpen), 5*time.Second, time.Millisecond)
		require.NoError(t, lat.timed(fa, breaker.Success), "the probe is admitted on the local limit")
		require.Equal(t, breaker.Closed, fa.State())
	}
	lat.check(t, "Redis down", opts.RequestBound+maxRequestLatency)
	require.Eventually(t, func() bool { return !sa.Stats().Healthy && sa.Stats().Errors > 0 }, 5*time.Second, 5*time.Millisecond)
	assert.Positive(t, sa.Stats().FailOpen)
	assert.Equal(t, breaker.Closed, b.State(), "B cannot know yet")

	require.NoError(t, srv.Restart())
	restarted := time.Now()
	require.Eventually(t, state(b, breaker.Open), 10*time.Second, time.Millisecond,
		"after the restart, A re-publishes its trip and B adopts it")
	t.Logf("B adopted A's trip %v after Redis restarted", time.Since(restarted))
	assert.Equal(t, []string{"closed->open (shared)"}, hb.reasons())
	_, err := b.Allow()
	require.ErrorAs(t, err, &oe)
	assert.Greater(t, oe.RetryIn(), 10*time.Second, "with what is left of A's cooldown")
	require.Eventually(t, func() bool { return sa.Stats().Healthy && sb.Stats().Healthy }, 5*time.Second, 5*time.Millisecond)
}

// TestRedisSlow: Redis stops answering for two seconds (CLIENT PAUSE) while
// requests trip, probe and succeed. Closed and open paths never wait; a
// probe waits at most RequestBound, once.
func TestRedisSlow(t *testing.T) {
	srv := redisserver.Start(t)
	opts := redisstore.Options{PollInterval: 50 * time.Millisecond, RequestBound: 5 * time.Millisecond}
	sa, sb := newStore(t, srv.Addr, opts), newStore(t, srv.Addr, opts)
	cfg := breaker.Config{ConsecutiveFailures: 3, Cooldown: 20 * time.Second}
	a, _ := newBreaker(t, sa, cfg)
	b, _ := newBreaker(t, sb, cfg)
	fa, _ := newBreaker(t, sa, breaker.Config{Name: "flash", ConsecutiveFailures: 1, Cooldown: 30 * time.Millisecond})
	waitSubscribed(t, srv.Addr, sa.Channel(), 2)
	require.Eventually(t, func() bool { return sa.Stats().Healthy }, 5*time.Second, time.Millisecond)

	admin := newClient(t, srv.Addr)
	const pause = 2 * time.Second
	if err := admin.Do(context.Background(), "CLIENT", "PAUSE", pause.Milliseconds(), "ALL").Err(); err != nil {
		// Before Redis 6.2 there is no mode: every client is paused.
		require.NoError(t, admin.Do(context.Background(), "CLIENT", "PAUSE", pause.Milliseconds()).Err())
	}
	paused := time.Now()

	var lat, probes latencies
	for i := range 3 {
		require.NoError(t, lat.timed(a, breaker.Failure), "call %d", i)
	}
	require.Equal(t, breaker.Open, a.State())
	for range 100 {
		_ = lat.timed(a, breaker.Success)
		require.NoError(t, lat.timed(b, breaker.Success))
	}
	for range 3 {
		fail(t, fa, 1)
		require.Eventually(t, state(fa, breaker.HalfOpen), 5*time.Second, time.Millisecond)
		require.NoError(t, probes.timed(fa, breaker.Success), "the probe is admitted after the bound")
	}
	require.Less(t, time.Since(paused), pause, "the measurements ran while Redis was paused")
	lat.check(t, "Redis paused: closed and open paths", maxRequestLatency)
	probes.check(t, "Redis paused: probes", opts.RequestBound+maxRequestLatency)
	assert.Positive(t, sa.Stats().FailOpen)

	require.Eventually(t, state(b, breaker.Open), 10*time.Second, time.Millisecond, "A's trip reaches B once Redis answers")
	t.Logf("B adopted A's trip %v after the pause began", time.Since(paused))
}
