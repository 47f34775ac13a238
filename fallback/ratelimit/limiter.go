package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/internal/keyed"
	"github.com/tierguard/tierguard/internal/subscribers"
)

// Defaults applied to zero fields of Config.
const (
	defaultPer      = time.Minute
	defaultMinShare = 0.125
	// recovery is the share of the slowdown left after a call passes:
	// about 17 calls bring a halved rate back within a tenth of its
	// configured value.
	recovery = 7.0 / 8
)

// ErrLimited reports a call refused by a limiter: it could not be admitted
// in the time the caller had. Errors returned by Wait and Do match it with
// errors.Is.
var ErrLimited = errors.New("tierguard: rate limited locally")

// ErrTooLarge reports a call a limiter can never admit: its tokens exceed
// the limiter's TokenBurst, so no wait makes room for it. It is
// fallback.ErrTooLarge, so that a chain's error, whose every tier skipped
// the request as too large (fallback.SkipTooLarge), matches it too. Such
// an error matches ErrLimited as well (a limiter refused the call): test
// for ErrTooLarge first — a gateway answers 413 to it, not 429.
var ErrTooLarge = fallback.ErrTooLarge

// LimitedError is the error of a refused call.
type LimitedError struct {
	// Name is the limiter's name.
	Name string
	// RetryIn is how long until the call could have been admitted; 0 when
	// it never can (TooLarge, or its turn beyond the limiter's clock).
	RetryIn time.Duration
	// TooLarge is set when the call can never be admitted: its tokens
	// exceed the limiter's TokenBurst. The error then matches ErrTooLarge.
	TooLarge bool
}

// Error names the limiter and when to come back.
func (e *LimitedError) Error() string {
	if e.TooLarge {
		return "tierguard: rate limiter " + strconv.Quote(e.Name) + ": the call exceeds the token burst: never admissible"
	}
	if e.RetryIn <= 0 {
		return "tierguard: rate limiter " + strconv.Quote(e.Name) + ": the call exceeds the burst"
	}
	return "tierguard: rate limiter " + strconv.Quote(e.Name) + ": limited, retry in " + e.RetryIn.String()
}

// Is reports whether target is ErrLimited, or ErrTooLarge for a call
// that can never be admitted.
func (e *LimitedError) Is(target error) bool {
	return target == ErrLimited || e.TooLarge && target == ErrTooLarge
}

// Verdict classifies the refusal as Rejected: no upstream call was made.
func (e *LimitedError) Verdict() classify.Verdict {
	if e.TooLarge {
		return classify.Verdict{Class: classify.Rejected, Reason: "never admissible: exceeds the token burst"}
	}
	return classify.Verdict{Class: classify.Rejected, Reason: "rate limited locally", RetryAfter: e.RetryIn}
}

// Config configures a Limiter: requests per Per, tokens per Per, or both.
type Config struct {
	// Name names the limiter in errors and for observers; in a Group, the
	// prefix of its members' names. Required.
	Name string
	// Requests is the number of calls allowed in any window of Per; 0
	// means no request limit. When set it must exceed Burst.
	Requests int
	// Tokens is the number of tokens (prompt and answer together) allowed
	// in any window of Per; 0 means no token limit. When set it must
	// exceed TokenBurst.
	Tokens int64
	// Per is the quota's window; 0 means a minute, the window of the
	// per-minute quotas model APIs publish.
	Per time.Duration
	// Burst is how many calls may start at once when the limiter is full.
	// Calls then come back at (Requests − Burst) per Per, so that no
	// window of Per ever holds more than Requests calls: an upstream that
	// counts over a sliding minute never sees the quota exceeded. 0 means
	// a tenth of Requests (at least 1).
	Burst int
	// TokenBurst is, in the same way, the tokens that may be spent at once;
	// a call estimated above it is never admitted. 0 means a quarter of
	// Tokens.
	TokenBurst int64
	// MinShare is the least share of its configured rate a limiter lowers
	// itself to after upstream 429s (see Limiter.Throttle); 1 disables the
	// lowering (the wait a 429 asks for still holds). 0 means 1/8.
	MinShare float64
	// Store shares the quota with other processes; nil keeps it local.
	Store Store
	// KeysInNames makes a Group name its members Name+"/"+key, the key as
	// it is; without it a member is named Name+"/#"+ a short hash of its
	// key, because a key is often a tenant id or an API key. Outside a
	// Group it changes nothing.
	KeysInNames bool
}

