package fallback

import (
	"context"
	"errors"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback/ratelimit"
	"github.com/tierguard/tierguard/internal/budget"
	"github.com/tierguard/tierguard/internal/detach"
)

// attempter runs one attempt of a stage: for the unary chain a call and
// its validation, for the streaming chain the start of a stream up to its
// first chunk with content. Everything around the attempt is runStage's.
type attempter[In, Out any] interface {
	// attempt runs an attempt of window per (remaining was left when the
	// window was computed) on a context built on base, holding g: a call
	// left running (abandoned, or a hedged race's loser) takes g with it.
	attempt(st *stage, b budget.Budget, base context.Context, per, remaining time.Duration, in In, g callGuards) (Out, attemptEnd)
	// committed is set for attempts whose success is only a beginning (a
	// stream's first chunk): their end is reported when it comes.
	committed() bool
	// limits returns the request's limiters on st (its tenant's, the
	// tier's) and its estimated tokens.
	limits(st *stage, ctx context.Context, in In) (tenant *ratelimit.Limiter, tokens int64)
	// reprompt adjusts in before a retry of an invalid answer.
	reprompt(st *stage, in In, err error) In
	// stickyKey is the pool affinity key of in on st, "" for none.
	stickyKey(st *stage, in In) string
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
}

// callGuards are what a call holds besides its stage's bulkhead slot: the
// stage's breaker token, and on a pool the member m (-1 for none) with its
// breaker token.
type callGuards struct {
	tok  breaker.Token
	m    int
	mtok breaker.Token
}

