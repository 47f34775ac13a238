package fallback

import (
	"sync"
	"sync/atomic"
	"time"
)

// parking takes a whole tier out of rotation after a failure that retrying
// cannot fix soon: an exhausted quota, or a 404 when no model can be named.
type parking struct {
	// until is when the tier may be tried again, in nanoseconds since the
	// chain's epoch (plus one, so that 0 means "not parked"); why says for
	// what.
	until atomic.Int64
	why   atomic.Uint32
}

func sinceEpoch(epoch time.Time) int64 { return int64(time.Since(epoch)) + 1 }

// check says whether the tier is parked. It reads the clock only while the
// tier is parked.
func (p *parking) check(epoch time.Time) Skip {
	if until := p.until.Load(); until != 0 {
		if sinceEpoch(epoch) < until {
			return Skip(p.why.Load())
		}
		p.until.CompareAndSwap(until, 0)
	}
	return NotSkipped
}

// parked reports whether the tier is parked now.
func (p *parking) parked(epoch time.Time) bool { return p.check(epoch) != NotSkipped }

// parkOnce parks the tier for d for why, unless it is parked for why
// already, and reports whether it did: of concurrent failures that park
// it, one is told it was first.
func (p *parking) parkOnce(epoch time.Time, why Skip, d time.Duration) bool {
	for {
		u := p.until.Load()
		now := sinceEpoch(epoch)
		if u != 0 && now < u && Skip(p.why.Load()) == why {
			return false
		}
		if p.until.CompareAndSwap(u, now+int64(d)) {
			p.why.Store(uint32(why))
			return true
		}
	}
}

// park parks the tier for d.
func (p *parking) park(epoch time.Time, why Skip, d time.Duration) {
	p.why.Store(uint32(why))
	p.until.Store(sinceEpoch(epoch) + int64(d))
}

// retiredModels are the models that answered 404, each until a recheck
// time (a Catalog's, until its next refresh). The request path reads an immutable
// map with one atomic load, and nothing at all while no model is retired.
type retiredModels struct {
	m  atomic.Pointer[map[string]int64]
	mu sync.Mutex
}

// has reports whether model is retired now.
func (r *retiredModels) has(model string, epoch time.Time) bool {
	m := r.m.Load()
	if m == nil {
		return false
	}
	until, ok := (*m)[normalizeModel(model)]
	return ok && sinceEpoch(epoch) < until
}

// mark retires model for d, dropping entries whose time has passed.
func (r *retiredModels) mark(model string, epoch time.Time, d time.Duration) {
	model = normalizeModel(model)
	now := sinceEpoch(epoch)
	r.mu.Lock()
	defer r.mu.Unlock()
	next := map[string]int64{model: now + int64(d)}
	if old := r.m.Load(); old != nil {
		for k, until := range *old {
			if k != model && until > now {
				next[k] = until
			}
		}
	}
	r.m.Store(&next)
}

// clear forgets every retired model.
func (r *retiredModels) clear() {
	r.mu.Lock()
	r.m.Store(nil)
	r.mu.Unlock()
}
