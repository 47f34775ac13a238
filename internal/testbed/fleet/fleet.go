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
	// Restarts is the number of restart drills, Storms of 503 storms
	// (at least one).
	Restarts, Storms int
	// Settle bounds every wait for the fleet to agree (generous: no
	// figure is judged by it, a run that needs it fails).
	Settle time.Duration
	// Logf, when set, receives progress lines.
	Logf func(format string, args ...any)
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
	// RoundTrips counts the Redis round trips of each kind of store
	// ("breaker", "limit", "spend") over the run.
	RoundTrips map[string]uint64
	// Requests counts the requests made, Admitted those answered, Grants
	// the calls the limiters admitted.
	Requests, Admitted, Grants uint64
}

// PhaseReport is one phase's figures.
type PhaseReport struct {
	// Name names the phase; From and To are its bounds since the run's
	// start.
	Name     string
	From, To time.Duration
	// Requests counts the requests made in the phase, Admitted those
	// answered, Granted the calls the limiters admitted.
	Requests, Admitted, Granted uint64
	// RoundTrips counts the phase's Redis round trips by kind of store.
	RoundTrips map[string]uint64
}

// TenantReport is one tenant's spend against its daily limit.
type TenantReport struct {
	// Name is the tenant; Phase the phase whose load billed it.
	Name, Phase string
	// FailClosed is the allowance's FailClosed.
	FailClosed bool
	// Limit is the daily token limit, Used the tokens the tenant's
	// answered calls used.
	Limit, Used int64
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

var kinds = []string{"breaker", "limit", "spend"}

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
	used             sync.Map // tenant -> *atomic.Int64
}

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
	chain   *fallback.Chain[string, reply]

	mu    sync.Mutex
	trans []transition // of br and drill
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

func (t tier) Call(ctx context.Context, _ string) (reply, error) {
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
	u := fallback.Usage{InputTokens: 60, OutputTokens: 40}
	fallback.Report(ctx, fallback.Reply{Usage: u, HasUsage: true})
	return reply{}, nil
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
}

func (f *fleet) plans() []tenantPlan {
	// What the fleet spends in a phase at its quota.
	full := int64(tokensPerCall) * int64(f.cfg.Quota) * int64(f.cfg.Phase) / int64(f.cfg.Per)
	// "steady" gets half the calls from the start, and crosses its limit
	// in the first phase; the others get a third of them in their phase
	// (while Redis is out the pods keep to their shares: 90 % of the rate,
	// starting empty) and cross theirs in its first half. "bulk" keeps
	// the load up once they are spent.
	quarter, eighth := max(full/4, tokensPerCall), max(full/8, tokensPerCall)
	return []tenantPlan{
		{"bulk", "every", false, 1 << 50},
		{"steady", "steady", false, quarter},
		{"restart-open", "restart", false, eighth},
		{"restart-closed", "restart", true, eighth},
		{"pause-open", "pause", false, eighth},
		{"pause-closed", "pause", true, eighth},
	}
}

func (f *fleet) newPod(i int) (*pod, error) {
	p := &pod{f: f, i: i}
	client := func(kind string) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: f.srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1,
			DialTimeout: 200 * time.Millisecond})
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
	sstore, err := redisspend.New(client("spend"), redisspend.Options{Prefix: f.prefix + "spend:"})
	if err != nil {
		return nil, err
	}
	tenants := map[string]spend.Allowance{}
	for _, tp := range f.plans() {
		tenants[tp.name] = spend.Allowance{DailyTokens: tp.limit, FailClosed: tp.failClosed}
	}
	p.ledger, err = spend.New(spend.Config{Prices: prices, Tenants: tenants, Store: sstore,
		SyncInterval: 200 * time.Millisecond, SyncTimeout: 300 * time.Millisecond, MaxStaleness: time.Second})
	if err != nil {
		return nil, err
	}
	p.chain, err = fallback.New(fallback.Config[string, reply]{Stages: []fallback.Stage[string, reply]{
		{Tier: tier{p}, Model: "pro", Retry: retry.Policy{MaxAttempts: 1}},
	}})
	if err != nil {
		return nil, err
	}
	if _, err := p.ledger.Attach(p.chain); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *pod) close() {
	_ = p.ledger.Close()
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
	tk, err := p.ledger.Admit(context.Background(), spend.Request{Tenant: tenant}, spend.Estimate{Tokens: tokensPerCall})
	if err != nil {
		return
	}
	defer tk.End()
	if _, err := p.chain.Do(tk, "q"); err == nil {
		f.passed.Add(1)
		v, _ := f.used.LoadOrStore(tenant, new(atomic.Int64))
		v.(*atomic.Int64).Add(tokensPerCall)
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
	f := &fleet{cfg: cfg, srv: srv, prefix: "tgfleet:", trips: map[string]*counter{}}
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
		req, pass, rt, gr := f.requests.Load(), f.passed.Load(), f.roundTrips(), f.granted()
		cfg.logf("%v: %s", from.Round(time.Millisecond), name)
		if err := run(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		pr := PhaseReport{Name: name, From: from, To: time.Since(f.start), Requests: f.requests.Load() - req,
			Admitted: f.passed.Load() - pass, Granted: f.granted() - gr, RoundTrips: map[string]uint64{}}
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
		{"503 storm", func() error { return f.storm503(rep) }},
		{"429 storm", func() error { return f.storm429(rep) }},
		{"restart", func() error {
			f.setTenants("bulk", "restart-open", "restart-closed")
			return f.outage(rep, func() error { srv.Kill(); return nil }, srv.Restart)
		}},
		{"pause", func() error {
			f.setTenants("bulk", "pause-open", "pause-closed")
			return f.outage(rep, srv.Freeze, srv.Thaw)
		}},
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

	for _, p := range f.pods {
		_ = p.ledger.Close()
	}
	for _, tp := range f.plans()[1:] {
		var used int64
		if v, ok := f.used.Load(tp.name); ok {
			used = v.(*atomic.Int64).Load()
		}
		rep.Tenants = append(rep.Tenants, TenantReport{Name: tp.name, Phase: tp.phase, FailClosed: tp.failClosed, Limit: tp.limit, Used: used})
	}
	f.windows(rep)
	rep.RoundTrips = f.roundTrips()
	for _, p := range f.pods {
		st := p.lstore.Stats()
		rep.Takes += st.Takes
		rep.Granted += st.Granted
	}
	rep.Requests, rep.Admitted = f.requests.Load(), f.passed.Load()
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

// outage takes Redis out for a phase while the workers go on, then brings
// it back and waits for every pod to use it again.
func (f *fleet) outage(rep *Report, out, back func() error) error {
	from := time.Since(f.start)
	if err := out(); err != nil {
		return err
	}
	time.Sleep(f.cfg.Phase)
	if err := back(); err != nil {
		return err
	}
	f.setTenants("bulk", "steady")
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
		mode := "fail open"
		if t.FailClosed {
			mode = "fail closed"
		}
		fmt.Fprintf(w, "| spend, tenant %q (%s, billed during %s) | %d of %d tokens: overshoot %.1f %% |\n",
			t.Name, mode, t.Phase, t.Used, t.Limit, 100*t.Overshoot())
	}
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
		for _, k := range kinds {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(p.RoundTrips[k])/float64(p.Requests)))
		}
		fmt.Fprintf(w, "| Redis round trips per request, %s (%d requests, %d past the limiters, %d answered) | %s; limit per call past it %.2f |\n",
			p.Name, p.Requests, p.Granted, p.Admitted, strings.Join(parts, ", "), float64(p.RoundTrips["limit"])/float64(max(p.Granted, 1)))
	}
}
