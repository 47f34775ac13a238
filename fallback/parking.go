package fallback

import (
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/classify"
)

// parking takes a tier out of rotation after a failure that retrying cannot
// fix soon: a retired model, an exhausted quota. It is shared by the unary
// and the streaming chain.
type parking struct {
	// until is when the tier may be tried again, in nanoseconds since the
	// chain's epoch (plus one, so that 0 means "not parked"); why says for
	// what.
	until atomic.Int64
	why   atomic.Uint32
}

func sinceEpoch(epoch time.Time) int64 { return int64(time.Since(epoch)) + 1 }

// preflight says whether the tier must be skipped without a call. It reads
// the clock only while the tier is parked.
func (p *parking) preflight(epoch time.Time, catalog *Catalog, model string) Skip {
	if until := p.until.Load(); until != 0 {
		if sinceEpoch(epoch) < until {
			return Skip(p.why.Load())
		}
		p.until.CompareAndSwap(until, 0)
	}
	if catalog != nil && model != "" && !catalog.Available(model) {
		return SkipRetired
	}
	return NotSkipped
}

// park records a failure of class Retired or QuotaExhausted. A retired
// model is marked in the catalog when there is one (until its next
// refresh), else parked for retireFor; an exhausted quota parks the tier
// for quotaFor or the server's retry-after, whichever is longer.
func (p *parking) park(epoch time.Time, catalog *Catalog, model string, v classify.Verdict, quotaFor, retireFor time.Duration) {
	var why Skip
	var d time.Duration
	switch v.Class {
	case classify.Retired:
		if catalog != nil && model != "" {
			catalog.MarkRetired(model)
			return
		}
		why, d = SkipRetired, retireFor
	case classify.QuotaExhausted:
		why, d = SkipQuota, max(quotaFor, v.RetryAfter)
	default:
		return
	}
	p.why.Store(uint32(why))
	p.until.Store(sinceEpoch(epoch) + int64(d))
}
