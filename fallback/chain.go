package fallback

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/internal/budget"
	"github.com/tierguard/tierguard/internal/detach"
	"github.com/tierguard/tierguard/validate"
)

// Chain answers requests from a list of model tiers, then a cache, then a
// default, all inside one deadline. Build it once with New and share it:
// it is safe for concurrent use, and Do keeps its per-call state on the
// stack.
type Chain[In, Out any] struct {
	base[In]
	tiers      []ModelTier[In, Out]
	validators []validate.Validator[Out]
	cache      Cache[In, Out]
	def        func(context.Context, In) (Out, bool)
	key        func(In) string

	flightMu sync.Mutex
	flights  map[string]*flight[Out]
}

// New compiles a chain from cfg, or returns an error naming every invalid
// field.
func New[In, Out any](cfg Config[In, Out]) (*Chain[In, Out], error) {
	e, err := newEngine("config", cfg.shared(), cfg.specs())
	if err != nil {
		return nil, err
	}
	c := &Chain[In, Out]{
		base: newBase[In](e, len(cfg.Stages)), tiers: make([]ModelTier[In, Out], len(cfg.Stages)), validators: make([]validate.Validator[Out], len(cfg.Stages)),
		cache: cfg.Cache, def: cfg.Default, key: cfg.Key, flights: make(map[string]*flight[Out]),
	}
	for i, s := range cfg.Stages {
		c.tiers[i], c.validators[i] = s.Tier, s.Validate
		c.modelFors[i] = s.ModelFor
		c.tokens[i], c.reprompts[i] = s.Tokens, s.Reprompt
	}
	return c, nil
}

// Do answers in. It tries each tier in order — preflight, bulkhead,
// breaker, then attempts with retries — inside one deadline, then the cache,
// then the default. On failure the error is an *Error that wraps every
// tier's error; a fail-closed class (Auth, Safety, InvalidRequest,
// Canceled by default) returns at once with its cause.
//
// A panic in a tier propagates to the caller after the tier's bulkhead slot
// and probe are released.
func (c *Chain[In, Out]) Do(ctx context.Context, in In) (Result[Out], error) {
	if c.key != nil && ctx.Value(inFlight{}) == nil {
		if k := c.key(in); k != "" {
			return c.shared(ctx, k, in)
		}
	}
	var r request
	c.begin(ctx, &r)
	if r.obs != nil {
		if c.key != nil {
			r.flight, _ = ctx.Value(inFlight{}).(*starter)
		}
		// Every return ends the request (r.ended) after what it made for
		// itself was released: only an unwinding one needs the recover,
		// which costs a call into the runtime on every return.
		defer func() {
			if !r.ended {
				c.unwound(&r, recover())
			}
		}()
	}
	var last classify.Verdict
	for i := range c.stages {
		st := &c.stages[i]
		s := stageRun[In, Out, *Chain[In, Out]]{e: c.engine, a: c, st: st, model: c.modelFor(i, in), in: in}
		out := s.run(&r)
		if end := &s.end; end.err == nil {
			win, o := st, breaker.Success
			if end.winner != nil {
				// The next tier's hedge answered; this tier's call lost the
				// race, and counts only for a failure it had already met.
				win, o = end.winner, end.loser
			}
			c.exit(&r, st, &s.h, o)
			c.answeredBy(&r, win, win.index > 0)
			if c.cache != nil {
				// The write-back is the request's work: within its budget,
				// the chain's own Total included.
				c.cache.Put(r.localContext(), in, out)
				r.finish()
			} else {
				r.doneAt = r.lastRead
			}
			c.end(&r, nil, classify.Verdict{}, 0)
			return Result[Out]{Value: out, Summary: r.sum}, nil
		}
		last = s.end.verdict
		switch s.end.route {
		case classify.RouteFailClosed:
			return c.fail(&r, s.end.verdict, true)
		case classify.RouteLocal:
			return c.local(&r, in, s.end.verdict)
		}
	}
	return c.local(&r, in, last)
}

// attempt makes one call and validates its answer.
func (c *Chain[In, Out]) attempt(st *stage, _ int, _ string, b budget.Budget, base context.Context, per, remaining time.Duration, in In, tok breaker.Token) (out Out, end attemptEnd) {
	if st.hedge.enabled() {
		return c.hedged(st, b, base, per, remaining, in, tok)
	}
	ctx, ctl := attemptContext(b, base, per, remaining)
	tier := c.tiers[st.index]
	if c.abandonAfter > 0 {
		// A call is a stream of one answer, read on its own goroutine.
		rd := readDetached(c.engine, st, ctx, func(yield func(Out, error) bool) { yield(tier.Call(ctx, in)) }, tok)
		out, end.err, _ = nextOf(rd)
		end.abandoned = rd.Stop()
	} else {
		out, end.err = tier.Call(ctx, in)
	}
	if ctl != nil {
		end.timedOut = end.err != nil && ctl.Expired()
		ctl.Cancel()
	}
	if end.err == nil {
		if err := c.check(st, out); err != nil {
			end.err, end.rejected = err, true
		}
	}
	return out, end
}

