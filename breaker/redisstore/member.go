package redisstore

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/breaker"
)

// shared is a breaker state as Redis holds it.
type shared struct {
	state breaker.State
	gen   uint64
	rem   time.Duration // time left of an open state's cooldown
}

func toShared(state, gen, remMs int64) shared {
	if state < 0 || state > int64(breaker.Open) {
		state = int64(breaker.Closed)
	}
	return shared{state: breaker.State(state), gen: uint64(max(gen, 0)), rem: time.Duration(remMs) * time.Millisecond}
}

// member is the store's side of one breaker. Its request-path methods
// (Record, Transitioned, ReleaseProbe) never touch the network; TryProbe
// waits at most Options.RequestBound.
type member struct {
	s      *Store
	id     string
	origin string
	keys   [3]string
	local  breaker.Local
	br     *breaker.Breaker // nil when local is another implementation

	probes     int
	counting   bool // fleet thresholds enabled: Record counts
	countCalls bool // a ratio is enabled: successes count too
	ratio      float64
	minCalls   int
	window     time.Duration
	cooldown   time.Duration

	calls stripedCounter
	fails atomic.Int64
	// pending counts this breaker's proposals in the write queue.
	pending atomic.Int64
	leaseN  atomic.Uint64

	// applyMu serialises the adoption of shared states, so that they reach
	// the breaker in generation order.
	applyMu sync.Mutex

	mu sync.Mutex
	// gen is the shared generation the breaker last agreed with.
	gen uint64
	// The local breaker as its transitions told: state, open-until,
	// whether forced, its latest generation, and the local generation of
	// the last shared state it adopted.
	state      breaker.State
	until      time.Time
	forced     bool
	localGen   uint64
	appliedGen uint64
	// Probe permits held: leases taken in Redis, and permits granted
	// without one (fail open).
	leases   []string
	unleased int
}

func newMember(s *Store, name string, local breaker.Local, origin string) *member {
	m := &member{s: s, id: ID(name), origin: origin, local: local}
	m.keys = s.keys(m.id)
	cfg := breaker.Config{
		Window:         breaker.DefaultWindow,
		MinCalls:       breaker.DefaultMinCalls,
		Cooldown:       breaker.DefaultCooldown,
		HalfOpenProbes: breaker.DefaultHalfOpenProbes,
	}
	if br, ok := local.(*breaker.Breaker); ok {
		m.br = br
		cfg = br.Config()
		m.state, m.localGen = br.State(), br.Generation()
	}
	m.probes = cfg.HalfOpenProbes
	if s.opts.FleetProbes > 0 {
		m.probes = s.opts.FleetProbes
	}
	m.ratio = s.opts.FleetFailureRatio
	if m.ratio == 0 {
		m.ratio = cfg.FailureRatio
	}
	m.ratio = max(m.ratio, 0)
	m.minCalls = cfg.MinCalls
	if s.opts.FleetMinCalls > 0 {
		m.minCalls = s.opts.FleetMinCalls
	}
	m.window, m.cooldown = cfg.Window, cfg.Cooldown
	m.countCalls = m.ratio > 0
	m.counting = m.countCalls || s.opts.FleetFailures > 0
	return m
}

// Record counts an outcome for the fleet's window: an atomic add, sent in
// batches every FlushInterval. Without fleet thresholds it does nothing.
func (m *member) Record(o breaker.Outcome) {
	if !m.counting {
		return
	}
	if m.countCalls {
		m.calls.add()
	}
	if o == breaker.Failure {
		m.fails.Add(1)
	}
}

// Transitioned queues a local transition for publication without waiting.
// Forced states are drills of one process and stay local; a reset is
// published to the fleet.
func (m *member) Transitioned(t breaker.Transition) {
	if m.br == nil {
		m.track(t)
	}
	var kind byte
	switch {
	case t.Forced:
		return
	case t.Reason == "reset":
		kind = 'r'
	case t.To == breaker.Open:
		kind = 'o'
	case t.To == breaker.HalfOpen:
		kind = 'h'
	default:
		kind = 'c'
	}
	m.pending.Add(1)
	if !m.s.enqueue(event{m: m, kind: kind, local: t.Generation, until: t.OpenUntil}) {
		m.pending.Add(-1)
	}
}

