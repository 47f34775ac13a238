package fallback

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/deadline"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// Chain answers requests from a list of model tiers, then a cache, then a
// default, all inside one deadline. Build it once with New and share it:
// it is safe for concurrent use, and Do keeps its per-call state on the
// stack.
type Chain[In, Out any] struct {
	op         string
	stages     []stage[In, Out]
	total      time.Duration
	table      classify.Table
	classifier classify.Classifier
	cache      Cache[In, Out]
	writer     CacheWriter[In, Out]
	def        func(context.Context, In) (Out, bool)
	catalog    *Catalog
	quotaPark  time.Duration
	retirePark time.Duration
	key        func(In) string
	timing     bool
	epoch      time.Time

	abandonAfter time.Duration
	abandoned    atomic.Uint64
	stuck        atomic.Int64

	observer observerSlot

	flightMu sync.Mutex
	flights  map[string]*flight[Out]
}

// stage is a Stage compiled for the request path.
type stage[In, Out any] struct {
	Stage[In, Out]
	name   string
	policy retry.Policy
	usage  UsageReporter[Out]
	guards
	parking
}

// New compiles a chain from cfg, or returns an error naming every invalid
// field.
func New[In, Out any](cfg Config[In, Out]) (*Chain[In, Out], error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Chain[In, Out]{
		op:         cfg.Operation,
		stages:     make([]stage[In, Out], len(cfg.Stages)),
		total:      cfg.Total,
		table:      classify.DefaultTable(),
		classifier: cfg.Classifier,
		cache:      cfg.Cache,
		def:        cfg.Default,
		catalog:    cfg.Catalog,
		quotaPark:  cfg.QuotaCooldown,
		retirePark: cfg.RetiredRecheck,
		key:        cfg.Key,
		timing:     cfg.MeasureLatency,

		abandonAfter: cfg.AbandonAfter,
		epoch:        time.Now(),
		flights:      make(map[string]*flight[Out]),
	}
	if c.op == "" {
		c.op = "generate_content"
	}
	if cfg.Table != nil {
		c.table = *cfg.Table
	}
	if c.classifier == nil {
		c.classifier = classify.Func(classify.Classify)
	}
	if w, ok := cfg.Cache.(CacheWriter[In, Out]); ok {
		c.writer = w
	}
	if c.quotaPark == 0 {
		c.quotaPark = DefaultQuotaCooldown
	}
	if c.retirePark == 0 {
		c.retirePark = DefaultRetiredRecheck
	}
	minAttempt := cfg.MinAttempt
	if minAttempt == 0 {
		minAttempt = DefaultMinAttempt
	}
	for i, s := range cfg.Stages {
		st := &c.stages[i]
		st.Stage = s
		st.name = s.Tier.Name()
		st.policy = s.Retry
		if st.policy.Table == nil {
			st.policy.Table = &c.table
		}
		if st.policy.Classifier == nil {
			st.policy.Classifier = c.classifier
		}
		st.policy = st.policy.WithDefaults()
		st.guards = guards{bulkhead: s.Bulkhead, breaker: s.Breaker, try: deadline.Try{Cap: s.TryTimeout, MinUseful: s.MinAttempt}}
		if st.try.MinUseful == 0 {
			st.try.MinUseful = minAttempt
		}
		if u, ok := s.Tier.(UsageReporter[Out]); ok {
			st.usage = u
		}
	}
	for i := range c.stages {
		st := &c.stages[i]
		switch {
		case st.Reserve < 0:
			st.try.Reserve = 0
		case st.Reserve > 0:
			st.try.Reserve = st.Reserve
		default:
			for j := i + 1; j < len(c.stages); j++ {
				st.try.Reserve += reserveFor(c.stages[j].try.MinUseful)
			}
		}
	}
	if cfg.Observer != nil {
		c.Observe(cfg.Observer)
	}
	return c, nil
}

// Observe adds an observer to the chain; it sees the requests that start
// after the call. Safe to call while the chain serves requests. The
// returned function removes it.
func (c *Chain[In, Out]) Observe(o Observer) (remove func()) { return c.observer.add(o) }

