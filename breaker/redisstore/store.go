package redisstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierguard/tierguard/breaker"
)

// slack is how far apart two open-until instants may be and still count as
// the same cooldown, and how early a cooldown may be declared over: the
// processes' timers and the network delay drift by a few milliseconds.
const slack = 250 * time.Millisecond

// Store shares the state of circuit breakers across processes through
// Redis. It implements breaker.Store: pass it as breaker.Config.Store (or
// in the Config of a breaker.Group) in every process, with the same breaker
// names. A Store is safe for concurrent use; make one per Redis client and
// process, and Close it on shutdown.
type Store struct {
	client  redis.UniversalClient
	opts    Options
	channel string
	token   string
	// epoch is the origin of the monotonic clock the store measures its
	// offsets to Redis's clock with.
	epoch time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ps     *redis.PubSub

	queue   chan event
	pollNow chan struct{}

	mu      sync.RWMutex
	byID    map[string][]*member
	members []*member
	seq     uint64

	// probeMu orders in-flight TryProbe lookups with Close.
	probeMu  sync.RWMutex
	probeWG  sync.WaitGroup
	probeSem chan struct{}

	closed  atomic.Bool
	healthy atomic.Bool
	stats   counters
}

type counters struct {
	published, stale, expired, applied, messages, polls, dropped, errors, failOpen, fleetTrips atomic.Uint64
}

// Stats are a Store's counters since New.
type Stats struct {
	// Published counts the transitions this store wrote to Redis (local
	// transitions accepted by the fleet, and fleet trips its counts
	// decided).
	Published uint64
	// Stale counts local transitions the fleet refused because another
	// process had changed the shared state first; the local breaker
	// adopted the shared state instead.
	Stale uint64
	// Expired counts writes (transitions, counts, probe permits) that
	// Redis executed after their expiry, because it was paused or slow,
	// and therefore ignored.
	Expired uint64
	// Applied counts shared states adopted by local breakers (transitions
	// with reason "shared").
	Applied uint64
	// Messages counts publications received on the channel.
	Messages uint64
	// Polls counts the polls that read the shared states.
	Polls uint64
	// Dropped counts transitions and probe releases dropped because the
	// queue was full or the store closed.
	Dropped uint64
	// Errors counts failed Redis operations.
	Errors uint64
	// FailOpen counts TryProbe answers given without Redis: it was
	// unreachable, slower than RequestBound, or the store was closed.
	FailOpen uint64
	// FleetTrips counts fleet-wide trips that this store's counts caused.
	FleetTrips uint64
	// Healthy reports whether the last Redis operation succeeded.
	Healthy bool
	// Breakers is the number of breakers joined and not yet garbage
	// collected.
	Breakers int
}

// Error is a failed Redis operation, as passed to Options.OnError.
type Error struct {
	// Op is what the store was doing: "subscribe", "publish", "record",
	// "probe", "release" or "poll".
	Op string
	// ID is the hashed id of the breaker concerned (see ID); empty when the
	// operation concerned several.
	ID string
	// Err is the error from go-redis.
	Err error
}

// Error describes the failure.
func (e *Error) Error() string {
	if e.ID == "" {
		return "redisstore: " + e.Op + ": " + e.Err.Error()
	}
	return "redisstore: " + e.Op + " " + e.ID + ": " + e.Err.Error()
}

// Unwrap returns the go-redis error.
func (e *Error) Unwrap() error { return e.Err }

// event is one entry of the write queue: a local transition to propose, or
// a probe lease to release.
type event struct {
	m     *member
	kind  byte   // 'o' open, 'h' half-open, 'c' closed, 'r' reset, 'x' release
	local uint64 // local generation of the transition
	until time.Time
	at    time.Time // when the transition was decided
	lease string
}