// Store shares limiters' quotas across processes. A Store must keep every
// decision local-first: it is asked only for calls the local limiter
// admits (now, or to act after a wait: their fleet turn is taken when
// they are admitted), and a slow or unreachable backend never makes a
// call wait longer than the store's own bound; without its backend a
// store decides alone (redislimit: by the process's share of the quota,
// or on the local limit).
type Store interface {
	// Join registers a limiter by name with its fleet-wide quota.
	Join(name string, q Quota) (Member, error)
}

// Quota is a limiter's fleet-wide quota, as its Config says it: each field
// means what Config's field of the same name means, with the defaults
// filled in (Per, Burst and TokenBurst are never zero for a limit that is
// set), so that a Store shapes its shared bucket as the local one.
type Quota struct {
	Requests   int
	Tokens     int64
	Per        time.Duration
	Burst      int
	TokenBurst int64
}

// Member is one limiter's part in a Store. A Member may also implement
// Refunder.
type Member interface {
	// Take asks the fleet for one call of tokens tokens. ok is false when
	// the fleet's quota is spent, with the time until it is back; a store
	// that cannot tell in time answers true.
	Take(tokens int64) (ok bool, retryIn time.Duration)
	// Adjust corrects an earlier Take by tokens (negative: give back). It
	// must not block.
	Adjust(tokens int64)
	// Hold asks the fleet to admit nothing for d, after an upstream 429.
	// It must not block.
	Hold(d time.Duration)
	// Leave releases the member.
	Leave()
}

// Refunder is implemented by a Member that can take back the turn of a
// call it granted (Take answered true) when the call is not made after
// all: another limiter refused it, or the caller gave up. Without it the
// fleet is given back the call's tokens (Adjust) but not its request.
type Refunder interface {
	// Refund gives back one call of tokens tokens granted by Take. It
	// must not block.
	Refund(tokens int64)
}

// Limiter admits calls at a configured rate: requests per minute, tokens
// per minute, or both, as model APIs publish their quotas. It is safe for
// concurrent use; admitting a call is a compare-and-swap per limit, with
// no lock and no allocation.
//
// Nothing pads the struct, and the members of a Group share their
// configuration: a Group holds many, mostly idle. An admission writes its
// bucket's word and a counter here; the fields it reads share those lines.
type Limiter struct {
	// shape is the normalized config and the clock's origin, shared by
	// every member of a Group: a member is shape.Name+"/"+key to its
	// Store (see Config).
	shape *shape
	key   string
	keyed bool
	// name is what errors and observers call a Group member (see Name),
	// made the first time they do: most members of a large group stay
	// idle and unnamed.
	name     atomic.Pointer[string]
	req, tok *bucket
	member   Member
	// hold is when the wait an upstream 429 asked for ends (nanoseconds
	// since epoch).
	hold atomic.Int64

	// observers is made by the first Observe: an idle member holds none.
	observers atomic.Pointer[subscribers.List[func(Event)]]

	admitted, delayed, refused, cancelled atomic.Uint64
	throttles                             atomic.Uint64
}

// shape is what the members of a Group have in common.
type shape struct {
	cfg      Config
	epoch    time.Time
	minShare float64
	// req and tok are the rates of the limits set.
	req, tok *rate
}

// New returns a limiter, or an error naming every invalid field.
func New(cfg Config) (*Limiter, error) {
	sh, err := newShape(cfg)
	if err != nil {
		return nil, err
	}
	return newLimiter(sh, "", false)
}