// StageInfo describes one compiled stage, for instrumentation.
type StageInfo struct {
	// Tier is the tier's name and Index its position in the chain.
	Tier  string
	Index int
	// Model and Provider are the stage's (for telemetry).
	Model    string
	Provider string
	// Breaker and Bulkhead are the stage's guards; nil when absent.
	Breaker  *breaker.Breaker
	Bulkhead *bulkhead.Bulkhead
}

// Operation returns the chain's operation name.
func (c *Chain[In, Out]) Operation() string { return c.op }

// Stages describes the chain's stages, in order.
func (c *Chain[In, Out]) Stages() []StageInfo {
	out := make([]StageInfo, len(c.stages))
	for i := range c.stages {
		st := &c.stages[i]
		out[i] = StageInfo{Tier: st.name, Index: i, Model: st.Model, Provider: st.Provider, Breaker: st.Breaker, Bulkhead: st.Bulkhead}
	}
	return out
}

// request is the per-call state of one Do, kept on its stack.
type request[Out any] struct {
	ctx    context.Context
	budget deadline.Budget
	obs    Observer
	timing bool
	res    Result[Out]
	start  time.Time
	// slotHandedOff is set when an abandoned call took over the stage's
	// bulkhead slot.
	slotHandedOff bool
	// queueWait is the current stage's wait for its bulkhead, reported on
	// its first event and then cleared.
	queueWait time.Duration
}

// Do answers in. It tries each tier in order — preflight, bulkhead,
// breaker, then attempts with retries — inside one deadline, then the cache,
// then the default. On failure the error is an *Error that wraps every
// tier's error; a fail-closed class (Auth, Safety, InvalidRequest, Canceled
// by default) returns at once with its cause.
//
// A panic in a tier propagates to the caller after the tier's bulkhead slot
// and probe are released.
func (c *Chain[In, Out]) Do(ctx context.Context, in In) (Result[Out], error) {
	if c.key != nil && ctx.Value(inFlight{}) == nil {
		if k := c.key(in); k != "" {
			return c.shared(ctx, k, in)
		}
	}

	if c.total > 0 {
		if d, ok := ctx.Deadline(); !ok || time.Until(d) > c.total {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, c.total)
			defer cancel()
		}
	}
	r := request[Out]{ctx: ctx, budget: deadline.New(ctx, 0)}
	r.res.TierIndex = -1
	r.res.deadline, r.res.hasDeadline = r.budget.Deadline()
	if o := c.observer.load(); o != nil {
		r.obs = o
		r.timing = true
		r.start = time.Now()
		defer c.endOnPanic(&r)
		r.ctx = r.obs.Observe(r.ctx, Event{Kind: RequestStarted, Operation: c.op, TierIndex: -1, Model: c.stages[0].Model, Provider: c.stages[0].Provider})
	} else {
		r.timing = c.timing
	}

	var last classify.Verdict
	for i := range c.stages {
		st := &c.stages[i]
		out, v, err := c.runStage(&r, i, st, in)
		if err == nil {
			r.res.Value = out
			r.res.Source = SourceTier
			r.res.Tier = st.name
			r.res.TierIndex = i
			r.res.Degraded = i > 0
			if c.writer != nil {
				c.writer.Put(r.ctx, in, out)
			}
			c.end(&r, nil, v)
			return r.res, nil
		}
		last = v
		switch c.table.Action(v.Class).Route {
		case classify.RouteFailClosed:
			return c.fail(&r, v, true)
		case classify.RouteLocal:
			return c.local(&r, in, v)
		}
	}
	return c.local(&r, in, last)
}

