package fallback

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/internal/budget"
)

// Reply is what one upstream response says about itself: what it cost and
// who answered. It holds no content.
type Reply struct {
	// Usage is the response's token usage, when HasUsage is set.
	Usage Usage
	// Response describes the response: its id, the model version that
	// answered, the finish reason.
	Response ResponseInfo

	// The sampling parameters the call was sent with, for telemetry
	// (gen_ai.request.max_tokens, gen_ai.request.temperature,
	// gen_ai.request.top_p): a tier that builds the request (the SDK
	// adapters' tiers) reports them before its upstream call, so that a
	// failed attempt carries them too. They are numbers the caller chose,
	// never part of the prompt. RequestMaxTokens 0 is not set;
	// RequestTemperature and RequestTopP count only with HasTemperature
	// and HasTopP, since 0 is a temperature.
	RequestMaxTokens   int64
	RequestTemperature float64
	RequestTopP        float64

	// The flags, together, so that a Reply packs in 184 bytes: a call
	// that reports makes one, which its events point to.
	HasUsage       bool
	HasTemperature bool
	HasTopP        bool
}

// Report tells the chain attempt that ctx belongs to what an upstream
// response said about itself. The code that receives a billed response —
// an SDK adapter, a hand-written tier — calls it once per response, as
// soon as the response is read and whether or not the response is then
// accepted: a rejected answer, a partial stream, a call nobody waits for
// any more (abandoned, or the loser of a hedged race) were all billed.
//
// Because the report travels in the context, it reaches the chain through
// any number of wrappers (pools, chaos faults, mappings) that pass their
// context on. A reply that arrives while the chain waits for its call is
// part of that attempt (AttemptEnd.Reply); one that arrives later is
// reported on its own, as a LateReply, so that every billed
// response is counted exactly once. Outside a chain, or when nothing
// listens to the chain, Report does nothing. It is safe to call from any
// goroutine.
func Report(ctx context.Context, r Reply) { RecordOf(ctx).Report(r) }

// RecordOf returns the chain's record of the upstream call ctx was made
// for, or nil outside a chain's attempt (and for attempts nothing needs a
// record of: no observer, no limiter, a tier seen to be plain). Every
// method of Record is safe on nil and then does nothing, so a tier
// decorator calls them without checking.
//
// The record is the contract through which a tier that knows more than
// its answer tells the chain: Report for what a response cost, Member and
// Rotated for a tier that spreads its calls over several deployments (see
// package pool). It travels in the context, so it reaches the chain
// through any number of wrappers that pass their context on.
func RecordOf(ctx context.Context) *Record {
	c, _ := ctx.Value(callKey{}).(*Record)
	return c
}

type callKey struct{}

// Record is the chain's record of one upstream call: the context its tier
// receives carries it (see RecordOf), and it collects what the call
// reports. The chain closes it when it stops waiting for the call; a reply
// reported after that is late, and goes to the chain's observers on its
// own. It is safe for concurrent use.
//
// Do not use a Record as a context: with a TryTimeout of its own, the
// attempt's deadline is only on the context the tier received, which
// carries the record. A tier reads deadlines and cancellation from its
// ctx.
type Record struct {
	context.Context
	// reqCtx and obs are the request's, and deadlineAt its budget's
	// deadline on the engine's clock (noDeadline when it has none), for
	// the events of a late reply and of a member's call that failed. The
	// engine is st's.
	reqCtx     context.Context
	obs        Observer
	deadlineAt time.Duration
	st         *stage
	model      string
	// tokens is the stage's estimate for the call, for the limiters of a
	// pool's members.
	tokens int64
	// n is the attempt's number.
	n int32
	// state holds the record's flags (see recordClosed), set under mu
	// where they go with a change of the fields it guards; recordTouched
	// and recordClosed are read without it, so that the chain settles and
	// closes the record of a call that reported nothing without taking
	// the lock.
	state atomic.Uint32

	mu sync.Mutex
	// reply is what the call's responses reported, and members what a
	// tier that spreads its calls over members (a pool) reported: each
	// made on first use, so that the record of a call that reports
	// nothing packs in 128 bytes. Every observed attempt allocates one,
	// and an allocation's cost grows with its size (in a loop of
	// allocations on the benchmark machine, about 50 ns at 128 bytes and
	// 130 at 320).
	reply   *Reply
	members *members
	// waited is how long the call waited for a rate limit's turn before
	// its upstream call (Waited).
	waited time.Duration
}

