package redisstore_test

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/breaker/redisstore"
	"github.com/tierguard/tierguard/internal/testbed/redisserver"
)

// hooks records the transitions of one breaker.
type hooks struct {
	mu  sync.Mutex
	trs []breaker.Transition
}

func (h *hooks) hook(t breaker.Transition) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.trs = append(h.trs, t)
}

func (h *hooks) transitions() []breaker.Transition {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]breaker.Transition(nil), h.trs...)
}

func (h *hooks) reasons() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, len(h.trs))
	for i, t := range h.trs {
		out[i] = t.From.String() + "->" + t.To.String() + " (" + t.Reason + ")"
	}
	return out
}

// newBreaker joins a breaker to store s.
func newBreaker(t testing.TB, s *redisstore.Store, cfg breaker.Config) (*breaker.Breaker, *hooks) {
	t.Helper()
	h := &hooks{}
	if cfg.Name == "" {
		cfg.Name = "gemini/pro"
	}
	cfg.Store = s
	b, err := breaker.New(cfg)
	require.NoError(t, err)
	b.Observe(h.hook)
	return b, h
}

func fail(t testing.TB, b *breaker.Breaker, n int) {
	t.Helper()
	for range n {
		tok, err := b.Allow()
		require.NoError(t, err)
		tok.Done(breaker.Failure)
	}
}

func state(b *breaker.Breaker, want breaker.State) func() bool {
	return func() bool { return b.State() == want }
}

// TestTripPropagates: two stores are two processes; when one trips, the
// other rejects within milliseconds — through the channel, since polling
// is set to a minute here.
func TestTripPropagates(t *testing.T) {
	addr := sharedAddr(t)
	opts := redisstore.Options{PollInterval: time.Minute}
	sa, sb := newStore(t, addr, opts), newStore(t, addr, opts)
	cfg := breaker.Config{ConsecutiveFailures: 3, Cooldown: time.Minute}
	a, _ := newBreaker(t, sa, cfg)
	b, hb := newBreaker(t, sb, cfg)
	waitSubscribed(t, addr, sa.Channel(), 2)

	// Process B serves traffic in its own goroutine until it is told the
	// model is down.
	var rejectedAt atomic.Int64
	var served atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			tok, err := b.Allow()
			if err != nil {
				require.ErrorIs(t, err, breaker.ErrOpen)
				rejectedAt.Store(time.Now().UnixNano())
				return
			}
			served.Add(1)
			tok.Done(breaker.Success)
			time.Sleep(100 * time.Microsecond)
		}
	}()

	fail(t, a, 3)
	tripped := time.Now()
	require.Equal(t, breaker.Open, a.State())
	<-done
	require.NotZero(t, rejectedAt.Load(), "process B never saw the trip")
	delay := time.Duration(rejectedAt.Load() - tripped.UnixNano())
	t.Logf("B rejected %v after A tripped (served %d calls before)", delay, served.Load())
	assert.Less(t, delay, time.Second, "propagation through the channel")
	assert.Equal(t, []string{"closed->open (shared)"}, hb.reasons())

	_, err := b.Allow()
	var oe *breaker.OpenError
	require.ErrorAs(t, err, &oe)
	assert.InDelta(t, time.Minute.Seconds(), oe.RetryIn().Seconds(), 2, "B adopts A's cooldown")
	require.Eventually(t, func() bool { return sa.Stats().Published == 1 && sb.Stats().Applied == 1 }, 5*time.Second, time.Millisecond,
		"counted once the writer and the hooks are done")
}