// newShape checks cfg and fills in its defaults.
func newShape(cfg Config) (*shape, error) {
	var errs []error
	invalid := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if cfg.Per < 0 {
		invalid("Per must not be negative, got %v", cfg.Per)
	}
	per := cfg.Per
	if per == 0 {
		per = defaultPer
	}
	if cfg.Requests < 0 {
		invalid("Requests must not be negative, got %d", cfg.Requests)
	}
	if cfg.Tokens < 0 {
		invalid("Tokens must not be negative, got %d", cfg.Tokens)
	}
	if cfg.Requests == 0 && cfg.Tokens == 0 {
		invalid("Requests or Tokens must be set")
	}
	if cfg.Burst < 0 || cfg.Requests > 0 && cfg.Burst >= cfg.Requests {
		invalid("Burst must be within [0, Requests), got %d", cfg.Burst)
	}
	if cfg.TokenBurst < 0 || cfg.Tokens > 0 && cfg.TokenBurst >= cfg.Tokens {
		invalid("TokenBurst must be within [0, Tokens), got %d", cfg.TokenBurst)
	}
	if math.IsNaN(cfg.MinShare) || cfg.MinShare < 0 || cfg.MinShare > 1 {
		invalid("MinShare must be within [0, 1], got %v", cfg.MinShare)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("rate limiter %q: invalid config: %w", cfg.Name, err)
	}
	sh := &shape{epoch: time.Now(), minShare: cfg.MinShare}
	if sh.minShare == 0 {
		sh.minShare = defaultMinShare
	}
	if cfg.Requests > 0 {
		if cfg.Burst == 0 {
			cfg.Burst = max(1, cfg.Requests/10)
			if cfg.Burst >= cfg.Requests {
				// One call per window: a burst of one, at that rate.
				cfg.Burst = 1
			}
		}
	}
	if cfg.Tokens > 0 {
		if cfg.TokenBurst == 0 {
			cfg.TokenBurst = max(1, cfg.Tokens/4)
		}
	}
	cfg.Per = per
	sh.cfg = cfg
	if cfg.Requests > 0 {
		sh.req = newRate(int64(per), int64(max(cfg.Requests-cfg.Burst, 1)), int64(cfg.Burst))
	}
	if cfg.Tokens > 0 {
		sh.tok = newRate(int64(per), cfg.Tokens-cfg.TokenBurst, cfg.TokenBurst)
	}
	return sh, nil
}

// newLimiter returns a limiter of shape sh, which it may share; a Group
// member (keyed) is sh's Name+"/"+key to its Store, and calls itself name
// in errors and events.
func newLimiter(sh *shape, key string, keyed bool) (*Limiter, error) {
	l := &Limiter{shape: sh, key: key, keyed: keyed}
	cfg := l.Config()
	if cfg.Requests > 0 {
		l.req = &bucket{}
		l.req.init(sh.req)
	}
	if cfg.Tokens > 0 {
		l.tok = &bucket{}
		l.tok.init(sh.tok)
	}
	per := cfg.Per
	if cfg.Store != nil {
		m, err := cfg.Store.Join(cfg.Name, Quota{Requests: cfg.Requests, Tokens: cfg.Tokens, Per: per, Burst: cfg.Burst, TokenBurst: cfg.TokenBurst})
		if err != nil {
			return nil, fmt.Errorf("rate limiter %q: joining the store: %w", l.Name(), err)
		}
		if m == nil {
			return nil, fmt.Errorf("rate limiter %q: Store.Join returned no Member and no error", l.Name())
		}
		l.member = m
	}
	return l, nil
}

// Name returns the limiter's name (for a Group member with hidden keys, the
// hashed name).
func (l *Limiter) Name() string {
	if !l.keyed {
		return l.shape.cfg.Name
	}
	if n := l.name.Load(); n != nil {
		return *n
	}
	n := keyed.Name(l.shape.cfg.Name, l.key, l.shape.cfg.KeysInNames)
	// Racing callers make equal names: whichever is kept will do.
	l.name.CompareAndSwap(nil, &n)
	return *l.name.Load()
}

// Config returns the limiter's configuration with defaults filled in.
func (l *Limiter) Config() Config {
	c := l.shape.cfg
	if l.keyed {
		c.Name += "/" + l.key
	}
	return c
}

