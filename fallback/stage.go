package fallback

import (
	"context"
	"errors"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/internal/budget"
	"github.com/tierguard/tierguard/internal/detach"
)

// attempter runs one attempt of a stage: for the unary chain a call and
// its validation, for the streaming chain the start of a stream up to its
// first chunk with content. Everything around the attempt is stageRun.run's.
type attempter[In, Out any] interface {
	// attempt runs attempt n (with model) of window per (remaining was
	// left when the window was computed) on a context built on base,
	// holding the stage's breaker token tok: a call left running
	// (abandoned, or a hedged race's loser) takes its probe with it.
	attempt(st *stage, n int, model string, b budget.Budget, base context.Context, per, remaining time.Duration, in In, tok breaker.Token) (Out, attemptEnd)
	// committed is set for attempts that pass a commit point (a stream's
	// first chunk) and go on past it: the attempt reports the commit
	// (see engine.commit) and returns when the stream has ended; its
	// success is settled by its caller.
	committed() bool
	// estimate returns the request's estimated tokens on st.
	estimate(st *stage, in In) int64
	// reprompt adjusts in before a retry of an invalid answer.
	reprompt(st *stage, in In, err error) In
}

// attemptEnd is how an attempt ended, besides its result.
type attemptEnd struct {
	err error
	// timedOut is set when the attempt's own window ended it.
	timedOut bool
	// abandoned is set when the call ignored its context and was left
	// behind (Config.AbandonAfter); it keeps the stage's bulkhead slot.
	abandoned bool
	// rejected is set when the call answered and the validator rejected
	// the answer: its usage was spent all the same.
	rejected bool
	// hedge describes the hedge of a hedged attempt, when one started.
	hedge *hedgeEnd
	// slotLeft is set when a hedged attempt's first call lost the race
	// and was left running: it releases the stage's bulkhead slot itself.
	slotLeft bool
	// ended is set when a hedged call panicked or called runtime.Goexit on
	// its goroutine, for the stage to raise again once its guards are
	// accounted for.
	ended *detach.Outcome
	// For a committed attempt: rotations is how many member calls it
	// recorded at its commit point (see engine.commit), and toCommit how
	// long it took to reach it — its latency, for the stage's accounting.
	rotations int
	toCommit  time.Duration
}

// stageEnd is how a stage ended for the request.
type stageEnd struct {
	verdict classify.Verdict
	route   classify.Route
	err     error
	// n is the number of the attempt that succeeded.
	n int
	// winner is the stage whose hedge answered, when it is not this one;
	// loser is then what this stage's own call counts for its breaker.
	winner *stage
	loser  breaker.Outcome
}

// run runs one tier behind its guards — preflight, breaker peek, budget,
// bulkhead, breaker — then its attempts, each behind its rate limiters,
// deciding after each failure whether to retry. The caller makes s with
// its engine, attempter, stage, model and input, and keeps it: on success
// run returns the result with the guards still held in s.h, for the
// caller to release (at once, or when a stream ends); on failure it has
// released them, parked the tier or its model if the class says so, and
// s.end says where the request goes next. (Kept by the caller, s is not
// copied back: a stage's end and guards are a few hundred bytes.)
func (s *stageRun[In, Out, A]) run(r *request) (out Out) {
	e, st, model := s.e, s.st, s.model
	skip, probe := e.preflight(st, model)
	if skip != NotSkipped {
		se := &SkipError{Tier: st.name, Model: model, Skip: skip}
		if skip == SkipRateLimited {
			se.Cooling = e.cooling(st)
		}
		s.end = e.skipped(r, st, model, skip, se)
		return out
	}
	if probe != 0 {
		// A stream's commit point ends the probe early (engine.commit).
		r.probe = probe
		defer func() { st.parking.EndProbe(r.probe); r.probe = 0 }()
	}
	if st.breaker != nil && st.breaker.State() == breaker.Open {
		// An open tier is skipped before anything else is spent: no clock
		// read, no slot. Allow on an open breaker only returns its error.
		tok, err := st.breaker.Allow()
		if err != nil {
			s.end = e.skipped(r, st, model, SkipOpen, err)
			return out
		}
		// It moved to half-open meanwhile: give the probe back, and let
		// the entry below take one in its turn.
		tok.Done(breaker.Ignored)
	}
	try, why, err := e.enter(r, st, &s.h)
	if err != nil {
		if why != NotSkipped {
			s.end = e.skipped(r, st, model, why, err)
			return out
		}
		// The caller gave up, or the time to start an attempt ran out,
		// while queued for a slot.
		v, _ := e.localCause(r, classify.Verdict{Class: classify.DeadlineExhausted, Reason: "no time left to start an attempt"})
		s.end = stageEnd{verdict: v, route: e.table.Action(v.Class).Route, err: err}
		return out
	}
	s.try, s.n = try, 1
	defer s.unwind(r)
	s.cost = s.a.estimate(st, s.in)
	for ; ; s.n++ {
		if out, done := s.next(r); done {
			return out
		}
	}
}

