package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/breaker/redisstore"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/ratelimit"
	"github.com/tierguard/tierguard/fallback/ratelimit/redislimit"
	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/fallback/spend/redisspend"
	"github.com/tierguard/tierguard/internal/testbed/redisserver"
	"github.com/tierguard/tierguard/retry"
)

// Config sizes a run.
type Config struct {
	// Pods is the number of pods (50).
	Pods int
	// Quota is the fleet's rate limit: Quota calls per Per.
	Quota int
	Per   time.Duration
	// Interval is how often each pod's worker asks for a call.
	Interval time.Duration
	// Phase is the length of each phase of load.
	Phase time.Duration
	// InFlight is how many callers each pod runs for a strict tenant,
	// each with one request in flight at a time (64); Hold how long the
	// upstream holds each of their calls (a few ms, so that they are
	// truly in flight together); StrictRounds sizes the strict tenants'
	// limits: that many requests per caller.
	InFlight, StrictRounds int
	Hold                   time.Duration
	// StrictTimeout is the strict ledgers' SyncTimeout and ReserveTimeout
	// (spend.Config), and a third of their MaxStaleness.
	StrictTimeout time.Duration
	// Restarts is the number of restart drills, Storms of 503 storms
	// (at least one).
	Restarts, Storms int
	// Settle bounds every wait for the fleet to agree (generous: no
	// figure is judged by it, a run that needs it fails).
	Settle time.Duration
	// Logf, when set, receives progress lines.
	Logf func(format string, args ...any)
}

// reserveTimeout is the strict ledgers' ReserveTimeout.
func (c Config) reserveTimeout() time.Duration {
	if c.StrictTimeout > 0 {
		return c.StrictTimeout
	}
	return 250 * time.Millisecond
}

func (c Config) logf(format string, args ...any) {
	if c.Logf != nil {
		c.Logf(format, args...)
	}
}

// The breaker shared in the storms: the fleet trips on StormFailures
// failures it counts together (no pod sees that many alone before the
// fleet trips), and cools down for StormCooldown.
const (
	StormFailures = 25
	StormCooldown = time.Second
	// drillShort and drillLong are the cooldowns of the restart drills'
	// breaker: pods below shortPods cycle through a whole trip while Redis
	// is away, the others trip and must stay open.
	drillShort = 50 * time.Millisecond
	drillLong  = time.Minute
	shortPods  = 10
	// tokensPerCall is what each answered call bills.
	tokensPerCall = 100
)

// Report is what a run measured.
type Report struct {
	// Config is the run's configuration.
	Config Config
	// Phases in the order they ran.
	Phases []PhaseReport
	// TripFromStorm and TripToEveryPod are, over the 503 storms, the
	// longest time from a storm's start, and from its first pod's trip,
	// until every pod was open; Storms has both for each storm.
	TripFromStorm, TripToEveryPod time.Duration
	Storms                        [][2]time.Duration
	// OwnTrips is the most pods whose breaker tripped on their own
	// failures in a storm (the others adopted the fleet's trip), OpenPods
	// the fewest pods that opened in one.
	OwnTrips, OpenPods int
	// Takes and Granted sum the limit stores' asks of Redis and the
	// grants among them.
	Takes, Granted uint64
	// TripsIn429 counts breaker trips during the 429 storm (want 0).
	TripsIn429 int
	// Upstream429 is how many calls reached the upstream while it
	// answered 429 (each 429 holds the fleet's limiter off).
	Upstream429 int
	// WorstUp and WorstDown are the most calls admitted in any window of
	// Per that met no outage, and that met one; WorstUpAt and WorstDownAt
	// when those windows began, since the run's start.
	WorstUp, WorstDown     int
	WorstUpAt, WorstDownAt time.Duration
	// DrillRuns counts the restart drills, DrillLost those whose trip
	// was lost (its pod left open), DrillUnsettled those after which Redis
	// and the pods did not all show the trip; DrillCases counts the drills
	// by how the trip and the closes were ordered.
	DrillRuns, DrillLost, DrillUnsettled int
	DrillCases                           map[string]int
	// Tenants are the limited tenants' spends.
	Tenants []TenantReport
	// Bursts are the strict tenants' bursts with Redis healthy.
	Bursts []BurstReport
	// StoreFailures counts the failed exchanges (and, strict, failed
	// reservations) of the local-first and of the strict ledgers, whole
	// run.
	StoreFailures [2]uint64
	// RoundTrips counts the Redis round trips of each kind of store
	// ("breaker", "limit", "spend") over the run.
	RoundTrips map[string]uint64
	// Requests counts the requests made, Admitted those answered, Grants
	// the calls the limiters admitted; StrictRequests the strict
	// tenants' requests (each asks the strict ledger once).
	Requests, Admitted, Grants, StrictRequests uint64
}

// BurstReport is one strict tenant's burst with Redis healthy.
type BurstReport struct {
	Tenant string
	// PeakInFlight is the most requests one pod had in flight at once
	// (Admit to End), PeakHeld the most calls the upstream held at once
	// over the fleet.
	PeakInFlight, PeakHeld int
	// StoreFailures counts the strict ledgers' failed exchanges and
	// reservations during the burst (each makes its pod decide on its
	// share until an exchange succeeds).
	StoreFailures uint64
	// ReserveMax is the longest reservation, ReserveSlow counts those
	// that took more than half the ReserveTimeout, ReserveErrors those
	// that failed (ReserveTimeout passed, most often).
	ReserveMax                 time.Duration
	ReserveSlow, ReserveErrors uint64
}

