package redisstore

import (
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/breaker"
)

// shared is a breaker state as Redis holds it, in this process's clock.
type shared struct {
	state breaker.State
	gen   uint64
	// until is when an open state's cooldown ends (at or before the moment
	// it was read when it has ended).
	until time.Time
	// decided is when the state was decided; zero for the absent state
	// (generation 0), which is older than anything.
	decided time.Time
	// confirmed is false for a state decided before its chain of states
	// began (the first write onto an absent state): Redis could not check
	// it against the state it had lost.
	confirmed bool
}

// sharedAt converts a state read at local instant at, given as durations
// from that instant: the time left of its cooldown and its decision's age.
func sharedAt(at time.Time, state, gen, remMs, ageMs, confirmed int64) shared {
	if state < 0 || state > int64(breaker.Open) {
		state = int64(breaker.Closed)
	}
	sh := shared{state: breaker.State(state), gen: uint64(max(gen, 0)), confirmed: confirmed != 0}
	sh.until = at.Add(millis(remMs))
	if sh.gen > 0 {
		sh.decided = at.Add(-millis(ageMs))
	}
	return sh
}

// millis is ms milliseconds, negative ones read as none, and those past
// what a Duration holds (about 292 years) as the longest: a product that
// overflowed would turn a cooldown that ends never into one that ended
// long ago.
func millis(ms int64) time.Duration {
	const most = math.MaxInt64 / int64(time.Millisecond)
	return time.Duration(min(max(ms, 0), most)) * time.Millisecond
}

// active reports whether sh is an open state with more than the slack of
// its cooldown left at now.
func (sh shared) active(now time.Time) bool {
	return sh.state == breaker.Open && sh.until.After(now.Add(slack))
}

// member is the store's side of one breaker. Its request-path methods
// (Record, Transitioned, ReleaseProbe) never touch the network; TryProbe
// waits at most Options.RequestBound.
type member struct {
	s      *Store
	id     string
	origin string
	keys   [3]string
	// local is the joined breaker's side; it holds the breaker weakly, so
	// a breaker nobody uses any more is garbage collected and then leaves
	// the store (Leave).
	local breaker.Local
	clock *offset

	probes     int
	counting   bool // fleet thresholds enabled: Record counts
	countCalls bool // a ratio is enabled: successes count too
	ratio      float64
	minCalls   int
	window     time.Duration
	cooldown   time.Duration

	calls stripedCounter
	fails atomic.Int64
	// pending counts this breaker's proposals in the write queue or being
	// written.
	pending atomic.Int64
	leaseN  atomic.Uint64

	// applyMu serialises the adoption of shared states, so that they reach
	// the breaker in generation order.
	applyMu sync.Mutex

	mu sync.Mutex
	// gen is the latest shared generation this process has seen: adopted,
	// agreed with, or overruled by a newer local decision.
	gen uint64
	// The local breaker as its transitions told: state, open-until, when
	// the state was decided (for a shared state, when the fleet decided
	// it), whether forced, its latest generation, the local generation of
	// the last shared state it adopted, and the local generation of the
	// last trip the fleet heard of (accepted, or refused while the fleet
	// was open anyway).
	state      breaker.State
	until      time.Time
	decided    time.Time
	forced     bool
	localGen   uint64
	appliedGen uint64
	heardGen   uint64
	// adopting is the decision time of the shared state being applied
	// (under applyMu), for track.
	adopting time.Time
	// Probe permits held: leases taken in Redis, and permits granted
	// without one (fail open).
	leases   []string
	unleased int
}

func newMember(s *Store, name string, local breaker.Local, origin string) *member {
	m := &member{s: s, id: ID(name), origin: origin, clock: newOffset()}
	m.keys = s.keys(m.id)
	m.local = local
	cfg := local.Config()
	m.state, m.localGen = local.State(), local.Generation()
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
	m.queue(event{m: m, kind: kind, local: t.Generation, until: t.OpenUntil, at: t.At})
}

// queue adds a proposal to the write queue, counting it as pending.
func (m *member) queue(ev event) {
	m.pending.Add(1)
	if !m.s.enqueue(ev) {
		m.pending.Add(-1)
	}
}

// track follows the local breaker's transitions (an Observe listener).
func (m *member) track(t breaker.Transition) {
	m.mu.Lock()
	m.state, m.until = t.To, t.OpenUntil
	m.forced = t.Forced
	m.localGen = max(m.localGen, t.Generation)
	if t.Reason == "shared" {
		m.appliedGen = max(m.appliedGen, t.Generation)
		m.heardGen = max(m.heardGen, t.Generation)
		m.decided = m.adopting
	} else {
		m.decided = t.At
	}
	m.mu.Unlock()
	if t.Reason == "shared" {
		m.s.stats.applied.Add(1)
	}
}