// stageRun is one request's run of a stage's attempts. The request is
// passed to its methods, not held: escape analysis sees a struct as one
// value, and the stage's end (its error) goes to the heap, which would
// take the request, kept on the caller's stack, with it.
type stageRun[In, Out any, A attempter[In, Out]] struct {
	e     *engine
	a     A
	st    *stage
	model string
	in    In
	h     held
	try   budget.Try
	cost  int64
	// n numbers the attempts on the trail; policyN those the retry policy
	// counts (a pool's rotations and retries of invalid answers are not
	// its).
	n, policyN, invalids int
	last                 decision
	end                  stageEnd
	decided              bool
}

// unwind frees the slot and the probe of a stage a panic is unwinding,
// deciding nothing.
func (s *stageRun[In, Out, A]) unwind(r *request) {
	if !s.decided {
		s.e.exit(r, s.st, &s.h, breaker.Ignored)
	}
}

// next makes attempt s.n; done is set when the stage is over (s.end says
// how), with out the answer when it succeeded.
func (s *stageRun[In, Out, A]) next(r *request) (out Out, done bool) {
	e, st := s.e, s.st
	remaining := s.h.remaining
	if s.n > 1 || !s.h.fresh {
		remaining = r.budget.Remaining()
	}
	per, ok := r.budget.Window(remaining, s.try)
	if !ok {
		return out, s.stop(r, SkipBudget, exhausted(remaining, nil))
	}
	r.limitWait, r.fresh = 0, false
	base := e.attemptStarted(r, st, s.model, s.n, remaining)
	// rec carries what the call reports (its responses, its members)
	// through whatever wraps the tier.
	var rec *Record
	if r.listens(st) {
		// An attempt without a window of its own (no deadline, no
		// TryTimeout) needs no deadline: asked inline, not through a call.
		var d time.Time
		own := per != budget.Unlimited
		if own {
			d, own = r.budget.AttemptDeadline(per, remaining)
		}
		if own && !e.stream && !st.hedge.enabled() {
			t := e.newTimedCall(r, st, base, s.model, s.n, s.cost, d)
			rec, base = &t.Record, t
		} else {
			rec = e.newCall(r, st, base, s.model, s.n, s.cost)
			base = rec
		}
	}
	var t0 time.Duration
	timing := r.timing || st.hedge.enabled()
	if timing {
		t0 = e.now()
	}
	res, ae := s.a.attempt(st, s.n, s.model, r.budget, base, per, remaining, s.in, s.h.tok)
	if ae.slotLeft || ae.abandoned {
		// A call left running — a hedged attempt's first call that lost
		// (or whose hedge panicked), or one abandoned for ignoring its
		// context — keeps the slot until it returns, and a probe stays a
		// probe: it reports when it returns (or the breaker's
		// MaxHalfOpenWait writes it off).
		r.slotHandedOff, r.tokenHandedOff = s.h.slot, s.h.tok.IsProbe()
	}
	reraise(ae.ended)
	var latency, ran time.Duration
	switch {
	case ae.err == nil && s.a.committed():
		// A stream ran to its end: what it took to commit is what the
		// stage's accounting needs.
		latency, ran = ae.toCommit, ae.toCommit
	case timing:
		r.lastRead, r.fresh = e.now(), true
		latency = r.lastRead - t0
		ran = latency
	case r.budget.Limited() && (ae.err != nil || st.index > 0):
		// remaining was read when the attempt began: one clock read gives
		// how long it ran.
		ran = remaining - r.budget.Remaining()
	}
	set := settlement{calls: 1}
	if rec != nil && rec.is(recordTouched) {
		// Only a record the tier touched has more to say; an untouched one
		// settles here, without a call.
		set = rec.settled()
	}
	r.limitWait = set.waited
	if set.calls == 0 && ae.hedge == nil {
		// The tier made no upstream call: a pool with every member out, a
		// rate limit's turn refused.
		var se *SkipError
		if errors.As(ae.err, &se) {
			return out, s.stop(r, se.Skip, ae.err)
		}
	}
	r.sum.UpstreamCalls += set.calls
	s.n += ae.rotations
	s.n += e.rotations(r, st, s.model, s.n, set.rotated)
	// mine is the record of the call whose result the attempt takes: the
	// hedge's when it won.
	mine := rec
	if ae.hedge != nil {
		loser := ae.hedge.rec
		if ae.hedge.won {
			mine, loser = ae.hedge.rec, rec
		}
		e.hedgeEnded(r, st, s.model, s.n, ae.hedge, loser)
	}
	if ae.err == nil {
		return s.answered(r, res, &ae, mine, &set, latency, ran), true
	}
	return out, s.failed(r, &ae, mine, &set, latency, ran, per)
}

