package redisspend_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/fallback/spend/redisspend"
	"github.com/tierguard/tierguard/internal/testbed/redisserver"
)

// usageTier bills what its request's context says (used), and counts
// what it billed: the provider's own count.
type usageTier struct {
	used   int64
	billed *atomic.Int64
	// gate, when set, holds every call until it is closed, so that many
	// requests are in flight at once.
	gate <-chan struct{}
}

func (u usageTier) Name() string { return "pro" }
func (u usageTier) Call(ctx context.Context, _ string) (reply, error) {
	if u.gate != nil {
		select {
		case <-u.gate:
		case <-ctx.Done():
			return reply{}, ctx.Err()
		}
	}
	in := u.used * 6 / 10
	us := fallback.Usage{InputTokens: in, OutputTokens: u.used - in}
	u.billed.Add(u.used)
	fallback.Report(ctx, fallback.Reply{Usage: us, HasUsage: true})
	return reply{usage: us}, nil
}

// pod is one process of a fleet sharing one tenant's limit.
type pod struct {
	ledger *spend.Ledger
	chain  *fallback.Chain[string, reply]
	store  *redisspend.Store
	events *eventLog
}

type podConfig struct {
	addr, prefix string
	limit        int64
	strict       bool
	used         int64 // what each request really bills
	billed       *atomic.Int64
	gate         <-chan struct{}
	interval     time.Duration
	onError      func(error)
	// wrap, when set, wraps the pod's store.
	wrap func(*redisspend.Store) spend.Store
}

func newPod(t testing.TB, pc podConfig) *pod {
	t.Helper()
	store, err := redisspend.New(newClient(t, pc.addr), redisspend.Options{Prefix: pc.prefix, Strict: pc.strict})
	require.NoError(t, err)
	var shared spend.Store = store
	if pc.wrap != nil {
		shared = pc.wrap(store)
	}
	l, err := spend.New(spend.Config{
		Prices:       prices,
		Tenants:      map[string]spend.Allowance{"acme": {DailyTokens: pc.limit}},
		Store:        shared,
		SyncInterval: cmpOr(pc.interval, 20*time.Millisecond),
		SyncTimeout:  200 * time.Millisecond,
		OnStoreError: pc.onError,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	c, err := fallback.New(fallback.Config[string, reply]{Stages: []fallback.Stage[string, reply]{
		{Tier: usageTier{used: pc.used, billed: pc.billed, gate: pc.gate}, Model: "pro"}}})
	require.NoError(t, err)
	_, err = l.Attach(c)
	require.NoError(t, err)
	ev := &eventLog{}
	l.Observe(ev.add)
	return &pod{ledger: l, chain: c, store: store, events: ev}
}

// newPods makes n pods of one configuration, under a key prefix of the
// test's own.
func newPods(t *testing.T, n int, pc podConfig) []*pod {
	t.Helper()
	pc.prefix = prefix(t)
	pods := make([]*pod, n)
	for i := range pods {
		pods[i] = newPod(t, pc)
	}
	return pods
}

func cmpOr(d, def time.Duration) time.Duration {
	if d != 0 {
		return d
	}
	return def
}

// request admits and runs one request with an estimate of est tokens.
func (p *pod) request(est int64) error {
	tk, err := p.ledger.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{Tokens: est})
	if err != nil {
		return err
	}
	defer tk.End()
	_, err = p.chain.Do(tk, "q")
	return err
}

type eventLog struct {
	mu  sync.Mutex
	all []spend.Event
}

func (e *eventLog) add(ev spend.Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
}

// count counts the events of kind k (and threshold th, for
// ThresholdReached).
func (e *eventLog) count(k spend.EventKind, th float64) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.all {
		if ev.Kind == k && (k != spend.ThresholdReached || ev.Threshold == th) {
			n++
		}
	}
	return n
}

// runFleet runs callers goroutines per pod, each asking for requests of
// estimate est until the ledger refuses one, and returns the requests
// admitted.
func runFleet(t *testing.T, pods []*pod, callers int, est int64) int64 {
	t.Helper()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for _, p := range pods {
		for range callers {
			wg.Go(func() {
				for {
					err := p.request(est)
					if errors.Is(err, spend.ErrLimitReached) {
						return
					}
					if !assert.NoError(t, err) {
						return
					}
					admitted.Add(1)
				}
			})
		}
	}
	wg.Wait()
	return admitted.Load()
}

