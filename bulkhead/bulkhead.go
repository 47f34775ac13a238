package bulkhead

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/internal/attach"
)

// ErrFull reports that a bulkhead had no free slot (and, with a wait
// configured, that none freed up in time or the queue was full). Errors
// returned by Acquire match it with errors.Is.
var ErrFull = errors.New("tierguard: bulkhead full")

// FullError is the error a full bulkhead returns. Each bulkhead builds its
// own once, so rejecting allocates nothing.
type FullError struct {
	// Name is the bulkhead's name.
	Name string
	// Max is its number of slots (an adaptive bulkhead's ceiling).
	Max int
	// Adaptive is set for an adaptive bulkhead, whose limit at the time
	// of the refusal the error cannot tell: it is built once, so that
	// refusing allocates nothing.
	Adaptive bool
}

// Error names the bulkhead and its size.
func (e *FullError) Error() string {
	if e.Adaptive {
		return "tierguard: bulkhead " + strconv.Quote(e.Name) + " full (adaptive limit, at most " + strconv.Itoa(e.Max) + ")"
	}
	return "tierguard: bulkhead " + strconv.Quote(e.Name) + " full (" + strconv.Itoa(e.Max) + " in flight)"
}

// Is reports whether target is ErrFull.
func (e *FullError) Is(target error) bool { return target == ErrFull }

// Verdict classifies the rejection: a local refusal, no upstream call made.
func (e *FullError) Verdict() classify.Verdict {
	return classify.Verdict{Class: classify.Rejected, Reason: "bulkhead full"}
}

// EventKind says what happened to one call at a bulkhead.
type EventKind uint8

const (
	// Permitted: an acquisition got a slot.
	Permitted EventKind = iota
	// Rejected: an acquisition was refused — the bulkhead was full, its
	// queue was full, the wait ended, or the context ended.
	Rejected
	// Finished: a slot was released.
	Finished
)

// String names the kind.
func (k EventKind) String() string {
	switch k {
	case Permitted:
		return "permitted"
	case Rejected:
		return "rejected"
	case Finished:
		return "finished"
	}
	return "invalid"
}

// Event is one call at a bulkhead, as observers see it.
type Event struct {
	// Bulkhead is the bulkhead's name.
	Bulkhead string
	// Kind says what happened.
	Kind EventKind
	// Queued is set when the acquisition waited in the queue, and Wait is
	// how long (Permitted and Rejected only).
	Queued bool
	Wait   time.Duration
}

// Config configures a Bulkhead.
type Config struct {
	// Name names the bulkhead in errors and for observers; in a Group, the
	// prefix of its members' names. Required.
	Name string
	// Max is the number of calls in flight at once. Required.
	Max int
	// MaxWait, when positive, lets an acquisition wait up to MaxWait for a
	// slot, in a FIFO queue of at most Queue waiters; beyond the queue,
	// acquisitions are refused at once. A wait never outlasts the acquiring
	// context. 0, the default, fails fast: waiting for a slot only moves
	// the queue into your workers.
	MaxWait time.Duration
	// Queue bounds the waiters; required with MaxWait.
	Queue int
	// KeysInNames makes a Group name its members Name+"/"+key, the key as it
	// is, in errors and for observers and instrumentation. Use it when the
	// keys are public values, such as feature names; without it a member is
	// named Name+"/#"+ the first 12 hex digits of the key's SHA-256, because
	// a key is often a tenant or user id. Outside a Group it changes
	// nothing.
	KeysInNames bool
	// Adaptive, when set, lets the limit move between its Floor and
	// Ceiling from the calls' latencies and overload signals reported to
	// Record; Max is then the limit it starts at. nil keeps Max fixed.
	Adaptive *Adaptive
	// Reserve, with priorities (see Priority), is the share of the limit,
	// from 0 to 0.3, that each priority leaves to those above it: Critical
	// may use the whole limit, Interactive all but one share, Batch all but
	// two, Sheddable all but three. 0, the default, lets every priority use
	// every slot, and keeps the fast path free of any priority check.
	Reserve float64
}