// New returns a Store that shares breaker state through client. It does no
// I/O: Redis need not be reachable, and the store connects (and reconnects)
// in the background. The client stays the caller's; Close does not close
// it.
func New(client redis.UniversalClient, opts Options) (*Store, error) {
	s, err := build(client, opts)
	if err != nil {
		return nil, err
	}
	s.ps = client.Subscribe(s.ctx) // no channel yet: no I/O
	s.wg.Add(2)
	go s.subscriber()
	go s.writer()
	return s, nil
}

// build returns a store that runs no goroutine yet.
func build(client redis.UniversalClient, opts Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: nil client")
	}
	opts, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	var tok [8]byte
	_, _ = rand.Read(tok[:])
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{
		client:   client,
		opts:     opts,
		channel:  opts.Prefix + "events",
		token:    hex.EncodeToString(tok[:]),
		epoch:    time.Now(),
		ctx:      ctx,
		cancel:   cancel,
		queue:    make(chan event, opts.QueueSize),
		pollNow:  make(chan struct{}, 1),
		byID:     make(map[string][]*member),
		probeSem: make(chan struct{}, 64),
	}
	s.healthy.Store(true)
	return s, nil
}

// ID returns the id under which a breaker named name is kept in Redis: the
// first 128 bits of the SHA-256 of the name, in hex. Keys and messages hold
// this id, never the name, so a breaker keyed by tenant or user (a
// breaker.Group key) puts no such data in Redis. Use it to find a breaker's
// keys when debugging: <prefix>{<id>}:state, :win and :probes.
func ID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:16])
}

// mono is the time since the store's epoch in microseconds, on the
// monotonic clock.
func (s *Store) mono() int64 { return time.Since(s.epoch).Microseconds() }

// Channel returns the name of the channel the store publishes on and
// listens to: the prefix followed by "events".
func (s *Store) Channel() string { return s.channel }

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	s.mu.RLock()
	n := len(s.members)
	s.mu.RUnlock()
	return Stats{
		Published:  s.stats.published.Load(),
		Stale:      s.stats.stale.Load(),
		Expired:    s.stats.expired.Load(),
		Applied:    s.stats.applied.Load(),
		Messages:   s.stats.messages.Load(),
		Polls:      s.stats.polls.Load(),
		Dropped:    s.stats.dropped.Load(),
		Errors:     s.stats.errors.Load(),
		FailOpen:   s.stats.failOpen.Load(),
		FleetTrips: s.stats.fleetTrips.Load(),
		Healthy:    s.healthy.Load(),
		Breakers:   n,
	}
}

// Close stops the store and returns the probe leases its breakers hold.
// It returns within twice Options.RequestBound (plus scheduling delays),
// whatever Redis does and whatever the go-redis client's timeouts and
// retries: it waits up to RequestBound for probe permits being asked for
// (Redis refuses to grant one later than that), then, up to twice
// RequestBound after it began, for the leases to be returned and the
// store's goroutines to stop. A goroutine still inside a Redis call then
// (Redis stopped, say) ends when go-redis returns, bounded by the client's
// own timeouts or by closing the client, and changes nothing after Close;
// an unreturned lease expires after LeaseDuration. The breakers that joined
// keep working on their local state. Close is idempotent.
func (s *Store) Close() error {
	// Under probeMu, so that no TryProbe starts a lookup after this.
	s.probeMu.Lock()
	if s.closed.Load() {
		s.probeMu.Unlock()
		return nil
	}
	s.closed.Store(true)
	s.probeMu.Unlock()
	start := time.Now()
	s.cancel()
	// PubSub.Close waits for a reconnection in progress, which a stopped
	// server can make last the client's dial timeout.
	go func() { _ = s.ps.Close() }()
	waitUntil(drained(&s.probeWG), start.Add(s.opts.RequestBound))
	deadline := start.Add(2 * s.opts.RequestBound)
	waitUntil(s.releaseAll(), deadline)
	waitUntil(drained(&s.wg), deadline)
	return nil
}

