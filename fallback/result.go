package fallback

import (
	"time"

	"github.com/tierguard/tierguard/classify"
)

// Source says where an answer came from.
type Source uint8

const (
	// SourceTier is an answer from a model tier.
	SourceTier Source = iota
	// SourceCache is an answer from the cache.
	SourceCache
	// SourceDefault is the default answer.
	SourceDefault
)

// String returns "tier", "cache" or "default".
func (s Source) String() string {
	switch s {
	case SourceTier:
		return "tier"
	case SourceCache:
		return "cache"
	case SourceDefault:
		return "default"
	}
	return "invalid_source"
}

// Skip says why a tier was passed over without an upstream call.
type Skip uint8

const (
	// NotSkipped: the tier was called.
	NotSkipped Skip = iota
	// SkipOpen: its circuit breaker is open (or its probes are taken).
	SkipOpen
	// SkipFull: its bulkhead is full.
	SkipFull
	// SkipRetired: its model is retired (catalog, or a 404 seen earlier).
	SkipRetired
	// SkipQuota: its quota is exhausted and the tier is parked.
	SkipQuota
	// SkipBudget: too little of the deadline is left for a useful attempt
	// after the reserve kept for later tiers.
	SkipBudget
)

// String names the skip reason.
func (s Skip) String() string {
	switch s {
	case NotSkipped:
		return "not_skipped"
	case SkipOpen:
		return "open"
	case SkipFull:
		return "full"
	case SkipRetired:
		return "retired"
	case SkipQuota:
		return "quota"
	case SkipBudget:
		return "budget"
	}
	return "invalid_skip"
}

// Attempt is one entry of a request's trail: an upstream call, or a tier
// passed over.
type Attempt struct {
	// Tier and TierIndex name the tier.
	Tier      string
	TierIndex int
	// N is the attempt's number on this tier, from 1; 0 for a skip.
	N int
	// Skip says why the tier was passed over; NotSkipped for a call.
	Skip Skip
	// Verdict is the attempt's classified outcome (class OK on success,
	// Rejected for a skip).
	Verdict classify.Verdict
	// Latency is the call's duration, measured when the chain has an
	// observer or Config.MeasureLatency is set; otherwise 0.
	Latency time.Duration
	// Wait is the delay chosen before the next attempt on the same tier;
	// 0 when none followed.
	Wait time.Duration
	// Err is the attempt's error: the tier's own, a validation failure, or
	// the local rejection.
	Err error
}

// inlineTrail is how many attempts a Result holds without allocating: a
// first-try success, or a skipped tier and the next tier's answer. Longer
// trails (retries) allocate once, next to an upstream failure that costs
// far more.
const inlineTrail = 2

// Result is a request's answer and how it was obtained.
type Result[Out any] struct {
	// Value is the answer.
	Value Out
	// Source says whether a tier, the cache or the default answered.
	Source Source
	// Tier and TierIndex name the tier that answered; "" and -1 for the
	// cache and the default.
	Tier      string
	TierIndex int
	// Degraded is set for any answer but the first tier's.
	Degraded bool
	// UpstreamCalls counts the calls made to tiers.
	UpstreamCalls int
	// Shared is set when the answer came from an execution shared with
	// other requests of the same idempotency key.
	Shared bool

	deadline    time.Time
	hasDeadline bool
	n           int
	inline      [inlineTrail]Attempt
	spill       []Attempt
}

// Attempts returns the trail of attempts and skips, in order.
func (r *Result[Out]) Attempts() []Attempt {
	if r.spill != nil {
		return r.spill
	}
	return r.inline[:r.n]
}

// Deadline returns the request's deadline (the earlier of its context's and
// the chain's Total), and false when it had none. time.Until(d) is the time
// left in the budget.
func (r *Result[Out]) Deadline() (time.Time, bool) { return r.deadline, r.hasDeadline }

func (r *Result[Out]) record(a Attempt) {
	if r.spill == nil && r.n < inlineTrail {
		r.inline[r.n] = a
		r.n++
		return
	}
	if r.spill == nil {
		r.spill = make([]Attempt, r.n, 2*inlineTrail)
		copy(r.spill, r.inline[:r.n])
	}
	r.spill = append(r.spill, a)
	r.n++
}
