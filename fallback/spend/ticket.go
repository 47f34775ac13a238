package spend

import (
	"context"
	"sync"
	"time"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
)

// inlineAttempts is how many attempts a Ticket records without allocating:
// a success, a fallback after one failure, or a retry and a fallback.
const inlineAttempts = 3

// Ticket is one admitted request. It is also the request's context: pass
// it to the chain's Do (or derive contexts from it), so that the ledger
// finds the request in every event. The chain's end (its RequestEnded
// event) closes the ticket; call End when the request ends without
// reaching an attached chain, or to be sure: End is idempotent.
type Ticket struct {
	context.Context
	l    *Ledger
	acct *account
	req  Request
	est  Estimate
	// day and month are the periods the estimate was booked in.
	day, month int64

	mu   sync.Mutex
	done bool
	rec  Record
	// spill holds the attempts past inlineAttempts.
	spill []AttemptCost
	// primary is the price of the first tier's model, for the extra cost
	// of a fallback; -1 when unknown or unpriced. answer is the attempt
	// that answered, -1 for none.
	primary, answer int
	causeSet        bool
}

// Value finds the Ticket for TicketFrom; every other key goes to the
// parent context.
func (t *Ticket) Value(key any) any {
	if key == (ticketKey{}) {
		return t
	}
	return t.Context.Value(key)
}

// Request returns the request's identity.
func (t *Ticket) Request() Request { return t.req }

func (t *Ticket) init(ctx context.Context, l *Ledger, a *account, req Request, est Estimate, cal *calendar) {
	spill := t.spill[:0]
	*t = Ticket{Context: ctx, l: l, acct: a, req: req, est: est, day: cal.day, month: cal.month, primary: -1, answer: -1, spill: spill}
	t.rec.Request, t.rec.Estimate = req, est
	t.rec.TierIndex, t.rec.Cause = -1, classify.OK
}

// End closes the request if its chain did not: its estimate is released
// and what its attempts used so far is committed. A request that never
// reached a chain counts as failed. End is idempotent.
func (t *Ticket) End() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.done {
		t.finish()
	}
}

// Record returns the request's record so far (complete once the request
// ended). Its Attempts are a copy.
func (t *Ticket) Record() Record {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.rec
	r.spill = append([]AttemptCost(nil), t.attempts()...)
	return r
}

func (t *Ticket) attempts() []AttemptCost {
	if t.spill != nil && len(t.spill) > 0 {
		return t.spill
	}
	return t.rec.inline[:t.rec.n]
}

func (t *Ticket) record(a AttemptCost) {
	r := &t.rec
	if len(t.spill) == 0 && r.n < inlineAttempts {
		r.inline[r.n] = a
		r.n++
		return
	}
	if len(t.spill) == 0 {
		t.spill = append(t.spill, r.inline[:r.n]...)
	}
	t.spill = append(t.spill, a)
	r.n++
}

// attempt records an upstream attempt; t.mu is held.
func (t *Ticket) attempt(b *binding, e *fallback.Event) {
	idx := b.price(e.TierIndex, e.Model)
	ac := AttemptCost{Tier: e.Tier, TierIndex: e.TierIndex, Model: e.Model, CostGroup: b.group(e.TierIndex), N: e.Attempt, Class: e.Verdict.Class, Retried: e.Retry, price: idx}
	ok := e.Err == nil && e.Verdict.Class == classify.OK
	if !ok && ac.Class == classify.OK {
		ac.Class = classify.Unknown
	}
	if e.HasUsage {
		ac.Usage, ac.Billed = e.Usage, true
		if idx >= 0 {
			ac.Cost, ac.Priced = t.l.prices.entries[idx].cost(e.Usage), true
		}
	}
	r := &t.rec
	r.Calls++
	if ac.Billed {
		addUsage(&r.Usage, ac.Usage)
		r.Cost = addSat(r.Cost, ac.Cost)
	}
	if e.TierIndex == 0 && idx >= 0 {
		t.primary = idx
	}
	if ok {
		t.answer = r.n
	} else {
		r.FailedCost = addSat(r.FailedCost, ac.Cost)
		if e.Retry {
			r.RetryCost = addSat(r.RetryCost, ac.Cost)
		} else if e.TierIndex == 0 {
			// The first tier was given up: what made the request fall back.
			r.Cause, t.causeSet = ac.Class, true
		}
	}
	t.record(ac)
}