// Strict: four pods, 16 callers each, one tenant's limit of 20,000
// tokens, each request estimated at what it bills (100 tokens). The
// provider bills exactly the limit, never more: 200 requests, however
// they interleave. The same fleet local-first (the default) passes the
// limit, by what the other pods spent before they heard of it; that is
// measured, not asserted, beyond its passing the limit at all.
func TestStrictFleetNeverPassesTheLimit(t *testing.T) {
	addr := sharedAddr(t)
	const limit = 20_000
	for _, strict := range []bool{true, false} {
		name := map[bool]string{true: "strict", false: "local-first"}[strict]
		t.Run(name, func(t *testing.T) {
			var billed atomic.Int64
			pods := newPods(t, 4, podConfig{addr: addr, limit: limit, strict: strict, used: 100, billed: &billed})
			admitted := runFleet(t, pods, 16, 100)
			over := float64(billed.Load()-limit) / limit * 100
			t.Logf("%s: %d requests admitted, %d tokens billed against %d (%+.1f %%)", name, admitted, billed.Load(), limit, over)
			if strict {
				assert.Equal(t, int64(limit), billed.Load(), "the provider billed the limit exactly")
				assert.Equal(t, int64(limit/100), admitted)
				for _, p := range pods {
					require.NoError(t, p.ledger.Close())
				}
				tot, err := pods[0].store.Totals(context.Background(), "acme", spend.Daily, dayID(time.Now()))
				require.NoError(t, err)
				if tot.Tokens == limit { // not across midnight
					assert.Zero(t, tot.ReservedTokens, "every reservation released")
				}
			}
		})
	}
}

// Strict, with estimates short of what requests bill (100 estimated, 130
// billed): the estimates the fleet admitted never pass the limit, so the
// fleet passes it by no more than the estimates' shortfall (30 tokens a
// request, of those whose end Redis had not yet heard when the limit
// bound: in flight, or their release on its way).
func TestStrictOvershootIsTheEstimatesShortfall(t *testing.T) {
	addr := sharedAddr(t)
	const limit, callers = 20_000, 8
	var billed atomic.Int64
	pods := newPods(t, 4, podConfig{addr: addr, limit: limit, strict: true, used: 130, billed: &billed})
	admitted := runFleet(t, pods, callers, 100)
	t.Logf("%d admitted, %d billed against %d: %d over, of a shortfall of %d", admitted, billed.Load(), limit, billed.Load()-limit, 30*admitted)
	assert.LessOrEqual(t, 100*admitted, int64(limit), "the estimates admitted fit in the limit")
	assert.LessOrEqual(t, billed.Load()-limit, 30*admitted, "over by no more than the estimates' shortfall")
	assert.Equal(t, 130*admitted, billed.Load())
}

// While Redis is away, each pod may spend its share of what the fleet
// had left when it last saw Redis: the remainder divided among the pods
// Redis counted. Two pods spend 6,000 of 10,000 with Redis up, Redis is
// killed, and each then spends until refused: together they stay within
// the limit. Before, each pod went on alone to the whole limit: 14,000.
func TestShareOfTheRemainderWhileRedisIsAway(t *testing.T) {
	for _, strict := range []bool{false, true} {
		name := map[bool]string{true: "strict", false: "local-first"}[strict]
		t.Run(name, func(t *testing.T) {
			srv := redisserver.Start(t)
			const limit = 10_000
			var billed atomic.Int64
			pre := prefix(t)
			var failed [2]atomic.Bool
			var pods []*pod
			for i := range 2 {
				pods = append(pods, newPod(t, podConfig{addr: srv.Addr, prefix: pre, limit: limit, strict: strict, used: 100, billed: &billed,
					onError: func(error) { failed[i].Store(true) }}))
			}
			for i := range 60 {
				require.NoError(t, pods[i%2].request(100))
			}
			// Both pods see the fleet's 6,000, and count two pods.
			require.Eventually(t, func() bool {
				for _, p := range pods {
					if p.ledger.Use("acme")[spend.DailyTokens].Used != 6000 || p.store.Pods() != 2 {
						return false
					}
				}
				return true
			}, 10*time.Second, 5*time.Millisecond)

			srv.Kill()
			require.Eventually(t, func() bool { return failed[0].Load() && failed[1].Load() }, 10*time.Second, 5*time.Millisecond,
				"both pods found Redis gone")
			var after [2]int64
			for i, p := range pods {
				for p.request(100) == nil {
					after[i] += 100
				}
			}
			t.Logf("after the kill: %v tokens (each pod's share: %d)", after, (limit-6000)/2)
			assert.Equal(t, [2]int64{2000, 2000}, after, "each pod spent its share of the 4,000 left")
			assert.Equal(t, int64(limit), billed.Load())
		})
	}
}

