package redisstore

import (
	"context"
	"math"
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
// it; untilMs is relative to Redis's clock. Without a fourth argument the
// state has no decision time, as an older version of the package wrote it.
var setState = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[2], 't1', 1)
if ARGV[1] ~= 'absent' then
  redis.call('HSET', KEYS[1], 's', ARGV[1], 'g', ARGV[2], 'u', now + tonumber(ARGV[3]))
  if ARGV[4] then redis.call('HSET', KEYS[1], 't', now + tonumber(ARGV[4])) end
end
return 1
`)

// redisNow returns Redis's clock in milliseconds.
func redisNow(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	now, err := c.Time(context.Background()).Result()
	require.NoError(t, err)
	return now.UnixMilli()
}

// TestProposeRules checks the script's state machine, case by case.
func TestProposeRules(t *testing.T) {
	c := rawClient(t)
	ctx := context.Background()
	const g = 1000 // a generation far below now in ms
	const (
		accepted = 1
		refused  = 0
		expired  = 2
	)
	cases := []struct {
		name    string
		state   string // "absent", "0", "1", "2"
		untilMs int64
		kind    string
		base    int64
		answer  int64 // accepted, refused or expired
		want    breaker.State
		written bool // a new generation
		// decidedMs is when the proposal was decided, relative to Redis's
		// clock (0: now); stale makes its expiry one second ago.
		decidedMs int64
		stale     bool
		// decidedState gives the shared state a decision time (now);
		// without it, the state is as an older version wrote it.
		decidedState bool
	}{
		{"absent: trip", "absent", 0, "o", 0, accepted, breaker.Open, true, 0, false, false},
		{"absent: half-open (Redis lost an open state)", "absent", 0, "h", 0, accepted, breaker.HalfOpen, true, 0, false, false},
		{"absent: close agrees", "absent", 0, "c", 0, accepted, breaker.Closed, false, 0, false, false},
		{"closed: trip", "0", 0, "o", g, accepted, breaker.Open, true, 0, false, false},
		{"closed: trip from a stale view", "0", 0, "o", g - 1, refused, breaker.Closed, false, 0, false, false},
		{"closed: half-open refused", "0", 0, "h", g, refused, breaker.Closed, false, 0, false, false},
		{"closed: close agrees", "0", 0, "c", g, accepted, breaker.Closed, false, 0, false, false},
		{"open: trip agrees", "2", 10000, "o", g, accepted, breaker.Open, false, 0, false, false},
		{"open: half-open before the cooldown ends", "2", 10000, "h", g, refused, breaker.Open, false, 0, false, false},
		{"open: half-open within the slack", "2", 100, "h", g, accepted, breaker.HalfOpen, true, 0, false, false},
		{"open: half-open after the cooldown", "2", -10, "h", g, accepted, breaker.HalfOpen, true, 0, false, false},
		{"open: close before the cooldown ends", "2", 10000, "c", g, refused, breaker.Open, false, 0, false, false},
		{"open: stale half-open", "2", -10, "h", g - 1, refused, breaker.Open, false, 0, false, false},
		{"half-open: half-open agrees", "1", 0, "h", g, accepted, breaker.HalfOpen, false, 0, false, false},
		{"half-open: probe succeeded", "1", 0, "c", g, accepted, breaker.Closed, true, 0, false, false},
		{"half-open: probe failed", "1", 0, "o", g, accepted, breaker.Open, true, 0, false, false},
		{"half-open: stale probe success", "1", 0, "c", g - 1, refused, breaker.HalfOpen, false, 0, false, false},
		{"open: reset whatever the view", "2", 10000, "r", 3, accepted, breaker.Closed, true, 0, false, false},
		{"expired: a trip executed too late", "0", 0, "o", g, expired, breaker.Closed, false, 0, true, false},
		{"expired: even a reset", "2", 10000, "r", 3, expired, breaker.Open, false, 0, true, false},
		{"open: trip after the cooldown ended", "2", -10, "o", g, accepted, breaker.Open, true, 0, false, false},
		{"open: trip within the slack of the end", "2", 100, "o", g, accepted, breaker.Open, true, 0, false, false},
		{"open: reset decided before the state", "2", 10000, "r", 3, refused, breaker.Open, false, -60000, false, true},
		{"open: reset decided after the state", "2", 10000, "r", 3, accepted, breaker.Closed, true, 0, false, true},
	}
	keys := []string{"tgtest:rules:{x}:state", "tgtest:rules:{x}:win"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := []any{tc.state, g, tc.untilMs}
			if tc.decidedState {
				args = append(args, -1)
			}
			require.NoError(t, setState.Run(ctx, c, keys, args...).Err())
			began := time.Now()
			now := redisNow(t, c)
			expires := now + 60000
			if tc.stale {
				expires = now - 1000
			}
			v, err := proposeScript.Run(ctx, c, keys, tc.kind, tc.base, now+5000, now+tc.decidedMs, expires,
				60000, slack.Milliseconds(), "tgtest:rules:events", "x", "o1").Int64Slice()
			require.NoError(t, err)
			// The script ran up to this long after now was read.
			late := float64(time.Since(began).Milliseconds() + 50)
			require.Len(t, v, 7)
			assert.Equal(t, tc.answer, v[0], "answer")
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
				assert.InDelta(t, 5000, v[3], late, "open until the proposed end")
			}
			if tc.written {
				assert.InDelta(t, -tc.decidedMs, v[4], late, "the decision's age")
				d, err := c.HGet(ctx, keys[0], "t").Int64()
				require.NoError(t, err)
				assert.InDelta(t, now+tc.decidedMs, d, 100, "the decision time is kept")
			}
			assert.InDelta(t, time.Now().UnixMicro(), v[6], float64(time.Minute.Microseconds()), "Redis's clock in µs")
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
	acquireBy := func(lease string, leaseMs, expires int64) int64 {
		v, err := acquireScript.Run(ctx, c, keys, 2, leaseMs, lease, slack.Milliseconds(), expires).Int64Slice()
		require.NoError(t, err)
		require.Len(t, v, 2)
		return v[0]
	}
	acquire := func(lease string, leaseMs int64) int64 { return acquireBy(lease, leaseMs, redisNow(t, c)+60000) }
	assert.Equal(t, int64(2), acquireBy("late", 60000, redisNow(t, c)-1), "a request answered too late takes nothing")
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
	b, err := breaker.New(breaker.Config{Name: "pro", ConsecutiveFailures: 1, Cooldown: time.Minute, Store: s})
	require.NoError(t, err)
	b.Observe(func(tr breaker.Transition) { reasons = append(reasons, tr.To.String()+" ("+tr.Reason+")") })
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
	m.sync(shared{state: breaker.Closed, gen: uint64(time.Now().UnixMilli()), decided: time.Now(), confirmed: true}, false, false)
	require.Equal(t, breaker.Closed, b.State())
	m.propose(ev)
	assert.Zero(t, s.Stats().Published+s.Stats().Stale+s.Stats().Errors, "nothing written")
	n, err := c.Exists(context.Background(), m.keys[0]).Result()
	require.NoError(t, err)
	assert.Zero(t, n)
}

// TestExpiredProposalIsRepublished: a proposal Redis runs after its expiry
// changes nothing and is counted; the poll that follows measures the clock
// offset again and publishes the trip anew, with the breaker's own end of
// cooldown. The offset is made ten seconds wrong here, as if Redis's clock
// had jumped: every proposal then looks expired to Redis.
func TestExpiredProposalIsRepublished(t *testing.T) {
	c := rawClient(t)
	ctx := context.Background()
	s, err := build(c, Options{Prefix: "tgtest:expired:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"})
	require.NoError(t, err)
	t.Cleanup(s.cancel)
	b, err := breaker.New(breaker.Config{Name: "pro", ConsecutiveFailures: 1, Cooldown: time.Minute, Store: s})
	require.NoError(t, err)
	m := s.snapshot()[0]
	require.True(t, m.measure())
	off, _ := m.clock.get()
	m.clock.us.Store(off - (10 * time.Second).Microseconds())

	tok, err := b.Allow()
	require.NoError(t, err)
	tok.Done(breaker.Failure)
	m.propose(<-s.queue)
	assert.Equal(t, uint64(1), s.Stats().Expired)
	n, err := c.Exists(ctx, m.keys[0]).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "nothing written")
	select {
	case <-s.pollNow:
	default:
		t.Fatal("an expired proposal asks for a poll")
	}

	s.poll()
	fixed, _ := m.clock.get()
	assert.InDelta(t, off, fixed, float64(100*time.Millisecond.Microseconds()), "the poll measured the offset again")
	m.propose(<-s.queue)
	v, err := readScript.Run(ctx, c, m.keys[:1]).Int64Slice()
	require.NoError(t, err)
	assert.Equal(t, int64(breaker.Open), v[0], "the trip is shared")
	var oe *breaker.OpenError
	_, err = b.Allow()
	require.ErrorAs(t, err, &oe)
	assert.InDelta(t, time.Until(oe.Until).Milliseconds(), v[2], 250, "with the breaker's own end of cooldown")
	assert.Equal(t, uint64(1), s.Stats().Published)
}

// TestOffset: the estimate is the highest lower bound seen, and starts
// again when a reply contradicts it (Redis's clock went back).
func TestOffset(t *testing.T) {
	o := newOffset()
	_, ok := o.get()
	assert.False(t, ok)
	o.observe(1000, 0, 100) // offset in [900, 1000]
	v, _ := o.get()
	assert.Equal(t, int64(900), v)
	o.observe(1250, 200, 260) // [990, 1050]: tighter
	v, _ = o.get()
	assert.Equal(t, int64(990), v)
	o.observe(1500, 300, 600) // [900, 1200]: looser, keeps 990
	v, _ = o.get()
	assert.Equal(t, int64(990), v)
	o.observe(700, 600, 610) // [90, 100]: the clock went back
	v, _ = o.get()
	assert.Equal(t, int64(90), v)
	assert.Equal(t, int64(3), toRedis(2500, 500))
}

func TestStripedCounter(t *testing.T) {
	var c stripedCounter
	for range 1000 {
		c.add()
	}
	assert.Equal(t, int64(1000), c.take())
	assert.Zero(t, c.take())
}

// TestSharedStateOfAnyLength: a cooldown or a decision's age past what a
// Duration holds reads as the longest one, not as a product that wrapped
// into the past (which would read an open fleet as closed).
func TestSharedStateOfAnyLength(t *testing.T) {
	now := time.Now()
	for _, ms := range []int64{math.MaxInt64 / int64(time.Millisecond), math.MaxInt64/int64(time.Millisecond) + 1, 1 << 62, math.MaxInt64} {
		sh := sharedAt(now, int64(breaker.Open), 3, ms, ms, 1)
		assert.True(t, sh.active(now.Add(100*365*24*time.Hour)), "open for %d ms is still open in a hundred years", ms)
		assert.True(t, sh.decided.Before(now), "decided %d ms ago is in the past", ms)
	}
	sh := sharedAt(now, int64(breaker.Open), 3, -5, -5, 1)
	assert.False(t, sh.active(now), "a negative time left is none")
	assert.Equal(t, now, sh.decided, "a negative age is none")
	assert.Equal(t, 1500*time.Millisecond, millis(1500))
}