// propose offers one queued local transition to the fleet (writer
// goroutine).
func (m *member) propose(ev event) {
	done := func() { m.pending.Add(-1) }
	// Under applyMu: a shared state being adopted right now is either
	// seen here or adopted after the proposal was written.
	m.applyMu.Lock()
	m.mu.Lock()
	// A shared state adopted after this transition replaced it.
	superseded := m.appliedGen > ev.local
	base := m.gen
	m.mu.Unlock()
	m.applyMu.Unlock()
	if superseded && ev.kind != 'r' {
		done()
		return
	}
	s := m.s
	off, ok := m.clock.get()
	if !ok {
		// No reply measured the offset to this breaker's server yet.
		if !m.measure() {
			done()
			return
		}
		off, _ = m.clock.get()
	}
	ctx, cancel := s.opContext()
	defer cancel()
	sent := s.mono()
	var until int64
	if ev.kind == 'o' {
		until = toRedis(sinceEpoch(ev.until, s.epoch), off)
	}
	v, err := proposeScript.Run(ctx, s.client, m.keys[:2], string(ev.kind), base, until,
		toRedis(sinceEpoch(ev.at, s.epoch), off), toRedis(sent+s.opts.OpTimeout.Microseconds(), off),
		s.opts.StateTTL.Milliseconds(), slack.Milliseconds(), s.channel, m.id, m.origin).Int64Slice()
	recv := s.mono()
	done()
	if err == nil && len(v) != 7 {
		err = errOr(nil, "bad reply")
	}
	if err != nil {
		s.fail("publish", m.id, err)
		return
	}
	s.healthy.Store(true)
	m.clock.observe(v[6], sent, recv)
	sh := sharedAt(m.replyAt(v[6], time.Now()), v[1], v[2], v[3], v[4], v[5])
	switch v[0] {
	case 1:
		if sh.gen > base {
			s.stats.published.Add(1)
		}
		if ev.kind == 'o' {
			m.heard(ev.local)
		}
		m.agree(sh)
	case 2:
		// Redis ran it too late. The next poll decides again: it adopts
		// what changed meanwhile, or re-publishes a trip.
		s.stats.expired.Add(1)
		s.kickPoll()
	default:
		s.stats.stale.Add(1)
		if ev.kind == 'o' && sh.active(time.Now()) {
			// The fleet is open anyway: the first trip's end stands.
			m.heard(ev.local)
		}
		m.sync(sh, true, false)
	}
}

// replyAt is when, on this process's clock, Redis read its clock redisUs
// for a reply received at recv: the offset (a lower bound, measured with
// that reply among others) puts it within the fastest reply's round trip,
// and never after recv. The durations a reply gives (time left, a
// decision's age) count from that instant, not from when the reply was
// read, which a loaded process may do much later.
func (m *member) replyAt(redisUs int64, recv time.Time) time.Time {
	off, ok := m.clock.get()
	if !ok {
		return recv
	}
	at := m.s.epoch.Add(time.Duration(redisUs-off) * time.Microsecond)
	if at.After(recv) {
		return recv
	}
	return at
}

// measure reads the breaker's shared state to measure the clock offset;
// it reports whether that worked (writer goroutine).
func (m *member) measure() bool {
	s := m.s
	ctx, cancel := s.opContext()
	defer cancel()
	sent := s.mono()
	v, err := readScript.Run(ctx, s.client, m.keys[:1]).Int64Slice()
	recv := s.mono()
	if err == nil && len(v) != 6 {
		err = errOr(nil, "bad reply")
	}
	if err != nil {
		s.fail("poll", m.id, err)
		return false
	}
	s.healthy.Store(true)
	m.clock.observe(v[5], sent, recv)
	return true
}

