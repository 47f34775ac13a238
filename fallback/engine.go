package fallback

import (
	"cmp"
	"context"
	"errors"
	"math"
	"reflect"
	"slices"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/deadline"
	"github.com/tierguard/tierguard/internal/budget"
	"github.com/tierguard/tierguard/internal/detach"
	"github.com/tierguard/tierguard/internal/hedge"
	"github.com/tierguard/tierguard/internal/park"
	"github.com/tierguard/tierguard/internal/subscribers"
	"github.com/tierguard/tierguard/retry"
)

// engine is what the unary and the streaming chain share: the compiled
// stages and everything a request does around an attempt — its budget, the
// stage's guards, the one decision per failure, parking, the trail and the
// events. The chains differ only in how an attempt runs (see attempter).
type engine struct {
	op           string
	stages       []stage
	total        time.Duration
	table        classify.Table
	catalog      Catalog
	retired      park.Models
	quotaPark    time.Duration
	maxQuotaPark time.Duration
	retirePark   time.Duration
	abandonAfter time.Duration
	measure      bool
	stream       bool
	epoch        time.Time
	observer     subscribers.Joined[Observer]
	// info describes the chain for its events; each stage's info points
	// into its Stages.
	info ChainInfo

	counters detach.Counters
}

// stage is a compiled stage.
type stage struct {
	// e is the engine the stage is compiled in.
	e                     *engine
	name, model, provider string
	address               string
	port                  int
	index                 int
	bulkhead              *bulkhead.Bulkhead
	// queues is set when the bulkhead has a MaxWait: read once, since
	// its configuration is fixed and Config copies it from a cache line
	// every acquisition writes.
	queues     bool
	breaker    *breaker.Breaker
	policy     retry.Policy
	classifier classify.Classifier
	try        budget.Try // Cap and MinUseful; the reserve is computed per attempt
	reserve    time.Duration
	need       budget.Need
	// parking takes the tier out of rotation (its quota, its model
	// retired, a server's cool-down); its reasons are Skips, and a
	// cool-down's rule a CoolRule.
	parking park.Lot
	// tally is the evidence of the tier's recent 429s, which coolDown
	// (with its defaults) judges; maxRetryWait is Stage.MaxRetryWait
	// resolved, MaxInt64 for no cap.
	tally        park.Tally
	coolDown     CoolDown
	maxRetryWait time.Duration
	// invalidRetries is Stage.InvalidOutputRetries.
	invalidRetries int
	// hedge is Stage.Hedge; hedges and latency are its budget and its
	// delay's quantile.
	hedge   Hedge
	hedges  hedge.Budget
	latency hedge.Quantile
	// plain is set once a success of the tier named no member: its calls
	// need no record when nothing else listens (see request.listens).
	plain atomic.Bool
	// info describes the stage for its events: built once, it travels
	// with each of them as a pointer.
	info *StageInfo
}

func newEngine(kind string, sh shared, specs []stageSpec) (*engine, error) {
	if err := check(kind, sh, specs); err != nil {
		return nil, err
	}
	e := &engine{
		op: cmp.Or(sh.op, "generate_content"), stages: make([]stage, len(specs)), total: sh.total,
		table: classify.DefaultTable(), catalog: nilCatalog(sh.catalog),
		quotaPark: cmp.Or(sh.quotaPark, defaultQuotaCooldown), maxQuotaPark: cmp.Or(sh.maxQuotaPark, defaultMaxQuotaCooldown),
		retirePark: cmp.Or(sh.retirePark, defaultRetiredRecheck), abandonAfter: sh.abandonAfter, measure: sh.measure,
		stream: sh.stream, epoch: time.Now(),
	}
	e.maxQuotaPark = max(e.maxQuotaPark, e.quotaPark)
	if sh.table != nil {
		e.table = *sh.table
	}
	classifier := sh.classifier
	if classifier == nil {
		classifier = classify.Func(classify.Classify)
	}
	minAttempt := cmp.Or(sh.minAttempt, defaultMinAttempt)
	for i, s := range specs {
		st := &e.stages[i]
		*st = stage{
			e: e, name: s.name, model: s.model, provider: s.provider, address: s.address, port: s.port,
			index: i, bulkhead: s.bulkhead, breaker: s.breaker,
			policy: s.retry.WithDefaults(), classifier: s.classifier, reserve: s.reserve,
			try:            budget.Try{Cap: s.cap, MinUseful: cmp.Or(s.minAttempt, minAttempt)},
			invalidRetries: s.invalidRetries, hedge: s.hedge, coolDown: s.coolDown.WithDefaults(),
			maxRetryWait: cmp.Or(s.maxRetryWait, defaultMaxRetryWait),
		}
		if st.maxRetryWait < 0 {
			st.maxRetryWait = math.MaxInt64
		}
		if s.hedge.enabled() {
			st.hedges.Init(cmp.Or(s.hedge.MaxExtra, defaultHedgeExtra))
			st.latency.Init(s.hedge.Quantile, s.hedge.Delay)
		}
		if st.classifier == nil {
			st.classifier = classifier
		}
		st.queues = st.bulkhead != nil && st.bulkhead.Config().MaxWait > 0
		st.need.Init(st.try.MinUseful, st.try.Cap)
	}
	e.info = ChainInfo{Operation: e.op, Stream: e.stream, Stages: make([]StageInfo, len(e.stages))}
	for i := range e.stages {
		st := &e.stages[i]
		e.info.Stages[i] = StageInfo{Operation: e.op, Tier: st.name, TierIndex: i, Model: st.model, Provider: st.provider,
			Address: st.address, Port: st.port, Stream: e.stream, Breaker: st.breaker, Bulkhead: st.bulkhead, MemberBreakers: specs[i].members}
		st.info = &e.info.Stages[i]
	}
	e.observer.Join = func(os []Observer) Observer { return Observers(os...) }
	if sh.observer != nil {
		e.observer.Add(sh.observer)
	}
	return e, nil
}

