package redislimit

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"

	"github.com/tierguard/tierguard/fallback/ratelimit"
)

// Defaults applied to zero fields of Options.
const (
	DefaultPrefix       = "tierguard:ratelimit:"
	DefaultRequestBound = 5 * time.Millisecond
	DefaultOpTimeout    = time.Second
	DefaultPrefetch     = 1
	DefaultHoldFor      = time.Second
	DefaultRetryHealth  = time.Second
	DefaultOutageAfter  = 3
)

// boundGrowth is how far the bound a call waits on Redis grows past
// Options.RequestBound when the store measures slower round trips: up to
// this many times it (and no more than a quarter of OpTimeout).
const boundGrowth = 20

// Options configures a Store. The zero value is a working configuration.
type Options struct {
	// Prefix starts every key; DefaultPrefix when empty. It must be
	// printable and hold no '{', '}' or space. Use one per environment.
	Prefix string
	// RequestBound is the longest a call waits on Redis while the store
	// has measured no slower round trips: only a call that holds no
	// prefetched turn of its own waits. The store learns from the round
	// trips it measures: the bound is twice the slowest recent one when
	// that is longer (a loaded host reads its replies late), up to 20
	// times RequestBound and a quarter of OpTimeout. Past the bound the
	// call is decided without Redis — by the process's share of the quota
	// (Pods), or on the local limit alone — and the late reply, when it
	// comes, tells the fleet what was decided. One late reply is no
	// outage: the store stops waiting on Redis after OutageAfter late
	// replies in a row, or when a take has waited OutageAfter bounds
	// without a reply (Redis paused), or on a failed operation (Redis
	// down), until a background check finds it healthy.
	// Size it at two or three times Redis's p99 round trip, well below the
	// model call's latency. DefaultRequestBound when zero.
	RequestBound time.Duration
	// OutageAfter is how many takes in a row must find Redis slower than
	// the bound before the store stops waiting on it (see RequestBound).
	// DefaultOutageAfter when zero; 1 stops at the first late reply.
	OutageAfter int
	// OpTimeout bounds each Redis operation through its context (go-redis
	// honours it with redis.Options.ContextTimeoutEnabled; otherwise its
	// read and write timeouts do). DefaultOpTimeout when zero.
	OpTimeout time.Duration
	// Prefetch is how many calls' turns a process takes from the fleet at
	// once and keeps at hand, refilled in the background, so that a call
	// rarely waits on Redis. Turns at hand count as used for the fleet: a
	// larger Prefetch lets each process burst a little more, never the
	// fleet past its quota by more than Prefetch turns per process.
	// DefaultPrefetch when zero.
	Prefetch int
	// HoldFor is how long turns at hand stay valid; older ones are dropped
	// (the fleet counted them). DefaultHoldFor when zero.
	HoldFor time.Duration
	// RetryHealth is how often an unhealthy store checks Redis again in the
	// background. DefaultRetryHealth when zero.
	RetryHealth time.Duration
	// Pods is how many processes are expected to share each quota: while
	// the store cannot use Redis (down, paused, slower than the bound
	// OutageAfter times in a row, or closed) — and for a call whose reply
	// comes after the bound — each of its limiters keeps to a share of
	// 1/Pods of its quota — of its burst and of its rate — so that the
	// fleet together stays near its quota instead of each process
	// spending all of it. Turns at hand (Prefetch) are used first: the
	// fleet counted them. A share is not emptied when the store stops
	// using Redis: the calls the fleet admits for the process are spent
	// from it too, so it holds what the process has not spent of it
	// lately. A process that was quiet serves a burst of its share at
	// once; one that spent its share through the fleet just before (when
	// the fleet may have spent its quota) has little left and fills at
	// the share's rate. A window across the outage's start holds at most
	// the quota and the part of the fleet's burst the quiet processes had
	// not spent (at most the burst: 110 % with the default Burst). When
	// Redis answers again the store tells the fleet's bucket, in the
	// background, what the share admitted that still counts (its state as
	// a bucket: at most its burst), and what it admitted for calls whose
	// reply was late while the store used Redis (all of them, unless the
	// late reply granted the call's turn), so that the fleet's burst does
	// not come on top of the shares' last window; and, when a health
	// check found Redis unreachable during the outage (down or paused, so
	// that the other processes were out too), for one window of the quota
	// after it is back a call needs room in the share as well as a fleet
	// turn, because other processes may still be on their shares (a
	// go-redis client redials once a second after failed dials). An
	// outage of this process alone (its replies late) has no such window.
	// Set it to the number of replicas, or the most you run: more pods
	// than Pods still exceed the quota while Redis is out (by Pods
	// running/Pods), fewer only waste part of it. While some processes
	// reach Redis and others do not (a partition), those that do take the
	// fleet's whole rate and the others their shares on top of it until
	// they are back.
	// 0, the default: as many processes as Redis last saw taking turns
	// of the limit within the 30 s before (each take notes its process;
	// at least one), so that a fleet that does not say its size still
	// keeps near its quota; a process alone, or one that never reached
	// Redis, keeps to the whole quota. 1: each process keeps to the whole
	// quota alone (the local limiter's own limit), which a fleet of N
	// processes exceeds N times over while Redis is out (the default of
	// earlier versions).
	Pods int
	// OnError, when set, is called with every failed Redis operation, from
	// the store's own goroutines or from a call that timed out. It must not
	// block. Errors name limits by their hashed id only.
	OnError func(error)
}