// The states of a record, in its state: closed once the chain stopped
// waiting for the call; counted once the tier counts its own calls
// (CountCalls); memberFailure when the attempt's failure is its member's
// alone (an exhausted quota: the member is parked, not the tier); asked
// when a decorator read the record (its estimate, its rules, its tokens):
// the stage then keeps making records; hedge for a hedge's call; touched
// once anything but the chain changed the record, or is about to.
const (
	recordClosed uint32 = 1 << iota
	recordCounted
	recordMemberFailure
	recordAsked
	recordHedge
	recordTouched
)

// is reports whether flag f is set.
func (c *Record) is(f uint32) bool { return c.state.Load()&f != 0 }

// set sets flag f; c.mu is held.
func (c *Record) set(f uint32) { c.state.Or(f) }

// lockTouched takes c.mu for a change that comes from outside the chain,
// marking the record touched first. A change marks the record before it
// reads recordClosed, and close sets recordClosed before it reads the
// mark: whichever of the two comes second in the order of atomic
// operations sees the other's. A close that found the record untouched
// therefore needs no lock (nothing was written, and whatever comes later
// finds the record closed: a report is then late), and one that found it
// touched takes the lock to read what was written.
func (c *Record) lockTouched() {
	c.state.Or(recordTouched)
	c.mu.Lock()
}

// members is what a call's record holds of a tier's members: calls
// counts the upstream calls the tier made, at is the member of the
// current one, rotated the member calls that failed before it; avoid is,
// for a hedge, the member the first call holds.
type members struct {
	calls   int32
	at      string
	rotated []rotation
	avoid   string
	// before is the member current before at, for NoCall.
	before string
}

// spread returns c's members, made on first use; c.mu is held.
func (c *Record) spread() *members {
	if c.members == nil {
		c.members = new(members)
	}
	return c.members
}

// rotation is a member's call that failed and sent the attempt to
// another member: an upstream call of its own on the trail.
type rotation struct {
	member  string
	err     error
	verdict classify.Verdict
	latency time.Duration
	// told is set once observers heard of it, as it happened.
	told bool
}

