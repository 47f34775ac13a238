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
	// Max is its number of slots.
	Max int
}

// Error names the bulkhead and its size.
func (e *FullError) Error() string {
	return "tierguard: bulkhead " + strconv.Quote(e.Name) + " full (" + strconv.Itoa(e.Max) + " in flight)"
}

// Is reports whether target is ErrFull.
func (e *FullError) Is(target error) bool { return target == ErrFull }

// Verdict classifies the rejection: a local refusal, no upstream call made.
func (e *FullError) Verdict() classify.Verdict {
	return classify.Verdict{Class: classify.Rejected, Reason: "bulkhead full"}
}

// Observer receives the outcome of every acquisition that had to wait for a
// slot. Fail-fast acquisitions are only counted (see Stats), unless the
// observer is also a CallObserver.
type Observer interface {
	// Waited is called after a wait in the queue ended, with the time spent
	// waiting and whether a slot was obtained.
	Waited(name string, wait time.Duration, acquired bool)
}

// CallObserver is an Observer that also sees every call: each acquisition
// that got a slot or was refused, queued or not (after Waited, for a queued
// one), and each release. AddObserver and WithObserver detect it. Its
// methods run on the caller's goroutine, on the acquisition path: keep them
// short and never block. A bulkhead without call observers pays one atomic
// load per acquisition and release for the feature.
type CallObserver interface {
	Observer
	// Permitted is called after an acquisition got a slot.
	Permitted(name string)
	// Rejected is called after an acquisition was refused: the bulkhead
	// was full, the queue was full, the wait ended, or the context ended.
	Rejected(name string)
	// Finished is called after a slot was released.
	Finished(name string)
}

// Option configures a Bulkhead.
type Option func(*Bulkhead) error

// WithMaxWait lets an acquisition wait up to d for a slot, in a FIFO queue of
// at most queue waiters; beyond the queue, acquisitions are rejected at once.
// A wait never outlasts the acquiring context. The default is to fail fast:
// waiting for a slot only moves the queue into your workers.
func WithMaxWait(d time.Duration, queue int) Option {
	return func(b *Bulkhead) error {
		if d <= 0 {
			return fmt.Errorf("bulkhead: max wait must be positive, got %v", d)
		}
		if queue <= 0 {
			return fmt.Errorf("bulkhead: queue size must be positive, got %d", queue)
		}
		b.maxWait, b.queueMax = d, queue
		return nil
	}
}

// WithKeysInNames makes a Group name its members prefix+"/"+key, the key as
// it is, in errors and for observers and instrumentation. Use it when the
// keys are public values, such as feature names; without it a member is
// named prefix+"/#"+ the first 12 hex digits of the key's SHA-256, because
// a key is often a tenant or user id. Outside a Group it changes nothing.
func WithKeysInNames() Option {
	return func(b *Bulkhead) error {
		b.keysInNames = true
		return nil
	}
}

// WithObserver reports every queued wait to o, and every call if o is a
// CallObserver.
func WithObserver(o Observer) Option {
	return func(b *Bulkhead) error {
		b.AddObserver(o)
		return nil
	}
}

// cacheLine is the size the hot counters are padded to.
const cacheLine = 64

// Bulkhead bounds the number of calls in flight. It is safe for concurrent
// use. The fail-fast path is a compare-and-swap and allocates nothing.
//
// The fields are laid out by how they are shared: what every call only
// reads, then the queue's length (read by every call, written only when
// someone queues), then the slots and the acceptances (written by every
// call), then the refusals (written only when full), a cache line apart
// whatever the struct's alignment, so that taking and returning a slot
// moves one line between cores.
type Bulkhead struct {
	max      int64
	name     string
	full     *FullError
	maxWait  time.Duration
	queueMax int
	// keysInNames is set by WithKeysInNames, for a Group to read.
	keysInNames bool
	// observers are added by AddObserver; copy-on-write. calls are the
	// CallObservers among them.
	observers atomic.Pointer[[]Observer]
	calls     atomic.Pointer[[]CallObserver]

	_ [cacheLine]byte
	// waiting counts queued acquisitions; the fast path defers to them so a
	// newcomer cannot take a slot ahead of the queue.
	waiting atomic.Int64
	// queued is the queue's length, for Stats: waiting also counts, for an
	// instant, a newcomer about to be turned away by a full queue.
	queued atomic.Int64

	_        [cacheLine]byte
	inflight atomic.Int64
	accepted atomic.Uint64

	_        [cacheLine]byte
	rejected atomic.Uint64

	_       [cacheLine]byte
	obsMu   sync.Mutex
	obsList []*observerEntry

	mu    sync.Mutex
	queue []*waiter
}