func (o Options) normalize() (Options, error) {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	check(len(o.Prefix) <= 128 && !strings.ContainsFunc(o.Prefix, func(r rune) bool {
		return r == '{' || r == '}' || unicode.IsSpace(r) || !unicode.IsPrint(r)
	}), "Prefix must be at most 128 printable characters without '{', '}' or spaces, got %q", o.Prefix)
	check(o.RequestBound >= 0, "RequestBound must not be negative, got %v", o.RequestBound)
	check(o.OpTimeout >= 0, "OpTimeout must not be negative, got %v", o.OpTimeout)
	check(o.Prefetch >= 0, "Prefetch must not be negative, got %d", o.Prefetch)
	check(o.HoldFor >= 0, "HoldFor must not be negative, got %v", o.HoldFor)
	check(o.RetryHealth >= 0, "RetryHealth must not be negative, got %v", o.RetryHealth)
	check(o.Pods >= 0, "Pods must not be negative, got %d", o.Pods)
	check(o.OutageAfter >= 0, "OutageAfter must not be negative, got %d", o.OutageAfter)
	if err := errors.Join(errs...); err != nil {
		return o, fmt.Errorf("redislimit: invalid options: %w", err)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.RequestBound, DefaultRequestBound)
	def(&o.OpTimeout, DefaultOpTimeout)
	def(&o.HoldFor, DefaultHoldFor)
	def(&o.RetryHealth, DefaultRetryHealth)
	if o.Prefetch == 0 {
		o.Prefetch = DefaultPrefetch
	}
	if o.OutageAfter == 0 {
		o.OutageAfter = DefaultOutageAfter
	}
	return o, nil
}

// Error is a failed Redis operation, as Options.OnError receives it.
type Error struct {
	// Op is the operation: "take", "adjust", "hold" or "settle" (what a
	// share admitted while Redis was out, told to the fleet).
	Op string
	// Limit is the limit's hashed id (see ID).
	Limit string
	// Err is the cause.
	Err error
}

// Error names the operation and the limit's id.
func (e *Error) Error() string {
	return "redislimit: " + e.Op + " " + e.Limit + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ID returns the id under which a limit named name is kept in Redis: the
// first 128 bits of the SHA-256 of the name, in hex. Keys hold this id,
// never the name, so a limiter keyed by tenant or API key (a
// ratelimit.Group member) puts no such data in Redis.
func ID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:16])
}

// Store shares ratelimit.Limiter quotas across processes through Redis:
// every process's limiter of the same name draws on one fleet-wide quota.
// It is a ratelimit.Store: give it to ratelimit.Config.Store.
//
// Local-first: a call is first admitted by the process's own limiter (its
// Config is the fleet's quota, so one process alone can never exceed it),
// then takes a fleet turn the process holds at hand, prefetched in the
// background. Only a call that finds none waits on Redis, at most the
// bound (Options.RequestBound, grown with the round trips the store
// measures). It fails open, to a share: a call whose reply is late is
// decided by the process's share of the quota (Options.Pods; on the local
// limit alone without it) and the reply tells the fleet when it comes;
// when Redis is late OutageAfter times in a row, paused or down, the
// store stops waiting on Redis, and a background check every RetryHealth
// brings the fleet's limit back when Redis answers again.
type Store struct {
	client redis.UniversalClient
	opts   Options
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	healthy   atomic.Bool
	checking  atomic.Bool
	lastCheck atomic.Int64
	// outages counts the times the store stopped using Redis.
	outages atomic.Uint64
	epoch   time.Time
	// late counts the takes in a row whose reply came after the bound.
	late atomic.Int64
	// rtt is the slowest recent round trip of a take (ns): each reply
	// raises it to its own, or lowers it by an eighth of the way.
	rtt atomic.Int64
	// backAt is when the store last used Redis again after an outage in
	// which a health check failed (ns since epoch); 0 before any.
	backAt atomic.Int64
	// unreachable is set when a health check failed during the outage:
	// Redis was down or paused, not merely slow to this process, so the
	// other processes were likely out too.
	unreachable atomic.Bool

	takes, granted, refused, failedOpen, errs, shareRefused atomic.Uint64
	// token names this store among the processes Redis sees taking turns.
	token string
}

// presence is how long Redis counts a process among those that take a
// limit's turns after its last take (see Options.Pods).
const presence = 30 * time.Second

// New returns a store over client. The client stays the caller's: Close
// does not close it.
func New(client redis.UniversalClient, opts Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("redislimit: nil client")
	}
	opts, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var tok [8]byte
	_, _ = crand.Read(tok[:])
	s := &Store{client: client, opts: opts, ctx: ctx, cancel: cancel, epoch: time.Now(), token: hex.EncodeToString(tok[:])}
	s.healthy.Store(true)
	return s, nil
}