// cacheLine is the size of a cache line, which the fast path's fields
// and state each have to themselves.
const cacheLine = 64

// inFlightMask is the part of Bulkhead.state that counts the slots held;
// the rest counts the acquisitions granted at once, wrapping.
const (
	inFlightMask   = 1<<32 - 1
	acceptedOne    = 1 << 32
	maxBulkheadMax = 1<<31 - 1
	// grant is what an acquisition adds to state: a slot and a count.
	grant = acceptedOne + 1
)

// Bulkhead.flags says whether an acquisition or a release has more to do
// than its add, so that both fast paths decide it on one load of a word
// they never write (a load of state itself, just after the add that wrote
// it, waits for that add to complete). Bit 0 is set while the bulkhead has
// observers; bit 1, the refusing hint, is set by an acquisition whose add
// found no free slot and cleared by the next release, so that a full
// bulkhead refuses on loads alone; the rest counts the acquisitions
// queued, and those about to try the queue.
const (
	observedFlag = 1 << 0
	refusingFlag = 1 << 1
	// priorityFlag is set for good on a bulkhead with a Config.Reserve:
	// each acquisition's bound depends on its priority, which only the
	// careful path reads.
	priorityFlag = 1 << 2
	waitingOne   = 1 << 3
	waitingShift = 3
)

// Bulkhead bounds the number of calls in flight. It is safe for concurrent
// use. The fail-fast path is one atomic add to take a slot and one to
// return it, with a load of flags beside each, and allocates nothing.
//
// Taking a slot and counting it is one fetch-and-add of one word (state):
// unlike a compare-and-swap loop, it never retries when another core got
// there first, so a slot taken and returned moves the line twice however
// many cores contend. An acquisition that finds the bulkhead full undoes
// its add with a second one; meanwhile state counts one slot too many,
// which can refuse an acquisition racing for a slot freed at that very
// instant (as if it had come a moment earlier) but never grants one past
// Max, and whoever undoes hands a freed slot to the queue as Release does.
// It also sets the refusing hint in flags: until the next release clears
// it, acquisitions read state before they add, and refuse on that read
// alone while no slot is free. Without the hint they add at once, as
// reading state just after an add wrote it costs as much as a tenth of
// the pair.
//
// The struct is two cache lines: the fields the fast path reads (max,
// flags) on the first, state alone on the second. Were they on one line,
// every load of the flags would fetch the line the other cores keep
// writing, and then fetch it again to write it: on two cores, parallel
// acquire-and-release pairs took 71 ns on one line and 46 on two. A
// Group holds one bulkhead per key, mostly idle, so everything a
// bulkhead needs only once it refuses, queues or is observed lives in
// extra, made on first use.
type Bulkhead struct {
	// max is the limit, where the fast path compares it: Config.Max, or
	// an adaptive bulkhead's current limit (written only when it moves,
	// seldom, so the line stays shared in every core's cache).
	max atomic.Uint64
	// flags holds the observed bit, the refusing hint and the count of
	// queued acquisitions (see observedFlag); the fast path takes the slow
	// one when any is set, where it defers to the queue so that a newcomer
	// cannot take a slot ahead of it.
	flags atomic.Int64
	// observers are added by Observe; copy-on-write, nil when none.
	observers atomic.Pointer[[]func(Event)]
	// cfg is the configuration, shared by the members of a Group; name is
	// this bulkhead's own Config.Name.
	cfg  *Config
	name string
	// extra is nil until the bulkhead first refuses, queues or is
	// observed.
	extra atomic.Pointer[extra]
	// tuning is an adaptive bulkhead's learning state and a priority
	// bulkhead's refusals by priority, made on first use; here, in what
	// was the line's padding, so that extra stays in its size class.
	tuning atomic.Pointer[tuning]
	// state holds the slots in flight (inFlightMask) and, above them, the
	// acquisitions granted without queueing, wrapping into extra.wraps.
	state atomic.Uint64
	// win is an adaptive bulkhead's window being filled, one add per call
	// reported (see callOne), and closing is held by the report that
	// closes it. They share state's line, which the calls they count have
	// just written: a report then moves no other line between cores, and
	// the bulkhead stays two lines.
	win     atomic.Uint64
	closing atomic.Bool
	_       [cacheLine - 20]byte
}

