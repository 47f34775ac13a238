package fallback

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/internal/park"
)

// coolDownOf is how long a 429 with a server delay keeps its tier (or
// member) out: the delay, at most classify.LongRetryAfter — a longer one
// is a quota's, which the classifier parks as QuotaExhausted, so a longer
// RateLimited delay (a custom classifier's, a hostile header) is not
// believed beyond it — and at most MaxQuotaCooldown.
func coolDownOf(v classify.Verdict, maxPark time.Duration) time.Duration {
	return min(v.RetryAfter, classify.LongRetryAfter, maxPark)
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
	return ok && park.Since(epoch) < until
}

// mark retires model for d, dropping entries whose time has passed.
func (r *retiredModels) mark(model string, epoch time.Time, d time.Duration) {
	model = normalizeModel(model)
	now := park.Since(epoch)
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
