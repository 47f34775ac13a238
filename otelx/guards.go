package otelx

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
)

// watchList is the set of guards the gauge callback reads. It is immutable
// once published; writers copy it under Instrumentation.mu.
type watchList struct {
	breakers  []*watchedBreaker
	bulkheads []*watchedBulkhead
}

// watchedGuard is one guard an Instrumentation watches: its share of the
// guard's watchers, until stop.
type watchedGuard struct {
	i      *Instrumentation
	attrs  *attrs
	shared *watchers
	detach func()
	once   sync.Once
}

func (w *watchedGuard) stop() {
	w.once.Do(func() {
		w.shared.leave(w.i)
		w.detach()
	})
}

type watchedBreaker struct {
	watchedGuard
	b *breaker.Breaker
}

type watchedBulkhead struct {
	watchedGuard
	b          *bulkhead.Bulkhead
	priorities priorityCache
}

// WatchBreaker exports b's state as tierguard.breaker.state and counts and
// logs its transitions, until unwatch is called or the Instrumentation is
// closed. Its tierguard.breaker.transitions series start at 0, every pair
// of states, so that the first trip shows in a rate. Watching a watched
// breaker again returns the first unwatch. However many Instrumentations
// watch b, each transition is counted once per MeterProvider and logged
// once per log handler, by the first of them still open: two chains on
// one breaker can be instrumented separately.
func (i *Instrumentation) WatchBreaker(b *breaker.Breaker) (unwatch func()) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.closed.Load() {
		return func() {}
	}
	cur := i.watched.Load()
	for _, w := range cur.breakers {
		if w.b == b {
			return func() { i.unwatchBreaker(w) }
		}
	}
	w := &watchedBreaker{b: b, watchedGuard: watchedGuard{i: i, attrs: newAttrs(attrBreaker.String(b.Name()))}}
	i.zeroTransitions(b.Name())
	w.shared, w.detach = watchersOf(b.Attach)
	w.shared.join(i, func() func() { return b.Observe(w.shared.breakerTransition) })
	next := &watchList{breakers: append(slices.Clip(cur.breakers), w), bulkheads: cur.bulkheads}
	i.watched.Store(next)
	return func() { i.unwatchBreaker(w) }
}

func (i *Instrumentation) unwatchBreaker(w *watchedBreaker) {
	i.mu.Lock()
	cur := i.watched.Load()
	next := &watchList{bulkheads: cur.bulkheads}
	for _, x := range cur.breakers {
		if x != w {
			next.breakers = append(next.breakers, x)
		}
	}
	i.watched.Store(next)
	i.mu.Unlock()
	w.stop()
}

// WatchBulkhead exports b's accepted, rejected, in-flight, queued and limit
// figures and records its queue waits, until unwatch is called or the
// Instrumentation is closed. Watching a watched bulkhead again returns the
// first unwatch. However many Instrumentations watch b, its figures and
// waits are exported once per MeterProvider, as WatchBreaker's
// transitions are.
func (i *Instrumentation) WatchBulkhead(b *bulkhead.Bulkhead) (unwatch func()) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.closed.Load() {
		return func() {}
	}
	cur := i.watched.Load()
	for _, w := range cur.bulkheads {
		if w.b == b {
			return func() { i.unwatchBulkhead(w) }
		}
	}
	w := &watchedBulkhead{b: b, watchedGuard: watchedGuard{i: i, attrs: newAttrs(attrBulkhead.String(b.Name()))}}
	w.shared, w.detach = watchersOf(b.Attach)
	w.shared.join(i, func() func() {
		// Only a bulkhead with a MaxWait queues, and its configuration is
		// fixed: one without never reports a queue wait, and observing it
		// would cost each of its acquisitions a call for nothing.
		if b.Config().MaxWait > 0 {
			return b.Observe(w.shared.bulkheadEvent)
		}
		return func() {}
	})
	next := &watchList{breakers: cur.breakers, bulkheads: append(slices.Clip(cur.bulkheads), w)}
	i.watched.Store(next)
	return func() { i.unwatchBulkhead(w) }
}

func (i *Instrumentation) unwatchBulkhead(w *watchedBulkhead) {
	i.mu.Lock()
	cur := i.watched.Load()
	next := &watchList{breakers: cur.breakers}
	for _, x := range cur.bulkheads {
		if x != w {
			next.bulkheads = append(next.bulkheads, x)
		}
	}
	i.watched.Store(next)
	i.mu.Unlock()
	w.stop()
}

// WatchBreakerGroup watches every breaker of g, those created later
// included, as WatchBreaker does, until unwatch is called or the
// Instrumentation is closed.
func (i *Instrumentation) WatchBreakerGroup(g *breaker.Group) (unwatch func()) {
	m := &memberWatches{}
	m.remove = g.Observe(func(_ string, b *breaker.Breaker) { m.add(i.WatchBreaker(b)) })
	return i.keepGroup(m)
}

// WatchBulkheadGroup watches every bulkhead of g, those created later
// included, as WatchBulkhead does, until unwatch is called or the
// Instrumentation is closed.
func (i *Instrumentation) WatchBulkheadGroup(g *bulkhead.Group) (unwatch func()) {
	m := &memberWatches{}
	m.remove = g.Observe(func(_ string, b *bulkhead.Bulkhead) { m.add(i.WatchBulkhead(b)) })
	return i.keepGroup(m)
}

// memberWatches is one group watch: the group subscription and the
// unwatch of every member it watched.
type memberWatches struct {
	mu       sync.Mutex
	remove   func()
	unwatch  []func()
	stopOnce sync.Once
}