// PhaseReport is one phase's figures.
type PhaseReport struct {
	// Name names the phase; From and To are its bounds since the run's
	// start.
	Name     string
	From, To time.Duration
	// Requests counts the requests made in the phase, Admitted those
	// answered, Granted the calls the limiters admitted; StrictRequests
	// the strict tenants' requests.
	Requests, Admitted, Granted, StrictRequests uint64
	// RoundTrips counts the phase's Redis round trips by kind of store.
	RoundTrips map[string]uint64
}

// TenantReport is one tenant's spend against its daily limit.
type TenantReport struct {
	// Name is the tenant; Phase the phase whose load billed it.
	Name, Phase string
	// FailClosed is the allowance's FailClosed.
	FailClosed bool
	// Limit is the daily token limit, Used the tokens the upstream
	// billed the tenant (the provider's count).
	Limit, Used int64
	// Requests counts the requests made for the tenant (admitted or not).
	Requests int64
	// Strict is set for the strict ledgers' tenants; Estimate is what
	// each of their requests reserved (each bills 100 tokens), Shortfall
	// the estimates' shortfall over every billed request.
	Strict    bool
	Estimate  int64
	Shortfall int64
	// Bound, for the tenants billed in an outage, is the most the fleet
	// may have spent by the share rule on requests asked before Redis came
	// back (0 for the others): each pod i
	// spends, beyond its own figure in Redis at its last view (synced_i),
	// its share of what the fleet had left at that view, s_i = (limit −
	// F_i − R_i) ÷ pods, once it knows Redis is away; before it knows, on
	// requests it admitted before its first failed exchange, it spent
	// e_i on its local view. Bound = Σ synced_i + max(s_i, e_i). Views
	// and Detection split Bound − Limit: Σ synced_i + Σ s_i − Limit (the
	// pods' views differ: what the fleet spent between them) and
	// Σ max(e_i − s_i, 0) (what pods spent past their shares before they
	// knew).
	Bound, Views, Detection int64
	// Outage is what the fleet spent on the tenant's requests asked
	// before Redis came back (Bound bounds it); Final bounds Used. A
	// strict tenant's callers go on for a second once Redis is back,
	// when the first pods back may reserve again what the others spent
	// on their shares and have not yet sent: after a pause Final is
	// Limit + Σ max(s_i, e_i), after a restart (Redis empty, its
	// reservations counting only the figures sent again) Bound + Limit.
	// See RELIABILITY.md.
	Outage, Final int64
	// RedisTokens and RedisReserved are the tenant's day as Redis holds
	// it at the end: the pods' figures, and the reservations left.
	RedisTokens, RedisReserved int64
	// Alerts counts the fleet's alerts ("0.7", "0.9", "1", "first
	// refusal"); WantAlerts are those due once: each threshold the
	// billed use reached, and the first refusal when the limit (or a
	// pod's share of it) refused a request.
	Alerts     map[string]int
	WantAlerts []string
}

// Overshoot is how far the tenant's spend went past its limit, as a
// fraction of it (0 when it stayed under).
func (t TenantReport) Overshoot() float64 {
	return max(float64(t.Used-t.Limit), 0) / float64(t.Limit)
}