// Close stops the store's background work and waits for it, at most
// OpTimeout. Limiters that use the store keep to their share of the quota
// afterwards (Options.Pods), or to their local limit without one.
func (s *Store) Close() error {
	s.cancel()
	s.down()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.opts.OpTimeout):
	}
	return nil
}

// Stats are a store's running figures.
type Stats struct {
	// Takes counts the calls that asked Redis for turns; Granted and
	// Refused how Redis answered; FailedOpen, the calls decided without
	// the fleet because Redis did not answer in time (by the process's
	// share when Options.Pods is above 1, otherwise admitted on the local
	// limit); ShareRefused, the calls the share refused (those, and calls
	// refused for want of room in the share in the window after an
	// outage); Errors, failed operations.
	Takes, Granted, Refused, FailedOpen, ShareRefused, Errors uint64
	// Outages counts the times the store stopped using Redis.
	Outages uint64
	// Healthy is false while the store is not waiting on Redis.
	Healthy bool
}

// Stats returns the store's figures.
func (s *Store) Stats() Stats {
	return Stats{Takes: s.takes.Load(), Granted: s.granted.Load(), Refused: s.refused.Load(),
		FailedOpen: s.failedOpen.Load(), ShareRefused: s.shareRefused.Load(), Errors: s.errs.Load(),
		Outages: s.outages.Load(), Healthy: s.healthy.Load()}
}

// bound is how long a call waits on Redis now: RequestBound, or twice
// the slowest recent round trip when that is longer, at most maxBound.
func (s *Store) bound() time.Duration {
	return max(s.opts.RequestBound, min(2*time.Duration(s.rtt.Load()), s.maxBound()))
}

// maxBound is the longest the bound grows to.
func (s *Store) maxBound() time.Duration {
	return max(s.opts.RequestBound, min(boundGrowth*s.opts.RequestBound, s.opts.OpTimeout/4))
}

// measured notes a take's round trip: a reply within the bound ends a
// run of late ones.
func (s *Store) measured(rtt, bound time.Duration) {
	if rtt <= bound {
		s.late.Store(0)
	}
	for {
		old := s.rtt.Load()
		next := max(int64(rtt), old-old/8)
		if next == old || s.rtt.CompareAndSwap(old, next) {
			return
		}
	}
}

// lateReply counts a take whose reply did not come within the bound, and
// declares an outage after OutageAfter of them in a row.
func (s *Store) lateReply() {
	if s.late.Add(1) >= int64(s.opts.OutageAfter) {
		s.down()
	}
}

// up marks the store as using Redis again, noting when an outage in
// which Redis was unreachable ended. An outage whose first health check
// found Redis answering (this process was slow, or its replies late) has
// no window after it: the other processes were not out.
func (s *Store) up() {
	if !s.healthy.Load() && s.healthy.CompareAndSwap(false, true) && s.unreachable.Swap(false) {
		s.backAt.Store(int64(time.Since(s.epoch)))
	}
}

// catchingUp reports whether the store uses Redis again since less than
// per, after an outage in which it was unreachable: a limit of that
// window then keeps to its share as well (see Options.Pods).
func (s *Store) catchingUp(per time.Duration) bool {
	at := s.backAt.Load()
	return at != 0 && s.healthy.Load() && time.Since(s.epoch)-time.Duration(at) < per
}

// down marks the store as not using Redis, counting a new outage.
func (s *Store) down() {
	if s.healthy.CompareAndSwap(true, false) {
		s.unreachable.Store(false)
		s.outages.Add(1)
	}
}

// Join registers a limiter's fleet quota. It implements ratelimit.Store.
func (s *Store) Join(name string, q ratelimit.Quota) (ratelimit.Member, error) {
	if q.Requests <= 0 && q.Tokens <= 0 {
		return nil, errors.New("redislimit: the quota has neither Requests nor Tokens")
	}
	id := ID(name)
	base := s.opts.Prefix + "{" + id + "}:"
	m := &member{s: s, id: id, q: q, keys: []string{base + "r", base + "t", base + "p"}}
	// Fractions of a microsecond are kept: a Per cut to whole ones made a
	// fleet faster than its quota, and one below a microsecond had no
	// requests limit at all (an interval of 0 means none).
	per := float64(q.Per) / float64(time.Microsecond)
	if q.Requests > 0 {
		// The same shape as the local bucket: no window of Per holds more
		// than Requests.
		m.req = newBucket(per/float64(max(q.Requests-q.Burst, 1)), int64(q.Burst))
	}
	if q.Tokens > 0 {
		m.tok = newBucket(per/float64(q.Tokens-q.TokenBurst), q.TokenBurst)
	}
	m.sizeShareLocked(max(s.opts.Pods, 1), 0)
	return m, nil
}