// Close leaves the limiter's Store, if it has one.
func (l *Limiter) Close() {
	if l.member != nil {
		l.member.Leave()
	}
}

func (l *Limiter) now() int64 { return int64(time.Since(l.shape.epoch)) }

// Reservation is a call admitted now or later by Reserve, Take or
// TakeWithin, or refused by Take or TakeWithin (Retry). It is a small
// value: no allocation.
type Reservation struct {
	l                *Limiter
	at               int64
	reqAfter, reqC   int64
	tokAfter, tokC   int64
	reqAct, tokAct   int64
	tokens           int64
	delay            time.Duration
	ok, retry, taken bool
	fleet            bool
}

// OK reports whether the call can be admitted at all: false when its
// tokens exceed TokenBurst, or when Reserve finds its turn beyond the
// range of the limiter's clock (some 292 years on, at a rate near zero),
// and then nothing is held.
func (r Reservation) OK() bool { return r.ok }

// Delay is how long the caller must wait before making the call; 0 means
// at once.
func (r Reservation) Delay() time.Duration { return r.delay }

// Retry is set when nothing is held: the fleet's quota (Config.Store) is
// spent, or — from Take and TakeWithin — the call's turn comes later than
// the caller would wait. Delay then says when to try again.
func (r Reservation) Retry() bool { return r.retry }

// Cancel gives back the turn of a call that will not be made. A call
// admitted at once (no Delay when it was taken) gets its tokens back
// whole, even if calls admitted since were placed behind it — they were
// admitted with its tokens counted — unless a reservation to act later
// was placed behind it (its time to act counts on them). A reservation
// to act later gets its tokens back only before its time to act has
// come, and not those later reservations were scheduled on, as
// golang.org/x/time/rate's Reservation.Cancel does. A reservation that
// holds nothing (Retry, or not OK) cancels nothing.
func (r Reservation) Cancel() {
	if !r.taken {
		return
	}
	l := r.l
	l.giveBack(l.now(), r)
	if r.fleet {
		// The fleet granted the call.
		if f, ok := l.member.(Refunder); ok {
			f.Refund(r.tokens)
		} else if r.tokC != 0 {
			l.member.Adjust(-r.tokens)
		}
	}
	l.cancelled.Add(1)
}

// giveBack gives a reservation's tokens back to the local buckets: whole
// for a turn that was taken to act at once (refund), otherwise as
// x/time/rate's cancel does.
func (l *Limiter) giveBack(now int64, r Reservation) {
	if l.req != nil && r.reqC != 0 {
		if r.reqAct <= r.at {
			l.req.refund(now, r.reqAfter, r.reqC, r.reqAct)
		} else {
			l.req.cancel(now, r.reqAfter, r.reqC, r.reqAct)
		}
	}
	if l.tok != nil && r.tokC != 0 {
		if r.tokAct <= r.at {
			l.tok.refund(now, r.tokAfter, r.tokC, r.tokAct)
		} else {
			l.tok.cancel(now, r.tokAfter, r.tokC, r.tokAct)
		}
	}
}

// Reserve reserves one call that will use tokens tokens (0 when the
// limiter has no token limit, or the count is unknown), to be made after
// the reservation's Delay. Calls are served in the order they reserved.
//
// A caller that will not wait whatever the Delay should use Take (or
// TakeWithin) instead: Reserve takes a turn that comes later too, and a
// reservation to act later that is cancelled after another caller
// reserved behind it gives back only part of its turn, so reserving and
// cancelling under contention loses quota.
func (l *Limiter) Reserve(tokens int64) Reservation {
	return l.reserve(l.now(), tokens, math.MaxInt64, false)
}