// Value finds the record for Report; every other key goes to the parent.
func (c *Record) Value(key any) any {
	if key == (callKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// Report adds what one upstream response of the call said about itself
// (see the package function Report).
func (c *Record) Report(r Reply) {
	if c == nil {
		return
	}
	c.lockTouched()
	if !c.is(recordClosed) {
		if c.reply == nil {
			c.reply = new(Reply)
		}
		merge(c.reply, &r)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.st.e.late(c, r)
}

// CountCalls says that the tier counts its own upstream calls, each with
// Member: one that then names none made no upstream call (every member
// out of rotation), and its *SkipError is a skip, not a failure. A tier
// that does not call it counts as one upstream call per attempt.
func (c *Record) CountCalls() { c.mark(recordCounted) }

// mark sets flag f as a change from outside the chain (see lockTouched).
func (c *Record) mark(f uint32) {
	if c == nil {
		return
	}
	c.lockTouched()
	c.set(f)
	c.mu.Unlock()
}

// Member reports an upstream call to the member named id ("#" and a
// short hash of its key; never the key), which becomes the attempt's
// current member: the trail and the events name it.
func (c *Record) Member(id string) {
	if c == nil {
		return
	}
	c.lockTouched()
	m := c.spread()
	c.set(recordCounted)
	m.calls, m.at, m.before = m.calls+1, id, m.at
	c.mu.Unlock()
}

// NoCall says that the member call Member last reported made no upstream
// call after all: the member's own wrapper refused it before sending
// anything (a rate limit's *SkipError). It is not counted, and the member
// current before it is current again. A tier calls it at most once per
// Member, before its next Member.
func (c *Record) NoCall() {
	if c == nil {
		return
	}
	c.lockTouched()
	if m := c.members; m != nil && m.calls > 0 {
		m.calls, m.at, m.before = m.calls-1, m.before, ""
	}
	c.mu.Unlock()
}

// Rotated reports that the current member's call failed with err (of
// verdict v, after latency) and that the attempt moves on to another
// member, and returns the context, built on ctx, to make that member's
// call with. The failed call is an upstream call of its own, outside the
// stage's retry policy and breaker: on the trail, and to observers as it
// happens — its AttemptEnded, then the next call's AttemptStarted, whose
// context (its span) the returned one carries. Values the observer set
// there take precedence over ctx's own.
func (c *Record) Rotated(ctx context.Context, err error, v classify.Verdict, latency time.Duration) context.Context {
	if c == nil {
		return ctx
	}
	c.lockTouched()
	defer c.mu.Unlock()
	m := c.spread()
	rot := rotation{member: m.at, err: err, verdict: v, latency: latency}
	// Observers hear of it at once unless the call is a hedge's, which
	// runs beside the first call (the chain reports its calls once the
	// race is over), or no longer the chain's (closed). Holding the lock,
	// so that the chain's own events wait for these.
	rot.told = c.obs != nil && !c.is(recordHedge|recordClosed)
	m.rotated = append(m.rotated, rot)
	if !rot.told {
		return ctx
	}
	n := int(c.n) + len(m.rotated) - 1
	ev := AttemptEnd{Stage: c.st.info, Model: c.model, Attempt: n, Member: rot.member, Breaker: breakerState(c.st),
		Remaining: c.remaining(), Verdict: v, Latency: latency, Err: err, Retry: true, Route: c.st.e.table.Action(v.Class).Route, Reply: noReply}
	c.obs.AttemptEnded(c.reqCtx, ev)
	next := c.obs.AttemptStarted(c.reqCtx, AttemptStart{Stage: c.st.info, Model: c.model, Attempt: n + 1,
		Breaker: breakerState(c.st), Remaining: c.remaining()})
	if next == c.reqCtx {
		return ctx
	}
	return &nextCall{Context: ctx, observed: next, rec: c}
}

// remaining is the time the request's budget leaves now.
func (c *Record) remaining() time.Duration {
	if c.deadlineAt == noDeadline {
		return budget.Unlimited
	}
	return c.deadlineAt - c.st.e.now()
}

// noDeadline is a record's deadlineAt for a request without a deadline.
const noDeadline = time.Duration(math.MaxInt64)

// recordDeadline is r's deadline for its records.
func (r *request) recordDeadline() time.Duration {
	if r.budget.Limited() {
		return r.deadlineAt
	}
	return noDeadline
}

// nextCall is the context of a member's call after a rotation: ctx's
// deadline and cancellation, the observer's values for the new call (its
// span) over ctx's, and the record.
type nextCall struct {
	context.Context
	observed context.Context
	rec      *Record
}

// Value finds the record, then the observer's values, then ctx's.
func (n *nextCall) Value(key any) any {
	if key == (callKey{}) {
		return n.rec
	}
	if v := n.observed.Value(key); v != nil {
		return v
	}
	return n.Context.Value(key)
}

// MemberFailed says that the attempt's failure is its member's alone (an
// exhausted quota, a cool-down the tier applied to that member): the chain
// does not park the whole tier for it.
func (c *Record) MemberFailed() { c.mark(recordMemberFailure) }

// memberFailed reports whether the tier said its failure was its
// member's alone (MemberFailed).
func (c *Record) memberFailed() bool { return c != nil && c.is(recordMemberFailure) }

// CurrentMember is the member the call is on now (see Member); "" for a
// tier without members.
func (c *Record) CurrentMember() string { return c.member(func(m *members) string { return m.at }) }

// member reads one of the record's member names with f; "" when the
// tier named none.
func (c *Record) member(f func(*members) string) string {
	if c == nil {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.members == nil {
		return ""
	}
	return f(c.members)
}

// Tokens is the sum of the input and output tokens reported so far, and
// whether any usage was — for a tier that corrects its own limiters with
// what its calls cost.
func (c *Record) Tokens() (int64, bool) {
	if c == nil {
		return 0, false
	}
	c.lockTouched()
	defer c.mu.Unlock()
	c.set(recordAsked)
	if c.reply == nil {
		return 0, false
	}
	return c.reply.Usage.InputTokens + c.reply.Usage.OutputTokens, c.reply.HasUsage
}

// settlement is what a tier reported of its calls, read once it
// returned: the upstream calls it made (1 for a tier that does not count
// them), the member of the last, the member calls that failed before it,
// whether its failure is its member's alone, whether a decorator read
// the record, and how long the call waited for a rate limit's turn.
type settlement struct {
	calls                int
	member               string
	rotated              []rotation
	memberFailure, asked bool
	waited               time.Duration
}

// settled is what the tier reported of its calls, read once it returned.
func (c *Record) settled() settlement {
	if c == nil || !c.is(recordTouched) {
		return settlement{calls: 1}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := settlement{calls: 1, memberFailure: c.is(recordMemberFailure), asked: c.is(recordAsked), waited: c.waited}
	counted := c.is(recordCounted)
	if counted {
		st.calls = 0
	}
	if m := c.members; m != nil {
		if counted {
			st.calls = int(m.calls)
		}
		st.member, st.rotated = m.at, m.rotated
	}
	return st
}

// takeRotated returns the member calls that failed so far and forgets
// them, for a stream that records them at its commit point.
func (c *Record) takeRotated() []rotation {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.members == nil {
		return nil
	}
	r := c.members.rotated
	c.members.rotated = nil
	return r
}

// close ends the chain's wait for the call and returns what its replies
// said: the record's own Reply, which nothing writes once it is closed
// (a later reply is late), or noReply.
func (c *Record) close() *Reply {
	if c == nil {
		return noReply
	}
	if c.state.Or(recordClosed)&recordTouched == 0 {
		// Nothing reported, and from now on a report is late.
		return noReply
	}
	c.mu.Lock()
	rep := c.reply
	c.mu.Unlock()
	if rep == nil {
		return noReply
	}
	return rep
}

// noReply is the Reply of a call whose responses reported nothing; the
// events of every such call point to it, and nothing writes it.
var noReply = new(Reply)

// shut ends the chain's wait for the call, for a chain that has no use
// for what it reported.
func (c *Record) shut() {
	if c != nil {
		c.state.Or(recordClosed)
	}
}

// merge adds a second reply of one call: a tier that made several
// upstream calls for one attempt (a pool rotating over its members) was
// billed for each; the later response's description wins where it says
// something.
func merge(a, b *Reply) {
	if b.HasUsage {
		a.HasUsage = true
		a.Usage.InputTokens += b.Usage.InputTokens
		a.Usage.OutputTokens += b.Usage.OutputTokens
		a.Usage.CacheReadInputTokens += b.Usage.CacheReadInputTokens
		a.Usage.CacheWriteInputTokens += b.Usage.CacheWriteInputTokens
		a.Usage.ReasoningOutputTokens += b.Usage.ReasoningOutputTokens
		a.Usage.TextInputTokens += b.Usage.TextInputTokens
		a.Usage.ImageInputTokens += b.Usage.ImageInputTokens
		a.Usage.AudioInputTokens += b.Usage.AudioInputTokens
		a.Usage.VideoInputTokens += b.Usage.VideoInputTokens
		a.Usage.DocumentInputTokens += b.Usage.DocumentInputTokens
		a.Usage.TextOutputTokens += b.Usage.TextOutputTokens
		a.Usage.ImageOutputTokens += b.Usage.ImageOutputTokens
		a.Usage.AudioOutputTokens += b.Usage.AudioOutputTokens
	}
	// What the call asked for: the latest report that says.
	if b.RequestMaxTokens != 0 {
		a.RequestMaxTokens = b.RequestMaxTokens
	}
	if b.HasTemperature {
		a.RequestTemperature, a.HasTemperature = b.RequestTemperature, true
	}
	if b.HasTopP {
		a.RequestTopP, a.HasTopP = b.RequestTopP, true
	}
	a.Response = mergeResponse(a.Response, b.Response)
}

// listens reports whether a request's attempts need a call record: an
// observer to tell, or a tier that may read it — a decorator correcting
// its limiters with the usage, a pool reporting its members, however
// wrapped. A stage learns its tier is plain — a success that named no
// member and whose record no decorator read — and then makes no record
// when no observer needs one.
func (r *request) listens(st *stage) bool { return r.obs != nil || !st.plain.Load() }

// newCall returns the record of attempt n's call on st, built on base;
// tokens is the stage's estimate for it.
func (e *engine) newCall(r *request, st *stage, base context.Context, model string, n int, tokens int64) *Record {
	return &Record{Context: base, reqCtx: r.ctx, obs: r.obs, deadlineAt: r.recordDeadline(), st: st, model: model, n: int32(n), tokens: tokens}
}

// newTimedCall is newCall for an attempt that ends at deadline, sooner
// than base: the record and the attempt's context, in one allocation
// where a record around a context of the attempt's own took two. The
// attempt's context is the timedRecord itself.
func (e *engine) newTimedCall(r *request, st *stage, base context.Context, model string, n int, tokens int64, deadline time.Time) *timedRecord {
	t := &timedRecord{Record: Record{Context: base, reqCtx: r.ctx, obs: r.obs, deadlineAt: r.recordDeadline(), st: st, model: model, n: int32(n), tokens: tokens}}
	t.timed.Init(base, deadline)
	return t
}

// timedRecord is a Record with the context of its attempt's deadline,
// which it is: the record's parent is the attempt's base, and its
// deadline, cancellation and error are the timed context's.
type timedRecord struct {
	Record
	timed budget.Context
}

// Value finds the record for Report; every other key goes to the parent.
func (t *timedRecord) Value(key any) any { return t.Record.Value(key) }

// Deadline is the attempt's deadline.
func (t *timedRecord) Deadline() (time.Time, bool) { return t.timed.Deadline() }

// Done is closed when the attempt's context ends.
func (t *timedRecord) Done() <-chan struct{} { return t.timed.Done() }

// Err says why the attempt's context ended, nil while it lives.
func (t *timedRecord) Err() error { return t.timed.Err() }

// AfterFunc runs f once the attempt's context ends, as context.AfterFunc
// (see Record.AfterFunc).
func (t *timedRecord) AfterFunc(f func()) (stop func() bool) { return t.timed.AfterFunc(f) }

// AfterFunc runs f once the attempt's context ends, as context.AfterFunc:
// the context package uses it so that a context derived from the record
// (an SDK's request) starts no goroutine to watch it, when the record's
// parent would not either.
func (c *Record) AfterFunc(f func()) (stop func() bool) { return context.AfterFunc(c.Context, f) }

// ownRecord is the chain's own record of an attempt whose context is
// ctx: the record itself, or nil — not one of an outer chain that ctx
// carries (RecordOf).
func ownRecord(ctx context.Context) *Record {
	switch c := ctx.(type) {
	case *Record:
		return c
	case *timedRecord:
		return &c.Record
	}
	return nil
}

// attemptContext is the context and the deadline's control of an attempt
// on base: the record's own deadline when it has one (newTimedCall), or
// else the one the budget makes.
func attemptContext(b budget.Budget, base context.Context, per, remaining time.Duration) (context.Context, *budget.Context) {
	if t, ok := base.(*timedRecord); ok {
		return t, &t.timed
	}
	return b.Context(base, per, remaining)
}

// Avoid is the member another call of the same attempt holds — set for
// a hedge on the same tier, so that it goes to another member; "" otherwise.
func (c *Record) Avoid() string { return c.member(func(m *members) string { return m.avoid }) }

// Estimate is the stage's estimate of the call's tokens (Stage.Tokens), 0
// when it has none.
func (c *Record) Estimate() int64 {
	if c == nil {
		return 0
	}
	c.ask()
	return c.tokens
}

// Rules are how the chain a call runs in classifies and parks failures,
// for a tier that makes decisions of its own (a pool parking a member).
type Rules struct {
	// Classifier and Table are the stage's classifier and the chain's
	// class table; Table must not be modified.
	Classifier classify.Classifier
	Table      *classify.Table
	// QuotaCooldown and MaxQuotaCooldown are the chain's
	// Config.QuotaCooldown and Config.MaxQuotaCooldown, with defaults.
	QuotaCooldown, MaxQuotaCooldown time.Duration
	// MinAttempt is the stage's: the least time worth starting a call
	// with, which a wait before the call must leave before the attempt's
	// deadline.
	MinAttempt time.Duration
	// CoolDown is the stage's Stage.CoolDown, with its defaults: when a
	// member's 429 takes it out for every request.
	CoolDown CoolDown
}

// DefaultRules are the rules of a chain with default settings.
func DefaultRules() Rules {
	return Rules{Classifier: classify.Func(classify.Classify), Table: &defaultTable,
		QuotaCooldown: defaultQuotaCooldown, MaxQuotaCooldown: defaultMaxQuotaCooldown, MinAttempt: defaultMinAttempt,
		CoolDown: CoolDown{}.WithDefaults()}
}

var defaultTable = classify.DefaultTable()

// Rules returns the rules of the chain the call runs in, or DefaultRules
// outside a chain.
func (c *Record) Rules() Rules {
	if c == nil {
		return DefaultRules()
	}
	c.ask()
	e := c.st.e
	return Rules{Classifier: c.st.classifier, Table: &e.table, QuotaCooldown: e.quotaPark, MaxQuotaCooldown: e.maxQuotaPark,
		MinAttempt: c.st.try.MinUseful, CoolDown: c.st.coolDown}
}

// Waited reports that the call waited d for a rate limit's turn before its
// upstream call; the attempt's event carries it (LimitWait).
func (c *Record) Waited(d time.Duration) {
	if c == nil || d <= 0 {
		return
	}
	c.lockTouched()
	c.waited += d
	c.mu.Unlock()
}

// ask marks the record read by a decorator.
func (c *Record) ask() { c.state.Or(recordAsked | recordTouched) }

// hedgeOf returns the record of the hedge of c's attempt, on st with
// model, built on base; on the same tier it avoids the member avoid.
func (c *Record) hedgeOf(base context.Context, st *stage, model, avoid string) *Record {
	h := &Record{Context: base, reqCtx: c.reqCtx, obs: c.obs, deadlineAt: c.deadlineAt, st: st, model: model, n: c.n, tokens: c.tokens}
	h.state.Store(recordHedge)
	if avoid != "" {
		h.members = &members{avoid: avoid}
		h.state.Store(recordHedge | recordTouched)
	}
	return h
}

// late reports a reply that came after the chain stopped waiting for its
// call.
func (e *engine) late(c *Record, r Reply) {
	if c.obs == nil {
		return
	}
	c.obs.LateReplyReceived(c.reqCtx, LateReply{Stage: c.st.info, Model: c.model, Attempt: int(c.n), Member: c.CurrentMember(), Hedge: c.is(recordHedge), Reply: &r})
}