// skipped records a tier passed over; t.mu is held.
func (t *Ticket) skipped(b *binding, e *fallback.Event) {
	if e.TierIndex != 0 {
		return
	}
	if idx := b.price(0, e.Model); idx >= 0 {
		t.primary = idx
	}
	t.rec.Cause, t.causeSet = skipCause(e), true
}

// skipCause is the class a skip of the first tier stands for: the parked
// quota, the retired model, the deadline, or a local rejection (an open
// breaker, a full bulkhead).
func skipCause(e *fallback.Event) classify.Class {
	switch e.Skip {
	case fallback.SkipQuota:
		return classify.QuotaExhausted
	case fallback.SkipRetired:
		return classify.Retired
	case fallback.SkipBudget:
		return classify.DeadlineExhausted
	}
	if e.Verdict.Class != classify.OK {
		return e.Verdict.Class
	}
	return classify.Rejected
}

// ended records the chain's end and closes the ticket; t.mu is held.
func (t *Ticket) ended(e *fallback.Event) {
	r := &t.rec
	r.Ended, r.Answered, r.Source, r.Degraded = true, e.Answered, e.Source, e.Degraded
	r.Tier, r.TierIndex = e.Tier, e.TierIndex
	t.finish()
}

// finish commits the request: its totals, the reconciliation of its
// estimate with what it used, the thresholds it made a meter cross, and
// its Record for subscribers. t.mu is held.
func (t *Ticket) finish() {
	t.done = true
	l, a, r := t.l, t.acct, &t.rec
	r.Valid = r.Answered && r.Source == fallback.SourceTier
	fallbackAnswer := r.Answered && (r.Source != fallback.SourceTier || r.TierIndex > 0)
	if fallbackAnswer && !t.causeSet {
		r.Cause = classify.Unknown
	}
	if fallbackAnswer && r.Source == fallback.SourceTier && t.answer >= 0 {
		ans := t.attempts()[t.answer]
		r.FallbackCost = ans.Cost
		if t.primary >= 0 && ans.Priced {
			r.FallbackExtra = ans.Cost - l.prices.entries[t.primary].cost(ans.Usage)
		}
	}
	tokens, cost := tokensOf(r.Usage), int64(r.Cost)

	cal := l.clock.now(time.Now())
	var cross crossings
	a.mu.Lock()
	a.roll(cal)
	for m := range numMeters {
		used := tokens
		if m.Cost() {
			used = cost
		}
		if a.periodOf(m) == t.periodOf(m) {
			a.reserved[m] -= t.est.of(m)
		}
		a.mine[m] += used
	}
	if tokens != 0 || cost != 0 {
		a.dirty = true
	}
	if a.allow.limited() {
		a.levels(l, cal, &cross)
	}
	t.commit(a, fallbackAnswer)
	a.mu.Unlock()
	l.emit(&cross)
	if fns := l.records.load(); len(fns) > 0 {
		if len(t.spill) > 0 {
			r.spill = t.spill
		}
		for _, fn := range fns {
			fn(r)
		}
		r.spill = nil
	}
}

func (t *Ticket) periodOf(m Meter) int64 {
	if m.Period() == Monthly {
		return t.month
	}
	return t.day
}