// Take admits one call of tokens tokens if its turn is now: it takes the
// turn and returns a Reservation with no Delay. Otherwise it takes
// nothing — there is nothing to cancel — and returns a Reservation with
// Retry set and Delay saying how long until the call could be admitted
// (not OK when it never can: its tokens exceed TokenBurst). The check and
// the take are one compare-and-swap per limit, so callers that contend
// for the last turns lose none of them: it is how a caller that will not
// wait asks, where Reserve and Cancel would lose quota.
func (l *Limiter) Take(tokens int64) Reservation {
	now := l.now()
	return l.reserve(now, tokens, now, true)
}

// TakeWithin is Take for a caller that would wait up to maxWait: when the
// call's turn comes within maxWait it is taken, to act after the
// Reservation's Delay (≤ maxWait); otherwise nothing is taken, Retry is
// set and Delay says when the turn would come. A negative maxWait is 0.
func (l *Limiter) TakeWithin(tokens int64, maxWait time.Duration) Reservation {
	now := l.now()
	limit := int64(math.MaxInt64)
	if maxWait < time.Duration(math.MaxInt64-now) {
		limit = now + int64(max(maxWait, 0))
	}
	return l.reserve(now, tokens, limit, true)
}

// reserve reserves at now, unless the call could only act after limit:
// then nothing is held, and with take the refusal says Retry.
func (l *Limiter) reserve(now, tokens, limit int64, take bool) Reservation {
	if l.tok != nil && tokens > l.tok.burst {
		// Never: no wait makes room for it.
		l.refusal()
		return Reservation{l: l}
	}
	r := Reservation{l: l, at: now, tokens: tokens, ok: true, taken: true}
	if h := l.hold.Load(); h > limit {
		// A 429's wait reaches past what the caller would wait: take
		// nothing.
		l.refusal()
		return Reservation{l: l, ok: true, retry: take, delay: time.Duration(h - now)}
	}
	act := now
	if l.req != nil {
		after, a, c, ok := l.req.reserve(now, 1, limit)
		if !ok {
			l.refusal()
			return Reservation{l: l, ok: ok || a > limit, retry: take && a > limit, delay: time.Duration(max(a-now, 0))}
		}
		r.reqAfter, r.reqC, r.reqAct, act = after, c, a, max(act, a)
	}
	if l.tok != nil && tokens > 0 {
		after, a, c, ok := l.tok.reserve(now, tokens, limit)
		if !ok {
			if l.req != nil {
				l.giveBack(now, r)
			}
			l.refusal()
			return Reservation{l: l, ok: a > limit, retry: take && a > limit, delay: time.Duration(max(a-now, 0))}
		}
		r.tokAfter, r.tokC, r.tokAct, act = after, c, a, max(act, a)
	}
	if h := l.hold.Load(); h > act {
		// A 429's wait reaches past the buckets' own.
		if h > limit {
			// It came while the turns were taken.
			l.giveBack(now, r)
			l.refusal()
			return Reservation{l: l, ok: true, retry: take, delay: time.Duration(h - now)}
		}
		act = h
	}
	r.delay = time.Duration(act - now)
	if l.member != nil {
		// A call to be made later takes its fleet turn now too: counted a
		// little early by the fleet, rather than never.
		if ok, in := l.member.Take(tokens); !ok {
			l.giveBack(now, r)
			l.refusal()
			return Reservation{l: l, ok: true, retry: true, delay: max(in, r.delay, time.Millisecond)}
		}
		r.fleet = true
	}
	if r.delay > 0 {
		l.delayed.Add(1)
		return r
	}
	l.admitted.Add(1)
	return r
}

func (l *Limiter) refusal() {
	l.refused.Add(1)
	if l.observed() {
		l.tell(Event{Kind: Refused})
	}
}

// Admissible reports whether a call of tokens tokens can ever be admitted:
// false when they exceed TokenBurst, which no wait makes room for. It
// takes nothing.
func (l *Limiter) Admissible(tokens int64) bool {
	return l.tok == nil || tokens <= l.tok.burst
}

// Allow admits one call of tokens tokens if it can be made now, and
// reports whether it was. It is Take, as a bool.
func (l *Limiter) Allow(tokens int64) bool {
	r := l.Take(tokens)
	return r.ok && !r.retry
}

