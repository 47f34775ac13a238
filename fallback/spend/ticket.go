package spend

import (
	"context"
	"sync/atomic"

	"github.com/tierguard/tierguard/bulkhead"
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
	// freq is the request's identity as the rest of tierguard reads it;
	// feature and priority complete it (Request). The identity is kept
	// once, not once per reader: a ticket is reset for every request.
	freq     fallback.Request
	feature  string
	priority Priority
	est      Estimate
	// res is the fleet's reservation of est (StrictStore), ID 0 for none.
	res Reserved
	// day and month are the periods the estimate was booked in.
	day, month int64

	// state is ticketOpen until the chain's first event, ticketRunning
	// while the chain reports to it (only the chain's goroutine touches
	// the fields below then), ticketDone once finished. It is read and
	// changed atomically (load, loadState, casState, storeState), but for
	// the write of init: a ticket being made ready for a request is shared
	// with nobody yet, like every other field init writes, and a plain
	// store spares the request a locked instruction.
	state uint32
	// noCopy keeps go vet's copylocks check on tickets, which the atomic
	// state type gave before: a ticket is found by its address.
	_ noCopy
	// sum is the request's figures. It holds no pointer, so that making a
	// ticket ready for a request clears it in one plain store; the Record
	// is built from it (record) only for those who ask.
	sum tally
	// tier is the name of the tier that answered, set at the end.
	tier string
	// The first inlineAttempts attempts are in inline, and all of them in
	// spill once there are more.
	inline [inlineAttempts]AttemptCost
	spill  []AttemptCost
}

// noCopy makes go vet report copies of the struct holding it.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}

// tally is a request's figures as the ticket collects them: the Record's,
// without its identity, estimate, tier name and attempts.
type tally struct {
	ended, answered, valid, degraded bool
	source                           fallback.Source
	tierIndex                        int
	calls                            int
	usage                            fallback.Usage
	cost, failed, retry              Amount
	fallbackCost, fallbackExtra      Amount
	cause                            classify.Class
	// n counts the attempts.
	n int
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
	// A type switch: both keys are empty structs, so their type says it
	// all, and comparing types alone is cheaper than comparing interfaces.
	switch key.(type) {
	case ticketKey:
		return t
	case fallback.RequestKey:
		return &t.freq
	}
	return t.Context.Value(key)
}

// Request returns the request's identity.
func (t *Ticket) Request() Request {
	return Request{ID: t.freq.ID, Tenant: t.freq.Tenant, Scenario: t.freq.Scenario, Feature: t.feature, Priority: t.priority}
}

const (
	ticketOpen uint32 = iota
	ticketRunning
	ticketDone
)

func (t *Ticket) init(ctx context.Context, l *Ledger, a *account, req Request, est Estimate, cal *calendar) {
	t.Context, t.l, t.acct, t.est, t.day, t.month = ctx, l, a, est, cal.day, cal.month
	// The slot priority is the one the caller's context set
	// (fallback.WithRequest, bulkhead.WithPriority), which bulkheads read
	// through the ticket: the request the ticket answers says the same.
	t.freq = fallback.Request{ID: req.ID, Tenant: req.Tenant, Scenario: req.Scenario, Priority: bulkhead.PriorityFrom(ctx)}
	t.feature, t.priority = req.Feature, req.Priority
	t.res = Reserved{}
	t.sum = tally{tierIndex: -1, primary: -1, answer: -1}
	if t.spill != nil {
		t.spill = t.spill[:0]
	}
	if t.tier != "" {
		t.tier = ""
	}
	t.state = ticketOpen
}

// End closes a request that no attached chain ran: its estimate is
// released, and it counts as a failed request. After the chain's end it
// does nothing; while a chain runs the request (a shared execution the
// caller stopped waiting for), the chain's end closes it.
func (t *Ticket) End() {
	// A plain load first: a ticket its chain closed, the common case, is
	// left without a locked instruction.
	if t.loadState() == ticketOpen && t.casState(ticketOpen, ticketDone) {
		t.finish()
	}
}

// Closed reports whether the request was closed.
func (t *Ticket) Closed() bool { return t.loadState() == ticketDone }

func (t *Ticket) loadState() uint32   { return atomic.LoadUint32(&t.state) }
func (t *Ticket) storeState(s uint32) { atomic.StoreUint32(&t.state, s) }
func (t *Ticket) casState(old, new uint32) bool {
	return atomic.CompareAndSwapUint32(&t.state, old, new)
}

// Record returns the request's record, complete once Closed; before that
// it is the zero Record. Its Attempts are a copy.
func (t *Ticket) Record() Record {
	if t.loadState() != ticketDone {
		return Record{}
	}
	r := t.record()
	r.attempts = append([]AttemptCost(nil), r.attempts...)
	return r
}

