package breaker

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/internal/attach"
	"github.com/tierguard/tierguard/internal/keyed"
	"github.com/tierguard/tierguard/internal/striped"
)

// State is a breaker's state. The numeric values are those of the state
// gauge otelx exports: closed 0, half-open 1, open 2.
type State uint8

const (
	// Closed lets every call through and counts failures.
	Closed State = 0
	// HalfOpen lets a limited number of probes through after the cooldown.
	HalfOpen State = 1
	// Open rejects every call until the cooldown ends.
	Open State = 2
)

// String returns "closed", "half_open" or "open".
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case HalfOpen:
		return "half_open"
	case Open:
		return "open"
	}
	return "invalid_state"
}

// ErrOpen reports that a breaker rejected a call. Errors returned by Allow
// and Do for a rejection match it with errors.Is.
var ErrOpen = errors.New("tierguard: circuit open")

// OpenError is the rejection of an open (or saturated half-open) breaker.
// It is built once per state change, so rejecting allocates nothing.
type OpenError struct {
	// Name is the breaker's name (Breaker.Name).
	Name string
	// Until is when the breaker lets probes through; zero when unknown
	// (forced open, or half-open with every probe slot taken).
	Until time.Time
	// HalfOpen is set when the breaker is half-open and all its probe slots
	// are taken.
	HalfOpen bool
}

// Error names the breaker.
func (e *OpenError) Error() string {
	if e.HalfOpen {
		return "tierguard: circuit " + strconv.Quote(e.Name) + " half-open, probes in flight"
	}
	return "tierguard: circuit " + strconv.Quote(e.Name) + " open"
}

// Is reports whether target is ErrOpen.
func (e *OpenError) Is(target error) bool { return target == ErrOpen }

// RetryIn returns the time until the next probe may pass, 0 when it may
// already pass or is unknown.
func (e *OpenError) RetryIn() time.Duration {
	if e.Until.IsZero() {
		return 0
	}
	return max(time.Until(e.Until), 0)
}

// Verdict classifies the rejection: a local refusal, no upstream call made,
// with the time to the next probe as its retry-after.
func (e *OpenError) Verdict() classify.Verdict {
	return classify.Verdict{Class: classify.Rejected, RetryAfter: e.RetryIn(), Reason: "circuit open"}
}

// Transition describes one state change. Only real changes are
// transitions: From and To differ, except when forcing starts or ends
// (ForceOpen on a tripped breaker, ForceClosed on a closed one, Reset of a
// forced one), which changes how the breaker behaves in the same state.
type Transition struct {
	// Name is the breaker's name (Breaker.Name).
	Name string
	// From and To are the states before and after.
	From, To State
	// Reason is a short fixed phrase: "consecutive failures",
	// "failure ratio", "slow calls", "cooldown elapsed", "probe succeeded",
	// "probe failed", "slow probes", "probe timed out", "forced open",
	// "forced closed", "reset", "shared".
	Reason string
	// At is when the change happened.
	At time.Time
	// Generation numbers the breaker's states; it grows by one per change.
	Generation uint64
	// OpenUntil is when an open breaker will let probes through (zero if
	// not open or forced open).
	OpenUntil time.Time
	// Forced is set for ForceOpen and ForceClosed: a drill, not a verdict
	// on the upstream's health (a shared store keeps it local).
	Forced bool
}

// String renders the transition for logs and test failures, e.g.
// "pro: closed -> open (consecutive failures), until 15:04:05.000".
func (t Transition) String() string {
	s := t.Name + ": " + t.From.String() + " -> " + t.To.String() + " (" + t.Reason + ")"
	if !t.OpenUntil.IsZero() {
		s += ", until " + t.OpenUntil.Format("15:04:05.000")
	}
	return s
}