// counter counts the Redis round trips (a command or a pipeline) of one
// kind of store, over every pod.
type counter struct{ n atomic.Uint64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

// kinds are the kinds of store whose round trips are counted: "spend" is
// the local-first ledgers' store, "spend-strict" the strict ones'.
var kinds = []string{"breaker", "limit", "spend", "spend-strict"}

// fault is what the upstream answers.
type fault int32

const (
	healthy fault = iota
	unavailable
	tooMany
)

var (
	err503     = errors.New("upstream: 503 unavailable")
	err429     = errors.New("upstream: 429 too many requests")
	errLimited = errors.New("rate limited")
)

// fleet is one run's world.
type fleet struct {
	cfg    Config
	srv    *redisserver.Server
	prefix string
	start  time.Time
	pods   []*pod
	trips  map[string]*counter
	fault  atomic.Int32
	// tenants are the tenants the workers bill now, in turn.
	tenants atomic.Pointer[[]string]

	upstream atomic.Int64 // calls that reached the upstream

	mu       sync.Mutex
	admitted []time.Duration
	outages  [][2]time.Duration

	requests, passed atomic.Uint64
	// used is, per tenant, what the upstream billed (*atomic.Int64): the
	// provider's own count; asked the requests made (*atomic.Int64).
	used, asked sync.Map

	// strictRequests counts the strict callers' requests; held the strict
	// calls the upstream holds now, peakHeld the most at once in a burst;
	// peakInFlight the most strict requests a pod had in flight at once
	// (from Admit to End) in a burst.
	strictRequests               atomic.Uint64
	held, peakHeld, peakInFlight atomic.Int64
	// storeFails counts the StoreFailed events of the local-first and
	// the strict ledgers.
	storeFails [2]atomic.Uint64
	// reserveMax is the longest reservation (ns) in a burst, reserveSlow
	// counts those longer than half the ReserveTimeout, reserveErrs those
	// that failed.
	reserveMax               atomic.Int64
	reserveSlow, reserveErrs atomic.Uint64
	firstReserveErr          atomic.Pointer[error]
	// refused marks the tenants a request of which was refused at the
	// limit (or at a pod's share of it).
	refused sync.Map
	// alerts counts the fleet's threshold events, by tenant and alert.
	amu    sync.Mutex
	alerts map[alertKey]int
	// planned are the tenants' plans by name; outs the outages' bounds
	// in time, by phase.
	planned map[string]tenantPlan
	outs    map[string][2]time.Time
}

// watched reports whether the tenant is billed in an outage.
func (f *fleet) watched(tenant string) bool { return f.planned[tenant].watched() }

type reply struct{}

// pod is one process: its own clients, stores, breakers, limiter, ledger
// and chain.
type pod struct {
	f       *fleet
	i       int
	clients []*redis.Client
	bstore  *redisstore.Store
	lstore  *redislimit.Store
	br      *breaker.Breaker
	drill   *breaker.Breaker
	lim     *ratelimit.Limiter
	ledger  *spend.Ledger
	chain   *fallback.Chain[call, reply]
	// sledger and schain are the strict ledger (over a strict redisspend
	// store) and its chain, which the strict tenants' callers use.
	sledger *spend.Ledger
	schain  *fallback.Chain[call, reply]
	// watches record, per ledger (local-first, strict), what the
	// outages' bounds are computed from.
	watches [2]*watch
	// inflight counts the strict requests between Admit and End.
	inflight atomic.Int64

	mu    sync.Mutex
	trans []transition // of br and drill
}

// call is a chain's input: the tenant billed, and when its Admit was
// asked (the outages' bounds tell the requests a pod admitted before it
// knew Redis was away from the others).
type call struct {
	tenant  string
	asked   time.Time
	watched bool
}

type transition struct {
	drill  bool
	at     time.Time
	to     breaker.State
	reason string
	until  time.Time
}

// tier is the pod's model: through the breaker and the limiter to the
// shared upstream.
type tier struct{ p *pod }

func (tier) Name() string { return "pro" }

func (t tier) Call(ctx context.Context, c call) (reply, error) {
	p, f := t.p, t.p.f
	tok, err := p.br.Allow()
	if err != nil {
		return reply{}, err
	}
	if !p.lim.Allow(0) {
		tok.Done(breaker.Ignored)
		return reply{}, errLimited
	}
	at := time.Since(f.start)
	f.mu.Lock()
	f.admitted = append(f.admitted, at)
	f.mu.Unlock()
	f.upstream.Add(1)
	switch fault(f.fault.Load()) {
	case unavailable:
		tok.Done(breaker.Failure)
		return reply{}, err503
	case tooMany:
		tok.Done(breaker.Ignored)
		p.lim.Throttle(f.cfg.Per / 4)
		return reply{}, err429
	}
	tok.Done(breaker.Success)
	p.lim.Passed()
	p.bill(ctx, c, 0)
	return reply{}, nil
}

// bill is the upstream's answer to a call: it counts what it bills, per
// tenant (the provider's own count, the truth the limits are judged by)
// and reports the usage to the chain.
func (p *pod) bill(ctx context.Context, c call, mode int) {
	v, _ := p.f.used.LoadOrStore(c.tenant, new(atomic.Int64))
	v.(*atomic.Int64).Add(tokensPerCall)
	if c.watched {
		p.watches[mode].billed(c.tenant, c.asked, tokensPerCall)
	}
	u := fallback.Usage{InputTokens: 60, OutputTokens: 40}
	fallback.Report(ctx, fallback.Reply{Usage: u, HasUsage: true})
}

var prices = func() *spend.Prices {
	p, err := spend.NewPrices(spend.PriceTable{Currency: "USD", Prices: []spend.Price{{Model: "pro",
		Rates: spend.Rates{Input: spend.MustParseAmount("1.25"), Output: spend.MustParseAmount("10")}}}})
	if err != nil {
		panic(err)
	}
	return p
}()

// tenantPlan is a tenant billed in one phase, with a daily limit of a
// fraction of what the fleet can spend in that phase.
type tenantPlan struct {
	name, phase string
	failClosed  bool
	limit       int64
	// strict tenants are the strict ledgers', billed by InFlight callers
	// per pod; estimate is what each of their requests reserves (it bills
	// tokensPerCall).
	strict   bool
	estimate int64
}

// watched reports whether the tenant's figures are recorded for the
// outages' bounds: the tenants billed while Redis is away.
func (tp tenantPlan) watched() bool { return tp.phase == "restart" || tp.phase == "pause" }

func (f *fleet) plans() []tenantPlan {
	// What the fleet spends in a phase at its quota.
	full := int64(tokensPerCall) * int64(f.cfg.Quota) * int64(f.cfg.Phase) / int64(f.cfg.Per)
	// "steady" gets half the calls from the start, and crosses its limit
	// in the first phase; the others get a third of them in their phase
	// (while Redis is out the pods keep to their shares: 90 % of the rate,
	// starting empty) and cross theirs in its first half. "bulk" keeps
	// the load up once they are spent.
	quarter, eighth := max(full/4, tokensPerCall), max(full/8, tokensPerCall)
	// The strict tenants' limits are StrictRounds requests per caller:
	// every caller gets to the limit with its peers in flight.
	strict := int64(tokensPerCall) * int64(f.cfg.Pods) * int64(f.cfg.InFlight) * int64(max(f.cfg.StrictRounds, 1))
	return []tenantPlan{
		{name: "bulk", phase: "every", limit: 1 << 50},
		{name: "steady", phase: "steady", limit: quarter},
		{name: "restart-open", phase: "restart", limit: eighth},
		{name: "restart-closed", phase: "restart", failClosed: true, limit: eighth},
		{name: "pause-open", phase: "pause", limit: eighth},
		{name: "pause-closed", phase: "pause", failClosed: true, limit: eighth},
		{name: "strict", phase: "strict", strict: true, limit: strict, estimate: tokensPerCall},
		{name: "strict-short", phase: "strict", strict: true, limit: strict, estimate: tokensPerCall - shortBy},
		{name: "strict-restart", phase: "restart", strict: true, limit: strict, estimate: tokensPerCall},
		{name: "strict-pause", phase: "pause", strict: true, limit: strict, estimate: tokensPerCall},
	}
}

// shortBy is how far "strict-short"'s estimate falls short of what each
// of its requests bills.
const shortBy = 30

func (f *fleet) newPod(i int) (*pod, error) {
	p := &pod{f: f, i: i}
	client := func(kind string) *redis.Client {
		opts := &redis.Options{Addr: f.srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialTimeout: 200 * time.Millisecond}
		if kind == "spend-strict" {
			// Each request waits on a reservation: the pool is kept
			// warm, as a serving pod's is, rather than dialled by the
			// first burst's 64 callers at once.
			opts.MinIdleConns = 4
		}
		c := redis.NewClient(opts)
		c.AddHook(f.trips[kind])
		p.clients = append(p.clients, c)
		return c
	}
	var err error
	p.bstore, err = redisstore.New(client("breaker"), redisstore.Options{
		Prefix: f.prefix + "breaker:", PollInterval: 500 * time.Millisecond, OpTimeout: 2 * time.Second,
		FleetFailures: StormFailures, FlushInterval: 50 * time.Millisecond,
	})
	if err != nil {
		return nil, err
	}
	p.br, err = breaker.New(breaker.Config{Name: "gemini/pro", ConsecutiveFailures: 1000, Cooldown: StormCooldown,
		HalfOpenProbes: 1, Window: 10 * time.Second, Store: p.bstore})
	if err != nil {
		return nil, err
	}
	cool := drillLong
	if i < shortPods {
		cool = drillShort
	}
	p.drill, err = breaker.New(breaker.Config{Name: "drill", ConsecutiveFailures: 1, Cooldown: cool, Store: p.bstore})
	if err != nil {
		return nil, err
	}
	observe := func(drill bool) func(breaker.Transition) {
		return func(t breaker.Transition) {
			p.mu.Lock()
			p.trans = append(p.trans, transition{drill: drill, at: time.Now(), to: t.To, reason: t.Reason, until: t.OpenUntil})
			p.mu.Unlock()
		}
	}
	p.br.Observe(observe(false))
	p.drill.Observe(observe(true))

	p.lstore, err = redislimit.New(client("limit"), redislimit.Options{
		Prefix: f.prefix + "limit:", Pods: f.cfg.Pods, RequestBound: 50 * time.Millisecond,
		RetryHealth: 100 * time.Millisecond, OpTimeout: 300 * time.Millisecond,
	})
	if err != nil {
		return nil, err
	}
	p.lim, err = ratelimit.New(ratelimit.Config{Name: "gemini-2.5-pro", Requests: f.cfg.Quota, Per: f.cfg.Per, Store: p.lstore})
	if err != nil {
		return nil, err
	}
	// Two ledgers, each over its own store and client: the local-first
	// one (the default) for the worker's tenants, the strict one for the
	// strict tenants' callers. Their prefixes differ so that each store
	// counts its own 50 processes (Options.Pods 0), as a fleet with one
	// mode would.
	for _, strict := range []bool{false, true} {
		kind, pre, mode := "spend", f.prefix+"spend:", 0
		if strict {
			kind, pre, mode = "spend-strict", f.prefix+"spend-strict:", 1
		}
		watch := map[string]bool{}
		for _, tp := range f.plans() {
			watch[tp.name] = tp.strict == strict && tp.watched()
		}
		p.watches[mode] = newWatch(f, watch)
		rs, err := redisspend.New(client(kind), redisspend.Options{Prefix: pre, Strict: strict, Lease: 30 * time.Second})
		if err != nil {
			return nil, err
		}
		tenants := map[string]spend.Allowance{}
		for _, tp := range f.plans() {
			if tp.strict == strict {
				tenants[tp.name] = spend.Allowance{DailyTokens: tp.limit, FailClosed: tp.failClosed}
			}
		}
		cfg := spend.Config{Prices: prices, Tenants: tenants, Store: watched{rs, p.watches[mode]},
			SyncInterval: syncInterval, SyncTimeout: syncTimeout, MaxStaleness: time.Second}
		if strict {
			// The strict ledgers send each release promptly, and take in
			// the fleet's figures with every reservation: their periodic
			// exchanges (of four idle tenants, most of the run) need not
			// double the local-first ones' load on Redis.
			cfg.SyncInterval = strictSyncInterval
			cfg.SyncTimeout, cfg.ReserveTimeout, cfg.MaxStaleness = f.cfg.StrictTimeout, f.cfg.StrictTimeout, 3*f.cfg.StrictTimeout
		}
		l, err := spend.New(cfg)
		if err != nil {
			return nil, err
		}
		l.Observe(func(e spend.Event) { f.event(p, strict, e) })
		var tr fallback.ModelTier[call, reply] = tier{p}
		if strict {
			tr = strictTier{p}
		}
		c, err := fallback.New(fallback.Config[call, reply]{Stages: []fallback.Stage[call, reply]{
			{Tier: tr, Model: "pro", Retry: retry.Policy{MaxAttempts: 1}},
		}})
		if err != nil {
			_ = l.Close()
			return nil, err
		}
		if _, err := l.Attach(c); err != nil {
			_ = l.Close()
			return nil, err
		}
		if strict {
			p.sledger, p.schain = l, c
		} else {
			p.ledger, p.chain = l, c
		}
	}
	return p, nil
}

// The ledgers' exchanges: every 200 ms, each bounded by 300 ms; the
// strict callers of an outage go on for afterBack once Redis is back.
const (
	syncInterval       = 200 * time.Millisecond
	strictSyncInterval = 500 * time.Millisecond
	syncTimeout        = 300 * time.Millisecond
	afterBack          = 5 * syncInterval
)

func (p *pod) close() {
	if p.ledger != nil {
		_ = p.ledger.Close()
	}
	if p.sledger != nil {
		_ = p.sledger.Close()
	}
	_ = p.bstore.Close()
	_ = p.lstore.Close()
	p.lim.Close()
	for _, c := range p.clients {
		_ = c.Close()
	}
}

// request is one request of the pod's worker: the tenant's ledger, then
// the chain.
func (p *pod) request(tenant string) {
	f := p.f
	f.requests.Add(1)
	f.ask(tenant)
	c := call{tenant: tenant, asked: time.Now(), watched: f.watched(tenant)}
	tk, err := p.ledger.Admit(context.Background(), spend.Request{Tenant: tenant}, spend.Estimate{Tokens: tokensPerCall})
	if err != nil {
		return
	}
	defer tk.End()
	if _, err := p.chain.Do(tk, c); err == nil {
		f.passed.Add(1)
	}
}

// work runs every pod's worker until stop is closed.
func (f *fleet) work(stop <-chan struct{}) (wait func()) {
	var wg sync.WaitGroup
	for _, p := range f.pods {
		wg.Go(func() {
			// Spread the pods' ticks over the interval.
			time.Sleep(time.Duration(p.i) * f.cfg.Interval / time.Duration(len(f.pods)))
			t := time.NewTicker(f.cfg.Interval)
			defer t.Stop()
			n := p.i
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				ts := *f.tenants.Load()
				p.request(ts[n%len(ts)])
				n++
			}
		})
	}
	return wg.Wait
}

