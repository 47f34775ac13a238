package fallback

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/internal/budget"
)

// defaultHedgeExtra is Hedge.MaxExtra's default: at most a tenth more
// calls.
const defaultHedgeExtra = 0.1

// hedgeEnd describes a hedge that started.
type hedgeEnd struct {
	// stage and model are where the hedge ran.
	stage *stage
	model string
	// won is set when the hedge answered first; otherwise err is its
	// failure, or nil when it was cancelled because the first call won.
	won     bool
	err     error
	latency time.Duration
	// primaryErr is the first call's failure, when it had failed before
	// the hedge answered (nil when it was still running).
	primaryErr error
	// rec is the hedge's call record, when the request listens: what it
	// reported, and the member it went to.
	rec *Record
	// phase is where the hedge's call stands (hedgeWaiting, ...), shared
	// by the race and the hedge's goroutine: it decides who settles the
	// call's upstream calls, so that each is counted once. callErr is the
	// tier's error, written before phase becomes hedgeReturned: the race
	// may end before it takes the hedge's result.
	phase   atomic.Int32
	callErr error
}

// The phases of a hedge's call. The race ends while the hedge's call is
// waiting to start (it then never starts), calling (it settles its calls
// itself when it returns, as a LateReply), or returned (the attempt settles
// them with its own).
const (
	hedgeWaiting int32 = iota
	hedgeCalling
	hedgeReturned
	hedgeDropped     // the race ended before the call started: no call
	hedgeSettleLater // the race ended during the call
)

// hedgeEnded records the call that lost a hedged attempt's race (or the
// hedge that failed): an upstream call in the trail, flagged Hedge when it
// was the hedge. loser is that call's record: what it reported so far
// rides its event, and a reply after this is late.
func (e *engine) hedgeEnded(r *request, st *stage, model string, n int, he *hedgeEnd, loser *Record) {
	if !he.won {
		switch {
		case he.phase.CompareAndSwap(hedgeWaiting, hedgeDropped):
			// Its call never started, and now never will.
			he.rec.close()
			st.hedges.Refund()
			return
		case he.phase.CompareAndSwap(hedgeCalling, hedgeSettleLater):
			// Still calling: what its tier will have called is known
			// when it returns, and settled then (settleLate).
			he.rec.close()
			e.hedgeLost(r, he, n)
			return
		}
	}
	reply := loser.close()
	// The hedge's own upstream calls; the first call's are counted with
	// its attempt.
	hset := he.rec.settled()
	if !he.won {
		herr := he.err
		if herr == nil {
			herr = he.callErr
		}
		var se *SkipError
		switch {
		case errors.As(herr, &se) && (he.rec == nil || hset.calls == 0):
			// The tier made no call: a pool with no other member in
			// rotation, a limiter's turn refused.
			e.hedgeSkipped(r, st, he, se.Skip, herr)
			return
		case he.rec != nil && hset.calls == 0:
			// Its tier counts its calls and made none (it saw the race
			// was over): nothing to tell.
			st.hedges.Refund()
			return
		}
	}
	r.sum.UpstreamCalls += hset.calls
	// A hedge's member calls that failed before its last were kept from
	// observers while it raced (Record.Rotated): each is a call of its own.
	e.rotations(r, he.stage, he.model, n, hset.rotated)
	a := Attempt{Tier: he.stage.name, TierIndex: he.stage.index, Model: he.model, N: n, Member: loser.CurrentMember(), Hedge: true, Latency: he.latency, Err: he.err}
	a.Verdict = classify.Verdict{Class: classify.Canceled, Reason: "lost the race to the first call"}
	if he.won {
		a = Attempt{Tier: st.name, TierIndex: st.index, Model: model, N: n, Member: loser.CurrentMember(),
			Verdict: classify.Verdict{Class: classify.Canceled, Reason: "lost the race to the hedge"}}
		if he.primaryErr != nil {
			a.Verdict, a.Err = st.classifier.Classify(he.primaryErr), he.primaryErr
		}
	} else if he.err != nil {
		a.Verdict = he.stage.classifier.Classify(he.err)
	}
	r.sum.record(a)
	if r.obs != nil {
		on := he.stage
		if he.won {
			on = st
		}
		ev := e.event(r, on, a.Model, n)
		ev.Member, ev.Hedge = a.Member, a.Hedge
		ev.Verdict, ev.Latency, ev.Err = a.Verdict, a.Latency, a.Err
		ev.Reply = reply
		r.obs.AttemptEnded(r.ctx, ev)
	}
}