// sizeShareLocked makes the member's share 1/pods of its quota at now; a
// share of one pod is off (the local limit alone decides). A share
// resized keeps the part of its burst it had spent. m.mu must be held,
// or the member not yet shared.
func (m *member) sizeShareLocked(pods int, now float64) {
	q, n := m.q, float64(pods)
	if q.Requests > 0 {
		m.share.req = m.share.req.resized(now, float64(q.Per)/float64(max(q.Requests-q.Burst, 1))*n, float64(q.Burst)/n)
	}
	if q.Tokens > 0 {
		m.share.tok = m.share.tok.resized(now, float64(q.Per)/float64(q.Tokens-q.TokenBurst)*n, float64(q.TokenBurst)/n)
	}
	m.share.on = pods > 1
	m.share.pods = pods
}

type bucket struct {
	interval, window float64 // µs
	burst            int64
}

// maxWindow is the longest window of a fleet's bucket, in microseconds:
// the local bucket's, an int64 of nanoseconds. A huge burst at a slow rate
// would take longer to come back; less of it is available at once
// instead, as locally, and the scripts' figures stay in their range.
const maxWindow = float64(math.MaxInt64 / int64(time.Microsecond))

// newBucket returns the fleet's bucket of one limit: interval µs per unit
// and burst units, its window cut to maxWindow.
func newBucket(interval float64, burst int64) bucket {
	return bucket{interval: interval, burst: burst, window: min(interval*float64(burst), max(maxWindow, interval))}
}

// micros is us microseconds as a Duration, at most the longest Duration.
func micros(us int64) time.Duration {
	if us > math.MaxInt64/int64(time.Microsecond) {
		return math.MaxInt64
	}
	return time.Duration(us) * time.Microsecond
}

// nanos is ns nanoseconds as a Duration, at most the longest Duration.
func nanos(ns float64) time.Duration {
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(ns)
}

// shareBucket is one limit of a process's share, which decides the calls
// the fleet could not in time: a bucket of the limit's burst and rate
// divided by Options.Pods, on the process's monotonic clock (ns since the
// store's epoch), guarded by the member's lock. While the store uses
// Redis, the calls the fleet admits for the process are spent from it
// too (without ever refusing one): so that it holds, when Redis is out,
// what the process has not spent of its share lately — its whole burst
// after a quiet spell, little after a busy one, when the fleet may have
// spent its quota just before.
type shareBucket struct {
	interval, window float64 // ns
	tat              float64
	set              bool
}

// resized returns the share of interval ns per unit and burst units
// (fractional: a share of a burst of 10 among 4 pods holds 2.5) that b
// becomes at now: full, or as spent as b was. A share's burst below one
// unit still admits one at a time, at its rate.
func (b shareBucket) resized(now, interval, burst float64) shareBucket {
	n := shareBucket{interval: interval, window: max(burst, 1) * interval, set: true}
	if b.set && b.tat > now {
		n.tat = now + (b.tat-now)/b.window*n.window
	}
	return n
}

// wait is how long until n units fit at now (0: they fit now).
func (b *shareBucket) wait(now float64, n int64) float64 {
	if !b.set || n <= 0 {
		return 0
	}
	next := max(b.tat, now) + float64(n)*b.interval
	return max(next-b.window-now, 0)
}

func (b *shareBucket) take(now float64, n int64) {
	if b.set && n > 0 {
		b.tat = max(b.tat, now) + float64(n)*b.interval
	}
}

func (b *shareBucket) refund(now float64, n int64) {
	if b.set && n > 0 {
		b.tat = max(b.tat-float64(n)*b.interval, now)
	}
}

// spend spends n units the fleet admitted at now, down to an empty
// share, never below — the fleet, not the share, decided them — unless
// debt says the share decided them too.
func (b *shareBucket) spend(now float64, n int64, debt bool) {
	if b.set && n > 0 {
		b.tat = max(b.tat, now) + float64(n)*b.interval
		if !debt {
			b.tat = min(b.tat, now+b.window)
		}
	}
}

// share is a member's share of its quota while Redis is out.
type share struct {
	req, tok shareBucket
	on       bool
	// pods is how many pods the share is sized for, and outage the
	// store's outage it was sized in (Options.Pods left at 0).
	pods   int
	outage uint64
	// owedReq and owedTok are what the share admitted that the fleet has
	// not been told of yet (see settleLocked).
	owedReq, owedTok int64
	// lateReq and lateTok are what the share admitted while the store
	// used Redis (a reply later than the bound), told to the fleet in
	// full: the fleet's window counts them all.
	lateReq, lateTok int64
}

// owed is what of the share's admissions still counts at now: no more
// than were admitted, and no more than the share has not yet earned back
// at its rate — its state as a bucket, which is what the fleet's bucket
// needs to hold so that no window counts them twice or not at all.
func (b *shareBucket) owed(now float64, admitted int64) int64 {
	if !b.set || admitted <= 0 {
		return 0
	}
	return min(admitted, int64(math.Ceil(max(b.tat-now, 0)/b.interval)))
}