// nilCatalog makes a nil pointer in the Catalog interface (an optional
// *catalog.Catalog left unset) the absence of a catalog it means.
func nilCatalog(c Catalog) Catalog {
	if v := reflect.ValueOf(c); c == nil || v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	return c
}

// base is what both chains add to the engine for their input type.
type base[In any] struct {
	*engine
	modelFors []func(In) string
	tokens    []func(In) int64
	reprompts []func(In, error) In
}

func newBase[In any](e *engine, n int) base[In] {
	return base[In]{engine: e, modelFors: make([]func(In) string, n),
		tokens: make([]func(In) int64, n), reprompts: make([]func(In, error) In, n)}
}

// estimate is the request's estimated tokens on st (Stage.Tokens), for
// the tier's decorators.
func (b base[In]) estimate(st *stage, in In) int64 {
	if f := b.tokens[st.index]; f != nil {
		return max(f(in), 0)
	}
	return 0
}

// reprompt adjusts in before a retry of an invalid answer on st.
func (b base[In]) reprompt(st *stage, in In, err error) In {
	if f := b.reprompts[st.index]; f != nil {
		return f(in, err)
	}
	return in
}

// Observe adds an observer to the chain; it sees the requests that start
// after the call. Safe to call while the chain serves requests. The
// returned function removes it.
func (b base[In]) Observe(o Observer) (remove func()) { return b.observer.Add(o) }

// Operation returns the chain's operation name.
func (b base[In]) Operation() string { return b.op }

// Stages describes the chain's stages, in order: a copy of what the
// chain's events point to.
func (b base[In]) Stages() []StageInfo { return slices.Clone(b.info.Stages) }

// Stats returns the chain's running figures.
func (b base[In]) Stats() Stats {
	return Stats{Abandoned: b.counters.Abandoned.Load(), Stuck: b.counters.Stuck.Load()}
}

// modelFor is the model a call of stage i will use for in.
func (b base[In]) modelFor(i int, in In) string {
	if f := b.modelFors[i]; f != nil {
		if m := f(in); m != "" {
			return m
		}
	}
	return b.stages[i].model
}

// StageInfo describes one compiled stage, for instrumentation: what is
// constant about every event of the stage. The chain's events point to
// the chain's own, which must not be modified.
type StageInfo struct {
	// Operation is the chain's Config.Operation.
	Operation string
	// Tier is the tier's name and TierIndex its position in the chain.
	Tier      string
	TierIndex int
	// Model and Provider are the stage's (for telemetry); Provider is the
	// tier's when the stage left it empty and the tier reports one.
	Model    string
	Provider string
	// Address and Port are the server the tier calls, when its tier
	// reports them (EndpointReporter); "" and 0 otherwise.
	Address string
	Port    int
	// Stream is set for a stage of a StreamChain.
	Stream bool
	// Breaker and Bulkhead are the stage's guards; nil when absent.
	Breaker  *breaker.Breaker
	Bulkhead *bulkhead.Bulkhead
	// MemberBreakers are the breakers of the tier's members — a pool's
	// keys — found through any decorators around it (a tier with a
	// MemberBreakers() []*breaker.Breaker method, reached through
	// Unwrap), so that instrumentation watches them with the stage.
	MemberBreakers []*breaker.Breaker
}