// Wait admits one call of tokens tokens, waiting for its turn unless that
// turn comes after ctx's deadline: then it returns a *LimitedError at once,
// without waiting and without taking a turn. A turn at the deadline
// itself is taken. It returns ctx's error if ctx ends first.
func (l *Limiter) Wait(ctx context.Context, tokens int64) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		maxWait := time.Duration(math.MaxInt64)
		d, limited := ctx.Deadline()
		if limited {
			maxWait = time.Until(d)
		}
		r := l.TakeWithin(tokens, maxWait)
		if !r.ok {
			return &LimitedError{Name: l.Name(), TooLarge: !l.Admissible(tokens)}
		}
		if r.delay == 0 && !r.retry {
			return nil
		}
		now := time.Now()
		if limited && d.Sub(now) < r.delay {
			r.Cancel()
			return &LimitedError{Name: l.Name(), RetryIn: r.delay}
		}
		due := now.Add(r.delay)
		t := time.NewTimer(r.delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			if !turnCame(ctx, due) {
				r.Cancel()
				return ctx.Err()
			}
		}
		if !r.retry {
			return nil
		}
	}
}

// turnCame reports whether a wait for a turn due at due, which ctx ended,
// still takes its turn: the deadline passed as the turn came. The turn was
// due no later than the deadline, so it is the caller's, whichever of the
// two the select saw first and whether or not its timer had fired (a
// timer due in the same instant may not have). A caller who cancels gives
// the turn back.
func turnCame(ctx context.Context, due time.Time) bool {
	return !time.Now().Before(due) && errors.Is(ctx.Err(), context.DeadlineExceeded)
}

// Adjust corrects the tokens a call was admitted with once its real usage
// is known: tokens more were used (negative: fewer). More is taken at once,
// which can put the limiter in debt that later calls wait out; fewer is
// given back, up to the burst.
func (l *Limiter) Adjust(tokens int64) {
	if l.tok == nil || tokens == 0 {
		return
	}
	l.tok.adjust(l.now(), tokens)
	if l.member != nil {
		l.member.Adjust(tokens)
	}
}

// Throttle tells the limiter that the upstream refused a call with a 429
// asking to wait d (0 when it said nothing): no call is admitted for d,
// and the rate is halved, down to MinShare of its configured value. It
// climbs back as calls pass (see Passed): each takes an eighth of the
// slowdown off. 429s that arrive during a wait already being served do
// not halve the rate again, so one burst of refusals counts once.
func (l *Limiter) Throttle(d time.Duration) {
	now := l.now()
	// The longest wait holds until the clock's end, not until it wraps.
	until := satAdd(now, int64(max(d, 0)))
	for {
		h := l.hold.Load()
		if now < h {
			// Within a wait already served: extend it, do not halve again.
			if until > h && !l.hold.CompareAndSwap(h, until) {
				continue
			}
			if until > h {
				l.holdBuckets(until)
			}
			return
		}
		if l.hold.CompareAndSwap(h, max(until, now+1)) {
			break
		}
	}
	l.throttles.Add(1)
	var slow float64
	for _, b := range []*bucket{l.req, l.tok} {
		if b == nil {
			continue
		}
		for {
			old := b.slow.Load()
			s := min(b.slowdown()*2, 1/l.shape.minShare)
			if b.slow.CompareAndSwap(old, math.Float64bits(s)) {
				slow = s
				break
			}
		}
	}
	l.holdBuckets(until)
	if l.member != nil && d > 0 {
		l.member.Hold(d)
	}
	if l.observed() {
		l.tell(Event{Kind: Throttled, Wait: max(d, 0), Slowdown: slow})
	}
}

func (l *Limiter) holdBuckets(until int64) {
	if l.req != nil {
		l.req.hold(until)
	}
	if l.tok != nil {
		l.tok.hold(until)
	}
}