// hedgeLost records a hedge that lost the race while its call was still
// running: on the trail, as a call that lost; its upstream calls, and so
// its AttemptEnd's place, go to observers when it returns (settleLate).
func (e *engine) hedgeLost(r *request, he *hedgeEnd, n int) {
	on := he.stage
	a := Attempt{Tier: on.name, TierIndex: on.index, Model: he.model, N: n, Member: he.rec.CurrentMember(), Hedge: true, Err: he.err,
		Verdict: classify.Verdict{Class: classify.Canceled, Reason: "lost the race to the first call"}}
	if he.err != nil {
		// Abandoned for ignoring its context.
		a.Verdict = on.classifier.Classify(he.err)
	}
	r.sum.record(a)
}

// settleLate reports the upstream calls of a hedge whose attempt ended
// while it ran, now that it returned: a LateReply with its calls, for
// observers that count them (a cost ledger), and what its responses
// reported before the attempt ended (a stream reports as it goes); what
// they reported after went out as late replies of their own as it came.
func (e *engine) settleLate(he *hedgeEnd) {
	c := he.rec
	if c == nil || c.obs == nil {
		return
	}
	calls := c.settled().calls
	// Closed when the race ended: nothing writes its reply any more.
	reply := c.close()
	if calls == 0 && reply == noReply {
		return
	}
	c.obs.LateReplyReceived(c.reqCtx, LateReply{Stage: c.st.info, Model: c.model, Attempt: int(c.n), Member: c.CurrentMember(),
		Hedge: true, Reply: reply, Calls: calls})
}

// hedgeSkipped records a hedge whose tier made no call: a skip on the
// trail, marked Hedge, and a TierSkip to observers — never an attempt, which
// a cost ledger counts as a call. The hedge budget it took goes back to st,
// the stage whose attempt it hedged.
func (e *engine) hedgeSkipped(r *request, st *stage, he *hedgeEnd, why Skip, err error) {
	st.hedges.Refund()
	on := he.stage
	v := skipVerdict(why, false)
	r.sum.record(Attempt{Tier: on.name, TierIndex: on.index, Model: he.model, Hedge: true, Skip: why, Verdict: v, Err: err})
	if r.obs != nil {
		r.obs.TierSkipped(r.ctx, TierSkip{Stage: on.info, Model: he.model, Skip: why, Hedge: true, Verdict: v, Err: err,
			Route: e.table.Action(v.Class).Route, Breaker: breakerState(on), Remaining: r.remaining()})
	}
}

// hedgeCall is a hedge ready to run: its context and its call, and the
// release of its guards with its outcome. avoid is, for a hedge on the
// same tier, the member the first call holds.
type hedgeCall struct {
	ctx     *budget.Context
	end     hedgeEnd
	avoid   string
	release func(v classify.Verdict, o breaker.Outcome, latency time.Duration)
}