type waiter struct {
	ready chan struct{}
}

// New returns a bulkhead named name with max slots.
func New(name string, max int, opts ...Option) (*Bulkhead, error) {
	if max <= 0 {
		return nil, fmt.Errorf("bulkhead %q: max must be positive, got %d", name, max)
	}
	b := &Bulkhead{name: name, max: int64(max), full: &FullError{Name: name, Max: max}}
	for _, o := range opts {
		if err := o(b); err != nil {
			return nil, fmt.Errorf("bulkhead %q: %w", name, err)
		}
	}
	return b, nil
}

// Name returns the bulkhead's name.
func (b *Bulkhead) Name() string { return b.name }

// Max returns the number of slots.
func (b *Bulkhead) Max() int { return int(b.max) }

// TryAcquire takes a slot if one is free and nobody is queued for one. A
// refusal counts in Stats.Rejected, as a granted slot counts in Accepted.
func (b *Bulkhead) TryAcquire() bool {
	if b.tryTake() {
		b.permitted()
		return true
	}
	b.refused()
	return false
}

// permitted counts and reports an acquisition that got a slot. Without
// call observers it is an add and a load, inlined.
func (b *Bulkhead) permitted() {
	b.accepted.Add(1)
	if b.calls.Load() != nil {
		b.tell(CallObserver.Permitted)
	}
}

// refused counts and reports a refused acquisition.
func (b *Bulkhead) refused() {
	b.rejected.Add(1)
	if b.calls.Load() != nil {
		b.tell(CallObserver.Rejected)
	}
}

// tell calls event on every call observer.
func (b *Bulkhead) tell(event func(CallObserver, string)) {
	if cs := b.calls.Load(); cs != nil {
		for _, c := range *cs {
			event(c, b.name)
		}
	}
}

func (b *Bulkhead) tryTake() bool {
	if b.waiting.Load() != 0 {
		return false
	}
	return b.take()
}

func (b *Bulkhead) take() bool {
	for {
		n := b.inflight.Load()
		if n >= b.max {
			return false
		}
		if b.inflight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Acquire takes a slot. Without WithMaxWait it fails at once with a
// *FullError (matching ErrFull) when none is free. With it, it queues and
// waits until a slot frees, the wait ends (ErrFull), or ctx ends (ctx's
// error). Every successful Acquire must be paired with one Release.
func (b *Bulkhead) Acquire(ctx context.Context) error {
	if b.tryTake() {
		b.permitted()
		return nil
	}
	if b.maxWait == 0 {
		b.refused()
		return b.full
	}
	return b.wait(ctx)
}

func (b *Bulkhead) wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		b.refused()
		return err
	}
	b.mu.Lock()
	// Announce the waiter before trying again: a Release that decrements
	// concurrently then either sees it (and hands over the slot) or its
	// decrement is seen by take below.
	b.waiting.Add(1)
	if b.take() {
		b.waiting.Add(-1)
		b.mu.Unlock()
		b.permitted()
		return nil
	}
	if len(b.queue) >= b.queueMax {
		b.waiting.Add(-1)
		b.mu.Unlock()
		b.refused()
		return b.full
	}
	w := &waiter{ready: make(chan struct{}, 1)}
	b.queue = append(b.queue, w)
	b.queued.Store(int64(len(b.queue)))
	b.mu.Unlock()

	start := time.Now()
	timer := time.NewTimer(b.maxWait)
	var ctxErr error
	select {
	case <-w.ready:
		timer.Stop()
		b.observe(time.Since(start), true)
		b.permitted()
		return nil
	case <-timer.C:
	case <-ctx.Done():
		timer.Stop()
		ctxErr = ctx.Err()
	}

	b.mu.Lock()
	queued := b.dequeue(w)
	b.mu.Unlock()
	if !queued {
		// Granted while timing out: the slot is ours.
		<-w.ready
		if ctxErr != nil {
			b.release() // never handed to the caller: no Finished
		} else {
			b.observe(time.Since(start), true)
			b.permitted()
			return nil
		}
	}
	b.observe(time.Since(start), false)
	b.refused()
	if ctxErr != nil {
		return ctxErr
	}
	return b.full
}