// record is the request's Record, its attempts the ticket's own.
func (t *Ticket) record() Record {
	s := &t.sum
	return Record{
		Request: t.Request(), Estimate: t.est,
		Ended: s.ended, Answered: s.answered, Valid: s.valid, Degraded: s.degraded,
		Source: s.source, Tier: t.tier, TierIndex: s.tierIndex,
		Calls: s.calls, Usage: s.usage, Cost: s.cost,
		FailedCost: s.failed, RetryCost: s.retry, FallbackCost: s.fallbackCost, FallbackExtra: s.fallbackExtra,
		Cause:    s.cause,
		attempts: t.attempts(),
	}
}

func (t *Ticket) attempts() []AttemptCost {
	if len(t.spill) > 0 {
		return t.spill
	}
	return t.inline[:t.sum.n]
}

// next returns the slot of the next attempt, to be filled in place: an
// AttemptCost is some 150 bytes, not worth building twice.
func (t *Ticket) next() *AttemptCost {
	n := t.sum.n
	t.sum.n++
	if len(t.spill) == 0 && n < inlineAttempts {
		return &t.inline[n]
	}
	if len(t.spill) == 0 {
		t.spill = append(t.spill, t.inline[:n]...)
	}
	t.spill = append(t.spill, AttemptCost{})
	return &t.spill[len(t.spill)-1]
}

// attempt records an upstream attempt.
func (t *Ticket) attempt(b *binding, e *fallback.AttemptEnd) {
	tier := e.Stage.TierIndex
	idx := b.price(tier, e.Model)
	r := &t.sum
	answer := r.n
	ac := t.next()
	// Field by field: a composite literal would be built aside and
	// copied in.
	ac.Tier, ac.TierIndex, ac.Model, ac.CostGroup, ac.N = e.Stage.Tier, tier, e.Model, b.group(tier), e.Attempt
	ac.Class, ac.Retried, ac.price = e.Verdict.Class, e.Retry, idx
	ac.Usage, ac.Billed, ac.Priced, ac.Cost = fallback.Usage{}, false, false, 0
	ok := e.Err == nil && e.Verdict.Class == classify.OK
	if !ok && ac.Class == classify.OK {
		ac.Class = classify.Unknown
	}
	r.calls++
	if e.Reply != nil && e.Reply.HasUsage {
		ac.Usage, ac.Billed = e.Reply.Usage, true
		if idx >= 0 {
			ac.Cost, ac.Priced = t.l.prices.entries[idx].cost(e.Reply.Usage), true
		}
		addUsage(&r.usage, ac.Usage)
		r.cost = addSat(r.cost, ac.Cost)
	}
	if tier == 0 && idx >= 0 {
		r.primary = idx
	}
	if ok {
		r.answer = answer
		return
	}
	r.failed = addSat(r.failed, ac.Cost)
	if e.Retry {
		r.retry = addSat(r.retry, ac.Cost)
	} else if tier == 0 {
		// The first tier was given up: what made the request fall back.
		r.cause, r.causeSet = ac.Class, true
	}
	if b.l.tripped != nil && ac.Class != classify.Canceled {
		b.l.lastFailure(e.Model).Store(int32(ac.Class))
	}
}

// skipped records a tier passed over.
func (t *Ticket) skipped(b *binding, e *fallback.TierSkip) {
	if e.Stage.TierIndex != 0 {
		return
	}
	if idx := b.price(0, e.Model); idx >= 0 {
		t.sum.primary = idx
	}
	t.sum.cause, t.sum.causeSet = skipCause(b.l, e), true
}

// skipCause is the class a skip of the first tier stands for: the parked
// quota, the rate limit (a server's cool-down, a local limiter), the
// retired model, a request too large for the tier's limiter (counted as
// too long for it), the deadline; for an open breaker, the class
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
	case fallback.SkipTooLarge:
		// Larger than the tier's limiter ever admits: as an input over
		// its window, a later tier may take it.
		return classify.ContextTooLong
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
	r := &t.sum
	r.ended, r.answered, r.source, r.degraded = true, e.Answered, e.Source, e.Degraded
	r.tierIndex = -1
	if e.Stage != nil {
		t.tier, r.tierIndex = e.Stage.Tier, e.Stage.TierIndex
	}
	t.finish()
}

