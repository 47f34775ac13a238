package subscribers

import (
	"sync"
	"sync/atomic"
)

// Joined holds subscribers of type F published joined into one F, for a
// path that calls a single value (a fan-out built once per change, not
// per call): Load is one atomic load. The zero value is empty; set Join
// before the first Add. A Joined must not be copied after first use.
type Joined[F any] struct {
	// Join makes one F of the subscribers, in the order they were added;
	// it is called with at least one.
	Join func([]F) F

	mu     sync.Mutex
	list   List[F]
	joined atomic.Pointer[F]
}

// Load returns the joined subscribers, and false when there are none.
func (j *Joined[F]) Load() (F, bool) {
	if p := j.joined.Load(); p != nil {
		return *p, true
	}
	var zero F
	return zero, false
}

// Add adds fn and returns the function that removes it; calling that more
// than once removes it once.
func (j *Joined[F]) Add(fn F) (remove func()) {
	j.mu.Lock()
	defer j.mu.Unlock()
	rm := j.list.Add(fn)
	j.publishLocked()
	return func() {
		j.mu.Lock()
		defer j.mu.Unlock()
		rm()
		j.publishLocked()
	}
}

func (j *Joined[F]) publishLocked() {
	fns := j.list.Load()
	if len(fns) == 0 {
		j.joined.Store(nil)
		return
	}
	f := j.Join(fns)
	j.joined.Store(&f)
}