// A threshold's event fires once for the fleet: four pods spend a
// tenant's limit together, and across the four, 70 %, 90 % and the limit
// are each reported once, and the first refusal once. Before, each pod
// that crossed a threshold reported it: up to four times each.
func TestThresholdEventsOncePerFleet(t *testing.T) {
	addr := sharedAddr(t)
	for _, strict := range []bool{false, true} {
		name := map[bool]string{true: "strict", false: "local-first"}[strict]
		t.Run(name, func(t *testing.T) {
			var billed atomic.Int64
			pods := newPods(t, 4, podConfig{addr: addr, limit: 20_000, strict: strict, used: 100, billed: &billed})
			runFleet(t, pods, 4, 100)
			// Every pod sees the fleet's final figure, then closes: the
			// last exchange makes the claims still pending.
			require.Eventually(t, func() bool {
				for _, p := range pods {
					if p.ledger.Use("acme")[spend.DailyTokens].Used < 20_000 {
						return false
					}
				}
				return true
			}, 10*time.Second, 5*time.Millisecond)
			for _, p := range pods {
				require.NoError(t, p.ledger.Close())
			}
			count := func(k spend.EventKind, th float64) int {
				n := 0
				for _, p := range pods {
					n += p.events.count(k, th)
				}
				return n
			}
			assert.Equal(t, 1, count(spend.ThresholdReached, 0.7), "70 %")
			assert.Equal(t, 1, count(spend.ThresholdReached, 0.9), "90 %")
			assert.Equal(t, 1, count(spend.ThresholdReached, 1), "the limit")
			assert.Equal(t, 1, count(spend.FirstRefusal, 0), "the first refusal")
			assert.Equal(t, 16, count(spend.Refused, 0), "every pod's callers were refused once each")
		})
	}
}

// A reservation whose process died is freed when its lease ends; a
// release sent twice (a retried exchange) frees it once.
func TestReservationLeaseAndIdempotentRelease(t *testing.T) {
	addr := sharedAddr(t)
	ctx := context.Background()
	pre := prefix(t)
	s, err := redisspend.New(newClient(t, addr), redisspend.Options{Prefix: pre, Strict: true, Lease: 50 * time.Millisecond})
	require.NoError(t, err)
	day := dayID(time.Now())
	end := time.Now().Add(time.Hour)
	reserve := func(id uint64, tokens int64) *spend.Reservation {
		r := &spend.Reservation{Tenant: "acme", Day: day, Month: day / 100, DayEnd: end, MonthEnd: end,
			Reserved: spend.Reserved{ID: id, Tokens: tokens}, Limits: [4]int64{1000, 0, 0, 0}}
		require.NoError(t, s.Reserve(ctx, r))
		return r
	}
	assert.True(t, reserve(1, 600).Granted)
	r := reserve(2, 600)
	assert.False(t, r.Granted, "600 reserved, 600 more would pass 1,000")
	assert.Equal(t, spend.DailyTokens, r.Meter)
	assert.Equal(t, int64(600), r.FleetReserved[spend.DailyTokens])
	// The process that holds reservation 1 dies: its lease frees it.
	require.Eventually(t, func() bool { return reserve(3, 600).Granted }, 10*time.Second, 10*time.Millisecond)

	// Reservation 3's request ends having used 550: the release and the
	// figure go in one exchange, twice.
	for range 2 {
		sh := []spend.Share{{Tenant: "acme", Period: spend.Daily, ID: day, End: end, Tokens: 550,
			Release: []spend.Reserved{{ID: 3, Tokens: 600}}}}
		require.NoError(t, s.Sync(ctx, sh))
		assert.Equal(t, int64(550), sh[0].FleetTokens)
		assert.Zero(t, sh[0].FleetReserved.Tokens, "released once")
	}
	r = reserve(4, 450)
	assert.True(t, r.Granted, "550 used, 450 fits")
	assert.Equal(t, int64(550), r.Fleet[spend.DailyTokens])
	assert.Equal(t, int64(550), r.Mine[spend.DailyTokens])
	assert.False(t, reserve(5, 1).Granted)
}