// check validates an answer of st.
func (c *Chain[In, Out]) check(st *stage, out Out) error {
	if v := c.validators[st.index]; v != nil {
		if verr := v.Validate(out); verr != nil {
			return asInvalidOutput(verr)
		}
	}
	return nil
}

// hedged is one result of a hedged attempt's race; ended is set when the
// call panicked or called runtime.Goexit.
type hedged[Out any] struct {
	out      Out
	err      error
	hedge    bool
	timedOut bool
	latency  time.Duration
	ended    *detach.Outcome
}

// The states of a hedged attempt's first call: running; returned (the
// attempt takes its result); lost (the hedge won, or panicked, and the
// call was left to finish); stuck (it ignored its context for
// AbandonAfter). A call lost or stuck gives back its own guards.
const (
	callRunning int32 = iota
	callReturned
	callLost
	callStuck
)

// hedged runs a hedged attempt: the first call on its own goroutine, and,
// if it has not answered after the stage's hedge delay (and the hedge
// budget allows), a second one on another member of the tier (when the
// first call named one: a pool) or on the next tier. The first valid answer wins and the other call's context is
// cancelled; a loser still running releases its own guards when it
// returns (the first call's bulkhead slot and half-open probe included),
// so none is held past its call or released early. With AbandonAfter, a
// first call that ignores its context is abandoned as it would be
// unhedged. A panic or Goexit in either call ends the attempt, to be
// raised again on the caller's goroutine.
func (c *Chain[In, Out]) hedged(st *stage, b budget.Budget, base context.Context, per, remaining time.Duration, in In, tok breaker.Token) (Out, attemptEnd) {
	st.hedges.Attempted()
	var deadline time.Time
	if per != budget.Unlimited {
		if d, ok := b.Deadline(); ok {
			deadline = d.Add(per - remaining)
		} else {
			deadline = time.Now().Add(per)
		}
	}
	r := &race[In, Out]{c: c, st: st, b: b, base: base, in: in, tok: tok, ctx: budget.NewContext(base, deadline),
		results: make(chan hedged[Out], 2), pending: 1}
	r.first = ownRecord(base)
	r.lostOutcome.Store(uint32(breaker.Ignored))
	go r.runFirst()
	delay, hedging := st.latency.Delay()
	var timer <-chan time.Time
	var t *time.Timer
	if hedging {
		t = time.NewTimer(delay)
		defer t.Stop()
		timer = t.C
	}
	// ctxDone arms the abandonment of a call that outlives its context by
	// AbandonAfter: the first call's, then, once it has failed, the
	// hedge's.
	var ctxDone <-chan struct{}
	var abandon <-chan time.Time
	if c.abandonAfter > 0 {
		ctxDone = r.ctx.Done()
	}
	for {
		select {
		case res := <-r.results:
			if out, end, done := r.returned(res); done {
				return out, end
			}
			if r.failedFirst != nil && r.pending > 0 && c.abandonAfter > 0 && !res.hedge {
				// The hedge runs on, in a window of its own: from now on
				// the abandonment follows it.
				ctxDone, abandon = r.hc.ctx.Done(), nil
			}
		case <-ctxDone:
			ctxDone = nil
			a := time.NewTimer(c.abandonAfter)
			defer a.Stop()
			abandon = a.C
		case <-abandon:
			abandon = nil
			if out, end, done := r.abandoned(); done {
				return out, end
			}
		case <-timer:
			timer = nil
			if !r.startHedge() {
				// No hedge now (the budget is spent, the next tier is
				// busy): look again while the first call runs, a quarter
				// of the delay later — the budget refills as other
				// requests make attempts.
				t.Reset(max(delay/4, time.Millisecond))
				timer = t.C
			}
		}
	}
}

// race is one hedged attempt: its first call and, once started, its hedge.
// The calls run on goroutines of their own and hand their results over
// results; state and lostOutcome are shared with the first call's
// goroutine.
type race[In, Out any] struct {
	c     *Chain[In, Out]
	st    *stage
	b     budget.Budget
	base  context.Context
	in    In
	tok   breaker.Token
	first *Record
	ctx   *budget.Context

	results chan hedged[Out]
	state   atomic.Int32
	// lostOutcome is what a probe left running reports when it returns: a
	// race lost to the next tier says nothing of this tier's health, one
	// lost to another member of this tier's pool means the tier answered,
	// and a call abandoned for ignoring its context failed.
	lostOutcome atomic.Uint32

	end attemptEnd
	hc  *hedgeCall
	// failedFirst is the first call's result once it failed.
	failedFirst   *hedged[Out]
	pending       int
	late          bool
	hedgeReturned bool
}