// drained returns a channel closed when wg's count reaches zero.
func drained(wg *sync.WaitGroup) <-chan struct{} {
	c := make(chan struct{})
	go func() {
		wg.Wait()
		close(c)
	}()
	return c
}

// waitUntil waits until c is closed or the deadline passes.
func waitUntil(c <-chan struct{}, deadline time.Time) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-c:
	case <-t.C:
	}
}

// Join connects the breaker named name to the store; breaker.New calls it.
// It does no I/O: the breaker starts from its local state and adopts the
// shared one at the next poll (one is started at once) or message. Join
// fails only when local is nil.
func (s *Store) Join(name string, local breaker.Local) (breaker.Member, error) {
	if local == nil {
		return nil, errors.New("redisstore: Join needs a local breaker")
	}
	s.mu.Lock()
	s.seq++
	origin := s.token + "-" + strconv.FormatUint(s.seq, 36)
	s.mu.Unlock()
	m := newMember(s, name, local, origin)
	// Follow every transition, those the store applies included, before
	// any can happen.
	local.Observe(m.track)
	s.mu.Lock()
	s.byID[m.id] = append(s.byID[m.id], m)
	s.members = append(s.members, m)
	s.mu.Unlock()
	s.kickPoll()
	return m, nil
}

// forget removes a member whose breaker was garbage collected (Leave). The
// lists are rebuilt, never changed in place: handle and snapshot read them
// outside the lock.
func (s *Store) forget(m *member) {
	s.mu.Lock()
	defer s.mu.Unlock()
	other := func(x *member) bool { return x != m }
	s.members = keep(s.members, other)
	if ms := keep(s.byID[m.id], other); len(ms) > 0 {
		s.byID[m.id] = ms
	} else {
		delete(s.byID, m.id)
	}
}

func keep(ms []*member, ok func(*member) bool) []*member {
	out := make([]*member, 0, len(ms))
	for _, m := range ms {
		if ok(m) {
			out = append(out, m)
		}
	}
	return out
}

func (s *Store) keys(id string) [3]string {
	base := s.opts.Prefix + "{" + id + "}:"
	return [3]string{base + "state", base + "win", base + "probes"}
}

func (s *Store) snapshot() []*member {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]*member(nil), s.members...)
}

func (s *Store) kickPoll() {
	select {
	case s.pollNow <- struct{}{}:
	default:
	}
}

// enqueue adds ev to the write queue without blocking; it drops ev when
// the queue is full or the store is closed.
func (s *Store) enqueue(ev event) bool {
	if s.closed.Load() {
		s.stats.dropped.Add(1)
		return false
	}
	select {
	case s.queue <- ev:
		return true
	default:
		s.stats.dropped.Add(1)
		return false
	}
}

// fail records a failed operation.
func (s *Store) fail(op, id string, err error) {
	if s.ctx.Err() != nil {
		return // closing: errors are expected and nobody is served
	}
	s.stats.errors.Add(1)
	s.healthy.Store(false)
	if s.opts.OnError != nil {
		s.opts.OnError(&Error{Op: op, ID: id, Err: err})
	}
}

func (s *Store) opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.ctx, s.opts.OpTimeout)
}

// subscriber applies the states other processes publish.
func (s *Store) subscriber() {
	defer s.wg.Done()
	if err := s.ps.Subscribe(s.ctx, s.channel); err != nil {
		// The channel is remembered: go-redis subscribes again when it
		// reconnects.
		s.fail("subscribe", "", err)
	}
	for msg := range s.ps.ChannelWithSubscriptions(redis.WithChannelSize(256)) {
		switch msg := msg.(type) {
		case *redis.Subscription:
			// (Re)subscribed: messages may have been missed meanwhile.
			s.kickPoll()
		case *redis.Message:
			s.handle(msg.Payload)
			s.stats.messages.Add(1)
		}
	}
}