// releaseMember ends g's hold on its pool member, if it has one.
func (e *engine) releaseMember(st *stage, g callGuards, v classify.Verdict, o breaker.Outcome, latency time.Duration) {
	if g.m >= 0 {
		st.pool.done(g.m, g.mtok, v, o, latency, e.quotaPark, e.maxQuotaPark)
	}
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

// errPoolAuth is the failure of a pool whose every member is out for its
// credentials: it fails closed, as Auth on a single tier does.
var errPoolAuth = classify.Wrap(errors.New("tierguard: every member of the pool was refused for its credentials"),
	classify.Verdict{Class: classify.Auth, Reason: "every pool member refused for its credentials"})

// runStage runs one tier behind its guards — preflight, breaker peek,
// budget, bulkhead, breaker — then its attempts, each behind its rate
// limiters (and, for a pool, on a member it picks), deciding after each
// failure whether to retry. On success it returns the result with the
// guards still held, for the caller to release (at once, or when a stream
// ends); on failure it has released them, parked the tier or its model if
// the class says so, and returns where the request goes next.
func runStage[In, Out any, A attempter[In, Out]](e *engine, a A, r *request, st *stage, model string, in In) (out Out, h held, end stageEnd) {
	if why := e.preflight(st, model); why != NotSkipped {
		end.err = &SkipError{Tier: st.name, Model: model, Skip: why}
		return out, h, e.skipped(r, st, model, why, end.err)
	}
	if st.breaker != nil && st.breaker.State() == breaker.Open {
		// An open tier is skipped before anything else is spent: no clock
		// read, no slot. Allow on an open breaker only returns its error.
		tok, err := st.breaker.Allow()
		if err != nil {
			return out, h, e.skipped(r, st, model, SkipOpen, err)
		}
		// It moved to half-open meanwhile: give the probe back, and let
		// the entry below take one in its turn.
		tok.Done(breaker.Ignored)
	}
	h, try, why, err := e.enter(r, st)
	if err != nil {
		if why != NotSkipped {
			return out, h, e.skipped(r, st, model, why, err)
		}
		// The caller gave up, or the time to start an attempt ran out,
		// while queued for a slot.
		v, _ := e.localCause(r, classify.Verdict{Class: classify.DeadlineExhausted, Reason: "no time left to start an attempt"})
		return out, h, stageEnd{verdict: v, route: e.table.Action(v.Class).Route, err: err}
	}
	decided := false
	// member is the pool member the current attempt holds, until it is
	// released or handed to a call left running.
	member := callGuards{m: -1}
	defer func() {
		if !decided {
			// A panic: free the slot, the probe and the member without
			// deciding anything.
			e.exit(r, st, &h, breaker.Ignored)
			e.releaseMember(st, member, classify.Verdict{Class: classify.Canceled, Reason: "the call panicked"}, breaker.Ignored, 0)
		}
	}()
	var lims [2]*ratelimit.Limiter
	var cost int64
	if st.limited {
		lims[0], cost = a.limits(st, r.ctx, in)
		lims[1] = st.limiter
		h.cost = cost
	}
	var key string
	if st.pool != nil {
		key = a.stickyKey(st, in)
	}
	var last decision
	var tried uint64
	// policyN numbers the attempts the retry policy counts: rotations to
	// another pool member and retries of invalid answers are not its.
	policyN, invalids := 0, 0
	for n := 1; ; n++ {
		remaining := h.remaining
		if n > 1 || !h.fresh {
			remaining = r.budget.Remaining()
		}
		per, ok := r.budget.Window(remaining, try)
		// stop ends the stage before an attempt: a skip for the first, the
		// last failure for a retry.
		stop := func(why Skip, err error) (Out, held, stageEnd) {
			decided = true
			if n == 1 {
				e.exit(r, st, &h, breaker.Ignored)
				if why == skipAuth {
					v := classify.Classify(errPoolAuth)
					r.sum.record(Attempt{Tier: st.name, TierIndex: st.index, Model: model, Verdict: v, Err: errPoolAuth})
					return out, h, stageEnd{verdict: v, route: e.table.Action(v.Class).Route, err: errPoolAuth}
				}
				return out, h, e.skipped(r, st, model, why, err)
			}
			// A retry was planned to fit, but scheduling ate the margin,
			// or its limiter's turn does not fit: the last failure stands,
			// and the refused retry is on the trail.
			e.exit(r, st, &h, last.outcome)
			e.skip(r, st, model, why, err)
			end.err = errors.Join(end.err, err)
			if st.pool == nil || end.verdict.Class != classify.QuotaExhausted {
				e.park(st, model, end.verdict, last.park)
			}
			return out, h, end
		}
		if !ok {
			return stop(SkipBudget, exhausted(remaining, nil))
		}
		r.limitWait = 0
		var resv [2]ratelimit.Reservation
		if lims[0] != nil || lims[1] != nil {
			var err error
			if resv, err = e.admit(r, st, lims, cost, try); err != nil {
				if r.ctx.Err() != nil {
					decided = true
					e.exit(r, st, &h, breaker.Ignored)
					v, _ := e.localCause(r, classify.Verdict{Class: classify.DeadlineExhausted, Reason: "no time left to start an attempt"})
					return out, h, stageEnd{verdict: v, route: e.table.Action(v.Class).Route, err: err}
				}
				return stop(SkipRateLimited, err)
			}
			if r.limitWait > 0 {
				// The wait ate into the attempt's window.
				remaining = r.budget.Remaining()
				if per, ok = r.budget.Window(remaining, try); !ok {
					unadmit(resv)
					return stop(SkipBudget, exhausted(remaining, nil))
				}
			}
		}
		m := -1
		var mtok breaker.Token
		if st.pool != nil {
			var why Skip
			m, mtok, why = st.pool.enter(key, tried, cost)
			if m < 0 {
				unadmit(resv)
				return stop(why, &SkipError{Tier: st.name, Model: model, Skip: why})
			}
			member = callGuards{m: m, mtok: mtok}
			r.member = st.pool.members[m].id
		}
		base := e.attemptStarted(r, st, model, n)
		// rec carries what the call's responses report (Report) through
		// whatever the tier wraps.
		var rec *call
		if r.listens(st) {
			rec = e.newCall(r, st, base, model, n, r.member, false)
			base = rec
		}
		var t0 time.Duration
		timing := r.timing || st.hedge.enabled() || st.pool != nil && st.pool.latencyAware
		if timing {
			t0 = e.now()
		}
		res, ae := a.attempt(st, r.budget, base, per, remaining, in, callGuards{tok: h.tok, m: m, mtok: mtok})
		r.sum.UpstreamCalls++
		if ae.slotLeft {
			// A hedged attempt's first call was left running (the hedge
			// won, or panicked): it gives its slot and its probe back when
			// it returns.
			r.slotHandedOff, r.tokenHandedOff = h.slot, h.tok.IsProbe()
		}
		if ae.abandoned {
			// The stuck call keeps the slot until it returns, and a probe
			// stays a probe: it reports its failure when it returns (or the
			// breaker's MaxHalfOpenWait writes it off).
			r.slotHandedOff, r.tokenHandedOff = h.slot, h.tok.IsProbe()
		}
		if ae.slotLeft || ae.abandoned {
			// The call left running releases its pool member itself.
			member.m = -1
		}
		reraise(ae.ended)
		var latency, ran time.Duration
		switch {
		case timing:
			latency = e.now() - t0
			ran = latency
		case r.budget.Limited() && (ae.err != nil || st.index > 0):
			// remaining was read when the attempt began: one clock read
			// gives how long it ran.
			ran = remaining - r.budget.Remaining()
		}
		// mine is the record of the call whose result the attempt takes:
		// the hedge's when it won.
		mine := rec
		if ae.hedge != nil {
			loser := ae.hedge.rec
			if ae.hedge.won {
				mine, loser = ae.hedge.rec, rec
			}
			e.hedgeEnded(r, st, model, n, ae.hedge, loser)
		}
		if ae.err == nil {
			if st.index > 0 && r.budget.Limited() {
				st.need.Answered(ran)
			}
			won := ae.hedge != nil && ae.hedge.won
			if st.hedge.enabled() {
				// When the hedge won, the first call took at least this
				// long: enough to move the quantile up.
				st.latency.observe(latency)
			}
			decided = true
			// lost is what the first call counts for when the hedge won:
			// nothing, or the failure it had met before the hedge answered.
			lostV, lost := classify.Verdict{Class: classify.Canceled}, breaker.Ignored
			if won && ae.hedge.primaryErr != nil {
				lostV, lost = e.outcomeOf(st, ae.hedge.primaryErr, false)
			}
			if won {
				e.releaseMember(st, member, lostV, lost, 0)
			} else {
				e.releaseMember(st, member, classify.Verdict{}, breaker.Success, latency)
			}
			member.m = -1
			if lims[1] != nil {
				lims[1].Passed()
			}
			if a.committed() {
				succeeded(st)
				return res, h, stageEnd{n: n}
			}
			d, _ := mine.close()
			if d.HasUsage && st.limited {
				corrected(lims, m, st, cost, d.Usage)
			}
			if won {
				// The hedge answered: the first call lost the race. The
				// answer is the hedge's, marked as such, on its member.
				r.member = ae.hedge.member
				e.answered(r, ae.hedge.stage, ae.hedge.model, n, ae.hedge.latency, &d, true)
				r.member = ""
				end := stageEnd{n: n}
				if ae.hedge.stage != st {
					end.winner, end.loser = ae.hedge.stage, lost
				}
				return res, h, end
			}
			e.answered(r, st, model, n, latency, &d, false)
			return res, h, stageEnd{n: n}
		}
		policyN++
		v, d := e.decide(r, st, policyN, try, failed{err: ae.err, timedOut: ae.timedOut, ran: ran, abandoned: ae.abandoned}, h.tok)
		if v.Class == classify.RateLimited && lims[1] != nil {
			lims[1].Throttle(v.RetryAfter)
		}
		if m >= 0 {
			e.releaseMember(st, member, v, d.outcome, 0)
			member.m = -1
			tried |= 1 << m
			if rotates(v.Class) && !r.budget.Over() && r.ctx.Err() == nil && st.pool.another(tried) {
				// This member's quota or credentials, not the tier's: the
				// next member first, at once, outside the retry policy.
				policyN--
				d = decision{retry: true, outcome: breaker.Ignored, route: d.route}
			} else if d.retry {
				// A retry after a backoff may go to any member again.
				tried = 0
			}
		}
		if v.Class == classify.InvalidOutput && invalids < st.invalidRetries && !d.retry && !r.budget.Over() && r.ctx.Err() == nil && r.budget.Fits(0, try) {
			// Opt-in: the transport was healthy, the answer was not; ask
			// the same tier again (with an adjusted prompt, if the stage
			// says how), never against the breaker or the retry policy.
			invalids++
			policyN--
			d = decision{retry: true, outcome: breaker.Ignored, route: d.route}
			in = a.reprompt(st, in, ae.err)
		}
		if r.budget.Limited() && (ae.timedOut || v.Class == classify.DeadlineExhausted) && (try.Cap == 0 || per < try.Cap) {
			// Cut short by the reserve or the deadline, not by its own cap:
			// it needed more than it was given.
			st.need.Cut(ran)
		}
		// A rejected answer (or a partial one a tier returns with its
		// error) was billed: observers that count cost need it.
		desc, _ := mine.close()
		e.attemptFailed(r, st, model, n, latency, v, d, ae.err, &desc)
		r.member = ""
		end, last = stageEnd{verdict: v, route: d.route, err: ae.err}, d
		if !d.retry {
			decided = true
			e.exit(r, st, &h, d.outcome)
			if st.pool == nil || v.Class != classify.QuotaExhausted {
				// A pool's quota is its members': they are parked, not the
				// tier.
				e.park(st, model, v, d.park)
			}
			return out, h, end
		}
		if e.sleep(r, d.wait) != nil || h.tok.Stale() {
			// The caller gave up while waiting, or the breaker opened: the
			// last failure stands, as the caller's context says.
			decided = true
			e.exit(r, st, &h, d.outcome)
			if r.ctx.Err() != nil {
				cv, _ := e.localCause(r, v)
				end.verdict, end.route = cv, e.table.Action(cv.Class).Route
			}
			return out, h, end
		}
	}
}

// skipped records a skip and says where the request goes after it.
func (e *engine) skipped(r *request, st *stage, model string, why Skip, err error) stageEnd {
	v := e.skip(r, st, model, why, err)
	return stageEnd{verdict: v, route: e.table.Action(v.Class).Route, err: err}
}