func (m *memberWatches) add(unwatch func()) {
	m.mu.Lock()
	m.unwatch = append(m.unwatch, unwatch)
	m.mu.Unlock()
}

func (m *memberWatches) stop() {
	m.stopOnce.Do(func() {
		m.remove()
		m.mu.Lock()
		members := m.unwatch
		m.unwatch = nil
		m.mu.Unlock()
		for _, unwatch := range members {
			unwatch()
		}
	})
}

// keepGroup makes Close end the group watch too.
func (i *Instrumentation) keepGroup(m *memberWatches) (unwatch func()) {
	i.mu.Lock()
	closed := i.closed.Load()
	if !closed {
		i.detach = append(i.detach, m.stop)
	}
	i.mu.Unlock()
	if closed {
		// Not under i.mu: the group calls WatchBreaker, which takes i.mu,
		// under its own lock.
		m.stop()
		return func() {}
	}
	return m.stop
}

type waitKey struct {
	name     string
	acquired bool
}

// recordWait records a queued acquisition's wait.
func (i *Instrumentation) recordWait(name string, wait time.Duration, acquired bool) {
	k := waitKey{name, acquired}
	v, ok := i.waits.Load(k)
	if !ok {
		v, _ = i.waits.LoadOrStore(k, newAttrs(attrBulkhead.String(name), attrAcquired.Bool(acquired)))
	}
	i.m.queueWait.Record(context.Background(), wait.Seconds(), v.(*attrs).rec...)
}

// logWait logs a queued acquisition's wait.
func (i *Instrumentation) logWait(name string, wait time.Duration, acquired bool) {
	ctx := context.Background()
	if i.logEnabled(ctx, slog.LevelDebug) {
		i.logger.LogAttrs(ctx, slog.LevelDebug, "bulkhead wait", slog.String(logComponent, logComponentValue),
			slog.String("bulkhead", name), slog.Duration("queue_wait", wait), slog.Bool("acquired", acquired))
	}
}

type transitionKey struct {
	name     string
	from, to breaker.State
}

// breakerStates are the states a breaker moves between.
var breakerStates = [...]breaker.State{breaker.Closed, breaker.HalfOpen, breaker.Open}

// transitionAttrs returns the attribute set of a transition of the named
// breaker.
func (i *Instrumentation) transitionAttrs(name string, from, to breaker.State) *attrs {
	k := transitionKey{name, from, to}
	v, ok := i.transitions.Load(k)
	if !ok {
		v, _ = i.transitions.LoadOrStore(k, newAttrs(attrBreaker.String(name),
			attrBreakerFrom.String(from.String()), attrBreakerTo.String(to.String())))
	}
	return v.(*attrs)
}

// zeroTransitions starts a watched breaker's transition series at 0, so
// that a Prometheus rate or increase sees its first trip: a series whose
// first sample is already 1 counts nothing.
func (i *Instrumentation) zeroTransitions(name string) {
	for _, from := range breakerStates {
		for _, to := range breakerStates {
			if from != to {
				i.m.transitions.Add(context.Background(), 0, i.transitionAttrs(name, from, to).add...)
			}
		}
	}
}

// countTransition counts one transition.
func (i *Instrumentation) countTransition(tr breaker.Transition) {
	i.m.transitions.Add(context.Background(), 1, i.transitionAttrs(tr.Name, tr.From, tr.To).add...)
}

// logTransition logs one transition.
func (i *Instrumentation) logTransition(tr breaker.Transition) {
	ctx := context.Background()
	level, msg := slog.LevelInfo, "circuit "+tr.To.String()
	if tr.To == breaker.Open {
		level = slog.LevelWarn
	}
	if i.logEnabled(ctx, level) {
		var b logBuf
		b.add(slog.String(logComponent, logComponentValue))
		b.add(slog.String("breaker", tr.Name))
		b.add(slog.String("from", tr.From.String()))
		b.add(slog.String("to", tr.To.String()))
		b.add(slog.String("reason", tr.Reason))
		b.add(slog.Uint64("generation", tr.Generation))
		if !tr.OpenUntil.IsZero() {
			b.add(slog.Duration("cooldown", tr.OpenUntil.Sub(tr.At)))
		}
		i.logger.LogAttrs(ctx, level, msg, b.attrs()...)
	}
}

// collect reports the watched guards' figures to the observable
// instruments.
func (i *Instrumentation) collect(_ context.Context, o metric.Observer) error {
	// A new collection interval begins for every reader collecting now:
	// the next 0 of a token counter is added again (see addCount).
	i.collections.Add(1)
	i.active.observe(o, i.m.active)
	// A guard watched through several Instrumentations on one
	// MeterProvider is reported by one of them: the SDK adds up what the
	// callbacks observe of an observable counter under one set of
	// attributes, so each would count the bulkhead's calls once more.
	w := i.watched.Load()
	for _, b := range w.breakers {
		if b.shared.reports(i) {
			o.ObserveInt64(i.m.breakerState, int64(b.b.State()), b.attrs.obs...)
		}
	}
	for _, b := range w.bulkheads {
		if !b.shared.reports(i) {
			continue
		}
		s := b.b.Stats()
		o.ObserveInt64(i.m.bhAccepted, int64(s.Accepted), b.attrs.obs...)
		o.ObserveInt64(i.m.bhRejected, int64(s.Rejected), b.attrs.obs...)
		o.ObserveInt64(i.m.bhInFlight, int64(s.InFlight), b.attrs.obs...)
		o.ObserveInt64(i.m.bhQueued, int64(s.Waiting), b.attrs.obs...)
		o.ObserveInt64(i.m.bhLimit, int64(s.Max), b.attrs.obs...)
		i.observePriorities(o, b, s)
	}
	return nil
}