// Stats are a chain's running figures.
type Stats struct {
	// Abandoned counts calls abandoned since the chain was built.
	Abandoned uint64
	// Stuck is the number of abandoned calls that have not returned yet;
	// each holds its tier's bulkhead slot.
	Stuck int64
}

// request is the per-call state of one request.
type request struct {
	ctx    context.Context // the caller's, with what observers added
	budget budget.Budget
	obs    Observer
	timing bool
	start  time.Duration // e.now() when the request began, when timing
	// lastRead is the clock reading that ended the latest attempt, when
	// timing (fresh until the next attempt or skip: the attempt's events
	// take the time left from it); doneAt, when set, is the one the
	// request's end reports. deadlineAt is the budget's deadline on the
	// same clock, so that the time left at a reading needs no other.
	lastRead, doneAt, deadlineAt time.Duration
	fresh                        bool
	// sum is the request's summary, copied into its result when it ends
	// (a pointer to the caller's result would make it escape).
	sum Summary
	// queueWait is the current stage's wait for its bulkhead, reported on
	// its first event and then cleared.
	queueWait time.Duration
	// slotHandedOff and tokenHandedOff are set when an abandoned call took
	// over the stage's bulkhead slot and breaker token.
	slotHandedOff, tokenHandedOff bool
	// left is the time the budget left when it was made (hasLeft until
	// the first tier took it): its clock reading, not made again.
	left    time.Duration
	hasLeft bool
	// probe is set while the request is the probe at the end of the
	// current tier's cool-down (see engine.preflight).
	probe int64
	// member is the pool member of the current attempt, for its events
	// and trail; limitWait is the attempt's wait for its rate limiters.
	member    string
	limitWait time.Duration
	// local is a context with the budget's deadline, made on first use by
	// the cache and the default.
	local *budget.Context
	// shared is set for a request that joined another's execution; ended
	// once its RequestEnded has been reported.
	shared, ended bool
	// flight is set for a shared execution: the state of the request
	// that started it.
	flight *starter
}

// now is a monotonic instant, the time since the chain's epoch; latencies
// are differences of two. It reads the monotonic clock only, where
// time.Now reads the wall clock too, which costs as much again on some
// virtual machines.
func (e *engine) now() time.Duration { return time.Since(e.epoch) }

// begin starts a request: its budget, its summary and its first event.
func (e *engine) begin(ctx context.Context, r *request) {
	e.beginAs(ctx, r, false)
}

// beginAs is begin for a request that joined another's execution too.
func (e *engine) beginAs(ctx context.Context, r *request, shared bool) {
	r.shared = shared
	r.ctx = ctx
	o, _ := e.observer.Load()
	r.timing = e.measure || o != nil
	// One monotonic reading serves the budget and the request's start
	// (time.Now reads the wall clock as well). The epoch carries the wall
	// clock, so the deadline still reads as a time of day, off by any step
	// the wall clock took since the chain was built; what uses it
	// compares monotonic readings.
	var now time.Time
	if r.timing || e.total > 0 {
		r.start = e.now()
		if e.total > 0 {
			// Only a Total of the chain's own makes a deadline from it.
			now = e.epoch.Add(r.start)
		}
	}
	r.budget, r.left, r.hasLeft = budget.NewLeftAt(ctx, e.total, now)
	r.sum.TierIndex = -1
	r.sum.deadline, r.sum.hasDeadline = r.budget.Deadline()
	if r.sum.hasDeadline {
		r.deadlineAt = r.sum.deadline.Sub(e.epoch)
	}
	// Every tier once, and a retry or two.
	r.sum.spillRoom = int32(len(e.stages) + inlineTrail)
	r.obs = o
	if o != nil {
		r.ctx = o.RequestStarted(ctx, RequestStart{Chain: &e.info, Shared: shared})
	}
}

// localContext is a context that ends with the request's budget, for the
// cache and the default.
func (r *request) localContext() context.Context {
	if d, ok := r.budget.Deadline(); ok {
		if cd, ok := r.ctx.Deadline(); !ok || d.Before(cd) {
			if r.local == nil {
				r.local = budget.NewContext(r.ctx, d)
			}
			return r.local
		}
	}
	return r.ctx
}

// remaining is the time the budget leaves: at the reading that ended the
// latest attempt while it is fresh (its events come right after it), or
// read now.
func (r *request) remaining() time.Duration {
	if r.fresh && r.budget.Limited() {
		return r.deadlineAt - r.lastRead
	}
	return r.budget.Remaining()
}