// runFirst makes the first call. Left to finish (the race lost, or
// abandoned), it gives back its own slot and probe when it returns.
func (r *race[In, Out]) runFirst() {
	c, st, ctx := r.c, r.st, r.ctx
	var res hedged[Out]
	detach.Run(func() {
		t0 := c.now()
		out, err := c.tiers[st.index].Call(ctx, r.in)
		if err == nil {
			err = c.check(st, out)
		}
		res = hedged[Out]{out: out, err: err, timedOut: err != nil && ctx.Expired(), latency: c.now() - t0}
	}, func(o detach.Outcome) {
		if o.Ended() {
			res = hedged[Out]{ended: &o}
		}
		if !r.state.CompareAndSwap(callRunning, callReturned) {
			if st.bulkhead != nil {
				st.bulkhead.Release()
			}
			if r.tok.IsProbe() {
				r.tok.Done(breaker.Outcome(r.lostOutcome.Load()))
			}
			if r.state.Load() == callStuck {
				c.counters.Stuck.Add(-1)
			}
		}
		r.results <- res
	})
}

// cancelHedge cancels a hedge that started.
func (r *race[In, Out]) cancelHedge() {
	if r.hc != nil {
		r.hc.ctx.Cancel()
	}
}

// abandonHedge marks a hedge still running when the attempt gives up on
// its calls: it is left behind too, and gives back its own guards.
func (r *race[In, Out]) abandonHedge() {
	if r.hc != nil && !r.hedgeReturned {
		r.end.hedge.err = errAbandoned
		r.hc.ctx.Cancel()
	}
}

// returned takes one call's result; done is set when the attempt is over.
func (r *race[In, Out]) returned(res hedged[Out]) (out Out, end attemptEnd, done bool) {
	r.pending--
	r.hedgeReturned = r.hedgeReturned || res.hedge
	switch {
	case res.ended != nil && res.hedge:
		// The first call, if still running, is left to finish.
		r.end.slotLeft = r.state.CompareAndSwap(callRunning, callLost)
		r.ctx.Cancel()
		r.end.ended = res.ended
		return out, r.end, true
	case res.ended != nil:
		r.cancelHedge()
		r.ctx.Cancel()
		return res.out, attemptEnd{ended: res.ended, hedge: r.end.hedge}, true
	case res.err == nil && res.hedge:
		r.end.hedge.won, r.end.hedge.latency = true, res.latency
		if r.failedFirst != nil {
			// The first call had failed while the hedge ran: its failure
			// still counts for its tier.
			r.end.hedge.primaryErr = r.failedFirst.err
		}
		if r.hc.end.stage == r.st {
			r.lostOutcome.Store(uint32(breaker.Success))
		}
		r.end.slotLeft = r.state.CompareAndSwap(callRunning, callLost)
		r.ctx.Cancel()
		return res.out, r.end, true
	case res.err == nil:
		r.cancelHedge()
		return res.out, r.end, true
	case res.hedge:
		r.end.hedge.err = res.err
	default:
		r.failedFirst = &res
	}
	if r.pending == 0 {
		r.ctx.Cancel()
		f := r.failedFirst
		return f.out, attemptEnd{err: f.err, timedOut: f.timedOut, hedge: r.end.hedge}, true
	}
	return out, end, false
}

// abandoned gives up on a call that outlived its context by
// AbandonAfter; done is set when the attempt is over.
func (r *race[In, Out]) abandoned() (out Out, end attemptEnd, done bool) {
	if f := r.failedFirst; f != nil {
		// Only a hedge is left, and it gives back its own guards.
		r.abandonHedge()
		return f.out, attemptEnd{err: f.err, timedOut: f.timedOut, hedge: r.end.hedge}, true
	}
	r.lostOutcome.Store(uint32(breaker.Failure))
	if r.state.CompareAndSwap(callRunning, callStuck) {
		r.c.counters.Stuck.Add(1)
		r.c.counters.Abandoned.Add(1)
		r.abandonHedge()
		return out, attemptEnd{err: errAbandoned, abandoned: true, hedge: r.end.hedge}, true
	}
	// It returned meanwhile: its result is on its way.
	r.lostOutcome.Store(uint32(breaker.Ignored))
	return out, end, false
}

