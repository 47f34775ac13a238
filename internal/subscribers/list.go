package subscribers

import (
	"sync"
	"sync/atomic"
)

// List holds subscribers of type F (usually a func). The zero value is an
// empty list, ready to use; a List must not be copied after first use.
type List[F any] struct {
	p       atomic.Pointer[[]F]
	mu      sync.Mutex
	entries []*entry[F]
}

// entry gives each subscription an identity, so that removing one removes
// it and not an equal function added twice.
type entry[F any] struct{ fn F }

// Load returns the subscribers in the order they were added, nil when there
// are none. The slice is shared: do not modify it.
func (l *List[F]) Load() []F {
	if p := l.p.Load(); p != nil {
		return *p
	}
	return nil
}

// Add appends fn and returns the function that removes it; calling that
// more than once removes it once.
func (l *List[F]) Add(fn F) (remove func()) {
	e := &entry[F]{fn: fn}
	l.mu.Lock()
	l.entries = append(l.entries, e)
	l.publishLocked()
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		for i, x := range l.entries {
			if x == e {
				l.entries = append(l.entries[:i:i], l.entries[i+1:]...)
				l.publishLocked()
				return
			}
		}
	}
}

func (l *List[F]) publishLocked() {
	if len(l.entries) == 0 {
		l.p.Store(nil)
		return
	}
	fns := make([]F, len(l.entries))
	for i, e := range l.entries {
		fns[i] = e.fn
	}
	l.p.Store(&fns)
}