func (f *fleet) granted() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return uint64(len(f.admitted))
}

func (f *fleet) setTenants(names ...string) { f.tenants.Store(&names) }

func (f *fleet) roundTrips() map[string]uint64 {
	m := map[string]uint64{}
	for _, k := range kinds {
		m[k] = f.trips[k].n.Load()
	}
	return m
}

// eventually polls cond every 5 ms until it holds or Settle passes.
func (f *fleet) eventually(cond func() bool) bool {
	for deadline := time.Now().Add(f.cfg.Settle); ; time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

func (f *fleet) everyPod(cond func(*pod) bool) func() bool {
	return func() bool {
		for _, p := range f.pods {
			if !cond(p) {
				return false
			}
		}
		return true
	}
}

// backOnRedis returns a condition that holds once every pod, since the
// call, has polled the breakers' shared states and (with limits) been
// seen using Redis for its limits. On a loaded machine a store may go unhealthy again for a
// moment (a reply slower than its RequestBound), so the pods are not
// required to be healthy at the same instant.
func (f *fleet) backOnRedis(limits bool) func() bool {
	polls := make([]uint64, len(f.pods))
	for i, p := range f.pods {
		polls[i] = p.bstore.Stats().Polls
	}
	seen := make([]bool, len(f.pods))
	return func() bool {
		all := true
		for i, p := range f.pods {
			if !seen[i] {
				seen[i] = p.bstore.Stats().Polls > polls[i]+1 && (!limits || p.lstore.Stats().Healthy)
			}
			all = all && seen[i]
		}
		return all
	}
}

// Run runs the fleet through its phases against a redis-server of its
// own and reports what it measured.
func Run(cfg Config) (*Report, error) {
	srv, err := redisserver.Launch()
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	f := &fleet{cfg: cfg, srv: srv, prefix: "tgfleet:", trips: map[string]*counter{}, alerts: map[alertKey]int{},
		planned: map[string]tenantPlan{}, outs: map[string][2]time.Time{}}
	for _, tp := range f.plans() {
		f.planned[tp.name] = tp
	}
	for _, k := range kinds {
		f.trips[k] = &counter{}
	}
	f.start = time.Now()
	for i := range cfg.Pods {
		p, err := f.newPod(i)
		if err != nil {
			return nil, err
		}
		f.pods = append(f.pods, p)
	}
	defer func() {
		for _, p := range f.pods {
			p.close()
		}
	}()
	rep := &Report{Config: cfg, DrillCases: map[string]int{}}
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer raw.Close()
	if !f.eventually(func() bool {
		n, err := raw.PubSubNumSub(context.Background(), f.prefix+"breaker:events").Result()
		return err == nil && n[f.prefix+"breaker:events"] >= int64(cfg.Pods) &&
			f.everyPod(func(p *pod) bool { return p.bstore.Stats().Polls > 0 })()
	}) {
		return nil, errors.New("the pods did not all reach Redis")
	}

	stop := make(chan struct{})
	f.setTenants("bulk", "steady")
	wait := f.work(stop)
	stopped := false
	defer func() {
		if !stopped {
			close(stop)
			wait()
		}
	}()
	phase := func(name string, run func() error) error {
		from := time.Since(f.start)
		req, pass, rt, gr, sreq := f.requests.Load(), f.passed.Load(), f.roundTrips(), f.granted(), f.strictRequests.Load()
		cfg.logf("%v: %s", from.Round(time.Millisecond), name)
		if err := run(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		pr := PhaseReport{Name: name, From: from, To: time.Since(f.start), Requests: f.requests.Load() - req,
			Admitted: f.passed.Load() - pass, Granted: f.granted() - gr, RoundTrips: map[string]uint64{},
			StrictRequests: f.strictRequests.Load() - sreq}
		for k, v := range f.roundTrips() {
			pr.RoundTrips[k] = v - rt[k]
		}
		rep.Phases = append(rep.Phases, pr)
		return nil
	}
	steps := []struct {
		name string
		run  func() error
	}{
		{"steady", func() error { time.Sleep(cfg.Phase); return nil }},
		{"strict", func() error {
			// With Redis healthy, one strict tenant after the other, while
			// the workers go on with "bulk" alone: on a loaded machine
			// the strict callers slow the local-first ledgers' exchanges,
			// and "steady" would measure that rather than the sync
			// interval.
			f.setTenants("bulk")
			defer f.setTenants("bulk", "steady")
			for _, name := range []string{"strict", "strict-short"} {
				if err := f.burst(rep, f.planned[name]); err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
			}
			return nil
		}},
		{"503 storm", func() error { return f.storm503(rep) }},
		{"429 storm", func() error { return f.storm429(rep) }},
		{"restart", func() error { return f.outage("restart", func() error { srv.Kill(); return nil }, srv.Restart) }},
		{"pause", func() error { return f.outage("pause", srv.Freeze, srv.Thaw) }},
	}
	for _, s := range steps {
		if err := phase(s.name, s.run); err != nil {
			return rep, err
		}
	}
	close(stop)
	wait()
	stopped = true
	if err := phase("restart drills", func() error { return f.drills(rep, raw) }); err != nil {
		return rep, err
	}

	// The ledgers' last exchanges make the fleet's last claims: the
	// alerts are counted once every ledger is closed.
	for _, p := range f.pods {
		_ = p.ledger.Close()
		_ = p.sledger.Close()
	}
	f.tenantReports(rep, raw)
	f.windows(rep)
	rep.RoundTrips = f.roundTrips()
	for _, p := range f.pods {
		st := p.lstore.Stats()
		rep.Takes += st.Takes
		rep.Granted += st.Granted
	}
	rep.Requests, rep.Admitted = f.requests.Load(), f.passed.Load()
	rep.StrictRequests = f.strictRequests.Load()
	rep.StoreFailures = [2]uint64{f.storeFails[0].Load(), f.storeFails[1].Load()}
	f.mu.Lock()
	rep.Grants = uint64(len(f.admitted))
	f.mu.Unlock()
	return rep, nil
}

// storm503 runs Config.Storms storms of 503s, each a phase long.
func (f *fleet) storm503(rep *Report) error {
	rep.OpenPods = len(f.pods)
	for range max(f.cfg.Storms, 1) {
		if err := f.storm503Once(rep); err != nil {
			return err
		}
	}
	return nil
}

// storm503Once: the upstream answers 503 for a third of the phase; the
// fleet trips on its shared count; then it recovers and every breaker
// closes.
func (f *fleet) storm503Once(rep *Report) error {
	for _, p := range f.pods {
		p.mu.Lock()
		p.trans = p.trans[:0]
		p.mu.Unlock()
	}
	began := time.Now()
	f.fault.Store(int32(unavailable))
	open := f.eventually(f.everyPod(func(p *pod) bool { return p.br.State() == breaker.Open }))
	time.Sleep(f.cfg.Phase / 3)
	f.fault.Store(int32(healthy))
	var first, last time.Time
	own, opened := 0, 0
	for _, p := range f.pods {
		p.mu.Lock()
		for _, t := range p.trans {
			if !t.drill && t.to == breaker.Open {
				if first.IsZero() || t.at.Before(first) {
					first = t.at
				}
				if t.at.After(last) {
					last = t.at
				}
				if t.reason != "shared" {
					own++
				}
				opened++
				break
			}
		}
		p.mu.Unlock()
	}
	rep.OpenPods = min(rep.OpenPods, opened)
	rep.OwnTrips = max(rep.OwnTrips, own)
	if !open {
		return fmt.Errorf("%d of %d pods opened", opened, len(f.pods))
	}
	rep.Storms = append(rep.Storms, [2]time.Duration{last.Sub(began), last.Sub(first)})
	rep.TripFromStorm, rep.TripToEveryPod = max(rep.TripFromStorm, last.Sub(began)), max(rep.TripToEveryPod, last.Sub(first))
	if !f.eventually(f.everyPod(func(p *pod) bool { return p.br.State() == breaker.Closed })) {
		return errors.New("the breakers did not all close after the storm")
	}
	time.Sleep(max(0, f.cfg.Phase-time.Since(began)))
	return nil
}

// storm429: the upstream answers 429 for half the phase; no breaker
// trips, and the limiters hold off.
func (f *fleet) storm429(rep *Report) error {
	opens := func() (n int) {
		for _, p := range f.pods {
			p.mu.Lock()
			for _, t := range p.trans {
				if !t.drill && t.to == breaker.Open {
					n++
				}
			}
			p.mu.Unlock()
		}
		return n
	}
	before := opens()
	up := f.upstream.Load()
	f.fault.Store(int32(tooMany))
	time.Sleep(f.cfg.Phase / 2)
	f.fault.Store(int32(healthy))
	rep.Upstream429 = int(f.upstream.Load() - up)
	rep.TripsIn429 = opens() - before
	time.Sleep(f.cfg.Phase / 2)
	return nil
}

// outage bills the phase's tenants: the local-first "<name>-open" and
// "<name>-closed" through the workers, the strict "strict-<name>" through
// its callers. A quarter phase in, it takes Redis out for a phase, then
// stops billing them (the strict callers go on until Redis is back and
// every pod uses it again, to see the fleet agree again), brings Redis
// back and waits for every pod to use it again.
func (f *fleet) outage(name string, out, back func() error) error {
	f.setTenants("bulk", name+"-open", name+"-closed")
	stop := make(chan struct{})
	wait := f.strictCallers("strict-"+name, f.planned["strict-"+name].estimate, false, stop)
	stopped := false
	stopStrict := func() {
		if !stopped {
			stopped = true
			close(stop)
			wait()
		}
	}
	defer stopStrict()
	// A quarter phase with Redis up: the tenants are partly spent when
	// it goes, and the pods' last views of them differ.
	time.Sleep(f.cfg.Phase / 4)
	from, at := time.Since(f.start), time.Now()
	if err := out(); err != nil {
		return err
	}
	time.Sleep(f.cfg.Phase)
	f.setTenants("bulk", "steady")
	f.outs[name] = [2]time.Time{at, time.Now()}
	if err := back(); err != nil {
		return err
	}
	// The strict callers go on while the pods find Redis again and send
	// it their figures (five sync intervals), then stop: 64 callers a
	// pod would keep Redis too busy for the limit stores to count it
	// healthy.
	time.Sleep(afterBack)
	stopStrict()
	ok := f.eventually(f.backOnRedis(true))
	f.mu.Lock()
	f.outages = append(f.outages, [2]time.Duration{from, time.Since(f.start)})
	f.mu.Unlock()
	if !ok {
		return errors.New("the pods did not all use Redis again")
	}
	time.Sleep(f.cfg.Per)
	return nil
}

// windows finds the worst windows of Per, apart from and across the
// outages.
func (f *fleet) windows(rep *Report) {
	f.mu.Lock()
	adm := slices.Clone(f.admitted)
	outs := slices.Clone(f.outages)
	f.mu.Unlock()
	slices.Sort(adm)
	per := f.cfg.Per
	for i := range adm {
		j, _ := slices.BinarySearch(adm[i:], adm[i]+per)
		from, to := adm[i], adm[i]+per
		down := false
		for _, o := range outs {
			if from < o[1] && to > o[0] {
				down = true
			}
		}
		if down && j > rep.WorstDown {
			rep.WorstDown, rep.WorstDownAt = j, from
		} else if !down && j > rep.WorstUp {
			rep.WorstUp, rep.WorstUpAt = j, from
		}
	}
}

// readDrill reads the drill breaker's shared state and the milliseconds
// left of its cooldown.
var readDrill = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cur = redis.call('HMGET', KEYS[1], 's', 'u')
local s = tonumber(cur[1]) or 0
local u = tonumber(cur[2]) or 0
local rem = 0
if s == 2 and u > now then rem = u - now end
return {s, rem}
`)

// drills runs the restart drills: Redis freezes; a few pods with a short
// cooldown trip, cool down, probe and close (their proposals queue behind
// the frozen server) while a pod with a long cooldown trips 20 ms after
// the last close, right after it or right before it; Redis is replaced by
// an empty one. The long trip must survive: the fleet ends up open until
// its end, and its pod never leaves it. A reset closes the fleet for the
// next drill.
func (f *fleet) drills(rep *Report, raw *redis.Client) error {
	key := f.prefix + "breaker:{" + redisstore.ID("drill") + "}:state"
	cases := []string{"20 ms after", "right after", "right before"}
	for run := range f.cfg.Restarts {
		closed := f.everyPod(func(p *pod) bool { return p.drill.State() == breaker.Closed })
		if !f.eventually(closed) {
			// The reset is not repeated when it is lost: reset every pod
			// still open.
			for _, p := range f.pods {
				if p.drill.State() != breaker.Closed {
					p.drill.Reset()
				}
			}
			if !f.eventually(closed) {
				return fmt.Errorf("drill %d: the fleet did not start closed", run)
			}
		}
		a := f.pods[shortPods+run%(len(f.pods)-shortPods)]
		bs := []*pod{f.pods[run%shortPods], f.pods[(run+3)%shortPods], f.pods[(run+6)%shortPods]}
		how := cases[run%len(cases)]
		rep.DrillCases[how]++
		if err := f.srv.Freeze(); err != nil {
			return err
		}
		for _, b := range bs {
			failOnce(b.drill)
		}
		var probes []breaker.Token
		for _, b := range bs {
			if !f.eventually(func() bool { return b.drill.State() == breaker.HalfOpen }) {
				return fmt.Errorf("drill %d: a short pod did not half-open", run)
			}
			tok, err := b.drill.Allow()
			if err != nil {
				return fmt.Errorf("drill %d: probe: %w", run, err)
			}
			probes = append(probes, tok)
		}
		a.mu.Lock()
		mark := len(a.trans)
		a.mu.Unlock()
		closeAll := func() {
			for _, tok := range probes {
				tok.Done(breaker.Success)
			}
		}
		switch how {
		case "20 ms after":
			closeAll()
			time.Sleep(20 * time.Millisecond)
			failOnce(a.drill)
		case "right after":
			closeAll()
			failOnce(a.drill)
		default:
			failOnce(a.drill)
			closeAll()
		}
		if err := f.srv.Restart(); err != nil {
			return err
		}
		// No call asks the limiters now, which check Redis only when
		// asked.
		back := f.backOnRedis(false)
		gaveUp := false
		settled := f.eventually(func() bool {
			if a.drill.State() != breaker.Open {
				gaveUp = true // the trip is lost: no need to wait
				return true
			}
			v, err := readDrill.Run(context.Background(), raw, []string{key}).Int64Slice()
			return err == nil && v[0] == int64(breaker.Open) && v[1] > int64((drillLong/2)/time.Millisecond) &&
				f.everyPod(func(p *pod) bool { return p.drill.State() == breaker.Open })()
		})
		a.mu.Lock()
		lost := false
		for _, t := range a.trans[mark:] {
			if t.drill && t.to != breaker.Open {
				lost = true
			}
		}
		a.mu.Unlock()
		rep.DrillRuns++
		if lost || a.drill.State() != breaker.Open {
			rep.DrillLost++
			f.cfg.logf("drill %d (%s): the trip was lost", run, how)
		} else if !settled || gaveUp {
			rep.DrillUnsettled++
			f.cfg.logf("drill %d (%s): the fleet did not settle on the trip", run, how)
		}
		if !f.eventually(back) {
			return fmt.Errorf("drill %d: the pods did not all use Redis again", run)
		}
		a.drill.Reset()
	}
	return nil
}

func failOnce(b *breaker.Breaker) {
	if tok, err := b.Allow(); err == nil {
		tok.Done(breaker.Failure)
	}
}

// Print writes the report as a table.
func (r *Report) Print(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "fleet: %d pods, one redis-server; quota %d per %v; each pod asks every %v; phases of %v\n\n",
		c.Pods, c.Quota, c.Per, c.Interval, c.Phase)
	fmt.Fprintf(w, "| measure | result |\n|---|---|\n")
	var storms []string
	for _, st := range r.Storms {
		storms = append(storms, st[0].Round(time.Millisecond).String()+" / "+st[1].Round(time.Millisecond).String())
	}
	fmt.Fprintf(w, "| 503 storms (%d): every pod open, from the storm's start / from the first trip | at least %d of %d pods each time; %s (at most %d pods tripped on their own counts) |\n",
		len(r.Storms), r.OpenPods, c.Pods, strings.Join(storms, "; "), r.OwnTrips)
	fmt.Fprintf(w, "| 429 storm: breaker trips / calls that reached the upstream in %v | %d / %d |\n", c.Phase/2, r.TripsIn429, r.Upstream429)
	fmt.Fprintf(w, "| rate limit, worst window of %v with Redis up | %d of %d (%.1f %%) |\n", c.Per, r.WorstUp, c.Quota, 100*float64(r.WorstUp)/float64(c.Quota))
	fmt.Fprintf(w, "| rate limit, worst window of %v meeting an outage (kill or pause) | %d of %d (%.1f %%) |\n", c.Per, r.WorstDown, c.Quota, 100*float64(r.WorstDown)/float64(c.Quota))
	for _, t := range r.Tenants {
		mode := "local-first"
		if t.Strict {
			mode = fmt.Sprintf("strict, estimate %d of %d", t.Estimate, tokensPerCall)
		}
		if t.FailClosed {
			mode += ", fail closed"
		}
		var extra []string
		if t.Shortfall > 0 {
			extra = append(extra, fmt.Sprintf("the estimates' shortfall %d", t.Shortfall))
		}
		if t.Bound > 0 {
			extra = append(extra, fmt.Sprintf("asked before Redis was back %d, share bound %d (%+.1f %%: views %+d, before the pods knew %+d); bound on the whole %d",
				t.Outage, t.Bound, 100*float64(t.Bound-t.Limit)/float64(t.Limit), t.Views, t.Detection, t.Final))
		}
		var alerts []string
		for _, a := range alertNames {
			alerts = append(alerts, fmt.Sprintf("%s ×%d", a, t.Alerts[a]))
		}
		fmt.Fprintf(w, "| spend, tenant %q (%s, billed during %s) | %d of %d tokens: overshoot %.1f %%%s; Redis holds %d, reserved %d; alerts %s (due once: %s) |\n",
			t.Name, mode, t.Phase, t.Used, t.Limit, 100*t.Overshoot(), prefixed("; ", strings.Join(extra, "; ")), t.RedisTokens, t.RedisReserved,
			strings.Join(alerts, ", "), strings.Join(t.WantAlerts, ", "))
	}
	for _, b := range r.Bursts {
		fmt.Fprintf(w, "| strict burst %q, Redis healthy: requests in flight, most in one pod / most calls held by the upstream at once | %d / %d (store failures %d; reservations: longest %v, %d slower than %v, %d failed) |\n",
			b.Tenant, b.PeakInFlight, b.PeakHeld, b.StoreFailures, b.ReserveMax.Round(time.Millisecond), b.ReserveSlow, c.reserveTimeout()/2, b.ReserveErrors)
	}
	fmt.Fprintf(w, "| spend stores: Redis round trips per request, whole run: local-first / strict | %.2f (%d for %d) / %.2f (%d for %d); failed exchanges %d / %d |\n",
		float64(r.RoundTrips["spend"])/float64(max(r.Requests, 1)), r.RoundTrips["spend"], r.Requests,
		float64(r.RoundTrips["spend-strict"])/float64(max(r.StrictRequests, 1)), r.RoundTrips["spend-strict"], r.StrictRequests,
		r.StoreFailures[0], r.StoreFailures[1])
	fmt.Fprintf(w, "| limit stores: Redis takes / granted (per granted) | %d / %d (%.1f) |\n", r.Takes, r.Granted, float64(r.Takes)/float64(max(r.Granted, 1)))
	cases := make([]string, 0, len(r.DrillCases))
	for k, v := range r.DrillCases {
		cases = append(cases, k+": "+strconv.Itoa(v))
	}
	slices.Sort(cases)
	fmt.Fprintf(w, "| restarts with a trip and closes racing (%s) | %d runs: %d trips lost, %d unsettled |\n",
		strings.Join(cases, ", "), r.DrillRuns, r.DrillLost, r.DrillUnsettled)
	for _, p := range r.Phases {
		if p.Requests == 0 {
			continue
		}
		var parts []string
		for _, k := range kinds[:3] {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(p.RoundTrips[k])/float64(p.Requests)))
		}
		strict := ""
		if p.StrictRequests > 0 {
			strict = fmt.Sprintf("; strict spend %.2f per strict request (%d)", float64(p.RoundTrips["spend-strict"])/float64(p.StrictRequests), p.StrictRequests)
		}
		fmt.Fprintf(w, "| Redis round trips per request, %s (%d requests, %d past the limiters, %d answered) | %s; limit per call past it %.2f%s |\n",
			p.Name, p.Requests, p.Granted, p.Admitted, strings.Join(parts, ", "), float64(p.RoundTrips["limit"])/float64(max(p.Granted, 1)), strict)
	}
}

// prefixed returns p+s, or "" when s is.
func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}