// endReading is the clock reading of the request's end: doneAt when the
// request ended right after the call that read it, else a new one.
func (r *request) endReading(e *engine) time.Duration {
	if r.doneAt != 0 {
		return r.doneAt
	}
	return e.now()
}

// endLeft is the time left at the request's end, from doneAt when set.
func (r *request) endLeft() time.Duration {
	if r.doneAt != 0 && r.budget.Limited() {
		return r.deadlineAt - r.doneAt
	}
	return r.budget.Remaining()
}

// finish releases what the request made for itself.
func (r *request) finish() {
	if r.local != nil {
		r.local.Cancel()
	}
}

// held is what a stage holds once inside its guards.
type held struct {
	// remaining is the time left when the budget was checked, for the
	// first attempt to reuse; fresh is unset when the clock must be read
	// again (after a wait in the bulkhead's queue).
	remaining time.Duration
	fresh     bool
	slot      bool
	tok       breaker.Token
}

// reserveFor is what stage i's attempts leave for the stages after it,
// when remaining is left: for each later tier, what it has been seen to
// need (plus a margin); nothing for a tier that will be skipped (breaker
// open, parked). A later tier never seen yet — no answer, no cut attempt —
// needs an unknown amount: together such tiers get half of what remains
// (at least their floors, at most their TryTimeouts), so that a stalled
// primary cannot starve a fallback nobody has measured.
func (e *engine) reserveFor(i int, remaining time.Duration) time.Duration {
	st := &e.stages[i]
	switch {
	case st.reserve < 0:
		return 0
	case st.reserve > 0:
		return st.reserve
	}
	var known, floors, caps time.Duration
	unknown, capped := false, true
	for j := i + 1; j < len(e.stages); j++ {
		later := &e.stages[j]
		if later.breaker != nil && later.breaker.State() == breaker.Open || later.parking.Check(e.epoch) != park.None {
			continue
		}
		need := withMargin(later.need.Get())
		if later.need.Known() {
			known = budget.Add(known, need)
			continue
		}
		unknown = true
		floors = budget.Add(floors, need)
		if later.try.Cap > 0 {
			caps = budget.Add(caps, withMargin(later.try.Cap))
		} else {
			capped = false
		}
	}
	if !unknown {
		return known
	}
	share := max(budget.Sub(remaining, known)/2, floors)
	if capped {
		share = min(share, max(caps, floors))
	}
	return budget.Add(known, share)
}

// withMargin adds a tenth (at least a millisecond) to what a later tier
// needs, for the time it takes to classify a timed-out attempt and enter
// the next tier's guards: without it, a primary that uses its whole share
// would leave the fallback a hair less than it needs.
func withMargin(d time.Duration) time.Duration { return d + max(d/10, time.Millisecond) }

// preflight says whether a stage must be skipped, for the model the call
// would use, before any guard is touched. probe is set when the request
// is the one let through at the end of the tier's cool-down: it ends the
// hold with st.parking.EndProbe once the stage is over.
func (e *engine) preflight(st *stage, model string) (why Skip, probe int64) {
	w, probe := st.parking.Enter(e.epoch)
	if w != park.None {
		return Skip(w), 0
	}
	if model != "" {
		if e.retired.Has(model, e.epoch) || e.catalog != nil && !e.catalog.Available(model) {
			st.parking.EndProbe(probe)
			return SkipRetired, 0
		}
	}
	return NotSkipped, probe
}

// enter takes a stage's guards after the preflight: the budget check, a
// bulkhead slot, then the breaker's token. On failure it holds nothing and
// returns why the tier is skipped — NotSkipped when the context ended while
// queued for a slot — with the error.
func (e *engine) enter(r *request, st *stage, h *held) (budget.Try, Skip, error) {
	// The time is checked before any guard is taken: a request that cannot
	// make a useful attempt must not hold a slot or a probe someone else
	// could use.
	try := st.try
	if r.hasLeft {
		// The first tier entered at once: the clock read to make the
		// budget is still the time. (A little late, it errs short: a
		// per-try cap then ends a hair early, never past the deadline.)
		h.remaining, r.hasLeft = r.left, false
	} else {
		h.remaining = r.budget.Remaining()
	}
	if r.budget.Limited() {
		try.Reserve = e.reserveFor(st.index, h.remaining)
	}
	if _, ok := r.budget.Window(h.remaining, try); !ok {
		return try, SkipBudget, exhausted(h.remaining, nil)
	}
	h.fresh = true
	if st.bulkhead != nil {
		var err error
		if st.queues {
			err = e.acquireWaiting(r, st, try, h.remaining)
			h.fresh = false
		} else {
			err = st.bulkhead.Acquire(r.ctx)
		}
		if err != nil {
			if !errors.Is(err, bulkhead.ErrFull) {
				return try, NotSkipped, err
			}
			return try, SkipFull, err
		}
		h.slot = true
	}
	if st.breaker != nil {
		tok, err := st.breaker.Allow()
		if err != nil {
			// Half-open with its probes taken: the slot goes back at once.
			if h.slot {
				st.bulkhead.Release()
				h.slot = false
			}
			return try, SkipOpen, err
		}
		h.tok = tok
	}
	return try, NotSkipped, nil
}