// TestFleetCycle: trip, half-open, one probe for the whole fleet, close;
// then a failed probe reopens everyone.
func TestFleetCycle(t *testing.T) {
	addr := sharedAddr(t)
	opts := redisstore.Options{PollInterval: 100 * time.Millisecond, RequestBound: 2 * time.Second}
	cfg := breaker.Config{ConsecutiveFailures: 2, Cooldown: time.Second}
	var bs []*breaker.Breaker
	var stores []*redisstore.Store
	for range 3 {
		s := newStore(t, addr, opts)
		b, _ := newBreaker(t, s, cfg)
		bs, stores = append(bs, b), append(stores, s)
	}
	waitSubscribed(t, addr, stores[0].Channel(), 3)
	all := func(want breaker.State) func() bool {
		return func() bool {
			for _, b := range bs {
				if b.State() != want {
					return false
				}
			}
			return true
		}
	}

	for round, outcome := range []breaker.Outcome{breaker.Success, breaker.Failure} {
		fail(t, bs[round], 2)
		require.Eventually(t, all(breaker.Open), 5*time.Second, time.Millisecond, "round %d: all open", round)
		require.Eventually(t, all(breaker.HalfOpen), 5*time.Second, time.Millisecond, "round %d: all half-open", round)

		// One probe for the fleet (HalfOpenProbes 1): whoever asks first.
		var probe breaker.Token
		require.Eventually(t, func() bool {
			for _, b := range bs {
				if tok, err := b.Allow(); err == nil {
					probe = tok
					return true
				}
			}
			return false
		}, 5*time.Second, time.Millisecond)
		require.True(t, probe.IsProbe())
		for _, b := range bs {
			_, err := b.Allow()
			require.ErrorIs(t, err, breaker.ErrOpen, "round %d: a second probe in the fleet", round)
		}
		probe.Done(outcome)
		if outcome == breaker.Success {
			require.Eventually(t, all(breaker.Closed), 5*time.Second, time.Millisecond, "the probe's success closes the fleet")
		} else {
			require.Eventually(t, all(breaker.Open), 5*time.Second, time.Millisecond, "the probe's failure reopens the fleet")
		}
	}
	for _, s := range stores {
		assert.Zero(t, s.Stats().FailOpen)
		assert.Zero(t, s.Stats().Errors)
	}
}

// TestLateJoinerAdopts: a process that starts while the fleet is open
// adopts the open state at once (Join starts a poll), not after a poll
// interval.
func TestLateJoinerAdopts(t *testing.T) {
	addr := sharedAddr(t)
	opts := redisstore.Options{PollInterval: time.Minute}
	sa := newStore(t, addr, opts)
	a, _ := newBreaker(t, sa, breaker.Config{ConsecutiveFailures: 1, Cooldown: time.Minute})
	fail(t, a, 1)
	raw := newClient(t, addr)
	key := prefix(t) + "{" + redisstore.ID("gemini/pro") + "}:state"
	require.Eventually(t, func() bool {
		v, err := raw.HGet(context.Background(), key, "s").Result()
		return err == nil && v == "2"
	}, 5*time.Second, time.Millisecond, "the trip is shared")

	sc := newStore(t, addr, opts)
	c, h := newBreaker(t, sc, breaker.Config{ConsecutiveFailures: 1, Cooldown: time.Minute})
	require.Eventually(t, state(c, breaker.Open), 5*time.Second, time.Millisecond)
	assert.Equal(t, []string{"closed->open (shared)"}, h.reasons())
}