// Passed tells the limiter that a call it admitted was served: after a 429
// each one brings the rate back closer to its configured value. While the
// rate is not lowered it is one atomic load per limit.
func (l *Limiter) Passed() {
	recovered := false
	for _, b := range [2]*bucket{l.req, l.tok} {
		if b == nil || b.slow.Load() == 0 {
			continue
		}
		for {
			old := b.slow.Load()
			if old == 0 {
				break
			}
			s := 1 + (math.Float64frombits(old)-1)*recovery
			next := math.Float64bits(s)
			if s < 1.01 {
				next = 0
			}
			if b.slow.CompareAndSwap(old, next) {
				recovered = recovered || next == 0
				break
			}
		}
	}
	if recovered && l.observed() {
		l.tell(Event{Kind: Recovered, Slowdown: 1})
	}
}

// Do runs fn once the limiter admits one call (without tokens), waiting as
// Wait does.
func Do[T any](ctx context.Context, l *Limiter, fn func(context.Context) (T, error)) (T, error) {
	if err := l.Wait(ctx, 0); err != nil {
		var zero T
		return zero, err
	}
	return fn(ctx)
}

// Stats is a snapshot of a limiter's figures.
type Stats struct {
	// Admitted counts calls admitted at once; Delayed, calls admitted to
	// act later; Refused, calls that could not be admitted (over the
	// burst, refused by Allow, or by the fleet); Cancelled, reservations
	// given back.
	Admitted, Delayed, Refused, Cancelled uint64
	// Throttles counts the upstream 429s that lowered the rate.
	Throttles uint64
	// Slowdown is how many times slower than configured the limiter runs
	// now (1: not lowered).
	Slowdown float64
	// Requests and Tokens are what could be spent at once now (negative
	// when reservations reach into the future); 0 for a limit not set.
	Requests, Tokens float64
}

// Stats returns the limiter's current figures.
func (l *Limiter) Stats() Stats {
	now := l.now()
	s := Stats{Admitted: l.admitted.Load(), Delayed: l.delayed.Load(), Refused: l.refused.Load(),
		Cancelled: l.cancelled.Load(), Throttles: l.throttles.Load(), Slowdown: 1}
	if l.req != nil {
		s.Requests, s.Slowdown = l.req.tokens(now), l.req.slowdown()
	}
	if l.tok != nil {
		s.Tokens = l.tok.tokens(now)
		s.Slowdown = max(s.Slowdown, l.tok.slowdown())
	}
	return s
}

// EventKind says what happened at a limiter.
type EventKind uint8

const (
	// Refused: a call could not be admitted (over the burst, refused by
	// Allow, by the fleet's quota).
	Refused EventKind = iota
	// Throttled: an upstream 429 lowered the rate (Slowdown) and holds
	// calls for Wait.
	Throttled
	// Recovered: the rate is back to its configured value.
	Recovered
)

// String names the kind.
func (k EventKind) String() string {
	switch k {
	case Refused:
		return "refused"
	case Throttled:
		return "throttled"
	case Recovered:
		return "recovered"
	}
	return "invalid"
}

// Event is something a limiter observer sees.
type Event struct {
	// Limiter is the limiter's name.
	Limiter string
	// Kind says what happened.
	Kind EventKind
	// Wait is the hold a 429 asked for (Throttled).
	Wait time.Duration
	// Slowdown is the factor the rate is lowered by (Throttled, Recovered).
	Slowdown float64
}

// Observe hands every refusal, throttle and recovery from now on to fn,
// and returns the function that stops it. fn runs on the caller's
// goroutine: keep it short and never block.
func (l *Limiter) Observe(fn func(Event)) (remove func()) {
	o := l.observers.Load()
	if o == nil {
		l.observers.CompareAndSwap(nil, new(subscribers.List[func(Event)]))
		o = l.observers.Load()
	}
	return o.Add(fn)
}

// observed reports whether anyone observes l: a load, or two once
// Observe was called.
func (l *Limiter) observed() bool {
	o := l.observers.Load()
	return o != nil && o.Load() != nil
}

func (l *Limiter) tell(e Event) {
	o := l.observers.Load()
	if o == nil {
		return
	}
	if fns := o.Load(); fns != nil {
		e.Limiter = l.Name()
		for _, fn := range fns {
			fn(e)
		}
	}
}