// acquireWaiting queues for a bulkhead slot no longer than an attempt can
// still start in: the budget's deadline, less the reserve and the least
// useful attempt.
func (e *engine) acquireWaiting(r *request, st *stage, try budget.Try, remaining time.Duration) error {
	var queued time.Duration
	if r.timing {
		queued = e.now()
	}
	ctx := r.ctx
	var c *budget.Context
	if d, ok := r.budget.Deadline(); ok {
		latest := budget.Sub(budget.Sub(remaining, try.Reserve), try.MinUseful)
		c = budget.NewContext(r.ctx, d.Add(latest-remaining))
		ctx = c
	}
	err := st.bulkhead.Acquire(ctx)
	if c != nil {
		c.Cancel()
		if err != nil && r.ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			// Out of time to start an attempt, not the caller's doing.
			err = exhausted(r.budget.Remaining(), err)
		}
	}
	if r.timing {
		r.queueWait = e.now() - queued
	}
	return err
}

// exit releases a stage's guards with the call's outcome.
func (e *engine) exit(r *request, st *stage, h *held, o breaker.Outcome) {
	if r.tokenHandedOff {
		r.tokenHandedOff = false
	} else {
		h.tok.Done(o)
	}
	h.tok = breaker.Token{}
	if h.slot {
		h.slot = false
		if r.slotHandedOff {
			// An abandoned call keeps the slot until it returns.
			r.slotHandedOff = false
			return
		}
		st.bulkhead.Release()
	}
}

// decision is what follows one failed attempt — decided once, from one
// row of the class table.
type decision struct {
	retry   bool
	wait    time.Duration
	stop    retry.StopReason
	outcome breaker.Outcome
	route   classify.Route
	park    classify.Park
	// cooling is set when the failure took the tier out of rotation for
	// every request.
	cooling *Cooling
}

// failed describes a failed attempt to decide on.
type failed struct {
	err error
	// timedOut is set when the attempt's own window ended it (its per-try
	// deadline, or the wait for a stream's first chunk).
	timedOut bool
	// ran is how long the attempt ran; 0 when not measured.
	ran time.Duration
	// abandoned is set when the call was abandoned after ignoring its
	// context.
	abandoned bool
}

// classifyFailure classifies a failed attempt, corrected with what the
// request's context and budget say: the caller's cancel, the deadline's
// end (and whether the attempt hung until it), a per-try timeout. over is
// set when no other tier can be tried any more.
func (e *engine) classifyFailure(r *request, st *stage, try budget.Try, f failed) (v classify.Verdict, over, hung bool) {
	v = st.classifier.Classify(f.err)
	if v.Class == classify.OK {
		// A custom classifier called a failure a success: it is not one.
		v.Class, v.Reason = classify.Unknown, "failure classified as ok"
	}
	callerErr := r.ctx.Err()
	over = callerErr != nil || r.budget.Over()
	switch {
	case errors.Is(callerErr, context.Canceled):
		v = classify.Verdict{Class: classify.Canceled, Reason: "canceled by caller"}
	case over:
		// The request's deadline ended the attempt (or passed while it
		// ran): no other tier can be tried. An attempt that had its useful
		// minimum and still did not answer is a timeout of this tier,
		// whatever the request's fate: a hung last tier must trip its
		// breaker.
		if f.timedOut || v.Class == classify.DeadlineExhausted || v.Class == classify.Canceled {
			hung = f.ran >= try.MinUseful
			v = classify.Verdict{Class: classify.DeadlineExhausted, Reason: "deadline exceeded"}
		}
	case v.Class == classify.DeadlineExhausted || v.Class == classify.Canceled && f.timedOut:
		// The request lives: the attempt's own window ran out, or the tier
		// timed out on its own.
		v = classify.Verdict{Class: classify.Transient, HTTPStatus: v.HTTPStatus, Status: v.Status, Reason: "per-try timeout"}
	case v.Class == classify.Canceled:
		// Something below the caller cancelled the attempt; the caller did
		// not ask for it, so this is not a reason to fail closed.
		v = classify.Verdict{Class: classify.Unknown, Reason: "attempt canceled below the caller"}
	}
	return v, over, hung
}