// phase is one state of a breaker, from one transition to the next. It is
// immutable but for its counters and its timer (set under the breaker's
// lock), and it is the generation: a call reports
// its outcome to the phase that admitted it, so a result from an earlier
// state can never change a later one.
type phase struct {
	state  State
	forced bool
	// Half-open: whether a timer will check the probes' waits.
	armed atomic.Bool
	gen   uint64

	// Closed: counted failures in a row, and the rolling window.
	failures atomic.Int64
	win      *window

	// Half-open: probe successes in a row. The probe slots belong to the
	// breaker (probes), so that the limit holds across half-open periods.
	successes atomic.Int64
	slows     atomic.Int64
	// Half-open: when the period began (the breaker's monotonic clock).
	start int64

	// The breaker's count of refusals when the phase began.
	rejectedBefore int64

	// Open and half-open: the error callers get, built once.
	rejection *OpenError
	until     time.Time
	timer     *time.Timer
}

// Breaker is a circuit breaker. It is safe for concurrent use; the closed
// path is an atomic load and no allocation, the open path an atomic load
// and an add to a counter it rarely shares.
type Breaker struct {
	cur atomic.Pointer[phase]
	// cfg is the normalized config and the clock's origin, shared by
	// every member of a Group: a member's own Name is cfg.Name+"/"+key
	// (see Config).
	cfg *shared
	// key is a Group member's key, when keyed is set.
	key string
	// name is what errors, transitions and metrics call a Group member
	// (see Name), made the first time they do: most members of a large
	// group stay idle and unnamed.
	name atomic.Pointer[string]

	// probes are the half-open probe slots, shared by every half-open
	// period; made at the first half-open period (see slots), so that an
	// idle breaker holds none.
	probes atomic.Pointer[probeSlots]
	// rejects counts refused calls; nil until the first one.
	rejects atomic.Pointer[striped.Counter]

	mu sync.Mutex
	// trips counts trips since the last close, for cooldown growth.
	trips  int32
	keyed  bool
	member Member

	// hooks holds what Observe and Attach added, nil until the first;
	// copy-on-write under mu. One pointer for both keeps a Breaker in its
	// 96-byte size class: a Group holds one per key.
	hooks atomic.Pointer[hooks]
}

type listener struct{ fn func(Transition) }

// hooks are a breaker's listeners and attachments. A published hooks is
// never changed; its attachments, made once, keep their own lock.
type hooks struct {
	listeners []*listener
	attached  *attach.Set
}

// withLocked publishes a copy of b's hooks changed by edit; b.mu is held.
func (b *Breaker) withLocked(edit func(h *hooks)) {
	var next hooks
	if cur := b.hooks.Load(); cur != nil {
		next.listeners = append(next.listeners, cur.listeners...)
		next.attached = cur.attached
	}
	edit(&next)
	b.hooks.Store(&next)
}

// New returns a breaker configured by cfg, or an error naming every invalid
// field.
func New(cfg Config) (*Breaker, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	return newShared(&shared{Config: cfg, epoch: time.Now()}, "", false)
}

// shared is what the members of a Group have in common: the normalized
// config and the origin of the monotonic clock their windows use.
type shared struct {
	Config
	epoch time.Time
}

// newShared returns a breaker of the normalized config cfg, which it may
// share with others; a Group member (keyed) is cfg.Name+"/"+key to its
// Store (see Name for what it calls itself).
func newShared(cfg *shared, key string, keyed bool) (*Breaker, error) {
	b := &Breaker{cfg: cfg, key: key, keyed: keyed}
	b.cur.Store(b.closedPhase(0, false))
	if cfg.Store != nil {
		m, err := cfg.Store.Join(b.storeName(), local{weak.Make(b)})
		if err != nil {
			return nil, err
		}
		if m == nil {
			return nil, errors.New("breaker: Store.Join returned no Member and no error")
		}
		b.member = m
		runtime.AddCleanup(b, Member.Leave, m)
	}
	return b, nil
}

// Name returns the name the breaker goes by in errors, transitions, logs
// and metrics: Config.Name, except for a Group member whose key is hidden
// (see NewGroup).
func (b *Breaker) Name() string {
	if !b.keyed {
		return b.cfg.Name
	}
	if n := b.name.Load(); n != nil {
		return *n
	}
	n := keyed.Name(b.cfg.Name, b.key, b.cfg.KeysInNames)
	// Racing callers make equal names: whichever is kept will do.
	b.name.CompareAndSwap(nil, &n)
	return *b.name.Load()
}