// prepareHedge takes the guards of a hedge for an attempt on st whose
// first call's record is first (nil when the request has none): another
// member of the same tier when the first call named one (a pool, however
// wrapped; the pool takes that member's guards), or else the next tier,
// behind its breaker, bulkhead (without waiting) and limiter (without
// waiting), within the time the deadline leaves it. nil when no hedge can
// run now.
// At the hedge's delay (late is false) it spends the budget only while
// more than one hedge is banked: when hedges are scarce they go to the
// calls still running a quarter of the delay later — the slow ones, not
// those a moment late.
func (e *engine) prepareHedge(b budget.Budget, st *stage, base context.Context, first *Record, nextModel string, late bool) *hedgeCall {
	least := int64(2)
	if late {
		least = 1
	}
	if !st.hedges.Take(least) {
		return nil
	}
	if member := first.CurrentMember(); member != "" {
		if deadline, ok := e.hedgeWindow(b, st); ok {
			return &hedgeCall{ctx: budget.NewContext(base, deadline), end: hedgeEnd{stage: st, model: first.model}, avoid: member,
				release: func(classify.Verdict, breaker.Outcome, time.Duration) {}}
		}
	}
	hc := e.nextTierHedge(b, st, base, nextModel)
	if hc == nil {
		st.hedges.Refund()
	}
	return hc
}

// hedgeWindow is when a hedge starting now on st must end: an attempt's
// window of its own — st's TryTimeout, within what the deadline leaves
// after the reserve for the tiers after st — as a first call gets; the
// zero time when nothing bounds it. ok is false when no useful attempt
// fits.
func (e *engine) hedgeWindow(b budget.Budget, st *stage) (time.Time, bool) {
	per, _, ok := e.hedgePer(b, st)
	if !ok || per == budget.Unlimited {
		return time.Time{}, ok
	}
	return time.Now().Add(per), true
}

// hedgePer is hedgeWindow as a length (budget.Unlimited when nothing
// bounds it), with what the budget had left when it was measured.
func (e *engine) hedgePer(b budget.Budget, st *stage) (per, remaining time.Duration, ok bool) {
	remaining = b.Remaining()
	try := st.try
	if b.Limited() {
		try.Reserve = e.reserveFor(st.index, remaining)
	}
	per, ok = b.Window(remaining, try)
	return per, remaining, ok
}

// nextTierHedge takes the guards of a hedge on the tier after st.
func (e *engine) nextTierHedge(b budget.Budget, st *stage, base context.Context, nextModel string) *hedgeCall {
	if st.index+1 >= len(e.stages) {
		return nil
	}
	ns := &e.stages[st.index+1]
	if ns.parking.Occupied() {
		// Parked, or at the end of a cool-down whose one probe is a
		// request's, not a hedge's.
		return nil
	}
	if nextModel != "" && (e.retired.Has(nextModel, e.epoch) || e.catalog != nil && !e.catalog.Available(nextModel)) {
		return nil
	}
	deadline, ok := e.hedgeWindow(b, ns)
	if !ok {
		return nil
	}
	var tok breaker.Token
	if ns.breaker != nil {
		t, err := ns.breaker.Allow()
		if err != nil {
			return nil
		}
		tok = t
	}
	if ns.bulkhead != nil && !ns.bulkhead.TryAcquire() {
		tok.Done(breaker.Ignored)
		return nil
	}
	return &hedgeCall{ctx: budget.NewContext(base, deadline), end: hedgeEnd{stage: ns, model: nextModel},
		release: func(_ classify.Verdict, o breaker.Outcome, _ time.Duration) {
			tok.Done(o)
			if ns.bulkhead != nil {
				ns.bulkhead.Release()
			}
		}}
}

// outcomeOf is how a hedged call's error counts for its breaker: a call
// cancelled because it lost the race does not count.
func (e *engine) outcomeOf(st *stage, err error, lost bool) (classify.Verdict, breaker.Outcome) {
	if err == nil {
		return classify.Verdict{}, breaker.Success
	}
	v := st.classifier.Classify(err)
	if lost {
		return classify.Verdict{Class: classify.Canceled, Reason: "lost the race"}, breaker.Ignored
	}
	if e.table.Action(v.Class).BreakerFailure {
		return v, breaker.Failure
	}
	return v, breaker.Ignored
}