// dequeue removes w from the queue; it reports false if w had already been
// granted a slot. b.mu must be held.
func (b *Bulkhead) dequeue(w *waiter) bool {
	for i, q := range b.queue {
		if q == w {
			copy(b.queue[i:], b.queue[i+1:])
			b.queue[len(b.queue)-1] = nil
			b.queue = b.queue[:len(b.queue)-1]
			b.queued.Store(int64(len(b.queue)))
			b.waiting.Add(-1)
			return true
		}
	}
	return false
}

func (b *Bulkhead) observe(wait time.Duration, ok bool) {
	if os := b.observers.Load(); os != nil {
		for _, o := range *os {
			o.Waited(b.name, wait, ok)
		}
	}
}

// AddObserver reports every queued wait from now on to o, in addition to
// the observers already added, and returns the function that removes it;
// every call too if o is a CallObserver. Instrumentation such as otelx uses
// it to watch bulkheads it did not create.
func (b *Bulkhead) AddObserver(o Observer) (remove func()) {
	entry := &observerEntry{o}
	b.obsMu.Lock()
	defer b.obsMu.Unlock()
	b.obsList = append(b.obsList, entry)
	b.publishObserversLocked()
	return func() {
		b.obsMu.Lock()
		defer b.obsMu.Unlock()
		for i, e := range b.obsList {
			if e == entry {
				b.obsList = append(b.obsList[:i:i], b.obsList[i+1:]...)
				b.publishObserversLocked()
				return
			}
		}
	}
}

type observerEntry struct{ o Observer }

func (b *Bulkhead) publishObserversLocked() {
	var os []Observer
	var cs []CallObserver
	for _, e := range b.obsList {
		os = append(os, e.o)
		if c, ok := e.o.(CallObserver); ok {
			cs = append(cs, c)
		}
	}
	if os == nil {
		b.observers.Store(nil)
	} else {
		b.observers.Store(&os)
	}
	if cs == nil {
		b.calls.Store(nil)
	} else {
		b.calls.Store(&cs)
	}
}

// MaxWait returns the longest an acquisition may wait for a slot; 0 when
// the bulkhead fails fast.
func (b *Bulkhead) MaxWait() time.Duration { return b.maxWait }

// Release returns a slot taken by Acquire or TryAcquire, handing it to the
// longest waiter if any. Releasing more slots than were taken panics: it
// would silently raise the bulkhead's limit.
func (b *Bulkhead) Release() {
	b.release()
	if b.calls.Load() != nil {
		b.tell(CallObserver.Finished)
	}
}

// release returns a slot without reporting it.
func (b *Bulkhead) release() {
	if b.inflight.Add(-1) < 0 {
		b.overRelease()
	}
	if b.waiting.Load() != 0 {
		b.handOff()
	}
}

// overRelease undoes a Release without Acquire and panics.
func (b *Bulkhead) overRelease() {
	b.inflight.Add(1)
	panic("tierguard: bulkhead " + strconv.Quote(b.name) + ": Release without Acquire")
}

// handOff gives freed slots to the longest waiters.
func (b *Bulkhead) handOff() {
	b.mu.Lock()
	for len(b.queue) > 0 && b.take() {
		w := b.queue[0]
		copy(b.queue, b.queue[1:])
		b.queue[len(b.queue)-1] = nil
		b.queue = b.queue[:len(b.queue)-1]
		b.queued.Store(int64(len(b.queue)))
		b.waiting.Add(-1)
		w.ready <- struct{}{}
	}
	b.mu.Unlock()
}

// Do runs fn holding a slot, and releases it when fn returns or panics.
func (b *Bulkhead) Do(ctx context.Context, fn func(context.Context) error) error {
	if err := b.Acquire(ctx); err != nil {
		return err
	}
	defer b.Release()
	return fn(ctx)
}

// Run runs fn holding a slot of b, and releases it when fn returns or
// panics.
func Run[T any](ctx context.Context, b *Bulkhead, fn func(context.Context) (T, error)) (T, error) {
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
	// Max is the number of slots.
	Max int
}

// Stats returns the bulkhead's current figures.
func (b *Bulkhead) Stats() Stats {
	return Stats{
		Accepted: b.accepted.Load(),
		Rejected: b.rejected.Load(),
		InFlight: int(b.inflight.Load()),
		Waiting:  int(b.queued.Load()),
		Max:      int(b.max),
	}
}
