package fallback

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/classify"
)

// parking takes a whole tier out of rotation after a failure that retrying
// cannot fix soon: an exhausted quota, or a 404 when no model can be named.
type parking struct {
	// until is when the tier may be tried again, in nanoseconds since the
	// chain's epoch (plus one, so that 0 means "not parked"); why says for
	// what.
	until atomic.Int64
	why   atomic.Uint32
	// hold is the until of the probe let through at the end of a
	// cool-down (see enter), which a new cool-down replaces.
	hold atomic.Int64
}

func sinceEpoch(epoch time.Time) int64 { return int64(time.Since(epoch)) + 1 }

// check says whether the tier is parked. It reads the clock only while the
// tier is parked. An ended cool-down is left for enter to hand over.
func (p *parking) check(epoch time.Time) Skip {
	if until := p.until.Load(); until != 0 {
		if sinceEpoch(epoch) < until {
			return Skip(p.why.Load())
		}
		if Skip(p.why.Load()) != SkipRateLimited {
			p.until.CompareAndSwap(until, 0)
		}
	}
	return NotSkipped
}

// coolDownOf is how long a 429 with a server delay keeps its tier (or
// member) out: the delay, at most classify.LongRetryAfter — a longer one
// is a quota's, which the classifier parks as QuotaExhausted, so a longer
// RateLimited delay (a custom classifier's, a hostile header) is not
// believed beyond it — and at most MaxQuotaCooldown.
func coolDownOf(v classify.Verdict, maxPark time.Duration) time.Duration {
	return min(v.RetryAfter, classify.LongRetryAfter, maxPark)
}

// probeHold is how long the one call let through at the end of a
// cool-down holds the others off, at most: it ends the hold itself when it
// returns (endProbe), or another 429 extends the cool-down.
const probeHold = time.Minute

// enter says whether a call may go to the tier now, as check does, with
// one difference: when a server's cool-down (SkipRateLimited) has just
// ended, one caller gets through and the others still skip until it
// returns — the server hears one request per delay, not a burst of every
// caller in flight. probe is then the hold that caller ends with endProbe;
// 0 otherwise.
func (p *parking) enter(epoch time.Time) (why Skip, probe int64) {
	until := p.until.Load()
	if until == 0 {
		return NotSkipped, 0
	}
	now := sinceEpoch(epoch)
	why = Skip(p.why.Load())
	if now < until {
		return why, 0
	}
	if why != SkipRateLimited {
		p.until.CompareAndSwap(until, 0)
		return NotSkipped, 0
	}
	hold := now + int64(probeHold)
	p.hold.Store(hold)
	if !p.until.CompareAndSwap(until, hold) {
		// Another caller took the probe, or the tier was parked again.
		return p.check(epoch), 0
	}
	return NotSkipped, hold
}

// endProbe ends the hold of a cool-down's probe, unless the tier was
// parked again meanwhile.
func (p *parking) endProbe(probe int64) {
	if probe != 0 {
		p.until.CompareAndSwap(probe, 0)
	}
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

// coolDown parks the tier for d for why, unless it is parked longer
// already (a quota's parking outlasts a server's retry delay).
func (p *parking) coolDown(epoch time.Time, why Skip, d time.Duration) {
	for {
		u := p.until.Load()
		next := sinceEpoch(epoch) + int64(d)
		if u >= next && u != p.hold.Load() {
			return
		}
		if p.until.CompareAndSwap(u, next) {
			p.why.Store(uint32(why))
			return
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
