package fallback

import (
	"context"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/internal/budget"
)

// attempter runs one attempt of a stage: for the unary chain a call and
// its validation, for the streaming chain the start of a stream up to its
// first chunk with content. Everything around the attempt is runStage's.
type attempter[In, Out any] interface {
	// attempt runs an attempt of window per (remaining was left when the
	// window was computed) on a context built on base. tok is the stage's
	// breaker token, which an abandoned call takes with it.
	attempt(st *stage, b budget.Budget, base context.Context, per, remaining time.Duration, in In, tok breaker.Token) (Out, attemptEnd)
	// describe reads the token usage and the response description of an
	// attempt's answer (a success, or an answer the validator rejected).
	describe(st *stage, out Out) (Usage, bool, ResponseInfo)
	// committed is set for attempts whose success is only a beginning (a
	// stream's first chunk): their end is reported when it comes.
	committed() bool
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
}

// described is what an attempt's answer says about itself, for observers.
type described struct {
	usage    Usage
	hasUsage bool
	resp     ResponseInfo
}

// stageEnd is how a stage ended for the request.
type stageEnd struct {
	verdict classify.Verdict
	route   classify.Route
	err     error
	// n is the number of the attempt that succeeded.
	n int
}

// runStage runs one tier behind its guards — preflight, breaker peek,
// budget, bulkhead, breaker — then its attempts, deciding after each
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
	defer func() {
		if !decided {
			// A panic: free the slot and the probe without deciding anything.
			e.exit(r, st, &h, breaker.Ignored)
		}
	}()
	var last decision
	for n := 1; ; n++ {
		remaining := h.remaining
		if n > 1 || !h.fresh {
			remaining = r.budget.Remaining()
		}
		per, ok := r.budget.Window(remaining, try)
		if !ok {
			decided = true
			if n == 1 {
				e.exit(r, st, &h, breaker.Ignored)
				return out, h, e.skipped(r, st, model, SkipBudget, exhausted(remaining, nil))
			}
			// A retry was planned to fit, but scheduling ate the margin:
			// the last failure stands.
			e.exit(r, st, &h, last.outcome)
			e.park(st, model, end.verdict, last.park)
			return out, h, end
		}
		base := e.attemptStarted(r, st, model, n)
		var t0 time.Time
		if r.timing {
			t0 = time.Now()
		}
		res, ae := a.attempt(st, r.budget, base, per, remaining, in, h.tok)
		r.sum.UpstreamCalls++
		if ae.abandoned {
			// The stuck call keeps the slot until it returns, and a probe
			// stays a probe: it reports its failure when it returns (or the
			// breaker's MaxHalfOpenWait writes it off).
			r.slotHandedOff, r.tokenHandedOff = h.slot, h.tok.IsProbe()
		}
		var latency, ran time.Duration
		switch {
		case r.timing:
			latency = time.Since(t0)
			ran = latency
		case r.budget.Limited() && (ae.err != nil || st.index > 0):
			// remaining was read when the attempt began: one clock read
			// gives how long it ran.
			ran = remaining - r.budget.Remaining()
		}
		if ae.err == nil {
			if st.index > 0 && r.budget.Limited() {
				st.need.Answered(ran)
			}
			decided = true
			if a.committed() {
				succeeded(st)
				return res, h, stageEnd{n: n}
			}
			var d described
			if r.obs != nil {
				d.usage, d.hasUsage, d.resp = a.describe(st, res)
			}
			e.answered(r, st, model, n, latency, &d)
			return res, h, stageEnd{n: n}
		}
		v, d := e.decide(r, st, n, try, failed{err: ae.err, timedOut: ae.timedOut, ran: ran, abandoned: ae.abandoned}, h.tok)
		if r.budget.Limited() && (ae.timedOut || v.Class == classify.DeadlineExhausted) && (try.Cap == 0 || per < try.Cap) {
			// Cut short by the reserve or the deadline, not by its own cap:
			// it needed more than it was given.
			st.need.Cut(ran)
		}
		var desc described
		if r.obs != nil {
			// A rejected answer (or a partial one a tier returns with its
			// error) was billed: observers that count cost need it.
			desc.usage, desc.hasUsage, desc.resp = a.describe(st, res)
		}
		e.attemptFailed(r, st, model, n, latency, v, d, ae.err, &desc)
		end, last = stageEnd{verdict: v, route: d.route, err: ae.err}, d
		if !d.retry {
			decided = true
			e.exit(r, st, &h, d.outcome)
			e.park(st, model, v, d.park)
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