// State returns the current state.
func (b *Breaker) State() State { return b.cur.Load().state }

// generation returns the current state's generation number.
func (b *Breaker) generation() uint64 { return b.cur.Load().gen }

// Config returns the breaker's configuration with defaults filled in.
func (b *Breaker) Config() Config {
	c := b.cfg.Config
	c.Name = b.storeName()
	return c
}

// storeName is the name a Store knows the breaker by: Config.Name.
func (b *Breaker) storeName() string {
	if b.keyed {
		return b.cfg.Name + "/" + b.key
	}
	return b.cfg.Name
}

// slots returns the probe slots, making them on first use.
func (b *Breaker) slots() *probeSlots {
	if p := b.probes.Load(); p != nil {
		return p
	}
	b.probes.CompareAndSwap(nil, newProbeSlots(b.cfg.HalfOpenProbes))
	return b.probes.Load()
}

func (b *Breaker) closedPhase(gen uint64, forced bool) *phase {
	p := &phase{state: Closed, gen: gen, forced: forced, rejectedBefore: b.rejected()}
	if b.cfg.windowed() && !forced {
		p.win = newWindow(b.cfg.Window, b.now())
	}
	return p
}

// now is the monotonic time since the breaker was made, in nanoseconds.
func (b *Breaker) now() int64 { return int64(time.Since(b.cfg.epoch)) }

// Token is the permission to make one call. Report its outcome exactly once
// with Done (or Report); a token from a rejected Allow is inert.
type Token struct {
	b  *Breaker
	ph *phase
	// start is when the call was admitted (on the breaker's monotonic
	// clock), when slow calls are timed, and always for a probe: its
	// slot holds start+1 as its ticket.
	start int64
	// probe is the probe's slot plus one; 0 for a call admitted while
	// closed. The token stays four words, returned in registers.
	probe int32
}

// Allow asks to make one call. It returns an *OpenError (matching ErrOpen)
// when the breaker is open, or half-open with every probe slot taken.
func (b *Breaker) Allow() (Token, error) {
	ph := b.cur.Load()
	switch ph.state {
	case Closed:
		t := Token{b: b, ph: ph}
		if b.cfg.SlowCallDuration > 0 && ph.win != nil {
			t.start = b.now()
		}
		return t, nil
	case Open:
		b.reject()
		return Token{}, ph.rejection
	}
	return b.allowProbe(ph)
}

func (b *Breaker) allowProbe(ph *phase) (Token, error) {
	now := b.now()
	slot, ticket, ok := b.slots().take(now)
	if !ok {
		b.reject()
		return Token{}, ph.rejection
	}
	if b.member != nil && !b.member.TryProbe() {
		if b.slots().claim(slot, ticket) {
			b.slots().free(slot)
		}
		b.reject()
		return Token{}, ph.rejection
	}
	// The slot is taken before armed is read, and the check clears armed
	// before it reads the slots: either the check sees this probe, or this
	// sees that no check is due and arms one.
	if b.cfg.MaxHalfOpenWait > 0 && !ph.armed.Load() {
		b.mu.Lock()
		if b.cur.Load() == ph {
			b.armLocked(ph)
		}
		b.mu.Unlock()
	}
	return Token{b: b, ph: ph, start: now, probe: slot + 1}, nil
}

// armLocked sets ph's timer to check the probes when the first of them
// has waited MaxHalfOpenWait, unless one is set or no probe is held. b.mu
// must be held and ph must be the current, half-open, phase.
func (b *Breaker) armLocked(ph *phase) {
	if b.cfg.MaxHalfOpenWait <= 0 || ph.armed.Load() {
		return
	}
	first, ok := b.slots().oldest()
	if !ok {
		return
	}
	ph.armed.Store(true)
	due := time.Duration(first + int64(b.cfg.MaxHalfOpenWait) - b.now())
	ph.timer = time.AfterFunc(max(due, 0), func() { b.checkProbes(ph) })
}

