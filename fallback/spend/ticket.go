package spend

import (
	"context"
	"sync/atomic"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
)

// inlineAttempts is how many attempts a Ticket records without allocating:
// a success, a fallback after one failure, or a retry and a fallback.
const inlineAttempts = 3

// Ticket is one admitted request. It is also the request's context: pass
// it to the chain's Do (or derive contexts from it), so that the ledger
// finds the request in every event. The chain's end (its RequestEnded
// event) closes the ticket; call End when the request ends, in case it
// never reached an attached chain: End is idempotent, and does nothing to
// a request its chain is still running.
//
// Attach the ledger to the outermost chain only: a chain called from a
// tier of another with the same context would close the ticket early.
type Ticket struct {
	context.Context
	l    *Ledger
	acct *account
	req  Request
	// freq is req as the rest of tierguard reads it.
	freq fallback.Request
	est  Estimate
	// day and month are the periods the estimate was booked in.
	day, month int64

	// state is ticketOpen until the chain's first event, ticketRunning
	// while the chain reports to it (only the chain's goroutine touches
	// the fields below then), ticketDone once finished.
	state atomic.Uint32
	rec   Record
	// n counts the attempts; the first inlineAttempts are in inline, and
	// all of them in spill once there are more.
	n      int
	inline [inlineAttempts]AttemptCost
	spill  []AttemptCost
	// primary is the price of the first tier's model, for the extra cost
	// of a fallback; -1 when unknown or unpriced. answer is the attempt
	// that answered, -1 for none.
	primary, answer int
	causeSet        bool
}

// Value finds the Ticket for TicketFrom, and the request's
// fallback.Request (its ID, Tenant and Scenario) for fallback.RequestFrom,
// so that the cache, otelx, chaos rules and routes see the tenant the
// ledger bills; every other key goes to the parent context.
func (t *Ticket) Value(key any) any {
	switch key {
	case ticketKey{}:
		return t
	case fallback.RequestKey{}:
		return &t.freq
	}
	return t.Context.Value(key)
}

// Request returns the request's identity.
func (t *Ticket) Request() Request { return t.req }

const (
	ticketOpen uint32 = iota
	ticketRunning
	ticketDone
)

func (t *Ticket) init(ctx context.Context, l *Ledger, a *account, req Request, est Estimate, cal *calendar) {
	t.Context, t.l, t.acct, t.req, t.est, t.day, t.month = ctx, l, a, req, est, cal.day, cal.month
	t.freq = fallback.Request{ID: req.ID, Tenant: req.Tenant, Scenario: req.Scenario}
	t.rec = Record{Request: req, Estimate: est, TierIndex: -1}
	t.n, t.spill, t.primary, t.answer, t.causeSet = 0, t.spill[:0], -1, -1, false
	t.state.Store(ticketOpen)
}

// End closes a request that no attached chain ran: its estimate is
// released, and it counts as a failed request. After the chain's end it
// does nothing; while a chain runs the request (a shared execution the
// caller stopped waiting for), the chain's end closes it.
func (t *Ticket) End() {
	if t.state.CompareAndSwap(ticketOpen, ticketDone) {
		t.finish()
	}
}

// Closed reports whether the request was closed.
func (t *Ticket) Closed() bool { return t.state.Load() == ticketDone }

// Record returns the request's record, complete once Closed; before that
// it is the zero Record. Its Attempts are a copy.
func (t *Ticket) Record() Record {
	if t.state.Load() != ticketDone {
		return Record{}
	}
	r := t.rec
	r.attempts = append([]AttemptCost(nil), t.attempts()...)
	return r
}

func (t *Ticket) attempts() []AttemptCost {
	if len(t.spill) > 0 {
		return t.spill
	}
	return t.inline[:t.n]
}

func (t *Ticket) record(a AttemptCost) {
	if len(t.spill) == 0 && t.n < inlineAttempts {
		t.inline[t.n] = a
		t.n++
		return
	}
	if len(t.spill) == 0 {
		t.spill = append(t.spill, t.inline[:t.n]...)
	}
	t.spill = append(t.spill, a)
	t.n++
}