// decide classifies a failed attempt and chooses what follows: retry here
// (after how long), or give the tier up — how the failure counts for the
// breaker, where the request goes, and whether the tier or its model is
// parked. The class table is consulted once.
func (e *engine) decide(r *request, st *stage, n int, try budget.Try, f failed, tok breaker.Token) (classify.Verdict, decision) {
	v, over, hung := e.classifyFailure(r, st, try, f)
	a := e.table.Action(v.Class)
	d := decision{route: a.Route, park: a.Park, outcome: breaker.Ignored}
	if over && d.route == classify.RouteNextTier {
		d.route = classify.RouteLocal
	}
	if a.BreakerFailure || hung {
		d.outcome = breaker.Failure
	}
	// A tier that ignores its context gets no second call from this
	// request: the stuck one still holds the slot.
	ra := st.policy.Decide(n, v, a.Retry && !f.abandoned, func(wait time.Duration) bool { return r.budget.Fits(wait, try) })
	if ra.Retry && tok.Stale() {
		// The breaker opened (or changed) since this request was admitted:
		// do not call a tier it now refuses.
		ra.Retry, ra.Wait, ra.Stop = false, 0, retry.CircuitOpen
	}
	if ra.Retry && v.RetryAfter > st.maxRetryWait && e.laterServes(st.index) {
		// The server's delay is longer than this tier may hold a request
		// while another can answer it now.
		ra.Retry, ra.Wait, ra.Stop = false, 0, retry.DelayTooLong
	}
	d.retry, d.wait, d.stop = ra.Retry, ra.Wait, ra.Stop
	if st.policy.OnAttempt != nil {
		st.policy.OnAttempt(ra)
	}
	return v, d
}

// laterServes reports whether a tier after stage i can be called now: its
// breaker not open, and not parked.
func (e *engine) laterServes(i int) bool {
	for j := i + 1; j < len(e.stages); j++ {
		later := &e.stages[j]
		if (later.breaker == nil || later.breaker.State() != breaker.Open) && later.parking.Check(e.epoch) == park.None {
			return true
		}
	}
	return false
}

// park takes a tier, or the model a call used, out of rotation after a
// failure whose class says so.
func (e *engine) park(st *stage, model string, v classify.Verdict, p classify.Park) {
	switch p {
	case classify.ParkQuota:
		st.parking.Park(e.epoch, uint8(SkipQuota), min(max(e.quotaPark, v.RetryAfter), e.maxQuotaPark))
	case classify.ParkRetired:
		m := v.Model
		if m == "" {
			m = model
		}
		switch {
		case m == "":
			// Neither the 404 nor the stage says which model it was about
			// (no Model, no ModelFor): a tier that serves several models
			// by the request's input would lose the live ones with the
			// dead one. The request moves on (its class says so); the
			// tier stays in rotation.
		case e.catalog != nil:
			e.catalog.MarkRetired(m)
		default:
			e.retired.Mark(m, e.epoch, e.retirePark)
		}
	}
}

// sleep waits d before a retry, or until the caller gives up. The wait was
// decided to fit the budget, so it never outlasts the deadline.
func (e *engine) sleep(r *request, d time.Duration) error { return budget.Sleep(r.ctx, d) }

// exhausted is the error of a budget that cannot fit an attempt.
func exhausted(remaining time.Duration, cause error) error {
	return &deadline.ExhaustedError{Remaining: max(remaining, 0), Cause: cause}
}

// succeeded records a success with the stage's shared retry budget.
func succeeded(st *stage) {
	if st.policy.Budget != nil {
		st.policy.Budget.Success()
	}
}

// breakerState is st's breaker state for its events; zero without one.
func breakerState(st *stage) breaker.State {
	if st.breaker != nil {
		return st.breaker.State()
	}
	return 0
}

// event builds the end of attempt n on st, with what every end has.
func (e *engine) event(r *request, st *stage, model string, n int) AttemptEnd {
	return AttemptEnd{Stage: st.info, Model: model, Attempt: n, Member: r.member, Breaker: breakerState(st), Remaining: r.remaining(), Reply: noReply}
}