// checkProbes writes off the probes that have waited MaxHalfOpenWait. If
// one of them was admitted in the current half-open period ph, the breaker
// reopens; otherwise the timer is set for the next probe due.
func (b *Breaker) checkProbes(ph *phase) {
	b.mu.Lock()
	if b.cur.Load() != ph {
		b.mu.Unlock()
		return
	}
	ph.armed.Store(false)
	current := false
	b.slots().writeOff(b.now()-int64(b.cfg.MaxHalfOpenWait), func(start int64) {
		// The fleet-wide permit goes back too, before the slot.
		if b.member != nil {
			b.member.ReleaseProbe()
		}
		if start >= ph.start {
			current = true
		}
	})
	if !current {
		b.armLocked(ph)
		b.mu.Unlock()
		return
	}
	tr := b.switchLocked(Open, "probe timed out", false, time.Time{})
	b.mu.Unlock()
	b.announce(tr, true)
}

// Stale reports whether the breaker has changed state since the token was
// issued (for a closed-state token: it tripped, or was reset or forced).
// Its outcome will be ignored; a caller about to retry should stop.
func (t Token) Stale() bool { return t.ph != nil && t.b.cur.Load() != t.ph }

// IsProbe reports whether the token admitted a half-open probe.
func (t Token) IsProbe() bool { return t.probe != 0 }

// Done reports the outcome of the call the token admitted.
func (t Token) Done(o Outcome) {
	if t.ph == nil {
		return
	}
	if t.probe != 0 {
		t.b.probeDone(t, o)
		return
	}
	t.b.closedDone(t, o)
}

// Report reports err's outcome, as decided by the breaker's Config.Outcome.
func (t Token) Report(err error) {
	if t.ph == nil {
		return
	}
	if err == nil {
		t.Done(Success)
		return
	}
	t.Done(t.b.cfg.Outcome(err))
}

func (b *Breaker) closedDone(t Token, o Outcome) {
	ph := t.ph
	if ph.forced {
		return
	}
	if o == Ignored {
		return
	}
	if b.member != nil {
		b.member.Record(o)
	}
	if o == Success {
		if ph.failures.Load() != 0 {
			ph.failures.Store(0)
		}
	} else if n := ph.failures.Add(1); b.cfg.ConsecutiveFailures > 0 && n >= int64(b.cfg.ConsecutiveFailures) {
		b.trip(ph, "consecutive failures")
		return
	}
	if ph.win == nil {
		return
	}
	now := b.now()
	slow := b.cfg.SlowCallDuration > 0 && now-t.start >= int64(b.cfg.SlowCallDuration)
	ph.win.record(now, o == Failure, slow)
	// Every outcome is checked, successes included: the call that brings the
	// window to MinCalls decides whatever it was, and calls leaving the
	// window can raise a ratio without any new failure.
	total, failures, slows := ph.win.sum(now)
	if total < int64(b.cfg.MinCalls) {
		return
	}
	switch {
	case b.cfg.FailureRatio > 0 && float64(failures) >= b.cfg.FailureRatio*float64(total):
		b.trip(ph, "failure ratio")
	case b.cfg.SlowCallDuration > 0 && float64(slows) >= b.cfg.SlowCallRatio*float64(total):
		b.trip(ph, "slow calls")
	}
}