// track follows the local breaker's transitions (a Subscribe listener).
func (m *member) track(t breaker.Transition) {
	m.mu.Lock()
	m.state, m.until = t.To, t.OpenUntil
	m.forced = t.Forced
	m.localGen = max(m.localGen, t.Generation)
	if t.Reason == "shared" {
		m.appliedGen = max(m.appliedGen, t.Generation)
	}
	m.mu.Unlock()
	if t.Reason == "shared" {
		m.s.stats.applied.Add(1)
	}
}

// propose offers one queued local transition to the fleet (writer
// goroutine).
func (m *member) propose(ev event) {
	defer m.pending.Add(-1)
	// Under applyMu: a shared state being adopted right now is either
	// seen here or adopted after the proposal was written.
	m.applyMu.Lock()
	m.mu.Lock()
	// A shared state adopted after this transition replaced it.
	superseded := m.br != nil && m.appliedGen > ev.local
	base := m.gen
	m.mu.Unlock()
	m.applyMu.Unlock()
	if superseded && ev.kind != 'r' {
		return
	}
	var openMs int64
	if ev.kind == 'o' {
		openMs = max(time.Until(ev.until).Milliseconds(), 0)
	}
	s := m.s
	ctx, cancel := s.opContext()
	defer cancel()
	v, err := proposeScript.Run(ctx, s.client, m.keys[:2], string(ev.kind), base, openMs,
		s.opts.StateTTL.Milliseconds(), slack.Milliseconds(), s.channel, m.id, m.origin).Int64Slice()
	if err == nil && len(v) != 4 {
		err = errOr(nil, "bad reply")
	}
	if err != nil {
		s.fail("publish", m.id, err)
		return
	}
	s.healthy.Store(true)
	sh := toShared(v[1], v[2], v[3])
	if v[0] == 1 {
		if sh.gen > base {
			s.stats.published.Add(1)
		}
		m.agree(sh)
		return
	}
	s.stats.stale.Add(1)
	m.observe(sh, true)
}

// agree records that the breaker's local state is the shared one at
// sh.gen.
func (m *member) agree(sh shared) {
	m.applyMu.Lock()
	m.mu.Lock()
	m.gen = max(m.gen, sh.gen)
	m.mu.Unlock()
	m.applyMu.Unlock()
}

// observe adopts a shared state newer than the last one seen; force adopts
// it at an equal generation too (the answer to a refused proposal).
func (m *member) observe(sh shared, force bool) {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.mu.Lock()
	if sh.gen < m.gen || sh.gen == m.gen && !force {
		m.mu.Unlock()
		return
	}
	m.gen = sh.gen
	m.mu.Unlock()
	m.apply(sh)
}

// apply hands a shared state to the local breaker. m.applyMu is held.
func (m *member) apply(sh shared) {
	var until time.Time
	if sh.state == breaker.Open {
		if sh.rem <= 0 {
			return // the cooldown is over: the breakers' timers move on
		}
		until = time.Now().Add(sh.rem)
		m.mu.Lock()
		same := m.state == breaker.Open && !m.until.IsZero() && until.Sub(m.until).Abs() <= slack
		m.mu.Unlock()
		if same {
			return
		}
	}
	m.local.ApplyShared(breaker.Shared{State: sh.state, OpenUntil: until})
	if m.br == nil {
		m.s.stats.applied.Add(1)
	}
}

// reconcile compares a polled shared state with the local one (writer
// goroutine): it adopts a newer shared state, and re-publishes a local trip
// the fleet never heard of (made while Redis was away, or dropped from a
// full queue).
func (m *member) reconcile(sh shared) {
	m.applyMu.Lock()
	m.mu.Lock()
	if sh.gen == 0 {
		// The shared state is gone (expired, flushed, Redis restarted
		// empty): start again from closed.
		m.gen = 0
	}
	newer := sh.gen > m.gen
	if newer {
		m.gen = sh.gen
	}
	// The tracked state must be the breaker's current one: between a
	// transition and its listener, it is not.
	republish := !newer && m.br != nil && m.state == breaker.Open && !m.forced &&
		m.br.Generation() == m.localGen && m.br.State() == breaker.Open &&
		time.Until(m.until) > slack && sh.state != breaker.Open && m.pending.Load() == 0
	until, local := m.until, m.localGen
	m.mu.Unlock()
	if newer {
		m.apply(sh)
	}
	m.applyMu.Unlock()
	if republish {
		m.pending.Add(1)
		if !m.s.enqueue(event{m: m, kind: 'o', local: local, until: until}) {
			m.pending.Add(-1)
		}
	}
}