// rotations records the member calls of a pool that failed and sent
// attempt n to another member at once: upstream calls of their own on the
// trail, numbered from n, outside the retry policy and the stage's
// breaker. It returns how many it recorded.
func (e *engine) rotations(r *request, st *stage, model string, n int, rotated []rotation) int {
	for i, rot := range rotated {
		if rot.told {
			// Observers heard of it as it happened (Record.Rotated).
			r.sum.record(Attempt{Tier: st.name, TierIndex: st.index, Model: model, N: n + i, Verdict: rot.verdict, Latency: rot.latency, Err: rot.err, Member: rot.member})
			continue
		}
		r.member = rot.member
		d := decision{retry: true, outcome: breaker.Ignored, route: e.table.Action(rot.verdict.Class).Route}
		e.attemptFailed(r, st, model, n+i, rot.latency, rot.verdict, d, rot.err, noReply)
	}
	r.member = ""
	return len(rotated)
}

// answered settles a successful attempt: its guards' accounting, its
// record, its report to observers.
func (s *stageRun[In, Out, A]) answered(r *request, res Out, ae *attemptEnd, mine *Record, set *settlement, latency, ran time.Duration) Out {
	e, st := s.e, s.st
	s.decided = true
	st.tally.Call(e.epoch, st.coolDown.Window)
	if st.index > 0 && r.budget.Limited() {
		st.need.Answered(ran)
	}
	won := ae.hedge != nil && ae.hedge.won
	if st.hedge.enabled() {
		// When the hedge won, the first call took at least this long:
		// enough to move the quantile up.
		st.latency.Observe(latency)
	}
	if mine != nil && set.member == "" && !won && !set.asked && !st.plain.Load() {
		// A success that named no member, and no decorator read its
		// record: the tier is plain, and needs no call record when nothing
		// else listens. (Stored once: a store on every success would take
		// the stage's line from every other core.)
		st.plain.Store(true)
	}
	// lost is what the first call counts for when the hedge won: nothing,
	// or the failure it had met before the hedge answered.
	lost := breaker.Ignored
	if won && ae.hedge.primaryErr != nil {
		_, lost = e.outcomeOf(st, ae.hedge.primaryErr, false)
	}
	if s.a.committed() {
		succeeded(st)
		s.end = stageEnd{n: s.n}
		return res
	}
	s.end = stageEnd{n: s.n}
	if won {
		// The hedge answered: the first call lost the race. The answer is
		// the hedge's, marked as such, on its member.
		r.member = ae.hedge.rec.CurrentMember()
		e.answered(r, ae.hedge.stage, ae.hedge.model, s.n, ae.hedge.latency, mine, true)
		r.member = ""
		if ae.hedge.stage != st {
			s.end.winner, s.end.loser = ae.hedge.stage, lost
		}
		return res
	}
	r.member = set.member
	e.answered(r, st, s.model, s.n, latency, mine, false)
	r.member = ""
	return res
}