// TestFleetProbeLimit: each process would let 3 probes through; the fleet
// lets 2 through in all.
func TestFleetProbeLimit(t *testing.T) {
	addr := sharedAddr(t)
	const processes, fleetProbes = 4, 2
	opts := redisstore.Options{PollInterval: 100 * time.Millisecond, RequestBound: 2 * time.Second, FleetProbes: fleetProbes}
	cfg := breaker.Config{ConsecutiveFailures: 1, Cooldown: 200 * time.Millisecond, HalfOpenProbes: 3}
	var bs []*breaker.Breaker
	var stores []*redisstore.Store
	for range processes {
		s := newStore(t, addr, opts)
		b, _ := newBreaker(t, s, cfg)
		bs, stores = append(bs, b), append(stores, s)
	}
	waitSubscribed(t, addr, stores[0].Channel(), processes)
	fail(t, bs[0], 1)
	for _, b := range bs {
		require.Eventually(t, state(b, breaker.HalfOpen), 5*time.Second, time.Millisecond)
	}

	// Every process asks for probes at once, several goroutines each.
	var mu sync.Mutex
	var tokens []breaker.Token
	var wg sync.WaitGroup
	for _, b := range bs {
		for range 4 {
			wg.Go(func() {
				for range 5 {
					if tok, err := b.Allow(); err == nil {
						mu.Lock()
						tokens = append(tokens, tok)
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	require.Len(t, tokens, fleetProbes, "probes admitted across the fleet")
	for _, s := range stores {
		require.Zero(t, s.Stats().FailOpen, "every answer came from Redis")
	}

	// An ignored probe returns its permit: another process may probe.
	tokens[0].Done(breaker.Ignored)
	var next breaker.Token
	require.Eventually(t, func() bool {
		for _, b := range bs {
			if tok, err := b.Allow(); err == nil {
				next = tok
				return true
			}
		}
		return false
	}, 5*time.Second, time.Millisecond, "the released permit is taken again")
	next.Done(breaker.Success)
	tokens[1].Done(breaker.Success)
	for _, b := range bs {
		require.Eventually(t, state(b, breaker.Closed), 5*time.Second, time.Millisecond)
	}
}

// TestLeaseExpires: a process that dies holding the fleet's probe permit
// blocks the others only until the lease ends.
func TestLeaseExpires(t *testing.T) {
	addr := sharedAddr(t)
	opts := redisstore.Options{PollInterval: 100 * time.Millisecond, RequestBound: 2 * time.Second, LeaseDuration: 300 * time.Millisecond}
	cfg := breaker.Config{ConsecutiveFailures: 1, Cooldown: 100 * time.Millisecond}
	sa, sb := newStore(t, addr, opts), newStore(t, addr, opts)
	a, _ := newBreaker(t, sa, cfg)
	b, _ := newBreaker(t, sb, cfg)
	waitSubscribed(t, addr, sa.Channel(), 2)
	fail(t, a, 1)
	require.Eventually(t, state(a, breaker.HalfOpen), 5*time.Second, time.Millisecond)
	require.Eventually(t, state(b, breaker.HalfOpen), 5*time.Second, time.Millisecond)
	var held breaker.Token
	require.Eventually(t, func() bool {
		tok, err := a.Allow()
		held = tok
		return err == nil
	}, 5*time.Second, time.Millisecond)
	taken := time.Now()
	_ = held // process A "dies" with the permit: it never reports

	_, err := b.Allow()
	require.ErrorIs(t, err, breaker.ErrOpen)
	require.Eventually(t, func() bool {
		tok, err := b.Allow()
		if err != nil {
			return false
		}
		tok.Done(breaker.Success)
		return true
	}, 5*time.Second, 5*time.Millisecond)
	assert.GreaterOrEqual(t, time.Since(taken), 250*time.Millisecond, "not before the lease ended")
	require.Eventually(t, state(a, breaker.Closed), 5*time.Second, time.Millisecond)
}

// TestFleetFailureCount: no process sees enough failures to trip alone;
// the fleet's count trips them all.
func TestFleetFailureCount(t *testing.T) {
	addr := sharedAddr(t)
	opts := redisstore.Options{FleetFailures: 4, FlushInterval: 20 * time.Millisecond, PollInterval: 100 * time.Millisecond}
	cfg := breaker.Config{ConsecutiveFailures: 3, Cooldown: time.Minute}
	var bs []*breaker.Breaker
	var hs []*hooks
	var stores []*redisstore.Store
	for range 4 {
		s := newStore(t, addr, opts)
		b, h := newBreaker(t, s, cfg)
		bs, hs, stores = append(bs, b), append(hs, h), append(stores, s)
	}
	waitSubscribed(t, addr, stores[0].Channel(), 4)
	for _, b := range bs {
		fail(t, b, 1)
	}
	for i, b := range bs {
		require.Eventually(t, state(b, breaker.Open), 5*time.Second, time.Millisecond, "breaker %d", i)
		assert.Equal(t, []string{"closed->open (shared)"}, hs[i].reasons())
	}
	trips := func() (n uint64) {
		for _, s := range stores {
			n += s.Stats().FleetTrips
		}
		return n
	}
	require.Eventually(t, func() bool { return trips() == 1 }, 5*time.Second, time.Millisecond, "one fleet trip")
}

// TestFleetFailureRatio: the breakers' own FailureRatio and MinCalls apply
// to the fleet's window.
func TestFleetFailureRatio(t *testing.T) {
	addr := sharedAddr(t)
	opts := redisstore.Options{FlushInterval: 20 * time.Millisecond, PollInterval: 100 * time.Millisecond}
	cfg := breaker.Config{ConsecutiveFailures: -1, FailureRatio: 0.5, MinCalls: 8, Cooldown: time.Minute}
	sa, sb := newStore(t, addr, opts), newStore(t, addr, opts)
	a, _ := newBreaker(t, sa, cfg)
	b, _ := newBreaker(t, sb, cfg)
	waitSubscribed(t, addr, sa.Channel(), 2)
	raw := newClient(t, addr)
	window := prefix(t) + "{" + redisstore.ID("gemini/pro") + "}:win"
	windowCalls := func() (calls, fails int) {
		h, err := raw.HGetAll(context.Background(), window).Result()
		require.NoError(t, err)
		for k, v := range h {
			n, err := strconv.Atoi(v)
			require.NoError(t, err)
			if strings.HasPrefix(k, "t") {
				calls += n
			} else {
				fails += n
			}
		}
		return calls, fails
	}
	for _, br := range []*breaker.Breaker{a, b} {
		for _, o := range []breaker.Outcome{breaker.Success, breaker.Failure, breaker.Success, breaker.Ignored} {
			tok, err := br.Allow()
			require.NoError(t, err)
			tok.Done(o)
		}
	}
	require.Eventually(t, func() bool { c, _ := windowCalls(); return c == 6 }, 5*time.Second, 5*time.Millisecond)
	_, fails := windowCalls()
	assert.Equal(t, 2, fails)
	assert.Equal(t, breaker.Closed, a.State(), "6 calls: fewer than MinCalls")
	fail(t, a, 1)
	fail(t, b, 1) // 8 calls, 4 failures
	require.Eventually(t, state(a, breaker.Open), 5*time.Second, time.Millisecond)
	require.Eventually(t, state(b, breaker.Open), 5*time.Second, time.Millisecond)
}

// TestPollCatchesMissedMessages: a state written without a message (as if
// the message were lost) reaches the breakers by polling.
func TestPollCatchesMissedMessages(t *testing.T) {
	addr := sharedAddr(t)
	s := newStore(t, addr, redisstore.Options{PollInterval: 50 * time.Millisecond})
	b, h := newBreaker(t, s, breaker.Config{})
	raw := newClient(t, addr)
	key := prefix(t) + "{" + redisstore.ID("gemini/pro") + "}:state"
	require.NoError(t, raw.Eval(context.Background(), `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], 's', 2, 'g', now, 'u', now + 60000)
return 1`, []string{key}).Err())
	require.Eventually(t, state(b, breaker.Open), 5*time.Second, time.Millisecond)
	assert.Equal(t, []string{"closed->open (shared)"}, h.reasons())
}

// TestResetAndForce: a reset is fleet-wide; forcing is a local drill.
func TestResetAndForce(t *testing.T) {
	addr := sharedAddr(t)
	opts := redisstore.Options{PollInterval: 100 * time.Millisecond}
	sa, sb := newStore(t, addr, opts), newStore(t, addr, opts)
	cfg := breaker.Config{ConsecutiveFailures: 1, Cooldown: time.Minute}
	a, _ := newBreaker(t, sa, cfg)
	b, _ := newBreaker(t, sb, cfg)
	waitSubscribed(t, addr, sa.Channel(), 2)
	// barrier trips a breaker of its own in one store and waits until the
	// other sees it: every publication made before has been applied.
	n := 0
	barrier := func(from, to *redisstore.Store) {
		t.Helper()
		n++
		cfg := breaker.Config{Name: "barrier" + strconv.Itoa(n), ConsecutiveFailures: 1, Cooldown: time.Minute}
		src, _ := newBreaker(t, from, cfg)
		dst, _ := newBreaker(t, to, cfg)
		fail(t, src, 1)
		require.Eventually(t, state(dst, breaker.Open), 5*time.Second, time.Millisecond)
	}

	a.ForceOpen()
	barrier(sa, sb)
	assert.Equal(t, breaker.Closed, b.State(), "a forced open is not shared")

	a.ForceClosed()
	fail(t, b, 1)
	barrier(sb, sa)
	assert.Equal(t, breaker.Closed, a.State(), "a forced breaker ignores the fleet")

	a.Reset()
	require.Eventually(t, state(b, breaker.Closed), 5*time.Second, time.Millisecond, "a reset closes the fleet")
	fail(t, b, 1)
	require.Eventually(t, state(a, breaker.Open), 5*time.Second, time.Millisecond, "A follows the fleet again")
}

// TestKeysHoldNoNames: keys and messages carry a hash of the breaker name,
// never the name (a Group key may be a tenant); every key expires.
func TestKeysHoldNoNames(t *testing.T) {
	addr := sharedAddr(t)
	raw := newClient(t, addr)
	p := prefix(t)
	ps := raw.Subscribe(context.Background(), p+"events")
	t.Cleanup(func() { _ = ps.Close() })
	_, err := ps.Receive(context.Background()) // subscribed
	require.NoError(t, err)

	s := newStore(t, addr, redisstore.Options{FleetFailures: 100, FlushInterval: 10 * time.Millisecond})
	g, err := breaker.NewGroup(breaker.Config{Name: "gemini", ConsecutiveFailures: 2, Store: s}, 10)
	require.NoError(t, err)
	const tenant = "alice@example.com"
	b := g.Get(tenant)
	check := func(k string) {
		t.Helper()
		assert.NotContains(t, k, "alice")
		assert.NotContains(t, k, "gemini")
		assert.True(t, strings.HasPrefix(k, p+"{"+redisstore.ID("gemini/"+tenant)+"}:"), k)
		ttl, err := raw.PTTL(context.Background(), k).Result()
		require.NoError(t, err)
		assert.Positive(t, ttl, "%s expires", k)
	}
	fail(t, b, 1)
	var keys []string
	require.Eventually(t, func() bool {
		keys, err = raw.Keys(context.Background(), p+"*").Result()
		return err == nil && len(keys) == 1
	}, 5*time.Second, 5*time.Millisecond, "the count reached the fleet's window")
	require.True(t, strings.HasSuffix(keys[0], "}:win"), keys[0])
	check(keys[0])
	fail(t, b, 1)
	require.Equal(t, breaker.Open, b.State())

	msg, err := ps.ReceiveMessage(context.Background())
	require.NoError(t, err)
	assert.NotContains(t, msg.Payload, "alice")
	assert.Contains(t, msg.Payload, redisstore.ID("gemini/"+tenant))

	keys, err = raw.Keys(context.Background(), p+"*").Result()
	require.NoError(t, err)
	require.Contains(t, keys, p+"{"+redisstore.ID("gemini/"+tenant)+"}:state")
	for _, k := range keys {
		check(k)
		if strings.HasSuffix(k, ":state") {
			vals, err := raw.HGetAll(context.Background(), k).Result()
			require.NoError(t, err)
			assert.ElementsMatch(t, []string{"s", "g", "u", "t", "r"}, keysOf(vals))
			for f, v := range vals {
				_, err := strconv.ParseInt(v, 10, 64)
				assert.NoError(t, err, "field %s holds a number only", f)
			}
		}
	}
}

func keysOf(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestOptionsValidation(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	_, err := redisstore.New(nil, redisstore.Options{})
	require.Error(t, err)
	for _, bad := range []redisstore.Options{
		{Prefix: "a{b"},
		{Prefix: "has space"},
		{RequestBound: -1},
		{QueueSize: -1},
		{FleetFailureRatio: 2},
		{FleetProbes: -1},
	} {
		_, err := redisstore.New(c, bad)
		assert.Error(t, err, "%+v", bad)
	}
	assert.Len(t, redisstore.ID("x"), 32)
	assert.NotEqual(t, redisstore.ID("x"), redisstore.ID("y"))
}

// TestNewNeedsNoRedis: a store starts while Redis is unreachable, its
// breakers work locally, and Close returns.
func TestNewNeedsNoRedis(t *testing.T) {
	s := newStore(t, redisserver.UnusedAddr(t), redisstore.Options{PollInterval: 20 * time.Millisecond, OpTimeout: 100 * time.Millisecond})
	b, _ := newBreaker(t, s, breaker.Config{ConsecutiveFailures: 1, Cooldown: 20 * time.Millisecond})
	fail(t, b, 1)
	require.Equal(t, breaker.Open, b.State())
	require.Eventually(t, state(b, breaker.HalfOpen), 5*time.Second, time.Millisecond)
	tok, err := b.Allow()
	require.NoError(t, err, "the probe is admitted without Redis")
	tok.Done(breaker.Success)
	require.Equal(t, breaker.Closed, b.State())
	require.Eventually(t, func() bool { return s.Stats().Errors > 0 && !s.Stats().Healthy }, 5*time.Second, 5*time.Millisecond)
	assert.Positive(t, s.Stats().FailOpen)
}

// TestClosedStore: after Close the breakers keep working locally.
func TestClosedStore(t *testing.T) {
	addr := sharedAddr(t)
	s := newStore(t, addr, redisstore.Options{})
	b, _ := newBreaker(t, s, breaker.Config{ConsecutiveFailures: 1, Cooldown: 10 * time.Millisecond})
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "idempotent")
	fail(t, b, 1)
	require.Equal(t, breaker.Open, b.State())
	require.Eventually(t, state(b, breaker.HalfOpen), 5*time.Second, time.Millisecond)
	tok, err := b.Allow()
	require.NoError(t, err)
	tok.Done(breaker.Success)
	assert.Equal(t, breaker.Closed, b.State())
	assert.Positive(t, s.Stats().Dropped)
}

// TestIgnoresGarbageMessages: whatever else is published on the channel is
// ignored.
func TestIgnoresGarbageMessages(t *testing.T) {
	addr := sharedAddr(t)
	s := newStore(t, addr, redisstore.Options{PollInterval: time.Minute})
	b, _ := newBreaker(t, s, breaker.Config{})
	waitSubscribed(t, addr, s.Channel(), 1)
	raw := newClient(t, addr)
	id := redisstore.ID("gemini/pro")
	for _, p := range []string{"", "v1", "v2 " + id + " 2 1 1000 x", "v1 " + id + " 9 1 1000 x", "v1 " + id + " 2 -1 1000 x", "v1 " + id + " 2 1 x x", strings.Repeat("v1 ", 1000)} {
		require.NoError(t, raw.Publish(context.Background(), s.Channel(), p).Err())
	}
	require.NoError(t, raw.Publish(context.Background(), s.Channel(), "v1 "+id+" 2 99999999999999 60000 other").Err())
	require.Eventually(t, func() bool { return s.Stats().Messages == 8 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, breaker.Open, b.State(), "only the valid message applied")
}

// TestCollectedBreakerLeaves: the store holds its breakers weakly, so that
// breakers nobody holds any more (made for a request, a tenant that left)
// leave the store when they are garbage collected; a breaker still held
// stays and keeps sharing.
func TestCollectedBreakerLeaves(t *testing.T) {
	addr := sharedAddr(t)
	opts := redisstore.Options{PollInterval: 50 * time.Millisecond}
	s, other := newStore(t, addr, opts), newStore(t, addr, opts)
	cfg := breaker.Config{ConsecutiveFailures: 1, Cooldown: time.Minute}
	kept, _ := newBreaker(t, s, cfg)
	held := make([]*breaker.Breaker, 100)
	for i := range held {
		b, err := breaker.New(breaker.Config{Name: "gone" + strconv.Itoa(i), Store: s})
		require.NoError(t, err)
		held[i] = b
	}
	require.Equal(t, 101, s.Stats().Breakers, "held breakers stay")
	runtime.KeepAlive(held)
	require.Eventually(t, func() bool {
		runtime.GC()
		return s.Stats().Breakers == 1
	}, 10*time.Second, 10*time.Millisecond, "collected breakers left")

	peer, _ := newBreaker(t, other, cfg)
	waitSubscribed(t, addr, s.Channel(), 2)
	fail(t, peer, 1)
	require.Eventually(t, state(kept, breaker.Open), 5*time.Second, time.Millisecond, "the breaker still held still shares")
}