type probeReq struct {
	state atomic.Int32 // 0 waiting, 1 abandoned by the request, 2 answered
	done  chan int8    // 1 granted, 0 refused, -1 error
}

// TryProbe asks for a fleet-wide probe permit, waiting at most
// Options.RequestBound; it answers true without Redis when the store is
// unhealthy, closed, saturated or too slow.
func (m *member) TryProbe() bool {
	s := m.s
	if !s.healthy.Load() {
		return m.failOpen()
	}
	s.probeMu.RLock()
	if s.closed.Load() {
		s.probeMu.RUnlock()
		return m.failOpen()
	}
	select {
	case s.probeSem <- struct{}{}:
	default:
		s.probeMu.RUnlock()
		return m.failOpen()
	}
	s.probeWG.Add(1)
	s.probeMu.RUnlock()

	lease := m.origin + ":" + strconv.FormatUint(m.leaseN.Add(1), 36)
	req := &probeReq{done: make(chan int8, 1)}
	go m.acquire(req, lease)
	timer := time.NewTimer(s.opts.RequestBound)
	defer timer.Stop()
	var r int8
	select {
	case r = <-req.done:
	case <-timer.C:
		if req.state.CompareAndSwap(0, 1) {
			// Redis is slower than the bound: stop asking it until a
			// background operation succeeds.
			s.healthy.Store(false)
			return m.failOpen()
		}
		r = <-req.done
	}
	switch r {
	case 1:
		m.mu.Lock()
		m.leases = append(m.leases, lease)
		m.mu.Unlock()
		return true
	case 0:
		return false
	}
	return m.failOpen()
}

func (m *member) acquire(req *probeReq, lease string) {
	s := m.s
	defer func() {
		<-s.probeSem
		s.probeWG.Done()
	}()
	ctx, cancel := s.opContext()
	defer cancel()
	n, err := acquireScript.Run(ctx, s.client, []string{m.keys[0], m.keys[2]},
		m.probes, s.opts.LeaseDuration.Milliseconds(), lease, slack.Milliseconds()).Int64()
	r := int8(n)
	if err != nil {
		s.fail("probe", m.id, err)
		r = -1
	} else {
		s.healthy.Store(true)
	}
	if req.state.CompareAndSwap(0, 2) {
		req.done <- r
		return
	}
	if r == 1 {
		// The request stopped waiting and probes without this lease.
		if err := s.client.ZRem(ctx, m.keys[2], lease).Err(); err != nil {
			s.fail("release", m.id, err)
		}
	}
}

func (m *member) failOpen() bool {
	m.mu.Lock()
	m.unleased++
	m.mu.Unlock()
	m.s.stats.failOpen.Add(1)
	return true
}

// ReleaseProbe returns a permit. Permits granted without a lease are
// returned first, so that a lease is never given back while a probe that
// might be its holder runs.
func (m *member) ReleaseProbe() {
	m.mu.Lock()
	if m.unleased > 0 {
		m.unleased--
		m.mu.Unlock()
		return
	}
	n := len(m.leases)
	if n == 0 {
		m.mu.Unlock()
		return
	}
	lease := m.leases[n-1]
	m.leases = m.leases[:n-1]
	m.mu.Unlock()
	m.s.enqueue(event{m: m, kind: 'x', lease: lease})
}

// stripedCounter is a counter spread over cache lines, so that parallel
// requests do not contend on one. The padding covers two 64-byte lines
// per stripe (adjacent-line prefetch) and keeps the stripes off the lines
// of the fields around the counter.
type stripedCounter struct {
	_       [128]byte
	stripes [8]struct {
		n atomic.Int64
		_ [120]byte
	}
}

func (c *stripedCounter) add() { c.stripes[rand.Uint32()&7].n.Add(1) }

func (c *stripedCounter) take() (n int64) {
	for i := range c.stripes {
		n += c.stripes[i].n.Swap(0)
	}
	return n
}

var _ breaker.Member = (*member)(nil)
var _ breaker.Store = (*Store)(nil)