// failed decides what follows a failed attempt — retry here, or give the
// tier up — and records it; done is set when the stage is over.
func (s *stageRun[In, Out, A]) failed(r *request, ae *attemptEnd, mine *Record, set *settlement, latency, ran, per time.Duration) (done bool) {
	e, st := s.e, s.st
	s.policyN++
	v, d := e.decide(r, st, s.policyN, s.try, failed{err: ae.err, timedOut: ae.timedOut, ran: ran, abandoned: ae.abandoned}, s.h.tok)
	if v.Class == classify.InvalidOutput && s.invalids < st.invalidRetries && !d.retry && !r.budget.Over() && r.ctx.Err() == nil && r.budget.Fits(0, s.try) {
		// Opt-in: the transport was healthy, the answer was not; ask the
		// same tier again (with an adjusted prompt, if the stage says
		// how), never against the breaker or the retry policy.
		s.invalids++
		s.policyN--
		d = decision{retry: true, outcome: breaker.Ignored, route: d.route}
		s.in = s.a.reprompt(st, s.in, ae.err)
	}
	if r.budget.Limited() && (ae.timedOut || v.Class == classify.DeadlineExhausted) && (s.try.Cap == 0 || per < s.try.Cap) {
		// Cut short by the reserve or the deadline, not by its own cap: it
		// needed more than it was given.
		st.need.Cut(ran)
	}
	// A rejected answer (or a partial one a tier returns with its error)
	// was billed: observers that count cost need it.
	desc := mine.close()
	switch {
	case set.memberFailure:
		// A pool member's own 429: the pool judged it for the member.
	case v.Class == classify.RateLimited && v.RetryAfter > 0:
		d.cooling = e.cool(r, st, v)
	default:
		st.tally.Call(e.epoch, st.coolDown.Window)
	}
	r.member = set.member
	e.attemptFailed(r, st, s.model, s.n, latency, v, d, ae.err, desc)
	r.member = ""
	s.end, s.last = stageEnd{verdict: v, route: d.route, err: ae.err}, d
	if set.memberFailure {
		// A pool's member ran out of quota, or was told to wait: the
		// member is parked or cooling down, not the tier.
		s.last.park = classify.ParkNone
	}
	if !d.retry {
		s.decided = true
		e.exit(r, st, &s.h, d.outcome)
		e.park(st, s.model, v, s.last.park)
		return true
	}
	if e.sleep(r, d.wait) != nil || s.h.tok.Stale() {
		// The caller gave up while waiting, or the breaker opened: the
		// last failure stands, as the caller's context says.
		s.decided = true
		e.exit(r, st, &s.h, d.outcome)
		if r.ctx.Err() != nil {
			cv, _ := e.localCause(r, v)
			s.end.verdict, s.end.route = cv, e.table.Action(cv.Class).Route
		}
		return true
	}
	return false
}

// stop ends the stage before attempt s.n is made (or by a tier that made
// no upstream call): a skip for the first, the last failure for a retry.
func (s *stageRun[In, Out, A]) stop(r *request, why Skip, err error) (done bool) {
	e, st := s.e, s.st
	s.decided = true
	if s.n == 1 {
		e.exit(r, st, &s.h, breaker.Ignored)
		s.end = e.skipped(r, st, s.model, why, err)
		return true
	}
	// A retry was planned to fit, but scheduling ate the margin, or its
	// limiter's turn does not fit: the last failure stands, and the
	// refused retry is on the trail.
	e.exit(r, st, &s.h, s.last.outcome)
	e.skip(r, st, s.model, why, err)
	s.end.err = errors.Join(s.end.err, err)
	e.park(st, s.model, s.end.verdict, s.last.park)
	return true
}

// skipped records a skip and says where the request goes after it.
func (e *engine) skipped(r *request, st *stage, model string, why Skip, err error) stageEnd {
	v := e.skip(r, st, model, why, err)
	return stageEnd{verdict: v, route: e.table.Action(v.Class).Route, err: err}
}