// local answers from the cache or the default after the tiers failed.
func (c *Chain[In, Out]) local(r *request[Out], in In, last classify.Verdict) (Result[Out], error) {
	if err := r.ctx.Err(); err != nil && errors.Is(err, context.Canceled) {
		return c.fail(r, classify.InContext(r.ctx, last), true)
	}
	if c.cache != nil {
		if out, ok := c.cache.Get(r.ctx, in); ok {
			return c.localAnswer(r, out, SourceCache)
		}
	}
	if c.def != nil {
		if out, ok := c.def(r.ctx, in); ok {
			return c.localAnswer(r, out, SourceDefault)
		}
	}
	if r.budget.Remaining() <= 0 {
		last = classify.Verdict{Class: classify.DeadlineExhausted, Reason: "deadline budget exhausted"}
	}
	return c.fail(r, last, false)
}

func (c *Chain[In, Out]) localAnswer(r *request[Out], out Out, src Source) (Result[Out], error) {
	r.res.Value = out
	r.res.Source = src
	r.res.Degraded = true
	if r.obs != nil {
		r.obs.Observe(r.ctx, Event{Kind: LocalAnswered, Operation: c.op, TierIndex: -1, Source: src, Degraded: true, UpstreamCalls: r.res.UpstreamCalls})
	}
	c.end(r, nil, classify.Verdict{})
	return r.res, nil
}

// endOnPanic closes an observed request that a tier's panic is unwinding,
// so its span ends and its gauges come back down; the panic goes on.
func (c *Chain[In, Out]) endOnPanic(r *request[Out]) {
	if p := recover(); p != nil {
		c.end(r, &PanicError{Value: p}, classify.Verdict{Class: classify.Unknown, Reason: "tier panicked"})
		panic(p)
	}
}

func (c *Chain[In, Out]) end(r *request[Out], err error, v classify.Verdict) {
	if r.obs == nil {
		return
	}
	r.obs.Observe(r.ctx, Event{
		Kind: RequestEnded, Operation: c.op, TierIndex: r.res.TierIndex, Tier: r.res.Tier,
		Verdict: v, Source: r.res.Source, Degraded: r.res.Degraded, UpstreamCalls: r.res.UpstreamCalls,
		Answered: err == nil, Remaining: r.budget.Remaining(), Latency: time.Since(r.start), Err: err,
	})
}

// fail builds the request's *Error from its trail.
func (c *Chain[In, Out]) fail(r *request[Out], cause classify.Verdict, closed bool) (Result[Out], error) {
	names := make([]string, len(c.stages))
	for i := range c.stages {
		names[i] = c.stages[i].name
	}
	e := buildError(names, r.res.Attempts(), cause, closed)
	var zero Out
	r.res.Value = zero
	r.res.Source = SourceTier
	r.res.Tier, r.res.TierIndex = "", -1
	c.end(r, e, cause)
	return r.res, e
}

// runStage runs one tier behind its guards: preflight, bulkhead, breaker,
// then the attempts. It returns the answer, or the verdict and error that
// ended the tier.
func (c *Chain[In, Out]) runStage(r *request[Out], i int, st *stage[In, Out], in In) (out Out, v classify.Verdict, err error) {
	if skip := c.preflight(st); skip != NotSkipped {
		err = skipError(st.name, st.Model, skip)
		return out, c.skip(r, i, st, skip, err), err
	}
	if oerr := st.open(); oerr != nil {
		return out, c.skip(r, i, st, SkipOpen, oerr), oerr
	}
	e, why, gerr := st.enter(r.ctx, r.budget, r.obs != nil)
	r.queueWait = e.queueWait
	if gerr != nil {
		if why == NotSkipped {
			// The context ended while queued for a slot.
			return out, classify.InContext(r.ctx, classify.Verdict{Class: classify.Canceled}), gerr
		}
		return out, c.skip(r, i, st, why, gerr), gerr
	}
	if e.slot {
		defer func() {
			if r.slotHandedOff {
				// An abandoned call keeps the slot until it returns.
				r.slotHandedOff = false
				return
			}
			st.Bulkhead.Release()
		}()
	}
	tok := e.tok
	decided := false
	defer func() {
		if !decided {
			// A panic: free the probe slot without deciding anything.
			tok.Done(breaker.Ignored)
		}
	}()
	out, v, err = c.attempts(r, i, st, in, tok, e)
	decided = true
	tok.Done(breaker.OutcomeFor(c.table, v.Class))
	if err != nil {
		c.park(st, v)
	}
	return out, v, err
}

