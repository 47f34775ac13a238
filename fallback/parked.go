package fallback

import "time"

// ParkedUntil reports until when the chain's stage i is parked — its quota
// exhausted, or its model retired when no model could be named — and why:
// SkipQuota or SkipRetired. A stage that is not parked, or an index out of
// range, gives the zero time and NotSkipped.
//
// Requests skip a parked stage without an upstream call. Work that can
// wait (a queued job) uses the time to come back when the stage can serve
// again, instead of spending attempts on it before then.
func (b base[In]) ParkedUntil(i int) (time.Time, Skip) {
	if i < 0 || i >= len(b.stages) {
		return time.Time{}, NotSkipped
	}
	until, why := b.stages[i].parking.Until(b.epoch)
	return until, Skip(why)
}

// Total returns the chain's Config.Total: the cap on each request's time;
// 0 when only the context's deadline applies.
func (b base[In]) Total() time.Duration { return b.total }
