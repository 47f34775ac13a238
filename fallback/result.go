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

var sourceNames = [...]string{SourceTier: "tier", SourceCache: "cache", SourceDefault: "default"}

// String returns "tier", "cache" or "default".
func (s Source) String() string { return name(sourceNames[:], s, "invalid_source") }

// name returns names[v], or invalid when v is out of range.
func name[T ~uint8](names []string, v T, invalid string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return invalid
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
	// SkipRetired: the model the call would use is retired (the catalog
	// does not list it, or it answered 404 earlier).
	SkipRetired
	// SkipQuota: its quota is exhausted and the tier is parked.
	SkipQuota
	// SkipBudget: too little of the deadline is left for a useful attempt
	// after the reserve kept for later tiers.
	SkipBudget
	// SkipRateLimited: the tier (or the request's tenant on it, or every
	// member of its pool) is over its local rate limit, and waiting for its
	// turn does not fit (ratelimit.TierConfig.MaxWait, the deadline), or a
	// server's 429s said its quota is spent for every caller and it cools
	// down until the server's time (see CoolDown; SkipError.Cooling says
	// by which rule, until when).
	SkipRateLimited
	// SkipTooLarge: the request can never be admitted by the tier's guard,
	// however long it waits — its token estimate exceeds its rate
	// limiter's TokenBurst (ratelimit), or every member's of its pool. A
	// guard of any kind says so by skipping with it. When every tier of a
	// chain skips a request as too large, and none was called, the chain
	// fails closed, without the cache or the default — the request must
	// be changed, not retried — with an error that matches ErrTooLarge
	// (a gateway answers 413).
	SkipTooLarge
	// SkipThrottled: the tier's client-side throttle (package throttle)
	// turned the call away locally, as the tier has lately refused a
	// share of its calls for overload.
	SkipThrottled
)

var skipNames = [...]string{
	NotSkipped: "not_skipped", SkipOpen: "open", SkipFull: "full",
	SkipRetired: "retired", SkipQuota: "quota", SkipBudget: "budget",
	SkipRateLimited: "rate_limited", SkipTooLarge: "too_large",
	SkipThrottled: "throttled",
}

// skipReasons are the verdict reasons of skips.
var skipReasons = [...]string{
	NotSkipped:      "",
	SkipOpen:        "circuit open",
	SkipFull:        "bulkhead full",
	SkipRetired:     "model retired",
	SkipQuota:       "quota exhausted, tier parked",
	SkipBudget:      "too little time left for this tier",
	SkipRateLimited: "over the local rate limit",
	SkipTooLarge:    "never admissible: larger than the limit allows",
	SkipThrottled:   "throttled: the tier is refusing calls for overload",
}

// String names the skip reason.
func (s Skip) String() string { return name(skipNames[:], s, "invalid_skip") }

// Attempt is one entry of a request's trail: an upstream call, or a tier
// passed over.
type Attempt struct {
	// Tier and TierIndex name the tier; Model is the model the call used
	// (or would have used, for a skip).
	Tier      string
	TierIndex int
	Model     string
	// N is the attempt's number on this tier, from 1; 0 for a skip.
	N int
	// Member names the pool member the call used ("#" and a short hash
	// of its key, never the key); "" for a tier that is not a Pool.
	Member string
	// Hedge is set for the second call of a hedged attempt, or, with
	// Skip, for a hedge whose tier made no call.
	Hedge bool
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
	// Cooling is set when the call's 429 took the tier out of rotation for
	// every request: by which rule, until when (see CoolDown); nil
	// otherwise. A skip during the cool-down carries it in its
	// *SkipError.
	Cooling *Cooling
}

// inlineTrail is how many calls a Summary holds without allocating: a
// first-try success. Tiers passed over are held apart, as skip marks, so
// that falling through every tier of a chain of up to markedSkips+1
// tiers allocates nothing either. Longer trails — retries, hedges, a
// pool's rotations — allocate once, next to an upstream failure or a
// second call that costs far more.
const inlineTrail = 1

// markedSkips is how many skips a Summary holds as marks.
const markedSkips = 7

// skipMark is a tier passed over, in 24 bytes where an Attempt takes
// 176: its place in the trail, the stage (whose name and model the entry
// takes), why, and its error. spent marks the verdict of a budget that ran
// out (DeadlineExhausted) rather than a refusal.
type skipMark struct {
	err   error
	at    uint8
	stage uint8
	skip  Skip
	spent bool
}