// attempts calls the tier until it answers or its retry policy stops. The
// first attempt reuses the budget check made on entering the guards.
func (c *Chain[In, Out]) attempts(r *request[Out], i int, st *stage[In, Out], in In, tok breaker.Token, e entered) (out Out, v classify.Verdict, err error) {
	for n := 1; ; n++ {
		var actx context.Context
		var cancel context.CancelFunc
		var aerr error
		if n == 1 && e.fresh {
			actx, cancel, aerr = r.budget.AttemptWithin(r.ctx, st.try, e.remaining)
		} else {
			actx, cancel, aerr = r.budget.Attempt(r.ctx, st.try)
		}
		if aerr != nil {
			if n == 1 {
				return out, c.skip(r, i, st, SkipBudget, aerr), aerr
			}
			// A retry was planned to fit, but scheduling ate the margin:
			// the last failure stands.
			return out, v, err
		}
		if r.obs != nil {
			e := c.stageEvent(r, AttemptStarted, i, st, n)
			e.QueueWait, r.queueWait = r.queueWait, 0
			actx = r.obs.Observe(actx, e)
		}
		var start time.Time
		if r.timing {
			start = time.Now()
		}
		abandoned := false
		if c.abandonAfter > 0 {
			out, err, abandoned = c.callDetached(actx, st, in)
			if abandoned {
				r.slotHandedOff = st.Bulkhead != nil
			}
		} else {
			out, err = st.Tier.Call(actx, in)
		}
		cancel()
		r.res.UpstreamCalls++
		if err == nil && st.Validate != nil {
			if verr := st.Validate.Validate(out); verr != nil {
				err = validate.AsInvalidOutput(verr)
			}
		}
		var latency time.Duration
		if r.timing {
			latency = time.Since(start)
		}
		if err == nil {
			st.policy.Succeeded()
			r.res.record(Attempt{Tier: st.name, TierIndex: i, N: n, Latency: latency})
			if r.obs != nil {
				e := c.stageEvent(r, AttemptEnded, i, st, n)
				e.Latency = latency
				if st.usage != nil {
					e.Usage, e.HasUsage = st.usage.Usage(out)
				}
				r.obs.Observe(r.ctx, e)
			}
			return out, classify.Verdict{}, nil
		}
		var zero Out
		out = zero
		v = c.classifyAttempt(r.ctx, actx, st, err)
		var a retry.Attempt
		if abandoned {
			// A tier that ignores its context gets no second call from
			// this request: the stuck one still holds the slot.
			a = retry.Attempt{N: n, Verdict: v, Stop: retry.NotRetryable}
		} else {
			a = st.policy.Decide(n, v, r.budget, st.try)
			if a.Retry && tok.Stale() {
				// The breaker opened (or changed) since this request was
				// admitted: do not call a tier it now refuses.
				a.Retry, a.Wait, a.Stop = false, 0, retry.CircuitOpen
			}
		}
		r.res.record(Attempt{Tier: st.name, TierIndex: i, N: n, Verdict: v, Latency: latency, Wait: a.Wait, Err: err})
		if r.obs != nil {
			e := c.stageEvent(r, AttemptEnded, i, st, n)
			e.Verdict, e.Latency, e.Err = v, latency, err
			e.Retry, e.Wait, e.Stop = a.Retry, a.Wait, a.Stop
			e.Route = c.table.Action(v.Class).Route
			r.obs.Observe(r.ctx, e)
		}
		if !a.Retry {
			return out, v, err
		}
		if serr := retry.Sleep(r.ctx, a.Wait); serr != nil {
			return out, classify.InContext(r.ctx, v), err
		}
		if tok.Stale() {
			// It opened while we slept.
			return out, v, err
		}
	}
}