// heard records that the fleet took the trip at local generation gen into
// account.
func (m *member) heard(gen uint64) {
	m.mu.Lock()
	m.heardGen = max(m.heardGen, gen)
	m.mu.Unlock()
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

// sync brings the local breaker and the fleet together once this process
// has learnt the shared state sh: from a publication, from the answer to a
// refused proposal (force: adopt it at an equal generation too) or from a
// poll (poll: an absent state means Redis lost it).
//
// A shared state newer than the last one seen is adopted, unless it is an
// unconfirmed half-open or closed state decided before the breaker's own
// open or half-open state: a proposal that reached an absent state late (a
// restart emptied Redis while it was queued) and that Redis could not
// refuse; the breaker keeps its state. Then, if the breaker is open on a
// trip the fleet does not show, the trip is published again.
func (m *member) sync(sh shared, force, poll bool) {
	m.applyMu.Lock()
	m.mu.Lock()
	if poll && sh.gen == 0 {
		// The shared state is gone (expired, flushed, Redis restarted
		// empty): start again from closed.
		m.gen = 0
	}
	newer := sh.gen > m.gen || force && sh.gen == m.gen
	if !newer && !poll {
		m.mu.Unlock()
		m.applyMu.Unlock()
		return
	}
	m.gen = max(m.gen, sh.gen)
	adopt := newer && !m.keeps(sh)
	m.mu.Unlock()
	if adopt {
		m.apply(sh)
	}
	m.applyMu.Unlock()
	m.republish(sh)
}

// keeps reports whether the breaker keeps its own state rather than adopt
// sh: sh is an unconfirmed half-open or closed state decided before the
// breaker's own open or half-open state, or after it by less than the
// slack. Two decisions that close together cannot be ordered (each pod
// times its own on its clock, and its offset to Redis's clock is known to
// within a round trip), so they are concurrent, and the trip wins: a pod
// that closes within a millisecond of another's trip, both while Redis was
// away, must not end that trip. m.mu is held.
func (m *member) keeps(sh shared) bool {
	return !m.forced && !sh.confirmed && sh.state != breaker.Open &&
		(m.state == breaker.Open || m.state == breaker.HalfOpen) && sh.decided.Before(m.decided.Add(slack))
}

// apply hands a shared state to the local breaker. m.applyMu is held.
func (m *member) apply(sh shared) {
	if m.s.closed.Load() {
		return // a late answer: the breakers are on their own now
	}
	var until time.Time
	if sh.state == breaker.Open {
		if !sh.until.After(time.Now()) {
			return // the cooldown is over: the breakers' timers move on
		}
		until = sh.until
		m.mu.Lock()
		same := m.state == breaker.Open && !m.until.IsZero() && until.Sub(m.until).Abs() <= slack
		m.mu.Unlock()
		if same {
			return
		}
	}
	m.mu.Lock()
	m.adopting = sh.decided
	m.mu.Unlock()
	m.local.ApplyShared(breaker.Shared{State: sh.state, OpenUntil: until})
}

// republish queues the breaker's trip again when the fleet, whose state is
// sh, does not show it: sh is not open (Redis lost the state, or holds an
// older decision the breaker kept its trip against), or sh is an open state
// whose cooldown has ended while the fleet never heard of this trip. It
// does nothing while a proposal of this breaker is pending: that proposal
// carries the breaker's latest state.
func (m *member) republish(sh shared) {
	if m.s.closed.Load() {
		return
	}
	now := time.Now()
	m.mu.Lock()
	// The tracked state must be the breaker's current one: between a
	// transition and its listener, it is not.
	current := m.state == breaker.Open && !m.forced &&
		m.local.Generation() == m.localGen && m.local.State() == breaker.Open
	missing := sh.state != breaker.Open || !sh.active(now) && m.heardGen < m.localGen
	do := current && missing && m.until.Sub(now) > slack && m.pending.Load() == 0
	ev := event{m: m, kind: 'o', local: m.localGen, until: m.until, at: m.decided}
	m.mu.Unlock()
	if do {
		m.queue(ev)
	}
}

type probeReq struct {
	state atomic.Int32 // 0 waiting, 1 abandoned by the request, 2 answered
	done  chan int8    // 1 granted, 0 refused, -1 error or expired
}

// TryProbe asks for a fleet-wide probe permit, waiting at most
// Options.RequestBound; it answers true without Redis when the store is
// unhealthy, closed, saturated, too slow, or has not yet measured the
// offset to Redis's clock that the request's expiry needs.
func (m *member) TryProbe() bool {
	s := m.s
	if !s.healthy.Load() {
		return m.failOpen()
	}
	off, ok := m.clock.get()
	if !ok {
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
	expires := toRedis(s.mono()+s.opts.RequestBound.Microseconds(), off)
	timer := time.NewTimer(s.opts.RequestBound)
	defer timer.Stop()
	go m.acquire(req, lease, expires)
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

func (m *member) acquire(req *probeReq, lease string, expires int64) {
	s := m.s
	defer func() {
		<-s.probeSem
		s.probeWG.Done()
	}()
	ctx, cancel := s.opContext()
	defer cancel()
	sent := s.mono()
	v, err := acquireScript.Run(ctx, s.client, []string{m.keys[0], m.keys[2]},
		m.probes, s.opts.LeaseDuration.Milliseconds(), lease, slack.Milliseconds(), expires).Int64Slice()
	recv := s.mono()
	if err == nil && len(v) != 2 {
		err = errOr(nil, "bad reply")
	}
	var r int8
	switch {
	case err != nil:
		s.fail("probe", m.id, err)
		r = -1
	case v[0] == 2:
		s.healthy.Store(true)
		s.stats.expired.Add(1)
		m.clock.observe(v[1], sent, recv)
		r = -1
	default:
		s.healthy.Store(true)
		m.clock.observe(v[1], sent, recv)
		r = int8(v[0])
	}
	if req.state.CompareAndSwap(0, 2) {
		req.done <- r
		return
	}
	if r == 1 {
		// The request stopped waiting and probes without this lease. The
		// store may be closing: the release gets a context of its own.
		rctx, rcancel := s.releaseContext()
		defer rcancel()
		if err := s.client.ZRem(rctx, m.keys[2], lease).Err(); err != nil {
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

// Leave forgets the member: its breaker was garbage collected.
func (m *member) Leave() { m.s.forget(m) }

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