// extra is the part of a Bulkhead its fail-fast grants never touch.
type extra struct {
	// full is the error of a refusal, built once so that refusing
	// allocates nothing.
	full FullError

	// queued is the queue's length, for Stats: flags also counts, for an
	// instant, a newcomer about to be turned away by a full queue.
	queued atomic.Int64
	// rejected counts refusals; acceptedQueued, the acquisitions granted
	// after a wait in the queue.
	rejected, acceptedQueued atomic.Uint64
	// wraps counts how often state's count of acquisitions wrapped: each
	// add that carried out of it counts one, each undo that borrowed
	// takes one back.
	wraps atomic.Uint64

	obsMu   sync.Mutex
	obsList []*observerEntry
	// attached holds what Attach attached.
	attached attach.Set

	mu    sync.Mutex
	queue []*waiter
}

type waiter struct {
	ready    chan struct{}
	priority Priority
}

// New returns a bulkhead, or an error naming every invalid field.
func New(cfg Config) (*Bulkhead, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	return newShared(&cfg, cfg.Name), nil
}

// check reports every invalid field of cfg.
func (cfg *Config) check() error {
	var errs []error
	// Each message starts with the field it is about, as in breaker.Config.
	invalid := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if cfg.Max <= 0 || cfg.Max > maxBulkheadMax {
		invalid("Max must be positive and at most %d, got %d", maxBulkheadMax, cfg.Max)
	}
	switch {
	case cfg.MaxWait < 0:
		invalid("MaxWait must not be negative, got %v", cfg.MaxWait)
	case cfg.MaxWait > 0 && cfg.Queue <= 0:
		invalid("Queue must be positive with a MaxWait, got %d", cfg.Queue)
	case cfg.MaxWait == 0 && cfg.Queue != 0:
		invalid("Queue %d without a MaxWait", cfg.Queue)
	}
	errs = cfg.checkAdaptive(errs)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bulkhead %q: invalid config: %w", cfg.Name, err)
	}
	return nil
}

// newShared returns a bulkhead named name of the checked config cfg,
// which it may share with others.
func newShared(cfg *Config, name string) *Bulkhead {
	b := &Bulkhead{cfg: cfg, name: name}
	b.max.Store(uint64(cfg.Max))
	if cfg.Reserve > 0 {
		// Every acquisition takes the careful path, where its priority
		// is read.
		b.flags.Store(priorityFlag)
	}
	return b
}

// ext returns b's extra part, making it on first use.
func (b *Bulkhead) ext() *extra {
	if x := b.extra.Load(); x != nil {
		return x
	}
	return b.makeExt()
}

func (b *Bulkhead) makeExt() *extra {
	top := b.cfg.Max
	if a := b.cfg.Adaptive; a != nil {
		top = a.Ceiling
	}
	x := &extra{full: FullError{Name: b.name, Max: top, Adaptive: b.cfg.Adaptive != nil}}
	if b.extra.CompareAndSwap(nil, x) {
		return x
	}
	return b.extra.Load()
}

// Config returns the bulkhead's configuration.
func (b *Bulkhead) Config() Config {
	c := *b.cfg
	c.Name = b.name
	return c
}

// Name returns the bulkhead's name.
func (b *Bulkhead) Name() string { return b.name }