// member is one limiter's part: its turns at hand and the fleet's last
// refusal.
type member struct {
	s        *Store
	id       string
	q        ratelimit.Quota
	keys     []string // requests, tokens, presence
	req, tok bucket

	mu sync.Mutex
	// handReq and handTok are the turns at hand, taken at handAt.
	handReq, handTok int64
	handAt           time.Time
	// seenPods is how many processes Redis last saw taking this limit's
	// turns (within presence).
	seenPods int
	// blockedUntil is when the fleet said its next turn comes (plus a
	// back-off), and refusals how many takes it refused in a row.
	blockedUntil time.Time
	refusals     int
	refilling    bool
	// flight, while a call asks the fleet, is closed when it has the
	// answer; flightAt is when it asked.
	flight   chan struct{}
	flightAt time.Time
	share    share
}

// Take implements ratelimit.Member.
func (m *member) Take(tokens int64) (bool, time.Duration) {
	s := m.s
	now := time.Now()
	m.mu.Lock()
	if m.share.owedReq|m.share.owedTok|m.share.lateReq|m.share.lateTok != 0 && s.healthy.Load() && s.ctx.Err() == nil {
		m.settleLocked()
	}
	if now.Before(m.blockedUntil) {
		in := m.blockedUntil.Sub(now)
		m.mu.Unlock()
		return false, in
	}
	if m.share.on && s.catchingUp(m.q.Per) {
		// Back from an outage: other processes may still be out, on
		// their shares, beside the fleet's whole rate, until their
		// clients reach Redis again (go-redis redials once a second
		// after failed dials). For a window, a call needs room in this
		// process's share too, so that the fleet keeps to the shares'
		// sum meanwhile.
		if in, ok := m.shareRoomLocked(now, tokens); !ok {
			m.mu.Unlock()
			s.shareRefused.Add(1)
			return false, in
		}
	}
	if m.fromHandLocked(now, tokens) {
		m.mu.Unlock()
		return true, 0
	}
	if !s.healthy.Load() || s.ctx.Err() != nil {
		ok, in, _, _ := m.byShareLocked(tokens)
		m.mu.Unlock()
		s.checkHealth()
		return ok, in
	}
	if fl := m.flight; fl != nil {
		at := m.flightAt
		m.mu.Unlock()
		if ok, in, decided := m.join(fl, at, tokens); decided {
			return ok, in
		}
	} else {
		m.mu.Unlock()
	}
	return m.ask(tokens)
}

// fromHandLocked takes a call's turns from those at hand, if they are
// enough. m.mu must be held.
func (m *member) fromHandLocked(now time.Time, tokens int64) bool {
	if now.Sub(m.handAt) > m.s.opts.HoldFor {
		m.handReq, m.handTok = 0, 0
	}
	needTok := int64(0)
	if m.tok.interval > 0 {
		needTok = tokens
	}
	if m.req.interval > 0 && m.handReq < 1 || m.handTok < needTok {
		return false
	}
	needReq := int64(0)
	if m.req.interval > 0 {
		needReq = 1
	}
	m.handReq -= needReq
	m.handTok -= needTok
	m.spendShareLocked(now, needReq, needTok)
	m.refillLocked(tokens)
	return true
}

// spendShareLocked spends from the share what the fleet admitted for the
// process (see shareBucket). m.mu must be held.
func (m *member) spendShareLocked(at time.Time, req, tok int64) {
	if !m.share.on {
		return
	}
	now := float64(at.Sub(m.s.epoch))
	// While catching up after an outage the share decides too: calls
	// that passed its check together go into its debt, which the next
	// ones wait out.
	debt := m.s.catchingUp(m.q.Per)
	m.share.req.spend(now, req, debt)
	m.share.tok.spend(now, tok, debt)
}

// shareRoomLocked reports whether the share has room now for a call of
// tokens tokens, and if not, how long until it does. m.mu must be held.
func (m *member) shareRoomLocked(at time.Time, tokens int64) (time.Duration, bool) {
	sh := &m.share
	now := float64(at.Sub(m.s.epoch))
	need, ntok := int64(0), int64(0)
	if m.req.interval > 0 {
		need = 1
	}
	if m.tok.interval > 0 && float64(tokens)*sh.tok.interval <= sh.tok.window {
		ntok = tokens
	}
	if w := max(sh.req.wait(now, need), sh.tok.wait(now, ntok)); w > 0 {
		return max(nanos(w), time.Millisecond), false
	}
	return 0, true
}

// asked is a call that asks the fleet, as the call and the take that
// answers it both see it, under the member's lock: when the reply comes
// after the bound, the call has been decided by the share meanwhile, and
// the reply tells the fleet what it was.
type asked struct {
	// replied is set when the take's reply was read; late, when the call
	// stopped waiting for it first.
	replied, late bool
	// admitted is set when the share (or the local limit alone) admitted
	// the late call, and req, tok are what it took from the share for it.
	admitted bool
	req, tok int64
}