// commit adds the request to its account's totals; a.mu is held.
func (t *Ticket) commit(a *account, fallbackAnswer bool) {
	r, s := &t.rec, &a.totals
	s.Requests++
	switch {
	case !r.Answered:
		s.Failed++
	case r.Source == fallback.SourceTier:
		s.Answered++
		s.Valid++
		if r.TierIndex == 0 {
			s.PrimaryAnswered++
		}
	default:
		s.Answered++
		s.Local++
	}
	if r.Answered && r.Degraded {
		s.Degraded++
	}
	s.Calls += int64(r.Calls)
	addUsage(&s.Usage, r.Usage)
	s.Cost = addSat(s.Cost, r.Cost)
	s.FailedCost = addSat(s.FailedCost, r.FailedCost)
	s.RetryCost = addSat(s.RetryCost, r.RetryCost)
	unpriced := len(a.models) - 1
	for _, ac := range t.attempts() {
		if !ac.Priced && ac.Billed {
			s.Unpriced++
		}
		if ac.Class != classify.OK {
			c := &s.ByClass[classIdx(ac.Class)]
			c.Attempts++
			c.Cost = addSat(c.Cost, ac.Cost)
			if ac.Retried {
				c.RetryCost = addSat(c.RetryCost, ac.Cost)
			}
		}
		if ac.Billed {
			i := ac.price
			if i < 0 || i >= unpriced {
				i = unpriced
			}
			m := &a.models[i]
			m.calls++
			addUsage(&m.usage, ac.Usage)
			m.cost = addSat(m.cost, ac.Cost)
		}
	}
	if fallbackAnswer {
		s.Fallbacks++
		s.FallbackCost = addSat(s.FallbackCost, r.FallbackCost)
		s.FallbackExtra = addSat(s.FallbackExtra, r.FallbackExtra)
		c := &s.ByClass[classIdx(r.Cause)]
		c.Fallbacks++
		c.FallbackCost = addSat(c.FallbackCost, r.FallbackCost)
		c.FallbackExtra = addSat(c.FallbackExtra, r.FallbackExtra)
	}
}

func classIdx(c classify.Class) int {
	if int(c) >= numClasses {
		return int(classify.Unknown)
	}
	return int(c)
}

// AttemptCost is one upstream attempt of a request, priced.
type AttemptCost struct {
	// Tier, TierIndex, Model and CostGroup name what was called; N is the
	// attempt's number on its tier.
	Tier      string
	TierIndex int
	Model     string
	CostGroup string
	N         int
	// Class is the attempt's outcome (OK for the answer); Retried is set
	// when the same tier was tried again after it.
	Class   classify.Class
	Retried bool
	// Usage is what the attempt was billed, when Billed (the tier reported
	// usage); Cost its price, when Priced.
	Usage          fallback.Usage
	Billed, Priced bool
	Cost           Amount

	price int
}

// Record is what one request cost and how it was answered. It holds no
// prompt and no answer.
type Record struct {
	// Request is the request's identity; Estimate what Admit reserved.
	Request  Request
	Estimate Estimate
	// Ended is set when the chain ended the request; a request closed by
	// Ticket.End before that has it unset.
	Ended bool
	// Answered, Source, Tier and TierIndex describe the answer; Valid is
	// set for an answer from a tier (it passed the tier's validation),
	// Degraded for any answer but the first tier's.
	Answered, Valid, Degraded bool
	Source                    fallback.Source
	Tier                      string
	TierIndex                 int
	// Calls counts upstream calls; Usage and Cost sum every attempt's.
	Calls int
	Usage fallback.Usage
	Cost  Amount
	// FailedCost, RetryCost, FallbackCost and FallbackExtra are those of
	// Totals, for this request.
	FailedCost, RetryCost, FallbackCost, FallbackExtra Amount
	// Cause is why the request left its first tier: the class of its last
	// failure there, or of its skip; OK when it did not leave it.
	Cause classify.Class

	n      int
	inline [inlineAttempts]AttemptCost
	spill  []AttemptCost
}

// Attempts returns the request's attempts, in order.
func (r Record) Attempts() []AttemptCost {
	if len(r.spill) > 0 {
		return r.spill
	}
	return r.inline[:r.n]
}