func (b *Breaker) probeDone(t Token, o Outcome) {
	slot := t.probe - 1
	if !b.slots().claim(slot, ticketOf(t.start)) {
		// The probe was written off: its slot is no longer its own, and
		// its report comes too late to decide anything.
		return
	}
	// The fleet-wide permit goes back before the local slot, so that a
	// store never sees more permits held than probes in flight.
	if b.member != nil {
		b.member.ReleaseProbe()
	}
	b.slots().free(slot)
	ph := t.ph
	if b.cur.Load() != ph {
		// A probe of an earlier period: it held its slot until now, but
		// decides nothing in this one.
		return
	}
	switch o {
	case Success:
		if b.cfg.SlowCallDuration > 0 && b.now()-t.start >= int64(b.cfg.SlowCallDuration) {
			ph.slows.Add(1)
		}
		n := ph.successes.Add(1)
		if n < int64(b.cfg.ProbeSuccesses) {
			return
		}
		// Slow successes count as successes in the run; their share
		// decides, as the slow-call ratio does while closed.
		if b.cfg.SlowCallDuration > 0 && float64(ph.slows.Load()) >= b.cfg.SlowCallRatio*float64(n) {
			b.transition(ph, Open, "slow probes", false)
			return
		}
		b.transition(ph, Closed, "probe succeeded", false)
	case Failure:
		b.transition(ph, Open, "probe failed", false)
	}
}

// trip opens a closed breaker.
func (b *Breaker) trip(ph *phase, reason string) { b.transition(ph, Open, reason, false) }

// transition moves the breaker from phase from to state to, unless another
// transition got there first. Hooks run after the lock is released.
func (b *Breaker) transition(from *phase, to State, reason string, forced bool) {
	b.mu.Lock()
	if from != nil && b.cur.Load() != from {
		b.mu.Unlock()
		return
	}
	tr := b.switchLocked(to, reason, forced, time.Time{})
	b.mu.Unlock()
	b.announce(tr, true)
}

// switchLocked installs a new phase in state to. openUntil, when set, is an
// open phase's end decided elsewhere (a shared store); otherwise the
// cooldown decides it. b.mu must be held.
func (b *Breaker) switchLocked(to State, reason string, forced bool, openUntil time.Time) Transition {
	old := b.cur.Load()
	if old.timer != nil {
		old.timer.Stop()
	}
	gen := old.gen + 1
	now := time.Now()
	var ph *phase
	switch to {
	case Closed:
		b.trips = 0
		ph = b.closedPhase(gen, forced)
	case HalfOpen:
		ph = &phase{state: HalfOpen, gen: gen, start: b.now(), rejectedBefore: b.rejected()}
		ph.rejection = &OpenError{Name: b.Name(), HalfOpen: true}
		// Probes of earlier periods may still hold slots: their waits
		// run on.
		defer b.armLocked(ph)
	case Open:
		ph = &phase{state: Open, gen: gen, forced: forced, rejectedBefore: b.rejected()}
		if !forced {
			var cooldown time.Duration
			if openUntil.IsZero() {
				b.trips++
				cooldown = b.cooldown()
				openUntil = now.Add(cooldown)
			} else {
				cooldown = max(openUntil.Sub(now), 0)
			}
			ph.until = openUntil
			ph.timer = time.AfterFunc(cooldown, func() {
				b.transition(ph, HalfOpen, "cooldown elapsed", false)
			})
		}
		ph.rejection = &OpenError{Name: b.Name(), Until: ph.until}
	}
	b.cur.Store(ph)
	return Transition{Name: b.Name(), From: old.state, To: to, Reason: reason, At: now, Generation: gen, OpenUntil: ph.until, Forced: forced}
}

// cooldown returns the cooldown for the current trip: Cooldown, doubled for
// every trip since the last close up to MaxCooldown, spread by the jitter.
func (b *Breaker) cooldown() time.Duration {
	d := b.cfg.Cooldown
	for i := int32(1); i < b.trips && d < b.cfg.MaxCooldown; i++ {
		if d > b.cfg.MaxCooldown/2 {
			d = b.cfg.MaxCooldown // doubling would pass the cap (or overflow)
			break
		}
		d *= 2
	}
	d = min(d, b.cfg.MaxCooldown)
	if j := b.cfg.CooldownJitter; j > 0 {
		f := float64(d) * (1 - j + 2*j*rand.Float64())
		if f >= float64(math.MaxInt64) {
			return time.Duration(math.MaxInt64)
		}
		d = time.Duration(f)
	}
	return d
}

func (b *Breaker) announce(tr Transition, publish bool) {
	if publish && b.member != nil {
		b.member.Transitioned(tr)
	}
	if h := b.hooks.Load(); h != nil {
		for _, l := range h.listeners {
			l.fn(tr)
		}
	}
}