// ask asks the fleet for a call's turns and the next ones', waiting no
// longer than the bound. The first call to ask while no other does is
// the process's flight: calls that find nothing at hand meanwhile wait
// for its answer rather than ask too (see join).
func (m *member) ask(tokens int64) (bool, time.Duration) {
	s := m.s
	fl := make(chan struct{})
	call := new(asked)
	m.mu.Lock()
	if other := m.flight; other != nil {
		// Another call began asking since this one looked: wait for
		// its answer as if this one had seen it.
		at := m.flightAt
		m.mu.Unlock()
		if ok, in, decided := m.join(other, at, tokens); decided {
			return ok, in
		}
		m.mu.Lock()
	}
	if m.flight == nil {
		m.flight, m.flightAt = fl, time.Now()
	} else {
		fl = nil
	}
	m.mu.Unlock()
	res := make(chan takeResult, 1)
	bound := s.bound()
	go func() {
		r := m.take(tokens, call, bound)
		if fl != nil {
			m.mu.Lock()
			m.flight = nil
			m.mu.Unlock()
			close(fl)
		}
		res <- r
	}()
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case r := <-res:
		return m.answer(r, tokens)
	case <-t.C:
	}
	m.mu.Lock()
	if call.replied {
		// The reply came as the bound ran out: it decides.
		m.mu.Unlock()
		return m.answer(<-res, tokens)
	}
	// Slower than the bound: decide on the process's share, and count a
	// late reply. The store goes on waiting on Redis unless the replies
	// have been late OutageAfter times in a row: one slow reply on a
	// loaded host is no outage.
	call.late = true
	ok, in, req, tok := m.byShareLocked(tokens)
	call.admitted, call.req, call.tok = ok, req, tok
	m.mu.Unlock()
	s.lateReply()
	return ok, in
}

// answer is a call's answer from its take's result.
func (m *member) answer(r takeResult, tokens int64) (bool, time.Duration) {
	if r.err != nil {
		return m.byShare(tokens)
	}
	return r.ok, r.retryIn
}

// join waits, no longer than the bound, for the answer to another call of
// this process that is asking the fleet (since at), and decides by it: a
// refusal refuses this call too (the fleet said when its next turn
// comes), a grant's prefetch at hand admits it, Redis failing or too slow
// leaves it to the share. Under contention this is what keeps a process's
// callers from asking Redis each for the same turn. decided is false when
// the answer left nothing for this call, which then asks on its own.
func (m *member) join(fl <-chan struct{}, at time.Time, tokens int64) (ok bool, in time.Duration, decided bool) {
	s := m.s
	t := time.NewTimer(s.bound())
	defer t.Stop()
	select {
	case <-fl:
	case <-t.C:
		// The flight is late. Redis that has not answered it in
		// OutageAfter of the longest bounds is out (paused, or its host
		// stuck): stop waiting on it. A reply merely slow (a loaded host)
		// comes before.
		if time.Since(at) >= time.Duration(s.opts.OutageAfter)*s.maxBound() {
			s.down()
		}
		ok, in := m.byShare(tokens)
		return ok, in, true
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case !s.healthy.Load() || s.ctx.Err() != nil:
		ok, in, _, _ := m.byShareLocked(tokens)
		return ok, in, true
	case now.Before(m.blockedUntil):
		return false, m.blockedUntil.Sub(now), true
	case m.fromHandLocked(now, tokens):
		return true, 0, true
	}
	return false, 0, false
}

// byShare decides a call the fleet could not: by the process's share of
// the quota (Options.Pods), or on the local limit alone without one.
func (m *member) byShare(tokens int64) (bool, time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ok, in, _, _ := m.byShareLocked(tokens)
	return ok, in
}

// byShareLocked is byShare with m.mu held; req and tok are what it took
// from the share.
func (m *member) byShareLocked(tokens int64) (ok bool, in time.Duration, req, tok int64) {
	s := m.s
	s.failedOpen.Add(1)
	sh := &m.share
	now := float64(time.Since(s.epoch))
	if o := s.outages.Load(); s.opts.Pods == 0 && (o != sh.outage || m.seenPods > sh.pods) {
		// As many pods as Redis last saw taking this limit's turns when
		// the outage began, or more seen since: a Redis restarted empty
		// counts the pods again from one as they come back, which must
		// not make a pod's share the whole quota.
		sh.outage = o
		m.sizeShareLocked(max(m.seenPods, 1), now)
	}
	// The share is not emptied when Redis goes out: it holds what this
	// process has not spent of it lately (see shareBucket), so a burst
	// after a quiet spell is served, while a process that spent its
	// share through the fleet just before has little of it left.
	need := int64(0)
	if m.req.interval > 0 {
		need = 1
	}
	ntok := int64(0)
	if m.tok.interval > 0 {
		ntok = tokens
	}
	healthy := s.healthy.Load() && s.ctx.Err() == nil
	if !sh.on {
		// No share: the local limit alone admits the call. While the
		// store uses Redis the fleet is still told of it.
		if !healthy {
			return true, 0, 0, 0
		}
		sh.lateReq += need
		sh.lateTok += max(ntok, 0)
		return true, 0, need, max(ntok, 0)
	}
	if ntok > 0 && float64(ntok)*sh.tok.interval > sh.tok.window {
		// More tokens than the share's burst: it can never pass by the
		// share; let the local limit (which admitted it) decide.
		ntok = 0
	}
	if w := max(sh.req.wait(now, need), sh.tok.wait(now, ntok)); w > 0 {
		s.shareRefused.Add(1)
		return false, max(nanos(w), time.Millisecond), 0, 0
	}
	sh.req.take(now, need)
	sh.tok.take(now, ntok)
	if healthy {
		sh.lateReq += need
		sh.lateTok += ntok
	} else {
		sh.owedReq += need
		sh.owedTok += ntok
	}
	return true, 0, need, ntok
}