// handle applies one publication:
// "v2 <id> <state> <gen> <open ms left> <decision age ms> <confirmed> <origin>",
// or the previous version's "v1 <id> <state> <gen> <open ms left> <origin>",
// read as confirmed and decided when received.
func (s *Store) handle(payload string) {
	f := strings.Fields(payload)
	var age int64
	confirmed := true
	switch {
	case len(f) == 8 && f[0] == "v2":
		var err error
		if age, err = strconv.ParseInt(f[5], 10, 64); err != nil || age < 0 {
			return
		}
		if f[6] != "0" && f[6] != "1" {
			return
		}
		confirmed = f[6] == "1"
	case len(f) == 6 && f[0] == "v1":
	default:
		return
	}
	origin := f[len(f)-1]
	st, err1 := strconv.ParseUint(f[2], 10, 8)
	gen, err2 := strconv.ParseUint(f[3], 10, 64)
	rem, err3 := strconv.ParseInt(f[4], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || st > uint64(breaker.Open) || gen > 1<<62 {
		return
	}
	if !confirmed && st != uint64(breaker.Open) {
		// An unconfirmed half-open or closed state (written onto an
		// absent one: Redis lost the state) may have to be weighed against
		// a breaker's own decision, which needs its decision time on
		// Redis's clock, as a poll gives it; a message gives its age from
		// when it was published, which a loaded process reads late.
		s.kickPoll()
		return
	}
	var c int64
	if confirmed {
		c = 1
	}
	sh := sharedAt(time.Now(), int64(st), int64(gen), rem, age, c)
	s.mu.RLock()
	ms := s.byID[f[1]]
	s.mu.RUnlock()
	for _, m := range ms {
		if m.origin != origin {
			m.sync(sh, false, false)
		}
	}
}

// writer runs every write and poll, one at a time, so that the proposals
// of a breaker reach Redis in the order its transitions happened.
func (s *Store) writer() {
	defer s.wg.Done()
	poll := time.NewTicker(s.opts.PollInterval)
	defer poll.Stop()
	flush := time.NewTicker(s.opts.FlushInterval)
	defer flush.Stop()
	for {
		if s.ctx.Err() != nil {
			return // closed while an operation ran
		}
		select {
		case <-s.ctx.Done():
			return
		case ev := <-s.queue:
			if ev.kind == 'x' {
				s.release(ev.m, ev.lease)
			} else {
				ev.m.propose(ev)
			}
		case <-flush.C:
			s.flush()
		case <-poll.C:
			s.poll()
		case <-s.pollNow:
			s.poll()
		}
	}
}

func (s *Store) release(m *member, lease string) {
	ctx, cancel := s.opContext()
	defer cancel()
	if err := s.client.ZRem(ctx, m.keys[2], lease).Err(); err != nil {
		s.fail("release", m.id, err)
		return
	}
	s.healthy.Store(true)
}

// releaseAll returns every lease still held, when closing, in the
// background; the channel is closed when that is done.
func (s *Store) releaseAll() <-chan struct{} {
	c := make(chan struct{})
	ctx, cancel := s.releaseContext()
	pipe := s.client.Pipeline()
	for _, m := range s.snapshot() {
		m.mu.Lock()
		for _, l := range m.leases {
			pipe.ZRem(ctx, m.keys[2], l)
		}
		m.leases = nil
		m.mu.Unlock()
	}
	if pipe.Len() == 0 {
		cancel()
		close(c)
		return c
	}
	go func() {
		defer close(c)
		defer cancel()
		_, _ = pipe.Exec(ctx)
	}()
	return c
}

// releaseContext bounds the return of leases, which must happen even while
// the store closes.
func (s *Store) releaseContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.opts.OpTimeout)
}

type scriptCall struct {
	keys []string
	args []any
}