// classifyAttempt classifies a failed attempt. An attempt whose own per-try
// deadline passed is a per-try timeout — Transient, counted against the
// breaker — even when the tier returned so late that the request's deadline
// has passed too: the tier was slow, whatever the request's fate. Otherwise
// the request's context decides between the caller's cancel, the end of the
// budget, and the tier's own error.
func (c *Chain[In, Out]) classifyAttempt(request, attempt context.Context, st *stage[In, Out], err error) classify.Verdict {
	v := st.policy.Classifier.Classify(err)
	if v.Class == classify.OK {
		// A custom classifier called a failure a success: it is not one.
		v.Class, v.Reason = classify.Unknown, "failure classified as ok"
	}
	// A separate attempt context always ends before the request's (the
	// chain's budget is its context), so its DeadlineExceeded is its own.
	ownTimeout := attempt != request && errors.Is(attempt.Err(), context.DeadlineExceeded)
	if ownTimeout && !errors.Is(request.Err(), context.Canceled) {
		if v.Class == classify.DeadlineExhausted || v.Class == classify.Canceled {
			return classify.Verdict{Class: classify.Transient, HTTPStatus: v.HTTPStatus, Status: v.Status, Reason: "per-try timeout"}
		}
		return v
	}
	return classify.InContext(request, v)
}

func (c *Chain[In, Out]) stageEvent(r *request[Out], kind EventKind, i int, st *stage[In, Out], n int) Event {
	e := Event{Kind: kind, Operation: c.op, Tier: st.name, TierIndex: i, Model: st.Model, Provider: st.Provider, Attempt: n, Remaining: r.budget.Remaining()}
	if st.Breaker != nil {
		e.Breaker, e.HasBreaker = st.Breaker.State(), true
	}
	return e
}

// skip records a tier passed over and returns its verdict.
func (c *Chain[In, Out]) skip(r *request[Out], i int, st *stage[In, Out], why Skip, err error) classify.Verdict {
	v := classify.Verdict{Class: classify.Rejected, Reason: skipReasons[why]}
	if why == SkipBudget && r.budget.Remaining() <= 0 {
		v = classify.Verdict{Class: classify.DeadlineExhausted, Reason: "deadline budget exhausted"}
	}
	r.res.record(Attempt{Tier: st.name, TierIndex: i, Skip: why, Verdict: v, Err: err})
	if r.obs != nil {
		e := c.stageEvent(r, StageSkipped, i, st, 0)
		e.Skip, e.Verdict, e.Err, e.Route = why, v, err, c.table.Action(v.Class).Route
		e.QueueWait, r.queueWait = r.queueWait, 0
		r.obs.Observe(r.ctx, e)
	}
	return v
}

var skipReasons = [...]string{
	NotSkipped:  "",
	SkipOpen:    "circuit open",
	SkipFull:    "bulkhead full",
	SkipRetired: "model retired",
	SkipQuota:   "quota exhausted, tier parked",
	SkipBudget:  "too little time left for this tier",
}

// preflight says whether a tier must be skipped without any call.
func (c *Chain[In, Out]) preflight(st *stage[In, Out]) Skip {
	return st.preflight(c.epoch, c.catalog, st.Model)
}

// park takes a tier out of rotation after a failure that retrying cannot
// fix soon.
func (c *Chain[In, Out]) park(st *stage[In, Out], v classify.Verdict) {
	st.park(c.epoch, c.catalog, st.Model, v, c.quotaPark, c.retirePark)
}

// skipError is the error recorded for a preflight skip.
func skipError(tier, model string, why Skip) error {
	return &SkipError{Tier: tier, Model: model, Skip: why}
}

// SkipError reports a tier passed over by preflight: its model is retired,
// or its quota is exhausted and it is parked.
type SkipError struct {
	// Tier and Model name the tier passed over.
	Tier  string
	Model string
	// Skip says why: SkipRetired or SkipQuota.
	Skip Skip
}

// Error names the tier and why it was skipped.
func (e *SkipError) Error() string {
	return "tierguard: tier " + e.Tier + " skipped: " + skipReasons[e.Skip]
}

// Verdict classifies the skip as Rejected: no upstream call was made.
func (e *SkipError) Verdict() classify.Verdict {
	return classify.Verdict{Class: classify.Rejected, Reason: skipReasons[e.Skip]}
}