// settleLocked tells the fleet, once the store uses Redis again, what the
// process's share admitted while it did not, as far as it still counts
// (owed): the fleet's bucket takes it as debt, in the background. Without
// it the fleet's bucket, full again, would admit its burst on top of what
// the shares admitted just before — and while some processes reach Redis
// and others do not, the fleet's rate on top of the shares'. m.mu must be
// held.
func (m *member) settleLocked() {
	sh := &m.share
	if sh.owedReq|sh.owedTok|sh.lateReq|sh.lateTok == 0 {
		return
	}
	now := float64(time.Since(m.s.epoch))
	req, tok := sh.req.owed(now, sh.owedReq)+sh.lateReq, sh.tok.owed(now, sh.owedTok)+sh.lateTok
	sh.owedReq, sh.owedTok, sh.lateReq, sh.lateTok = 0, 0, 0, 0
	if req > 0 && m.req.interval > 0 {
		m.background("settle", adjustScript, m.keys[:1], m.req.interval, m.req.window, req)
	}
	if tok > 0 && m.tok.interval > 0 {
		m.background("settle", adjustScript, m.keys[1:2], m.tok.interval, m.tok.window, tok)
	}
}

type takeResult struct {
	ok      bool
	retryIn time.Duration
	err     error
}

// take asks Redis for the turns of a call of tokens tokens (needed, when
// call is set) and a prefetch beyond them, and keeps what it is granted
// beyond the call at hand — and the call's own turns too, when the call
// stopped waiting for the reply and was refused meanwhile. bound is the
// bound the call waits for the reply.
func (m *member) take(tokens int64, call *asked, bound time.Duration) takeResult {
	s := m.s
	s.takes.Add(1)
	needReq, needTok := int64(0), int64(0)
	if call != nil {
		needReq, needTok = 1, tokens
	}
	wantReq := needReq + int64(s.opts.Prefetch)
	wantTok := needTok + int64(s.opts.Prefetch)*max(tokens, 0)
	if m.req.interval == 0 {
		wantReq, needReq = 0, 0
	}
	if m.tok.interval == 0 {
		wantTok, needTok = 0, 0
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.OpTimeout)
	defer cancel()
	start := time.Now()
	v, err := takeScript.Run(ctx, s.client, m.keys,
		m.req.interval, m.req.window, wantReq, needReq, m.tok.interval, m.tok.window, wantTok, needTok,
		s.token, presence.Microseconds()).Int64Slice()
	if err != nil {
		s.fail("take", m.id, err)
		return takeResult{err: err}
	}
	s.measured(time.Since(start), bound)
	s.up()
	if len(v) == 3 && v[0] == 0 {
		s.refused.Add(1)
		m.mu.Lock()
		if call != nil {
			// A late call the share admitted stays owed: the fleet is
			// told when the member next settles.
			call.replied = true
		}
		m.seenPods = int(v[2])
		m.refusals = min(m.refusals+1, 30)
		// A fleet's next turn may be centuries away (a rate near zero):
		// the wait saturates, where a sum would wrap round to the past.
		in := micros(v[1])
		in += min(m.spreadLocked(tokens), math.MaxInt64-in)
		m.blockedUntil = time.Now().Add(in)
		m.mu.Unlock()
		return takeResult{retryIn: in}
	}
	if len(v) != 4 {
		err := fmt.Errorf("unexpected reply %v", v)
		s.fail("take", m.id, err)
		return takeResult{err: err}
	}
	s.granted.Add(1)
	m.mu.Lock()
	m.seenPods = int(v[3])
	m.refusals = 0
	if time.Since(m.handAt) > s.opts.HoldFor {
		m.handReq, m.handTok = 0, 0
	}
	now := time.Now()
	if call != nil {
		call.replied = true
		switch {
		case !call.late:
			m.spendShareLocked(now, needReq, needTok)
		case !call.admitted:
			// Refused meanwhile: the call's turns are the next call's.
			needReq, needTok = 0, 0
		default:
			// Admitted meanwhile: the fleet has counted it now, so the
			// share owes nothing for it.
			m.share.lateReq = max(m.share.lateReq-call.req, 0)
			m.share.lateTok = max(m.share.lateTok-call.tok, 0)
		}
	}
	m.handReq += v[1] - needReq
	m.handTok += v[2] - needTok
	m.handAt = now
	m.mu.Unlock()
	return takeResult{ok: true}
}