// TryAcquire takes a slot if one is free and nobody is queued for one. A
// refusal counts in Stats.Rejected, as a granted slot counts in Accepted.
// Having no context to read a priority from, it acquires as Interactive
// on a bulkhead with a Reserve.
func (b *Bulkhead) TryAcquire() bool {
	// One call out of line, whatever the fast path found, keeps the fast
	// path short; that call gets the flags it read, so as not to read
	// them twice on the way to a refusal.
	f, s := b.flags.Load(), uint64(0)
	if f == 0 {
		s = b.state.Add(grant)
		if s&inFlightMask <= b.max.Load() && s>>32 != 0 {
			return true
		}
	}
	return b.tryAcquireSlow(f, s)
}

// tryAcquireSlow is TryAcquire past its fast path, which read flags f. If
// f is clear, the fast path's add returned s and found no free slot or
// wrapped the count; with no observer when it began, there is none to
// tell of a grant. Otherwise it is the careful take (see full), and
// what observers are told.
func (b *Bulkhead) tryAcquireSlow(f int64, s uint64) bool {
	if f == 0 {
		if b.added(s, b.max.Load()) {
			return true
		}
	} else if f&priorityFlag != 0 {
		return b.tryAcquirePriority(f)
	} else if m := b.max.Load(); !b.full(f, m) && b.added(b.state.Add(grant), m) {
		b.permitted()
		return true
	}
	b.refused()
	return false
}

// permitted reports an acquisition that got a slot (added counted it).
// Without observers it is a load, inlined.
func (b *Bulkhead) permitted() {
	if b.observers.Load() != nil {
		b.tell(Event{Kind: Permitted})
	}
}

// refused counts and reports a refused acquisition.
func (b *Bulkhead) refused() {
	b.ext().rejected.Add(1)
	if b.observers.Load() != nil {
		b.tell(Event{Kind: Rejected})
	}
}

// tell hands e to every observer.
func (b *Bulkhead) tell(e Event) {
	if os := b.observers.Load(); os != nil {
		e.Bulkhead = b.name
		for _, o := range *os {
			o(e)
		}
	}
}

// full is the careful take's check, made when flags f are set: an
// acquisition refuses without an add when somebody is queued or no slot is
// free. Those two loads read the line the add is about to write, and a
// full bulkhead refuses on them alone: under overload, refusals read a
// shared line instead of each writing it twice. The fast path skips them
// while flags are clear, the refusing hint included, which an add that
// found no free slot would have set.
func (b *Bulkhead) full(f int64, bound uint64) bool {
	return f>>waitingShift != 0 || b.state.Load()&inFlightMask >= bound
}

// added settles an add of grant to state that returned s: it counts a
// wrap of the acquisitions' count, and undoes the add when it found no
// free slot below bound (the limit, or a priority's share of it).
func (b *Bulkhead) added(s, bound uint64) bool {
	if s>>32 == 0 {
		b.ext().wraps.Add(1)
	}
	if s&inFlightMask <= bound {
		return true
	}
	b.undo()
	if b.flags.Load()&refusingFlag == 0 {
		b.flags.Or(refusingFlag)
	}
	// The slot this add held for an instant may have been the one a
	// Release found taken when it looked for a slot to hand to the queue:
	// hand it over instead.
	if b.flags.Load()>>waitingShift != 0 {
		b.handOff()
	}
	return false
}

// takeLocked takes a slot if one is free, counting it as accepted when
// count is set (a slot handed to a waiter is counted when the waiter takes
// it).
// Only the queue's paths take this way, under extra.mu: a compare-and-swap
// never counts a slot it does not get, so the only slots state counts
// beyond Max are the fast path's, each with its count (see Stats).
func (b *Bulkhead) takeLocked(count bool, bound uint64) bool {
	add := uint64(1)
	if count {
		add = grant
	}
	for {
		s := b.state.Load()
		if s&inFlightMask >= bound {
			return false
		}
		if b.state.CompareAndSwap(s, s+add) {
			if count && (s+add)>>32 == 0 {
				b.ext().wraps.Add(1)
			}
			return true
		}
	}
}

