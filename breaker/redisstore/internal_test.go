package redisstore

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
)

// rawClient connects to the server TestMain started (main_test.go).
func rawClient(t *testing.T) *redis.Client {
	t.Helper()
	addr := os.Getenv("TIERGUARD_REDISSTORE_ADDR")
	if addr == "" {
		t.Skip("no Redis server (TIERGUARD_SKIP_REDIS)")
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// setState writes a breaker's shared state directly: state "absent" deletes
// it; untilMs is relative to Redis's clock.
var setState = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[2], 't1', 1)
if ARGV[1] ~= 'absent' then
  redis.call('HSET', KEYS[1], 's', ARGV[1], 'g', ARGV[2], 'u', now + tonumber(ARGV[3]))
end
return 1
`)

// TestProposeRules checks the script's state machine, case by case.
func TestProposeRules(t *testing.T) {
	c := rawClient(t)
	ctx := context.Background()
	const g = 1000 // a generation far below now in ms
	cases := []struct {
		name     string
		state    string // "absent", "0", "1", "2"
		untilMs  int64
		kind     string
		base     int64
		accepted bool
		want     breaker.State
		written  bool // a new generation
	}{
		{"absent: trip", "absent", 0, "o", 0, true, breaker.Open, true},
		{"absent: half-open (Redis lost an open state)", "absent", 0, "h", 0, true, breaker.HalfOpen, true},
		{"absent: close agrees", "absent", 0, "c", 0, true, breaker.Closed, false},
		{"closed: trip", "0", 0, "o", g, true, breaker.Open, true},
		{"closed: trip from a stale view", "0", 0, "o", g - 1, false, breaker.Closed, false},
		{"closed: half-open refused", "0", 0, "h", g, false, breaker.Closed, false},
		{"closed: close agrees", "0", 0, "c", g, true, breaker.Closed, false},
		{"open: trip agrees", "2", 10000, "o", g, true, breaker.Open, false},
		{"open: half-open before the cooldown ends", "2", 10000, "h", g, false, breaker.Open, false},
		{"open: half-open within the slack", "2", 100, "h", g, true, breaker.HalfOpen, true},
		{"open: half-open after the cooldown", "2", -10, "h", g, true, breaker.HalfOpen, true},
		{"open: close before the cooldown ends", "2", 10000, "c", g, false, breaker.Open, false},
		{"open: stale half-open", "2", -10, "h", g - 1, false, breaker.Open, false},
		{"half-open: half-open agrees", "1", 0, "h", g, true, breaker.HalfOpen, false},
		{"half-open: probe succeeded", "1", 0, "c", g, true, breaker.Closed, true},
		{"half-open: probe failed", "1", 0, "o", g, true, breaker.Open, true},
		{"half-open: stale probe success", "1", 0, "c", g - 1, false, breaker.HalfOpen, false},
		{"open: reset whatever the view", "2", 10000, "r", 3, true, breaker.Closed, true},
	}
	keys := []string{"tgtest:rules:{x}:state", "tgtest:rules:{x}:win"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, setState.Run(ctx, c, keys, tc.state, g, tc.untilMs).Err())
			v, err := proposeScript.Run(ctx, c, keys, tc.kind, tc.base, 5000, 60000, slack.Milliseconds(), "tgtest:rules:events", "x", "o1").Int64Slice()
			require.NoError(t, err)
			require.Len(t, v, 4)
			assert.Equal(t, tc.accepted, v[0] == 1, "accepted")
			assert.Equal(t, tc.want, breaker.State(v[1]), "state")
			prev := int64(g)
			if tc.state == "absent" {
				prev = 0
			}
			if tc.written {
				assert.Greater(t, v[2], time.Now().Add(-time.Minute).UnixMilli(), "a new generation is at least Redis's clock in ms")
				n, err := c.Exists(ctx, keys[1]).Result()
				require.NoError(t, err)
				assert.Zero(t, n, "a change clears the window")
				ttl, err := c.PTTL(ctx, keys[0]).Result()
				require.NoError(t, err)
				assert.Positive(t, ttl)
			} else {
				assert.Equal(t, prev, v[2], "generation unchanged")
			}
			if breaker.State(v[1]) == breaker.Open && tc.written {
				assert.Equal(t, int64(5000), v[3], "open for the proposed time")
			}
		})
	}
}

// TestAcquireRules: the fleet-wide probe limit, leases that expire, and no
// probe while the shared breaker is open.
func TestAcquireRules(t *testing.T) {
	c := rawClient(t)
	ctx := context.Background()
	keys := []string{"tgtest:acquire:{y}:state", "tgtest:acquire:{y}:probes"}
	require.NoError(t, c.Del(ctx, keys...).Err())
	acquire := func(lease string, leaseMs int64) int64 {
		n, err := acquireScript.Run(ctx, c, keys, 2, leaseMs, lease, slack.Milliseconds()).Int64()
		require.NoError(t, err)
		return n
	}
	assert.Equal(t, int64(1), acquire("a", 60000))
	assert.Equal(t, int64(1), acquire("b", 200))
	assert.Equal(t, int64(0), acquire("c", 60000), "two probes at most")
	require.Eventually(t, func() bool { return acquire("c", 60000) == 1 }, 5*time.Second, 10*time.Millisecond, "b's lease expires")
	require.NoError(t, c.ZRem(ctx, keys[1], "a", "c").Err())
	require.NoError(t, setState.Run(ctx, c, []string{keys[0], "tgtest:acquire:{y}:win"}, "2", 5, 10000).Err())
	assert.Equal(t, int64(0), acquire("d", 60000), "open with time left")
	require.NoError(t, setState.Run(ctx, c, []string{keys[0], "tgtest:acquire:{y}:win"}, "2", 5, 100).Err())
	assert.Equal(t, int64(1), acquire("d", 60000), "open, but the cooldown ends within the slack")
}

// TestStaleProposalAdopts: a process that missed a change has its trip
// refused and adopts the shared state; its next trip, made from the current
// view, is accepted. The store runs no goroutine here: the test drives the
// queue itself.
func TestStaleProposalAdopts(t *testing.T) {
	c := rawClient(t)
	ctx := context.Background()
	s, err := build(c, Options{Prefix: "tgtest:stale:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"})
	require.NoError(t, err)
	t.Cleanup(s.cancel)
	var reasons []string
	b, err := breaker.New(breaker.Config{Name: "pro", ConsecutiveFailures: 1, Cooldown: time.Minute, Store: s,
		OnStateChange: func(tr breaker.Transition) { reasons = append(reasons, tr.To.String()+" ("+tr.Reason+")") }})
	require.NoError(t, err)
	m := s.snapshot()[0]
	trip := func() {
		tok, err := b.Allow()
		require.NoError(t, err)
		tok.Done(breaker.Failure)
		m.propose(<-s.queue)
	}

	// Another process closed the fleet at a newer generation, and this one
	// missed it.
	require.NoError(t, c.HSet(ctx, m.keys[0], "s", 0, "g", time.Now().UnixMilli(), "u", 0).Err())
	trip()
	assert.Equal(t, uint64(1), s.Stats().Stale)
	assert.Equal(t, breaker.Closed, b.State(), "adopted the shared state")

	trip()
	assert.Equal(t, uint64(1), s.Stats().Published)
	st, err := c.HGet(ctx, m.keys[0], "s").Result()
	require.NoError(t, err)
	assert.Equal(t, "2", st, "the second trip is shared")
	assert.Equal(t, breaker.Open, b.State())
	assert.Equal(t, []string{"open (consecutive failures)", "closed (shared)", "open (consecutive failures)"}, reasons)
}

// TestSupersededTransitionIsDropped: a local transition that a shared state
// replaced before it could be written is not proposed.
func TestSupersededTransitionIsDropped(t *testing.T) {
	c := rawClient(t)
	s, err := build(c, Options{Prefix: "tgtest:superseded:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"})
	require.NoError(t, err)
	t.Cleanup(s.cancel)
	b, err := breaker.New(breaker.Config{Name: "pro", ConsecutiveFailures: 1, Cooldown: time.Minute, Store: s})
	require.NoError(t, err)
	m := s.snapshot()[0]
	tok, err := b.Allow()
	require.NoError(t, err)
	tok.Done(breaker.Failure)
	ev := <-s.queue
	// Meanwhile the fleet closed (a message from another process).
	m.observe(shared{state: breaker.Closed, gen: uint64(time.Now().UnixMilli())}, false)
	require.Equal(t, breaker.Closed, b.State())
	m.propose(ev)
	assert.Zero(t, s.Stats().Published+s.Stats().Stale+s.Stats().Errors, "nothing written")
	n, err := c.Exists(context.Background(), m.keys[0]).Result()
	require.NoError(t, err)
	assert.Zero(t, n)
}

func TestStripedCounter(t *testing.T) {
	var c stripedCounter
	for range 1000 {
		c.add()
	}
	assert.Equal(t, int64(1000), c.take())
	assert.Zero(t, c.take())
}