// Summary is how a request was answered; Result and StreamResult both
// carry it.
type Summary struct {
	// Source says whether a tier, the cache or the default answered.
	Source Source
	// CacheHit says how the cache matched, in the cache's own words (see
	// Cache.Get; package cache says "exact", "template", "semantic" or
	// "simplified"); "" for an answer not from a cache.
	CacheHit string
	// Tier and TierIndex name the tier that answered; "" and -1 for the
	// cache, the default, and a request that failed.
	Tier      string
	TierIndex int
	// Degraded is set for any answer but the first tier's.
	Degraded bool
	// UpstreamCalls counts the calls made to tiers that were settled
	// with the request: each one an AttemptEnd to observers. A hedge still
	// calling when its race ended is settled when it returns, and its
	// calls reach observers then (LateReply.Calls), not this count; a
	// hedge whose tier made no call (a skip marked Hedge) is not one.
	UpstreamCalls int

	deadline    time.Time
	hasDeadline bool
	// n counts the calls held in inline, or in spill once it outgrew
	// inline (made with room for spillRoom); marks counts the skips held
	// in skips, on the stages of e.
	n, spillRoom int32
	marks        uint8
	inline       [inlineTrail]Attempt
	spill        []Attempt
	skips        [markedSkips]skipMark
	e            *engine
}

// Attempts returns the trail of attempts and skips, in order.
func (s Summary) Attempts() []Attempt { return s.trail() }

// Deadline returns the request's deadline (the earlier of its context's
// and the chain's Total), and false when it had none. time.Until(d) is the
// time left in the budget.
func (s Summary) Deadline() (time.Time, bool) { return s.deadline, s.hasDeadline }

// trail is Attempts without the copy a value receiver makes. A trail
// with skip marks is built anew.
func (s *Summary) trail() []Attempt {
	calls := s.spill
	if calls == nil {
		calls = s.inline[:s.n]
	}
	if s.marks == 0 {
		return calls
	}
	all := make([]Attempt, len(calls)+int(s.marks))
	m := 0
	for i := range all {
		if m < int(s.marks) && int(s.skips[m].at) == i {
			all[i] = s.skips[m].attempt(s.e)
			m++
			continue
		}
		all[i], calls = calls[0], calls[1:]
	}
	return all
}

// attempt is the trail entry the mark stands for, as engine.skip makes it.
func (k *skipMark) attempt(e *engine) Attempt {
	st := &e.stages[k.stage]
	return Attempt{Tier: st.name, TierIndex: st.index, Model: st.model, Skip: k.skip, Verdict: skipVerdict(k.skip, k.spent), Err: k.err}
}

// skipVerdict is the verdict of a skip; spent for a budget that ran out.
func skipVerdict(why Skip, spent bool) classify.Verdict {
	if spent {
		return classify.Verdict{Class: classify.DeadlineExhausted, Reason: "deadline budget exhausted"}
	}
	return classify.Verdict{Class: classify.Rejected, Reason: skipReasons[why]}
}

// mark holds a skip of st on model as a mark, when there is room and the
// mark can say it all (the stage's own model); false otherwise, for the
// caller to record it in full.
func (s *Summary) mark(e *engine, st *stage, model string, why Skip, spent bool, err error) bool {
	at := int(s.n) + int(s.marks)
	if s.marks >= markedSkips || at > 255 || st.index > 255 || model != st.model {
		return false
	}
	s.skips[s.marks] = skipMark{err: err, at: uint8(at), stage: uint8(st.index), skip: why, spent: spent}
	s.marks++
	s.e = e
	return true
}

func (s *Summary) record(a Attempt) { *s.add() = a }

// add returns the trail's next entry, zeroed, for the caller to fill in
// place: an entry is 176 bytes, and building it apart then copying it in
// was a tenth of the bare success path.
func (s *Summary) add() *Attempt {
	if s.spill == nil && s.n < inlineTrail {
		a := &s.inline[s.n]
		*a = Attempt{}
		s.n++
		return a
	}
	if s.spill == nil {
		s.spill = make([]Attempt, s.n, max(s.spillRoom, 2*inlineTrail))
		copy(s.spill, s.inline[:s.n])
	}
	s.spill = append(s.spill, Attempt{})
	s.n++
	return &s.spill[len(s.spill)-1]
}

// Result is a request's answer and how it was obtained.
type Result[Out any] struct {
	// Value is the answer.
	Value Out
	// Shared is set when the answer came from an execution shared with
	// other requests of the same idempotency key.
	Shared bool
	Summary
}

// StreamResult describes how a stream was answered. Read it after the
// iteration ends.
type StreamResult struct {
	Summary
	// Chunks and Bytes measure what the consumer received.
	Chunks int
	Bytes  int
	// FinishReason is the finish reason that ended the stream.
	FinishReason string
	// Complete is set when the stream ended with a finish reason and passed
	// validation (or came whole from the cache or the default).
	Complete bool
	// Continued is set when Continue resumed the stream on another tier.
	Continued bool
	// TimeToFirstChunk is measured from the start of the request.
	TimeToFirstChunk time.Duration
}
