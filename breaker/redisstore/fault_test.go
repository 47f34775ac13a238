package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/breaker/redisstore"
	"github.com/tierguard/tierguard/internal/testbed/redisserver"
)

// readShared reads a breaker's shared state and the time left of its
// cooldown, on Redis's clock.
var readShared = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cur = redis.call('HMGET', KEYS[1], 's', 'u')
local s = tonumber(cur[1]) or 0
local u = tonumber(cur[2]) or 0
local rem = 0
if s == 2 and u > now then rem = u - now end
return {s, rem}
`)

// sharedState returns the shared state of the breaker named name under
// prefix p, its cooldown's end as an interval of this process's clock
// (the read took from before to after), and whether it could be read.
func sharedState(c *redis.Client, p, name string) (st breaker.State, earliest, latest time.Time, err error) {
	before := time.Now()
	v, err := readShared.Run(context.Background(), c, []string{p + "{" + redisstore.ID(name) + "}:state"}).Int64Slice()
	after := time.Now()
	if err != nil {
		return 0, time.Time{}, time.Time{}, err
	}
	rem := time.Duration(v[1]) * time.Millisecond
	return breaker.State(v[0]), before.Add(rem), after.Add(rem), nil
}

// openUntil returns when b's cooldown ends; b must be open.
func openUntil(t *testing.T, b *breaker.Breaker) time.Time {
	t.Helper()
	_, err := b.Allow()
	var oe *breaker.OpenError
	require.ErrorAs(t, err, &oe)
	require.False(t, oe.HalfOpen)
	return oe.Until
}

// TestRestartEmptyKeepsNewerTrip: Redis freezes while pod B runs a whole
// cycle on its own (trip, half-open, probe, close: proposals queued behind
// the frozen server), and pod A trips; Redis is replaced by an empty one.
// An empty Redis cannot refuse B's proposals; they must not end A's trip.
// A stays open with its own cooldown, and the fleet (Redis, and B) ends up
// open until A's cooldown ends. Every one of 20 runs must pass. B finds the
// new server at once; A finds it after a lag that varies from run to run
// (none, or up to 120 ms: a pod slower to resolve the new address), so
// that either pod's writes may come first. A trips 20 ms after B closes,
// right after (within a millisecond), or right before: decisions that
// close together are concurrent, and the trip wins. The last two used to
// lose A's trip in about a third of the runs: A adopted B's close, whose
// decision time it read as the time the reply reached it less the
// decision's age in whole milliseconds, and so a millisecond or more later
// than it was.
func TestRestartEmptyKeepsNewerTrip(t *testing.T) {
	redisserver.Skip(t)
	const runs = 20
	// A's cooldown is never waited for: each run ends as soon as both
	// stores have written everything they had queued. It is long so that
	// a stalled machine cannot end it before the fleet settles.
	const cooldownA = time.Minute
	var dialA, dialB redirect
	srv, err := redisserver.Launch()
	require.NoError(t, err)
	t.Cleanup(func() { srv.Stop() })

	for run := range runs {
		t.Run(fmt.Sprintf("run%02d", run), func(t *testing.T) {
			lagA := time.Duration(run%4) * 40 * time.Millisecond
			dialA.set(srv.Addr)
			dialB.set(srv.Addr)
			// The empty server that replaces this one, started now so that
			// the restart itself takes no time.
			next, err := redisserver.Launch()
			require.NoError(t, err)
			switched := false
			t.Cleanup(func() {
				if !switched {
					next.Stop() // the run failed before the restart
				}
			})
			p := prefix(t)
			opts := redisstore.Options{Prefix: p, PollInterval: 50 * time.Millisecond, OpTimeout: 2 * time.Second}
			sa := newStoreOn(t, redirectClient(t, &dialA), opts)
			sb := newStoreOn(t, redirectClient(t, &dialB), opts)
			a, ha := newBreaker(t, sa, breaker.Config{ConsecutiveFailures: 1, Cooldown: cooldownA})
			b, hb := newBreaker(t, sb, breaker.Config{ConsecutiveFailures: 1, Cooldown: 30 * time.Millisecond})
			waitSubscribed(t, srv.Addr, sa.Channel(), 2)
			require.Eventually(t, func() bool {
				return sa.Stats().Polls > 0 && sb.Stats().Polls > 0 && sa.Stats().Healthy && sb.Stats().Healthy
			}, 10*time.Second, time.Millisecond, "both stores reached Redis")

			require.NoError(t, srv.Freeze())
			fail(t, b, 1)
			require.Eventually(t, state(b, breaker.HalfOpen), 5*time.Second, time.Millisecond)
			probe, err := b.Allow()
			require.NoError(t, err, "B probes on its local limit")
			switch run % 3 {
			case 0: // A trips 20 ms after B closes
				probe.Done(breaker.Success)
				time.Sleep(20 * time.Millisecond)
				fail(t, a, 1)
			case 1: // right after
				probe.Done(breaker.Success)
				fail(t, a, 1)
			case 2: // right before
				fail(t, a, 1)
				probe.Done(breaker.Success)
			}
			require.Equal(t, breaker.Closed, b.State())
			untilA := openUntil(t, a)

			// Redis comes back empty: a new server takes the address and
			// the frozen one dies, cutting every connection to it.
			old := srv
			srv, switched = next, true
			dialB.set(srv.Addr)
			old.Stop()
			time.Sleep(lagA)
			dialA.set(srv.Addr)
			raw := newClient(t, srv.Addr)

			// Settled: nothing left to write, and B follows a shared open
			// state. Stop early if A leaves its trip.
			deadline := time.Now().Add(30 * time.Second)
			settled := func() bool {
				st, _, _, err := sharedState(raw, p, "gemini/pro")
				return err == nil && st == breaker.Open && b.State() == breaker.Open &&
					redisstore.Idle(sa) && redisstore.Idle(sb)
			}
			for !settled() && a.State() == breaker.Open && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			t.Logf("A: %v; B: %v; A's store %+v; B's store %+v", ha.reasons(), hb.reasons(), sa.Stats(), sb.Stats())
			require.Equal(t, []string{"closed->open (consecutive failures)"}, ha.reasons(), "A's trip was not cut short")
			require.True(t, settled(), "the fleet settled on A's trip; B: %v", hb.reasons())

			st, earliest, latest, err := sharedState(raw, p, "gemini/pro")
			require.NoError(t, err)
			require.Equal(t, breaker.Open, st)
			// The shared cooldown is A's, to within the slack the store
			// allows itself (250 ms): a stale proposal would have closed
			// it, or opened it for B's 30 ms.
			const slack = 250 * time.Millisecond
			assert.WithinRange(t, untilA, earliest.Add(-slack), latest.Add(slack), "Redis holds A's cooldown")
			// B's view of it lags by B's delay in reading the publication;
			// a second is far more than a run ever needs, and far less
			// than the 10 s at stake.
			assert.WithinDuration(t, untilA, openUntil(t, b), time.Second, "B adopted A's cooldown")
			assert.Equal(t, "closed->open (shared)", hb.reasons()[len(hb.reasons())-1], "B: %v", hb.reasons())
		})
	}
}

// TestPauseDoesNotStretchCooldown: Redis freezes (SIGSTOP) as pod A trips,
// for longer than the store's operations may take (OpTimeout), and runs
// the proposal waiting in its socket when it resumes (SIGCONT). The fleet's
// cooldown must still end when A's does, not a pause later: the proposal
// expired, and A publishes its trip again with its own end. Both when the
// client gives up at OpTimeout (ContextTimeoutEnabled) and when it waits
// for the late answer (its read timeout, 3 s, outlasts the pause; go-redis
// then reports the context's deadline all the same).
func TestPauseDoesNotStretchCooldown(t *testing.T) {
	for _, tc := range []struct {
		name          string
		contextBounds bool
	}{{"client gives up", true}, {"client waits", false}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redisserver.Start(t)
			const (
				cooldown  = 2 * time.Second
				pause     = time.Second
				opTimeout = 250 * time.Millisecond
			)
			client := func() *redis.Client {
				c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: tc.contextBounds})
				t.Cleanup(func() { _ = c.Close() })
				return c
			}
			p := prefix(t)
			opts := redisstore.Options{Prefix: p, PollInterval: 50 * time.Millisecond, OpTimeout: opTimeout}
			sa, sb := newStoreOn(t, client(), opts), newStoreOn(t, client(), opts)
			cfg := breaker.Config{ConsecutiveFailures: 1, Cooldown: cooldown}
			a, ha := newBreaker(t, sa, cfg)
			b, hb := newBreaker(t, sb, cfg)
			waitSubscribed(t, srv.Addr, sa.Channel(), 2)
			// A first trip, of another breaker, has Redis cache the scripts,
			// as it has in a service that has been running: a script Redis
			// does not know fails at once when it resumes rather than run.
			warm, _ := newBreaker(t, sa, breaker.Config{Name: "warm-up", ConsecutiveFailures: 1, Cooldown: time.Minute})
			fail(t, warm, 1)
			require.Eventually(t, func() bool {
				return sa.Stats().Published == 1 && sa.Stats().Polls > 0 && sb.Stats().Polls > 0 &&
					redisstore.Idle(sa) && sa.Stats().Healthy && sb.Stats().Healthy
			}, 10*time.Second, time.Millisecond, "both stores reached Redis")

			require.NoError(t, srv.Freeze())
			fail(t, a, 1)
			untilA := openUntil(t, a)
			time.Sleep(pause)
			require.NoError(t, srv.Thaw())
			// The scenario needs the pause to end well before the cooldown;
			// a machine too slow for that cannot tell.
			if left := time.Until(untilA); left < 300*time.Millisecond {
				t.Skipf("the pause ended %v before the cooldown: too late to tell", left)
			}

			raw := newClient(t, srv.Addr)
			require.Eventually(t, func() bool {
				st, _, _, err := sharedState(raw, p, "gemini/pro")
				return err == nil && st == breaker.Open && b.State() == breaker.Open &&
					redisstore.Idle(sa) && redisstore.Idle(sb)
			}, time.Until(untilA), 5*time.Millisecond, "the fleet shares A's trip before it ends")
			st, earliest, latest, err := sharedState(raw, p, "gemini/pro")
			require.NoError(t, err)
			require.Equal(t, breaker.Open, st)
			// Stretched, it would end a pause (1 s) later.
			const slack = 250 * time.Millisecond
			assert.WithinRange(t, untilA, earliest.Add(-slack), latest.Add(slack), "Redis holds A's cooldown")
			assert.WithinDuration(t, untilA, openUntil(t, b), pause/2, "B adopted A's cooldown")

			// When A's cooldown ends, the fleet follows A to half-open: A's
			// proposal is not refused by a stretched shared cooldown.
			// A's state reads half-open once its cooldown has passed; the
			// transition reaches its listener a moment later, which a
			// loaded machine can stretch: wait for both.
			require.Eventually(t, func() bool {
				return b.State() == breaker.HalfOpen && a.State() == breaker.HalfOpen && len(ha.transitions()) >= 2 &&
					redisstore.Idle(sa) && redisstore.Idle(sb)
			}, 10*time.Second, 5*time.Millisecond)
			st, _, _, err = sharedState(raw, p, "gemini/pro")
			require.NoError(t, err)
			assert.Equal(t, breaker.HalfOpen, st)
			// A moves on by its own timer, or by a peer's a little earlier
			// (Redis lets a cooldown end within the slack): never later
			// than its own end, and never back to open.
			trs := ha.transitions()
			require.Len(t, trs, 2, "A: %v", ha.reasons())
			assert.Equal(t, breaker.HalfOpen, trs[1].To, "A: %v", ha.reasons())
			assert.False(t, trs[1].At.Before(untilA.Add(-slack)), "A's cooldown was not cut short either: %v before its end",
				untilA.Sub(trs[1].At))
			assert.Equal(t, "closed->open (shared)", hb.reasons()[0], "B: %v", hb.reasons())
			assert.NotContains(t, hb.reasons(), "open->open (shared)", "B's cooldown was not stretched")
		})
	}
}

// TestCloseBounded: Close returns within twice RequestBound while Redis is
// frozen (SIGSTOP) or dead, whatever the client's own bounds (here 10 s
// dial, read and write timeouts, 5 retries, no context deadlines), with a
// lease to return, a probe waiting for a permit and a proposal in flight.
// The assertion allows the bound plus 2 s for a loaded machine; the
// elapsed time is logged.
func TestCloseBounded(t *testing.T) {
	for _, how := range []string{"stopped", "killed"} {
		t.Run(how, func(t *testing.T) {
			srv := redisserver.Start(t)
			c := redis.NewClient(&redis.Options{Addr: srv.Addr, DialTimeout: 10 * time.Second,
				ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, MaxRetries: 5})
			t.Cleanup(func() { _ = c.Close() })
			const bound = 250 * time.Millisecond
			s, err := redisstore.New(c, redisstore.Options{Prefix: prefix(t), RequestBound: bound,
				PollInterval: 20 * time.Millisecond, LeaseDuration: time.Minute})
			require.NoError(t, err)
			b, _ := newBreaker(t, s, breaker.Config{ConsecutiveFailures: 1, Cooldown: 20 * time.Millisecond, HalfOpenProbes: 2})
			other, _ := newBreaker(t, s, breaker.Config{Name: "other", ConsecutiveFailures: 1, Cooldown: time.Minute})
			require.Eventually(t, func() bool { return s.Stats().Polls > 0 }, 10*time.Second, time.Millisecond)
			fail(t, b, 1)
			require.Eventually(t, state(b, breaker.HalfOpen), 5*time.Second, time.Millisecond)
			held, err := b.Allow()
			require.NoError(t, err)
			require.Zero(t, s.Stats().FailOpen, "a lease from Redis")

			if how == "stopped" {
				require.NoError(t, srv.Freeze())
			} else {
				srv.Kill()
			}
			fail(t, other, 1) // a proposal for the writer
			asked := make(chan struct{})
			go func() {
				defer close(asked)
				if tok, err := b.Allow(); err == nil { // a permit asked for
					tok.Done(breaker.Ignored)
				}
			}()
			time.Sleep(10 * time.Millisecond)

			start := time.Now()
			require.NoError(t, s.Close())
			took := time.Since(start)
			t.Logf("Close took %v (bound %v)", took, 2*bound)
			assert.Less(t, took, 2*bound+2*time.Second)
			<-asked
			held.Done(breaker.Success)
			assert.Equal(t, breaker.Closed, b.State(), "the breakers work on their own after Close")
		})
	}
}
