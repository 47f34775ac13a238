package otelx

import (
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
)

// watchersKey is the key otelx attaches its state to a breaker or a
// bulkhead under (breaker.Breaker.Attach, bulkhead.Bulkhead.Attach).
type watchersKey struct{}

// watchers is what every Instrumentation watching one guard shares: the
// guard's one subscription, and the Instrumentations in the order they
// came to watch it. Two chains on one breaker, instrumented separately,
// are two Instrumentations feeding the same counters when they share a
// MeterProvider (the SDK hands both the same instruments), and each would
// count every transition once more. So a transition, a queue wait or a
// gauge's figure is exported by the first live watcher of each
// MeterProvider only, and logged by the first of each log handler. The
// state hangs off the guard itself rather than off a registry of the
// package, which would be state shared by every user of otelx in the
// process.
type watchers struct {
	mu sync.Mutex
	// members are the watching Instrumentations in the order they came;
	// copy-on-write under mu, so that one event reads one list.
	members atomic.Pointer[[]*Instrumentation]
	// unsubscribe ends the guard subscription, held while anyone watches;
	// under mu.
	unsubscribe func()
}

func newWatchers() any { return &watchers{} }

// watchersOf returns the watchers attached to a guard and the function
// that lets go of them.
func watchersOf(attach func(key any, newValue func() any) (any, func())) (*watchers, func()) {
	v, detach := attach(watchersKey{}, newWatchers)
	return v.(*watchers), detach
}

// join adds i, subscribing to the guard with subscribe if nobody watched
// it.
func (w *watchers) join(i *Instrumentation, subscribe func() (unsubscribe func())) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var next []*Instrumentation
	if cur := w.members.Load(); cur != nil {
		next = append(next, *cur...)
	}
	next = append(next, i)
	w.members.Store(&next)
	if w.unsubscribe == nil {
		w.unsubscribe = subscribe()
	}
}

// leave removes i, and the subscription with the last watcher. Both under
// mu: a watcher joining as the last one leaves could otherwise hold a new
// subscription beside the old one for an instant, and an event would be
// delivered twice.
func (w *watchers) leave(i *Instrumentation) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var next []*Instrumentation
	if cur := w.members.Load(); cur != nil {
		for _, x := range *cur {
			if x != i {
				next = append(next, x)
			}
		}
	}
	w.members.Store(&next)
	if len(next) == 0 && w.unsubscribe != nil {
		w.unsubscribe()
		w.unsubscribe = nil
	}
}

// live appends the watchers not closed to buf, reading each one's state
// once, so that the exporters chosen for an event are chosen from one
// view.
func (w *watchers) live(buf []*Instrumentation) []*Instrumentation {
	if cur := w.members.Load(); cur != nil {
		for _, i := range *cur {
			if !i.closed.Load() {
				buf = append(buf, i)
			}
		}
	}
	return buf
}

// reports reports whether i exports the guard's gauges: it is the first
// live watcher exporting through its MeterProvider.
func (w *watchers) reports(i *Instrumentation) bool {
	if cur := w.members.Load(); cur != nil {
		for _, x := range *cur {
			if x == i {
				return true
			}
			if x.meterKey == i.meterKey && !x.closed.Load() {
				return false
			}
		}
	}
	return false
}

// firstMeter reports whether none of before exports through i's
// MeterProvider; firstLog, whether none logs to i's handler.
func firstMeter(before []*Instrumentation, i *Instrumentation) bool {
	for _, x := range before {
		if x.meterKey == i.meterKey {
			return false
		}
	}
	return true
}

func firstLog(before []*Instrumentation, i *Instrumentation) bool {
	for _, x := range before {
		if x.logKey == i.logKey {
			return false
		}
	}
	return true
}

// breakerTransition counts a transition once per MeterProvider and logs it
// once per handler. It runs in the goroutine that caused it (a request, or
// the cooldown timer).
func (w *watchers) breakerTransition(tr breaker.Transition) {
	var buf [4]*Instrumentation
	live := w.live(buf[:0])
	for k, i := range live {
		if firstMeter(live[:k], i) {
			i.countTransition(tr)
		}
		if i.logKey != nil && firstLog(live[:k], i) {
			i.logTransition(tr)
		}
	}
}

// bulkheadEvent records a queued acquisition's wait once per MeterProvider
// and logs it once per handler.
func (w *watchers) bulkheadEvent(e bulkhead.Event) {
	if !e.Queued {
		return
	}
	var buf [4]*Instrumentation
	live := w.live(buf[:0])
	for k, i := range live {
		acquired := e.Kind == bulkhead.Permitted
		if firstMeter(live[:k], i) {
			i.recordWait(e.Bulkhead, e.Wait, acquired)
		}
		if i.logKey != nil && firstLog(live[:k], i) {
			i.logWait(e.Bulkhead, e.Wait, acquired)
		}
	}
}

// identity returns v when it can be compared with ==, as the keys of
// watchers are, and alt otherwise: a MeterProvider or a log handler of a
// type that cannot be compared is known by the Instrumentation that uses
// it, and is then not shared.
func identity(v, alt any) any {
	if v != nil && reflect.ValueOf(v).Comparable() {
		return v
	}
	return alt
}