// attempt records an upstream attempt.
func (t *Ticket) attempt(b *binding, e *fallback.AttemptEnd) {
	tier := e.Stage.TierIndex
	idx := b.price(tier, e.Model)
	ac := AttemptCost{Tier: e.Stage.Tier, TierIndex: tier, Model: e.Model, CostGroup: b.group(tier), N: e.Attempt, Class: e.Verdict.Class, Retried: e.Retry, price: idx}
	ok := e.Err == nil && e.Verdict.Class == classify.OK
	if !ok && ac.Class == classify.OK {
		ac.Class = classify.Unknown
	}
	if e.Reply.HasUsage {
		ac.Usage, ac.Billed = e.Reply.Usage, true
		if idx >= 0 {
			ac.Cost, ac.Priced = t.l.prices.entries[idx].cost(e.Reply.Usage), true
		}
	}
	r := &t.rec
	r.Calls++
	if ac.Billed {
		addUsage(&r.Usage, ac.Usage)
		r.Cost = addSat(r.Cost, ac.Cost)
	}
	if tier == 0 && idx >= 0 {
		t.primary = idx
	}
	if ok {
		t.answer = t.n
	} else {
		r.FailedCost = addSat(r.FailedCost, ac.Cost)
		if e.Retry {
			r.RetryCost = addSat(r.RetryCost, ac.Cost)
		} else if tier == 0 {
			// The first tier was given up: what made the request fall back.
			r.Cause, t.causeSet = ac.Class, true
		}
		if b.l.tripped != nil && ac.Class != classify.Canceled {
			b.l.lastFailure(e.Model).Store(int32(ac.Class))
		}
	}
	t.record(ac)
}

// skipped records a tier passed over.
func (t *Ticket) skipped(b *binding, e *fallback.TierSkip) {
	if e.Stage.TierIndex != 0 {
		return
	}
	if idx := b.price(0, e.Model); idx >= 0 {
		t.primary = idx
	}
	t.rec.Cause, t.causeSet = skipCause(b.l, e), true
}

// skipCause is the class a skip of the first tier stands for: the parked
// quota, the rate limit (a server's cool-down, a local limiter), the
// retired model, the deadline; for an open breaker, the class
// of the last failure seen on its model, the one that tripped it (or kept
// it open), so that a 429 storm's fallbacks stay the 429s' once the
// breaker opens; else a local rejection.
func skipCause(l *Ledger, e *fallback.TierSkip) classify.Class {
	switch e.Skip {
	case fallback.SkipOpen:
		if c := l.lastFailure(e.Model).Load(); c > 0 {
			return classify.Class(c)
		}
	case fallback.SkipQuota:
		return classify.QuotaExhausted
	case fallback.SkipRateLimited:
		// Cooling down after the server's 429, or over a local limit: a
		// rate limit either way.
		return classify.RateLimited
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

// ended records the chain's end and closes the ticket.
func (t *Ticket) ended(e *fallback.RequestEnd) {
	r := &t.rec
	r.Ended, r.Answered, r.Source, r.Degraded = true, e.Answered, e.Source, e.Degraded
	r.Tier, r.TierIndex = "", -1
	if e.Stage != nil {
		r.Tier, r.TierIndex = e.Stage.Tier, e.Stage.TierIndex
	}
	t.finish()
}

// finish commits the request: its totals, the reconciliation of its
// estimate with what it used, the thresholds it made a meter cross, and
// its Record for subscribers. The caller owns the ticket: it won the
// state it is in.
func (t *Ticket) finish() {
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

	cal := l.clock.calendar()
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
	t.state.Store(ticketDone)
	l.emit(&cross)
	if fns := l.records.Load(); len(fns) > 0 {
		rec := *r
		rec.attempts = t.attempts()
		for _, fn := range fns {
			fn(&rec)
		}
	}
}

// late records usage that reached the ledger outside the request's own
// run: an attempt that ended after End closed the ticket (a shared
// execution that outlived the request that started it), or a response
// that came after the chain stopped waiting for its call
// (fallback.LateReply). Its tokens and cost still count, against the
// tenant's limits and in its totals; the request's Record does not hold
// them. call is set for an attempt's end, whose call counts too (a late
// reply's call was counted when its attempt ended). It touches only the
// account, under its lock.
func (t *Ticket) late(b *binding, st *fallback.StageInfo, model string, u fallback.Usage, call bool) {
	l, a := t.l, t.acct
	idx := b.price(st.TierIndex, model)
	var cost Amount
	if idx >= 0 {
		cost = l.prices.entries[idx].cost(u)
	}
	tokens := tokensOf(u)
	var cross crossings
	a.mu.Lock()
	a.roll(l.clock.calendar())
	for m := range numMeters {
		if m.Cost() {
			a.mine[m] += int64(cost)
		} else {
			a.mine[m] += tokens
		}
	}
	a.dirty = true
	s := &a.totals
	if call {
		s.Calls++
	}
	addUsage(&s.Usage, u)
	s.Cost = addSat(s.Cost, cost)
	if idx < 0 {
		s.Unpriced++
	}
	if a.allow.limited() {
		a.levels(l, l.clock.calendar(), &cross)
	}
	a.mu.Unlock()
	l.emit(&cross)
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
	as := t.attempts()
	for i := range as {
		ac := &as[i] // not copied: an AttemptCost is some 150 bytes
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

	attempts []AttemptCost
}

// Attempts returns the request's attempts, in order. In a Record passed to
// an ObserveRecords function they are the Ticket's: copy them to keep them.
func (r Record) Attempts() []AttemptCost { return r.attempts }