// Observe calls fn after every transition from now on, outside any lock,
// in the goroutine that caused the transition (for the end of a cooldown,
// a timer's goroutine, where a panic of fn is not recovered), until the
// returned function is called. Instrumentation such as otelx uses it to watch breakers it did
// not create.
func (b *Breaker) Observe(fn func(Transition)) (remove func()) {
	l := &listener{fn: fn}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.withLocked(func(h *hooks) { h.listeners = append(h.listeners, l) })
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.withLocked(func(h *hooks) {
			h.listeners = slices.DeleteFunc(h.listeners, func(x *listener) bool { return x == l })
		})
	}
}

// Attach returns the value attached to b under key — made by calling
// newValue, the first time a key is asked for — and the function that lets
// go of it. The value stays attached until everyone who got it has let go,
// then goes, and asking again makes a new one. It lets code that watches
// breakers it did not create share state per breaker without a registry
// of its own: otelx keeps there what must happen once per breaker however
// many chains and Instrumentations watch it, such as counting a
// transition. key must be comparable (Attach panics otherwise), and of a
// type of the caller's own, as a context key is, so that two packages
// cannot collide. newValue runs under a lock of b's attachments: it must
// not call Attach. Calling detach more than once lets go once.
func (b *Breaker) Attach(key any, newValue func() any) (value any, detach func()) {
	return b.attachments().Attach("breaker", key, newValue)
}

// attachments returns b's attachments, made on first use.
func (b *Breaker) attachments() *attach.Set {
	if h := b.hooks.Load(); h != nil && h.attached != nil {
		return h.attached
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if h := b.hooks.Load(); h != nil && h.attached != nil {
		return h.attached
	}
	set := new(attach.Set)
	b.withLocked(func(h *hooks) { h.attached = set })
	return set
}

// ForceOpen opens the breaker and keeps it open, rejecting every call,
// until ForceClosed or Reset. For drills: see what your service does when a
// model is gone. On a breaker already forced open it does nothing.
func (b *Breaker) ForceOpen() { b.force(Open, "forced open") }

// ForceClosed closes the breaker and keeps it closed whatever the outcomes,
// until ForceOpen or Reset. On a breaker already forced closed it does
// nothing.
func (b *Breaker) ForceClosed() { b.force(Closed, "forced closed") }

// Reset returns the breaker to a fresh closed state: counters cleared,
// cooldown growth forgotten, forcing undone. Probes still in flight keep
// their slots until they report: their calls are still running.
func (b *Breaker) Reset() {
	b.mu.Lock()
	old := b.cur.Load()
	tr := b.switchLocked(Closed, "reset", false, time.Time{})
	b.mu.Unlock()
	if old.state == Closed && !old.forced {
		// Counters were cleared, but nothing a hook counts as a
		// transition happened.
		return
	}
	b.announce(tr, true)
}

func (b *Breaker) force(to State, reason string) {
	b.mu.Lock()
	if cur := b.cur.Load(); cur.forced && cur.state == to {
		// Already forced there: nothing changes, so nothing is announced
		// (a hook or a metric would count it as a change).
		b.mu.Unlock()
		return
	}
	tr := b.switchLocked(to, reason, true, time.Time{})
	b.mu.Unlock()
	b.announce(tr, true)
}

// Do runs fn with ctx if b allows it and reports fn's outcome with the
// breaker's Config.Outcome. Like bulkhead.Do and retry.Do, it leaves ctx to
// fn: a call that fails because ctx ended counts as Ignored under the
// default outcome. A panic in fn releases a probe slot without deciding
// anything, then continues.
func Do[T any](ctx context.Context, b *Breaker, fn func(context.Context) (T, error)) (T, error) {
	tok, err := b.Allow()
	if err != nil {
		var zero T
		return zero, err
	}
	done := false
	defer func() {
		if !done {
			tok.Done(Ignored)
		}
	}()
	v, err := fn(ctx)
	done = true
	tok.Report(err)
	return v, err
}