// runScripts runs one script per call in a pipeline, loading the script
// and retrying once if Redis lost its script cache (a restart).
func (s *Store) runScripts(ctx context.Context, sc *redis.Script, calls []scriptCall) ([]*redis.Cmd, error) {
	exec := func() ([]*redis.Cmd, error) {
		pipe := s.client.Pipeline()
		cmds := make([]*redis.Cmd, len(calls))
		for i, c := range calls {
			cmds[i] = sc.EvalSha(ctx, pipe, c.keys, c.args...)
		}
		_, err := pipe.Exec(ctx)
		return cmds, err
	}
	cmds, err := exec()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		if lerr := sc.Load(ctx, s.client).Err(); lerr != nil {
			return cmds, lerr
		}
		cmds, err = exec()
	}
	return cmds, err
}

// poll reads the shared state of every breaker: it catches up on missed
// messages, tells whether Redis is back, and re-publishes local trips that
// Redis never heard of.
func (s *Store) poll() {
	ctx, cancel := s.opContext()
	defer cancel()
	ms := s.snapshot()
	if len(ms) == 0 {
		if err := s.client.Ping(ctx).Err(); err != nil {
			s.fail("poll", "", err)
			return
		}
		s.healthy.Store(true)
		return
	}
	calls := make([]scriptCall, len(ms))
	for i, m := range ms {
		calls[i] = scriptCall{keys: m.keys[:1]}
	}
	sent := s.mono()
	cmds, err := s.runScripts(ctx, readScript, calls)
	recv, at := s.mono(), time.Now()
	if err != nil && !isReplyError(err) {
		s.fail("poll", "", err)
		return
	}
	s.healthy.Store(true)
	for i, m := range ms {
		v, err := cmds[i].Int64Slice()
		if err != nil || len(v) != 6 {
			s.fail("poll", m.id, errOr(err, "bad reply"))
			continue
		}
		m.clock.observe(v[5], sent, recv)
		m.sync(sharedAt(m.replyAt(v[5], at), v[0], v[1], v[2], v[3], v[4]), false, true)
	}
	s.stats.polls.Add(1)
}

// flush sends the counted outcomes of every counting breaker in one
// pipeline.
func (s *Store) flush() {
	var ms []*member
	var calls []scriptCall
	sent := s.mono()
	for _, m := range s.snapshot() {
		if !m.counting {
			continue
		}
		off, ok := m.clock.get()
		if !ok {
			continue // counted at the next flush after a poll measured the offset
		}
		n, f := m.calls.take(), m.fails.Swap(0)
		if !m.countCalls {
			n = f
		}
		if n == 0 && f == 0 {
			continue
		}
		ms = append(ms, m)
		calls = append(calls, scriptCall{keys: m.keys[:2], args: []any{
			n, f, max(m.window.Milliseconds()/10, 1), 10, m.ratio, m.minCalls, s.opts.FleetFailures,
			max(m.cooldown.Milliseconds(), 1), s.opts.StateTTL.Milliseconds(), s.channel, m.id,
			toRedis(sent+s.opts.OpTimeout.Microseconds(), off),
		}})
	}
	if len(calls) == 0 {
		return
	}
	ctx, cancel := s.opContext()
	defer cancel()
	cmds, err := s.runScripts(ctx, recordScript, calls)
	recv, at := s.mono(), time.Now()
	if err != nil && !isReplyError(err) {
		s.fail("record", "", err)
		return
	}
	s.healthy.Store(true)
	for i, m := range ms {
		v, err := cmds[i].Int64Slice()
		if err != nil || len(v) != 9 {
			s.fail("record", m.id, errOr(err, "bad reply"))
			continue
		}
		m.clock.observe(v[6], sent, recv)
		switch v[0] {
		case 1:
			s.stats.fleetTrips.Add(1)
			s.stats.published.Add(1)
		case 2:
			s.stats.expired.Add(1)
		}
		m.sync(sharedAt(m.replyAt(v[6], at), v[1], v[2], v[3], v[4], v[5]), false, false)
	}
}

func isReplyError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

func errOr(err error, msg string) error {
	if err != nil {
		return err
	}
	return errors.New(msg)
}