// undo takes back an add of an acquisition that found no free slot.
func (b *Bulkhead) undo() {
	s := b.state.Add(^uint64(grant - 1))
	if s&inFlightMask == inFlightMask {
		// A Release without Acquire returned the slot this add held, and
		// went unnoticed: give the slot back, so that the count stays
		// right.
		b.state.Add(1)
		return
	}
	if s>>32 == inFlightMask {
		b.ext().wraps.Add(^uint64(0))
	}
}

// Acquire takes a slot. Without a MaxWait it fails at once with a
// *FullError (matching ErrFull) when none is free. With it, it queues and
// waits until a slot frees, the wait ends (ErrFull), or ctx ends (ctx's
// error). Every successful Acquire must be paired with one Release.
func (b *Bulkhead) Acquire(ctx context.Context) error {
	f, s := b.flags.Load(), uint64(0) // as in TryAcquire
	if f == 0 {
		s = b.state.Add(grant)
		if s&inFlightMask <= b.max.Load() && s>>32 != 0 {
			return nil
		}
	}
	return b.acquireSlow(ctx, f, s)
}

// acquireSlow is Acquire past its fast path (see tryAcquireSlow).
func (b *Bulkhead) acquireSlow(ctx context.Context, f int64, s uint64) error {
	if f == 0 {
		if b.added(s, b.max.Load()) {
			return nil
		}
	} else if f&priorityFlag != 0 {
		return b.acquirePriority(ctx, f)
	} else if m := b.max.Load(); !b.full(f, m) && b.added(b.state.Add(grant), m) {
		b.permitted()
		return nil
	}
	if b.cfg.MaxWait == 0 {
		b.refused()
		return &b.ext().full
	}
	return b.wait(ctx, Interactive)
}

func (b *Bulkhead) wait(ctx context.Context, p Priority) error {
	x := b.ext()
	if err := ctx.Err(); err != nil {
		b.refusedAs(p)
		return err
	}
	x.mu.Lock()
	// Announce the waiter before trying again: a Release (or an undone
	// take) that decrements concurrently then either sees it (and hands
	// over the slot) or its decrement is seen by take below.
	b.flags.Add(waitingOne)
	if b.takeLocked(true, b.bound(b.flags.Load(), p)) {
		b.flags.Add(-waitingOne)
		x.mu.Unlock()
		b.permitted()
		return nil
	}
	if len(x.queue) >= b.cfg.Queue {
		b.flags.Add(-waitingOne)
		x.mu.Unlock()
		b.refusedAs(p)
		return &x.full
	}
	w := &waiter{ready: make(chan struct{}, 1), priority: p}
	x.queue = enqueue(x.queue, w)
	x.queued.Store(int64(len(x.queue)))
	x.mu.Unlock()

	start := time.Now()
	timer := time.NewTimer(b.cfg.MaxWait)
	var ctxErr error
	select {
	case <-w.ready:
		timer.Stop()
		b.queuedEnd(time.Since(start), true, p)
		return nil
	case <-timer.C:
	case <-ctx.Done():
		timer.Stop()
		ctxErr = ctx.Err()
	}

	x.mu.Lock()
	queued := b.dequeue(x, w)
	x.mu.Unlock()
	if !queued {
		// Granted while timing out: the slot is ours.
		<-w.ready
		if ctxErr != nil {
			b.release() // never handed to the caller: no Finished
		} else {
			b.queuedEnd(time.Since(start), true, p)
			return nil
		}
	}
	b.queuedEnd(time.Since(start), false, p)
	if ctxErr != nil {
		return ctxErr
	}
	return &x.full
}