// gatedStore is a strict store whose exchanges fail while off is set: a
// pod that cannot reach Redis while the others can.
type gatedStore struct {
	*redisspend.Store
	off *atomic.Bool
}

func (g gatedStore) Sync(ctx context.Context, shares []spend.Share) error {
	if g.off.Load() {
		return errors.New("partitioned")
	}
	return g.Store.Sync(ctx, shares)
}

// Redis comes back empty after the pods spent their shares: it holds
// nothing of what they spent until each has sent its figures again, and
// pod B cannot reach it yet. Pod A, back, holds its view of what B spent
// before the outage (the reservation's floor), and since Redis holds
// less of the others than A saw, keeps to its share — spent — until B's
// figures are back: nothing is spent twice. Before, A's reservations saw
// an empty Redis and were granted.
func TestBackFromAnEmptyRestartNothingIsSpentTwice(t *testing.T) {
	srv := redisserver.Start(t)
	const limit = 10_000
	var billed atomic.Int64
	var failed [2]atomic.Bool
	var bOff atomic.Bool
	pre := prefix(t)
	var pods []*pod
	for i := range 2 {
		pc := podConfig{addr: srv.Addr, prefix: pre, limit: limit, strict: true, used: 100, billed: &billed,
			onError: func(error) { failed[i].Store(true) }}
		if i == 1 {
			// B's store can be cut off.
			pc.wrap = func(s *redisspend.Store) spend.Store { return gatedStore{s, &bOff} }
		}
		pods = append(pods, newPod(t, pc))
	}
	for i := range 60 {
		require.NoError(t, pods[i%2].request(100))
	}
	require.Eventually(t, func() bool {
		for _, p := range pods {
			if p.ledger.Use("acme")[spend.DailyTokens].Used != 6000 || p.store.Pods() != 2 {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond)
	srv.Kill()
	bOff.Store(true)
	require.Eventually(t, func() bool { return failed[0].Load() && failed[1].Load() }, 10*time.Second, 5*time.Millisecond)
	for _, p := range pods {
		for p.request(100) == nil {
		}
	}
	require.Equal(t, int64(limit), billed.Load(), "each pod spent its share")

	require.NoError(t, srv.Restart())
	recovered := make(chan struct{})
	var once sync.Once
	pods[0].ledger.Observe(func(e spend.Event) {
		if e.Kind == spend.StoreRecovered {
			once.Do(func() { close(recovered) })
		}
	})
	<-recovered
	time.Sleep(200 * time.Millisecond) // A's exchanges go on; B stays cut off
	for range 20 {
		assert.ErrorIs(t, pods[0].request(100), spend.ErrLimitReached, "A keeps to its spent share")
	}
	bOff.Store(false)
	require.Eventually(t, func() bool {
		tot, err := pods[0].store.Totals(context.Background(), "acme", spend.Daily, dayID(time.Now()))
		return err == nil && tot.Tokens == limit
	}, 10*time.Second, 5*time.Millisecond, "B's figures back in Redis")
	for _, p := range pods {
		assert.ErrorIs(t, p.request(100), spend.ErrLimitReached, "Redis refuses")
	}
	assert.Equal(t, int64(limit), billed.Load(), "nothing spent twice")
}