// attemptStarted reports an attempt about to start and returns the
// context the attempt builds on.
func (e *engine) attemptStarted(r *request, st *stage, model string, n int, remaining time.Duration) context.Context {
	if r.obs == nil {
		return r.ctx
	}
	ev := AttemptStart{Stage: st.info, Model: model, Attempt: n, Member: r.member, Breaker: breakerState(st),
		Remaining: remaining, QueueWait: r.queueWait}
	r.queueWait = 0
	return r.obs.AttemptStarted(r.ctx, ev)
}

// skip records a tier passed over and returns its verdict.
func (e *engine) skip(r *request, st *stage, model string, why Skip, err error) classify.Verdict {
	r.fresh = false
	spent := why == SkipBudget && r.budget.Remaining() <= 0
	v := skipVerdict(why, spent)
	if !r.sum.mark(e, st, model, why, spent, err) {
		a := r.sum.add()
		a.Tier, a.TierIndex, a.Model, a.Skip, a.Verdict, a.Err = st.name, st.index, model, why, v, err
	}
	if r.obs != nil {
		ev := TierSkip{Stage: st.info, Model: model, Skip: why, Verdict: v, Err: err, Route: e.table.Action(v.Class).Route,
			Breaker: breakerState(st), Remaining: r.budget.Remaining(), QueueWait: r.queueWait}
		if se, ok := err.(*SkipError); ok && se.Cooling.Rule != NotCooled {
			ev.Cooling = &se.Cooling
		}
		r.obs.TierSkipped(r.ctx, ev)
		r.queueWait = 0
	}
	return v
}

// answered records a successful attempt and closes its call's record;
// hedge is set when the answer came from the hedge of a hedged attempt
// (its member is r.member).
func (e *engine) answered(r *request, st *stage, model string, n int, latency time.Duration, rec *Record, hedge bool) {
	succeeded(st)
	if st.policy.OnAttempt != nil {
		st.policy.OnAttempt(retry.Attempt{N: n})
	}
	a := r.sum.add()
	a.Tier, a.TierIndex, a.Model, a.N, a.Latency, a.Member, a.Hedge = st.name, st.index, model, n, latency, r.member, hedge
	if r.obs == nil {
		rec.shut()
		return
	}
	r.obs.AttemptEnded(r.ctx, AttemptEnd{Stage: st.info, Model: model, Attempt: n, Member: r.member, Breaker: breakerState(st), Remaining: r.remaining(),
		Latency: latency, Hedge: hedge, LimitWait: r.limitWait, Reply: rec.close()})
}

// attemptFailed records a failed attempt and its decision.
func (e *engine) attemptFailed(r *request, st *stage, model string, n int, latency time.Duration, v classify.Verdict, d decision, err error, desc *Reply) {
	a := r.sum.add()
	a.Tier, a.TierIndex, a.Model, a.N, a.Verdict, a.Latency, a.Wait, a.Err, a.Member = st.name, st.index, model, n, v, latency, d.wait, err, r.member
	a.Cooling = d.cooling
	if r.obs != nil {
		ev := e.event(r, st, model, n)
		ev.Verdict, ev.Latency, ev.Err, ev.Cooling = v, latency, err, d.cooling
		ev.Retry, ev.Wait, ev.Stop, ev.Route = d.retry, d.wait, d.stop, d.route
		ev.Reply, ev.LimitWait = desc, r.limitWait
		r.obs.AttemptEnded(r.ctx, ev)
	}
}

// answeredBy records which tier answered.
func (e *engine) answeredBy(r *request, st *stage, degraded bool) {
	r.sum.Source, r.sum.Tier, r.sum.TierIndex, r.sum.Degraded = SourceTier, st.name, st.index, degraded
}

// localAnswered records an answer from the cache or the default.
func (e *engine) localAnswered(r *request, src Source, hit string) {
	r.sum.Source, r.sum.Tier, r.sum.TierIndex, r.sum.Degraded, r.sum.CacheHit = src, "", -1, true, hit
	if r.obs != nil {
		r.obs.LocalAnswered(r.ctx, LocalAnswer{Chain: &e.info, Source: src, CacheHit: hit, UpstreamCalls: r.sum.UpstreamCalls})
	}
}

// tooLargeVerdict is the verdict of a request every tier skipped as too
// large.
var tooLargeVerdict = classify.Verdict{Class: classify.InvalidRequest, Reason: "never admissible: too large for every tier"}