// finish commits the request: its totals, the reconciliation of its
// estimate with what it used, the thresholds it made a meter cross, and
// its Record for subscribers. The caller owns the ticket: it won the
// state it is in.
func (t *Ticket) finish() {
	l, a, r := t.l, t.acct, &t.sum
	r.valid = r.answered && r.source == fallback.SourceTier
	fallbackAnswer := r.answered && (r.source != fallback.SourceTier || r.tierIndex > 0)
	if fallbackAnswer && !r.causeSet {
		r.cause = classify.Unknown
	}
	if fallbackAnswer && r.source == fallback.SourceTier && r.answer >= 0 {
		ans := &t.attempts()[r.answer]
		r.fallbackCost = ans.Cost
		if r.primary >= 0 && ans.Priced {
			r.fallbackExtra = ans.Cost - l.prices.entries[r.primary].cost(ans.Usage)
		}
	}
	tokens, cost := tokensOf(r.usage), int64(r.cost)

	cal := l.clock.calendar()
	a.mu.Lock()
	a.roll(cal)
	sameDay, sameMonth := a.day == t.day, a.month == t.month
	if sameDay {
		a.reserved[DailyTokens] -= t.est.Tokens
		a.reserved[DailyCost] -= int64(t.est.Cost)
	}
	if sameMonth {
		a.reserved[MonthlyTokens] -= t.est.Tokens
		a.reserved[MonthlyCost] -= int64(t.est.Cost)
	}
	a.mine[DailyTokens] += tokens
	a.mine[MonthlyTokens] += tokens
	a.mine[DailyCost] += cost
	a.mine[MonthlyCost] += cost
	if tokens != 0 || cost != 0 {
		a.dirty = true
	}
	queue := false
	if t.res.ID != 0 {
		queue = len(a.releases) == 0
		a.releases = append(a.releases, release{Reserved: t.res, day: t.day, month: t.month})
		a.dirty = true
	}
	if a.allow.limited() && a.due() {
		// Rare: a threshold reached, or unpriced usage to look at.
		t.commitCrossing(a, cal, fallbackAnswer)
	} else {
		t.commit(a, fallbackAnswer)
		a.mu.Unlock()
		t.storeState(ticketDone)
	}
	if queue {
		// The fleet counts the estimate until the store hears of the
		// request's end: tell it now rather than at the next interval.
		l.store.releasing(a)
	}
	if fns := l.records.Load(); len(fns) > 0 {
		// The Record is reused, as ObserveRecords says: built on the heap
		// for each request, it was one allocation of some 300 bytes.
		rec, _ := l.recordPool.Get().(*Record)
		if rec == nil {
			rec = new(Record)
		}
		*rec = t.record()
		for _, fn := range fns {
			fn(rec)
		}
		*rec = Record{}
		l.recordPool.Put(rec)
	}
}

// commitCrossing is the end of finish for a request after which a's
// meters must be looked at: it records the thresholds reached, commits
// the request, unlocks a.mu (which the caller holds), closes the ticket
// and emits the events. It is apart so that the common end of a request,
// which reaches no threshold, does not clear the room for them.
func (t *Ticket) commitCrossing(a *account, cal *calendar, fallbackAnswer bool) {
	var cross crossings
	a.levels(t.l, cal, &cross)
	t.commit(a, fallbackAnswer)
	a.mu.Unlock()
	t.storeState(ticketDone)
	t.l.emit(&cross)
}

// late records a call or usage that reached the ledger outside the
// request's own run: an attempt that ended after End closed the ticket (a
// shared execution that outlived the request that started it), or a
// response that came after the chain stopped waiting for its call
// (fallback.LateReply). Its tokens and cost still count, against the
// tenant's limits and in its totals; the request's Record does not hold
// them. calls counts the upstream calls it stands for that nothing counted
// yet, billed or not: 1 for an attempt's end, a hedge's own for its late
// settlement, 0 for a reply of a call counted when its attempt ended. It
// touches only the account, under its lock.
func (t *Ticket) late(b *binding, st *fallback.StageInfo, model string, rep *fallback.Reply, calls int) {
	l, a := t.l, t.acct
	billed := rep != nil && rep.HasUsage
	if !billed {
		if calls > 0 {
			a.mu.Lock()
			a.totals.Calls += int64(calls)
			a.mu.Unlock()
		}
		return
	}
	u := rep.Usage
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
	s.Calls += int64(calls)
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

// commit adds the request to its account's totals; a.mu is held.
func (t *Ticket) commit(a *account, fallbackAnswer bool) {
	r, s := &t.sum, &a.totals
	s.Requests++
	switch {
	case !r.answered:
		s.Failed++
	case r.source == fallback.SourceTier:
		s.Answered++
		s.Valid++
		if r.tierIndex == 0 {
			s.PrimaryAnswered++
		}
	default:
		s.Answered++
		s.Local++
	}
	if r.answered && r.degraded {
		s.Degraded++
	}
	s.Calls += int64(r.calls)
	addUsage(&s.Usage, r.usage)
	s.Cost = addSat(s.Cost, r.cost)
	s.FailedCost = addSat(s.FailedCost, r.failed)
	s.RetryCost = addSat(s.RetryCost, r.retry)
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
		s.FallbackCost = addSat(s.FallbackCost, r.fallbackCost)
		s.FallbackExtra = addSat(s.FallbackExtra, r.fallbackExtra)
		c := &s.ByClass[classIdx(r.cause)]
		c.Fallbacks++
		c.FallbackCost = addSat(c.FallbackCost, r.fallbackCost)
		c.FallbackExtra = addSat(c.FallbackExtra, r.fallbackExtra)
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