// dequeue removes w from the queue; it reports false if w had already been
// granted a slot. x.mu must be held.
func (b *Bulkhead) dequeue(x *extra, w *waiter) bool {
	for i, q := range x.queue {
		if q == w {
			copy(x.queue[i:], x.queue[i+1:])
			x.queue[len(x.queue)-1] = nil
			x.queue = x.queue[:len(x.queue)-1]
			x.queued.Store(int64(len(x.queue)))
			b.flags.Add(-waitingOne)
			return true
		}
	}
	return false
}

// queuedEnd counts and reports the end of a wait in the queue.
func (b *Bulkhead) queuedEnd(wait time.Duration, acquired bool, p Priority) {
	e := Event{Kind: Rejected, Queued: true, Wait: wait}
	if acquired {
		e.Kind = Permitted
		b.ext().acceptedQueued.Add(1)
	} else {
		x := b.ext()
		x.rejected.Add(1)
		if b.flags.Load()&priorityFlag != 0 {
			b.countPriority(p)
		}
	}
	b.tell(e)
}

// Observe hands every call at the bulkhead from now on to fn — each
// acquisition permitted or rejected (with its wait, if it queued) and each
// release — and returns the function that stops it. fn runs on the
// caller's goroutine, on the acquisition path: keep it short and never
// block. A bulkhead without observers pays nothing for the feature: the
// load of flags that tells acquisitions and releases of observers also
// tells them of the queue.
func (b *Bulkhead) Observe(fn func(Event)) (remove func()) {
	x := b.ext()
	entry := &observerEntry{fn}
	x.obsMu.Lock()
	defer x.obsMu.Unlock()
	x.obsList = append(x.obsList, entry)
	b.publishObserversLocked(x)
	return func() {
		x.obsMu.Lock()
		defer x.obsMu.Unlock()
		for i, e := range x.obsList {
			if e == entry {
				x.obsList = append(x.obsList[:i:i], x.obsList[i+1:]...)
				b.publishObserversLocked(x)
				return
			}
		}
	}
}

type observerEntry struct{ fn func(Event) }

// Attach returns the value attached to b under key — made by calling
// newValue, the first time a key is asked for — and the function that lets
// go of it. The value stays attached until everyone who got it has let go,
// then goes, and asking again makes a new one. It lets code that watches
// bulkheads it did not create share state per bulkhead without a
// registry of its own: otelx keeps there what must happen once per
// bulkhead however many chains and Instrumentations watch it, such as
// reporting its figures. key must be comparable (Attach panics otherwise),
// and of a type of the caller's own, as a context key is, so that two
// packages cannot collide. newValue runs under a lock of b's attachments:
// it must not call Attach. Calling detach more than once lets go once.
func (b *Bulkhead) Attach(key any, newValue func() any) (value any, detach func()) {
	return b.ext().attached.Attach("bulkhead", key, newValue)
}

func (b *Bulkhead) publishObserversLocked(x *extra) {
	if len(x.obsList) == 0 {
		b.flags.And(^observedFlag)
		b.observers.Store(nil)
		return
	}
	os := make([]func(Event), len(x.obsList))
	for i, e := range x.obsList {
		os[i] = e.fn
	}
	// The list before the flag: whoever sees the flag finds the list.
	b.observers.Store(&os)
	b.flags.Or(observedFlag)
}

// Release returns a slot taken by Acquire or TryAcquire, handing it to the
// longest waiter if any. Releasing more slots than were taken panics: it
// would silently raise the bulkhead's limit. (One that meets a refused
// acquisition's slot of an instant takes that slot instead and does not
// panic; the refused acquisition then restores the count.)
//
// Its fast path is the add and a load of flags; the rest (a bad Release,
// the queue, observers, the refusing hint) is out of line in released.
func (b *Bulkhead) Release() {
	if s := b.state.Add(^uint64(0)); s&inFlightMask == inFlightMask || b.flags.Load() != 0 {
		b.released(s, true)
	}
}

// release returns a slot without reporting it.
func (b *Bulkhead) release() {
	b.released(b.state.Add(^uint64(0)), false)
}