// startHedge starts the hedge, if one can run now.
func (r *race[In, Out]) startHedge() bool {
	c := r.c
	hc := c.prepareHedge(r.b, r.st, r.base, r.first, c.hedgeModel(r.st, r.in), r.late)
	r.late = true
	if hc == nil {
		return false
	}
	r.hc, r.end.hedge = hc, &hc.end
	r.pending++
	var hctx context.Context = hc.ctx
	if first := r.first; first != nil {
		// The hedge's replies and members are its own call's; on the same
		// tier, it avoids the first call's member.
		hc.end.rec = first.hedgeOf(hc.ctx, hc.end.stage, hc.end.model, hc.avoid)
		hctx = hc.end.rec
	}
	go r.runHedge(hc, hctx)
	return true
}

// runHedge makes the hedge's call and releases its guards.
func (r *race[In, Out]) runHedge(hc *hedgeCall, hctx context.Context) {
	c := r.c
	var res hedged[Out]
	released := false
	detach.Run(func() {
		if !hc.end.phase.CompareAndSwap(hedgeWaiting, hedgeCalling) {
			// The race ended before the call started: it makes none.
			released = true
			hc.release(classify.Verdict{Class: classify.Canceled}, breaker.Ignored, 0)
			res = hedged[Out]{err: context.Canceled, hedge: true}
			return
		}
		t0 := c.now()
		out, err := c.tiers[hc.end.stage.index].Call(hctx, r.in)
		hc.end.callErr = err
		if !hc.end.phase.CompareAndSwap(hedgeCalling, hedgeReturned) {
			// The race ended during the call: this goroutine settles it.
			c.settleLate(&hc.end)
		}
		if err == nil {
			err = c.check(hc.end.stage, out)
		}
		lost := err != nil && hc.ctx.Err() != nil && !hc.ctx.Expired() && r.base.Err() == nil
		latency := c.now() - t0
		v, o := c.outcomeOf(hc.end.stage, err, lost)
		released = true
		hc.release(v, o, latency)
		res = hedged[Out]{out: out, err: err, hedge: true, latency: latency}
	}, func(o detach.Outcome) {
		if o.Ended() {
			if !released {
				// A panic decides nothing for the hedge's guards.
				hc.release(classify.Verdict{Class: classify.Canceled}, breaker.Ignored, 0)
			}
			res = hedged[Out]{hedge: true, ended: &o}
		}
		hc.ctx.Cancel()
		r.results <- res
	})
}

// hedgeModel is the model a next-tier hedge of st would use for in.
func (c *Chain[In, Out]) hedgeModel(st *stage, in In) string {
	if st.index+1 >= len(c.stages) {
		return st.model
	}
	return c.modelFor(st.index+1, in)
}

// committed is false: a call's success is its end.
func (c *Chain[In, Out]) committed() bool { return false }

// local answers from the cache or the default after the tiers failed.
func (c *Chain[In, Out]) local(r *request, in In, last classify.Verdict) (Result[Out], error) {
	defer r.finish()
	cause, canceled := c.localCause(r, last)
	if canceled {
		return c.fail(r, cause, true)
	}
	if out, src, hit, ok := c.localAnswer(r.localContext(), in); ok {
		c.localAnswered(r, src, hit)
		c.end(r, nil, classify.Verdict{}, 0)
		return Result[Out]{Value: out, Summary: r.sum}, nil
	}
	return c.fail(r, cause, false)
}

// localAnswer asks the cache, then the default.
func (c *Chain[In, Out]) localAnswer(ctx context.Context, in In) (Out, Source, string, bool) {
	return lookup(ctx, c.cache, c.def, in)
}

// getter is what lookup needs of a Cache or a StreamCache.
type getter[In, T any] interface {
	Get(ctx context.Context, in In) (T, string, bool)
}

// lookup asks a cache, then a default, for in.
func lookup[In, T any](ctx context.Context, cache getter[In, T], def func(context.Context, In) (T, bool), in In) (T, Source, string, bool) {
	if cache != nil {
		if out, hit, ok := cache.Get(ctx, in); ok {
			return out, SourceCache, hit, true
		}
	}
	if def != nil {
		if out, ok := def(ctx, in); ok {
			return out, SourceDefault, "", true
		}
	}
	var zero T
	return zero, SourceTier, "", false
}

// fail ends the request with its *Error.
func (c *Chain[In, Out]) fail(r *request, cause classify.Verdict, closed bool) (Result[Out], error) {
	err := c.failure(r, cause, closed)
	c.end(r, err, cause, 0)
	return Result[Out]{Summary: r.sum}, err
}

// asInvalidOutput makes sure a validator's err classifies as InvalidOutput:
// a *validate.Error is returned as is, anything else is wrapped in one of
// rule "custom" whose text does not repeat err's (a custom validator may
// quote the answer).
func asInvalidOutput(err error) error {
	var ve *validate.Error
	if errors.As(err, &ve) {
		return err
	}
	return &validate.Error{Rule: "custom", Reason: "rejected by a custom validator", Err: err}
}