// spreadLocked is a random delay added to the fleet's "next turn in"
// when it refuses. Every process it refused meanwhile heard the same
// instant and would come back at once for the one turn the fleet has by
// then: one take granted, the others refused again, turn after turn —
// about a take per contending process per granted turn. The delay spreads
// them out, the more the longer this process was refused in a row: none
// after a first refusal (the fleet's word stands), then over 1, 3, 7, …
// of the fleet's turns, up to Options.Pods (or the pods Redis counts; at
// least 4) of them:
// under contention the processes come back about one per turn, while one
// that contends with few others keeps a short wait. Turns nobody takes
// meanwhile stay in the fleet's bucket (up to its burst), and a grant
// ends the back-off. m.mu must be held.
func (m *member) spreadLocked(tokens int64) time.Duration {
	unit := m.req.interval
	if unit == 0 {
		unit = m.tok.interval * float64(max(tokens, 1))
	}
	pods := m.s.opts.Pods
	if pods == 0 {
		pods = m.seenPods
	}
	turns := min(int64(1)<<min(m.refusals-1, 20)-1, int64(max(pods, 4)))
	span := min(unit*float64(turns), maxWindow)
	if span < 1 {
		return 0
	}
	return micros(rand.Int64N(int64(span)))
}

// refillLocked starts a background prefetch when the turns at hand run
// low. m.mu must be held.
func (m *member) refillLocked(tokens int64) {
	low := m.req.interval > 0 && m.handReq < int64(m.s.opts.Prefetch+1)/2 ||
		m.tok.interval > 0 && m.handTok < tokens
	if !low || m.refilling || !m.s.healthy.Load() || m.s.ctx.Err() != nil {
		return
	}
	m.refilling = true
	s := m.s
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if s.ctx.Err() == nil {
			m.take(tokens, nil, s.bound())
		}
		m.mu.Lock()
		m.refilling = false
		m.mu.Unlock()
	}()
}

// Adjust implements ratelimit.Member: it corrects the fleet's tokens in
// the background.
func (m *member) Adjust(tokens int64) {
	if m.tok.interval == 0 || tokens == 0 {
		return
	}
	m.background("adjust", adjustScript, m.keys[1:2], m.tok.interval, m.tok.window, tokens)
}

// Hold implements ratelimit.Member: it holds the fleet's calls for d in
// the background, after an upstream 429.
func (m *member) Hold(d time.Duration) {
	if m.req.interval == 0 || d <= 0 {
		return
	}
	m.mu.Lock()
	m.handReq = 0
	m.mu.Unlock()
	m.background("hold", holdScript, m.keys[:1], m.req.interval, m.req.window, d.Microseconds())
}

// Refund implements ratelimit.Refunder: a call the store granted is not
// made after all (another limiter refused it). Its turn goes back among
// the turns at hand while the store uses Redis — it was the fleet's, and
// is dropped with them after HoldFor — or to the process's share while
// it does not. Nothing is sent to Redis.
func (m *member) Refund(tokens int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.s.healthy.Load() || m.s.ctx.Err() != nil {
		if m.share.on {
			now := float64(time.Since(m.s.epoch))
			if m.req.interval > 0 {
				m.share.req.refund(now, 1)
				m.share.owedReq = max(m.share.owedReq-1, 0)
			}
			if m.tok.interval > 0 {
				m.share.tok.refund(now, tokens)
				m.share.owedTok = max(m.share.owedTok-max(tokens, 0), 0)
			}
		}
		return
	}
	if m.req.interval > 0 {
		m.handReq++
	}
	if m.tok.interval > 0 {
		m.handTok += max(tokens, 0)
	}
	if m.share.on {
		// The share was spent for it too (see shareBucket).
		now := float64(time.Since(m.s.epoch))
		m.share.req.refund(now, 1)
		m.share.tok.refund(now, tokens)
	}
}

// Leave implements ratelimit.Member.
func (m *member) Leave() {}

func (m *member) background(op string, sc *redis.Script, keys []string, args ...any) {
	s := m.s
	if s.ctx.Err() != nil || !s.healthy.Load() {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(s.ctx, s.opts.OpTimeout)
		defer cancel()
		if err := sc.Run(ctx, s.client, keys, args...).Err(); err != nil {
			s.fail(op, m.id, err)
		}
	}()
}

func (s *Store) fail(op, id string, err error) {
	s.errs.Add(1)
	s.down()
	if s.opts.OnError != nil {
		s.opts.OnError(&Error{Op: op, Limit: id, Err: err})
	}
}

// checkHealth pings Redis in the background, at most every RetryHealth,
// while the store is unhealthy.
func (s *Store) checkHealth() {
	now := time.Now().UnixNano()
	if last := s.lastCheck.Load(); now-last < int64(s.opts.RetryHealth) || !s.lastCheck.CompareAndSwap(last, now) {
		return
	}
	if !s.checking.CompareAndSwap(false, true) || s.ctx.Err() != nil {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.checking.Store(false)
		ctx, cancel := context.WithTimeout(s.ctx, min(s.opts.OpTimeout, 4*s.maxBound()))
		defer cancel()
		if err := s.client.Ping(ctx).Err(); err != nil {
			s.unreachable.Store(true)
			return
		}
		s.up()
	}()
}