// released finishes a release whose add to state returned s: it panics
// if no slot was held, clears the refusing hint (a slot is now free),
// hands the slot to the queue, and reports the release if report is set.
func (b *Bulkhead) released(s uint64, report bool) {
	if s&inFlightMask == inFlightMask {
		// It was 0: the subtraction borrowed from the count above.
		b.overRelease()
	}
	f := b.flags.Load()
	if f&refusingFlag != 0 {
		b.flags.And(^refusingFlag)
	}
	if f>>waitingShift != 0 {
		b.handOff()
	}
	if report && f&observedFlag != 0 {
		b.tell(Event{Kind: Finished})
	}
}

// overRelease undoes a Release without Acquire and panics.
func (b *Bulkhead) overRelease() {
	b.state.Add(1)
	panic("tierguard: bulkhead " + strconv.Quote(b.name) + ": Release without Acquire")
}

// handOff gives freed slots to the longest waiters.
func (b *Bulkhead) handOff() {
	x := b.ext()
	x.mu.Lock()
	for len(x.queue) > 0 && b.takeLocked(false, b.bound(b.flags.Load(), x.queue[0].priority)) {
		w := x.queue[0]
		copy(x.queue, x.queue[1:])
		x.queue[len(x.queue)-1] = nil
		x.queue = x.queue[:len(x.queue)-1]
		x.queued.Store(int64(len(x.queue)))
		b.flags.Add(-waitingOne)
		w.ready <- struct{}{}
	}
	x.mu.Unlock()
}

// Do runs fn holding a slot of b, and releases it when fn returns or
// panics.
func Do[T any](ctx context.Context, b *Bulkhead, fn func(context.Context) (T, error)) (T, error) {
	if err := b.Acquire(ctx); err != nil {
		var zero T
		return zero, err
	}
	defer b.Release()
	return fn(ctx)
}

// Stats is a snapshot of a bulkhead's figures.
type Stats struct {
	// Accepted counts acquisitions that got a slot.
	Accepted uint64
	// Rejected counts acquisitions refused (full, queue full, wait ended,
	// context ended while queued), refused TryAcquire calls included.
	Rejected uint64
	// InFlight is the number of slots held now.
	InFlight int
	// Waiting is the number of acquisitions queued now.
	Waiting int
	// Max is the number of slots: an adaptive bulkhead's limit now.
	Max int
	// RejectedAt counts the refusals by priority, in the order of
	// Priorities, on a bulkhead with a Config.Reserve (zero elsewhere,
	// where priorities are not read).
	RejectedAt [len(Priorities)]uint64
}

// Stats returns the bulkhead's current figures. They are exact once
// the calls they count have returned; taken while acquisitions race for
// the last slot, Accepted may for an instant count one that is being
// refused.
func (b *Bulkhead) Stats() Stats {
	s, limit := b.state.Load(), b.max.Load()
	inFlight, accepted := s&inFlightMask, s>>32
	// Slots beyond Max are refused fast-path acquisitions about to undo
	// their add, each of which also counted itself accepted. An adaptive
	// bulkhead's limit may fall below the slots held, which are real: for
	// it only the ceiling tells them apart, and a refusal racing this
	// snapshot may count for an instant.
	top := limit
	if a := b.cfg.Adaptive; a != nil {
		top = uint64(a.Ceiling)
	}
	if inFlight > top {
		accepted -= inFlight - top
		inFlight = top
	}
	st := Stats{Accepted: accepted, InFlight: int(inFlight), Max: int(limit)}
	if x := b.extra.Load(); x != nil {
		st.Accepted += x.wraps.Load()<<32 + x.acceptedQueued.Load()
		st.Rejected = x.rejected.Load()
		st.Waiting = int(x.queued.Load())
	}
	if t := b.tuning.Load(); t != nil {
		for i := range st.RejectedAt {
			st.RejectedAt[i] = t.rejectedAt[i].Load()
		}
	}
	return st
}