// localCause is the verdict a request that found no local answer fails
// with, and whether it fails closed, without asking the cache or the
// default: when its caller cancelled it, or when every tier skipped it
// as too large (the request must change; a canned answer would hide it).
func (e *engine) localCause(r *request, last classify.Verdict) (classify.Verdict, bool) {
	if err := r.ctx.Err(); errors.Is(err, context.Canceled) {
		return classify.Verdict{Class: classify.Canceled, Reason: "canceled by caller"}, true
	}
	if e.tooLarge(r) {
		return tooLargeVerdict, true
	}
	if r.budget.Remaining() <= 0 {
		return classify.Verdict{Class: classify.DeadlineExhausted, Reason: "deadline budget exhausted"}, false
	}
	return last, false
}

// tooLarge reports whether every stage skipped the request as too large
// (SkipTooLarge) and no tier was called. It reads the trail in place: a
// failing request builds no trail to ask.
func (e *engine) tooLarge(r *request) bool {
	s := &r.sum
	if s.UpstreamCalls != 0 || len(e.stages) == 0 {
		return false
	}
	stages, last := 0, -1
	for _, k := range s.skips[:s.marks] {
		if k.skip != SkipTooLarge {
			return false
		}
		if int(k.stage) != last {
			stages, last = stages+1, int(k.stage)
		}
	}
	calls := s.spill
	if calls == nil {
		calls = s.inline[:s.n]
	}
	for i := range calls {
		a := &calls[i]
		switch {
		case a.Hedge && a.Skip != NotSkipped:
			// A hedge that found nowhere to go says nothing of its tier.
		case a.Skip != SkipTooLarge:
			return false
		case s.marks == 0 && a.TierIndex != last:
			stages, last = stages+1, a.TierIndex
		}
	}
	if s.marks != 0 && len(calls) != 0 {
		// Marks and entries both: count the stages apart.
		return e.everyStageTooLarge(s)
	}
	return stages == len(e.stages)
}

// everyStageTooLarge is tooLarge's count of the stages skipped, for a
// trail that holds skips both as marks and as entries.
func (e *engine) everyStageTooLarge(s *Summary) bool {
	for i := range e.stages {
		found := false
		for _, a := range s.trail() {
			if a.TierIndex == i && a.Skip == SkipTooLarge {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// failure builds the request's *Error from its trail.
func (e *engine) failure(r *request, cause classify.Verdict, closed bool) *Error {
	err := buildError(e.stages, r.sum.trail(), cause, closed)
	r.sum.Source, r.sum.Tier, r.sum.TierIndex = SourceTier, "", -1
	return err
}

// end reports the request's end.
func (e *engine) end(r *request, err error, v classify.Verdict, chunks int) {
	if r.obs == nil {
		return
	}
	r.ended = true
	sum := &r.sum
	if f := r.flight.left(); f != nil {
		// A shared execution whose starter gave up before it ended: the
		// request ends as its starter did; the calls made are its cost.
		sum, err, v = &f.sum, f.err, f.cause
	}
	var st *StageInfo
	if i := sum.TierIndex; i >= 0 && i < len(e.info.Stages) {
		st = &e.info.Stages[i]
	}
	r.obs.RequestEnded(r.ctx, RequestEnd{
		Chain: &e.info, Stage: st, Answered: err == nil, Verdict: v, Err: err,
		Source: sum.Source, CacheHit: sum.CacheHit, Degraded: sum.Degraded, UpstreamCalls: r.sum.UpstreamCalls,
		Remaining: r.endLeft(), Latency: r.endReading(e) - r.start,
		Chunks: chunks, Incomplete: err != nil && errors.Is(err, ErrIncomplete), Shared: r.shared,
	})
}

// endOnPanic closes an observed request that a tier's panic, or its
// runtime.Goexit, is unwinding, so its span ends and its gauges come back
// down; the panic goes on.
func (e *engine) endOnPanic(r *request) { e.unwound(r, recover()) }

// unwound is endOnPanic once it recovered p (nil for runtime.Goexit, or
// when nothing is unwinding the request).
func (e *engine) unwound(r *request, p any) {
	if p == nil && (r.ended || r.obs == nil) {
		return
	}
	r.finish()
	if r.obs != nil && !r.ended {
		if p == nil {
			// Not a panic, and the request did not end: runtime.Goexit.
			e.end(r, outcomeError(detach.Outcome{Goexit: true}), classify.Verdict{Class: classify.Unknown, Reason: "tier called runtime.Goexit"}, 0)
		} else {
			pe, _ := p.(*PanicError)
			if pe == nil {
				pe = &PanicError{Value: p}
			}
			e.end(r, pe, classify.Verdict{Class: classify.Unknown, Reason: "tier panicked"}, 0)
		}
	}
	if p != nil {
		panic(p)
	}
}
