package otelx

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/deadline"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

var _ fallback.Observer = (*Instrumentation)(nil)

// reqState is one request's instrumentation state. It is also the
// request's context: RequestStarted returns it, so that the chain hands it
// back with every later event of the request, and one allocation serves
// both. Its mutable fields are touched only by the request's goroutine;
// Value, which a tier's goroutine may call, reads only fields set before
// the context is handed out.
type reqState struct {
	context.Context
	inst *Instrumentation
	// started is set for a request seen from RequestStarted on; events of
	// a request that was not are exported without spans.
	started bool
	op      *opState
	span    trace.Span
	attempt trace.Span
	// cur is the stage of the current attempt, and curInfo the chain's
	// description of it; answered the stage of the last successful
	// attempt.
	cur      *stageState
	curInfo  *fallback.StageInfo
	answered *stageState
	// queueWait is the bulkhead wait the chain measured before the current
	// attempt (fallback.AttemptStart.QueueWait), or -1.
	queueWait time.Duration
	// opened holds what the current attempt's span learnt as it started
	// and as its first chunk came, set on the span with the rest of its
	// attributes when it ends: one SetAttributes per span, since each one
	// that outgrows the SDK span's attribute slice copies it anew. It
	// serves the request span's attributes too. Set for a request with
	// spans only (tracedReq), so that one without carries no buffer; it
	// comes from the Instrumentation's pool and goes back to it when the
	// request span ends (see Instrumentation.bufs).
	opened *kvBuf
	// reqLabels are the request's labels: noLabels for a request without
	// any, so that its state packs in 128 bytes, one allocation's size
	// class, where the labels inline took 224.
	*reqLabels
	// active is the request's series of tierguard.active_requests, from
	// its start to its end.
	active *activeSeries
}

// reqLabels are a request's labels: its fallback.Request's, and the
// attributes of WithAttributes.
type reqLabels struct {
	id, tenant, scenario string
	labels               []attribute.KeyValue
	// extra are the labels copied onto metrics (Options.MetricAttributes);
	// nil when none.
	extra []attribute.KeyValue
	// profile caches the sets extra makes; nil when none is cached (too
	// many combinations, or a value of a kind not cached).
	profile *labelProfile
}

// noLabels are the labels of a request without any. Read only: readLabels
// fills a request's own.
var noLabels reqLabels

// tracedReq is the state of a request with spans: its labels come in the
// same allocation, and the buffer of its spans' attributes from the
// Instrumentation's pool.
type tracedReq struct {
	reqState
	lab reqLabels
}

// buf returns a buffer for a request's spans' attributes, from the pool.
func (i *Instrumentation) buf() *kvBuf {
	if b, ok := i.bufs.Get().(*kvBuf); ok {
		return b
	}
	return new(kvBuf)
}

// release gives r's buffer back to the pool once its request span has
// ended; a buffer an open attempt span still uses stays with it.
func (i *Instrumentation) release(r *reqState) {
	b := r.opened
	if b == nil || r.attempt != nil {
		return
	}
	r.opened = nil
	b.reset(nil)
	i.bufs.Put(b)
}

// spanContext is the context of the span an event is about, for log
// correlation: the attempt's span sp, or, when nil, the request's span
// (which r's parent holds), or whatever span the caller's context holds.
func (r *reqState) spanContext(sp trace.Span) trace.SpanContext {
	if sp != nil {
		return sp.SpanContext()
	}
	return trace.SpanContextFromContext(r.Context)
}

// Value answers the request state for its Instrumentation and defers every
// other key to the parent.
func (r *reqState) Value(key any) any {
	if k, ok := key.(*Instrumentation); ok && k == r.inst {
		return r
	}
	return r.Context.Value(key)
}

func (r *reqState) add(a *attrs) []metric.AddOption {
	if r.extra == nil {
		return a.add
	}
	if m := r.merged(a); m != nil {
		return m.add
	}
	return []metric.AddOption{metric.WithAttributeSet(r.merge(a))}
}

func (r *reqState) rec(a *attrs) []metric.RecordOption {
	if r.extra == nil {
		return a.rec
	}
	if m := r.merged(a); m != nil {
		return m.rec
	}
	return []metric.RecordOption{metric.WithAttributeSet(r.merge(a))}
}

// merged returns a with the request's labels added, from the cache of
// its labels' profile; nil when it has none or the cache is full.
func (r *reqState) merged(a *attrs) *attrs {
	if r.profile == nil {
		return nil
	}
	return r.profile.merged(&r.inst.profiles, a)
}

func (r *reqState) merge(a *attrs) attribute.Set {
	return attribute.NewSet(append(a.set.ToSlice(), r.extra...)...)
}

// attemptSet is the set of an attempt of class cls, named by its pool
// member and as a hedge when it is either. nil means the cache was full:
// the caller builds the set (attemptKVs).
func (st *stageState) attemptSet(cls int, member string, hedge bool) *attrs {
	if member == "" && !hedge {
		return st.attempts[cls]
	}
	return st.members.get(st.attempts[cls], memberKey{class: cls, member: member, hedge: hedge})
}

// addAttempts counts n attempts of class cls on st.
func (i *Instrumentation) addAttempts(ctx context.Context, r *reqState, st *stageState, cls int, member string, hedge bool, n int64) {
	if a := st.attemptSet(cls, member, hedge); a != nil {
		i.m.attempts.Add(ctx, n, r.add(a)...)
		return
	}
	kv := withMember(append(st.attempts[cls].set.ToSlice(), r.extra...), member, hedge)
	i.m.attempts.Add(ctx, n, metric.WithAttributeSet(attribute.NewSet(kv...)))
}

// RequestStarted opens the request's span and returns the request's
// context with it. Instrumentation is a fallback.Observer: every decision
// of a chain it observes is exported by the method of its event.
func (i *Instrumentation) RequestStarted(ctx context.Context, e fallback.RequestStart) context.Context {
	if i.closed.Load() {
		return ctx
	}
	return i.requestStarted(ctx, &e)
}

// AttemptStarted opens the attempt's span and returns the attempt's
// context with it, so that the tier's own spans (its HTTP client's) nest
// under the attempt.
func (i *Instrumentation) AttemptStarted(ctx context.Context, e fallback.AttemptStart) context.Context {
	if r := i.request(ctx, e.Stage.Operation, e.Stage.Stream); r != nil {
		return i.attemptStarted(ctx, r, &e)
	}
	return ctx
}

// AttemptEnded records the attempt's metrics, ends its span and logs it.
func (i *Instrumentation) AttemptEnded(ctx context.Context, e fallback.AttemptEnd) {
	if r := i.request(ctx, e.Stage.Operation, e.Stage.Stream); r != nil {
		if e.Reply == nil {
			e.Reply = &noReply
		}
		i.attemptEnded(ctx, r, &e)
	}
}

// noReply stands for the Reply of an event made by hand without one (the
// chain's events always point to one); nothing writes it.
var noReply fallback.Reply

// TierSkipped counts and logs a skip.
func (i *Instrumentation) TierSkipped(ctx context.Context, e fallback.TierSkip) {
	if r := i.request(ctx, e.Stage.Operation, e.Stage.Stream); r != nil {
		i.stageSkipped(ctx, r, &e)
	}
}

// LocalAnswered counts a cache hit and logs a local answer.
func (i *Instrumentation) LocalAnswered(ctx context.Context, e fallback.LocalAnswer) {
	if r := i.request(ctx, e.Chain.Operation, e.Chain.Stream); r != nil {
		i.localAnswered(ctx, r, &e)
	}
}

// RequestEnded records the request's metrics, ends its span and logs it.
func (i *Instrumentation) RequestEnded(ctx context.Context, e fallback.RequestEnd) {
	if r := i.request(ctx, e.Chain.Operation, e.Chain.Stream); r != nil {
		i.requestEnded(ctx, r, &e)
	}
}

// FirstChunkReceived records a stream's time to first chunk.
func (i *Instrumentation) FirstChunkReceived(ctx context.Context, e fallback.FirstChunk) {
	if r := i.request(ctx, e.Stage.Operation, e.Stage.Stream); r != nil {
		i.firstChunk(ctx, r, &e)
	}
}

// ChunkReceived records the time between two chunks of a stream.
func (i *Instrumentation) ChunkReceived(ctx context.Context, e fallback.NextChunk) {
	if r := i.request(ctx, e.Stage.Operation, e.Stage.Stream); r != nil {
		i.chunkReceived(ctx, r, &e)
	}
}

// LateReplyReceived counts the tokens of a response the chain stopped
// waiting for.
func (i *Instrumentation) LateReplyReceived(ctx context.Context, e fallback.LateReply) {
	if r := i.request(ctx, e.Stage.Operation, e.Stage.Stream); r != nil {
		i.lateReply(ctx, r, &e)
	}
}

// request returns the state of ctx's request: the one its RequestStarted
// made, or, for a request this Instrumentation did not see start, one for
// metrics and logs only; nil once closed.
func (i *Instrumentation) request(ctx context.Context, op string, stream bool) *reqState {
	// The chain hands back the context RequestStarted returned: the
	// request's state itself, found without a Value call down the chain.
	if r, ok := ctx.(*reqState); ok && r.inst == i {
		return r
	}
	if r, _ := ctx.Value(i).(*reqState); r != nil {
		return r
	}
	if i.closed.Load() {
		return nil
	}
	return i.unstarted(ctx, op, stream)
}

// readLabels reads the request labels from ctx — its fallback.Request and
// the attributes of WithAttributes — into own when it is set (a traced
// request's, made with its state), else into labels made when there are
// any.
func (i *Instrumentation) readLabels(r *reqState, ctx context.Context, own *reqLabels) {
	req := fallback.RequestFrom(ctx)
	attrs := attributes(ctx)
	if req == (fallback.Request{}) && len(attrs) == 0 {
		return
	}
	if own == nil {
		own = new(reqLabels)
	}
	r.reqLabels = own
	r.id, r.scenario = req.ID, req.Scenario
	if i.tenantLabels {
		r.tenant = req.Tenant
	}
	r.labels = attrs
	if len(i.metricKeys) == 0 {
		return
	}
	// The labels are gathered in a buffer on the stack: a request whose
	// labels' profile is cached shares the profile's copy.
	var buf [8]attribute.KeyValue
	extra := buf[:0]
	for _, k := range i.metricKeys {
		var v string
		found := false
		switch k {
		case KeyRequestID:
			v, found = r.id, r.id != ""
		case KeyTenant:
			// Listing it is the opt-in, with or without TenantLabels.
			v, found = req.Tenant, req.Tenant != ""
		case KeyScenario:
			v, found = r.scenario, r.scenario != ""
		default:
			for _, kv := range r.labels {
				if kv.Key == k {
					extra = append(extra, kv)
				}
			}
			continue
		}
		if found {
			extra = append(extra, k.String(v))
		}
	}
	if len(extra) == 0 {
		return
	}
	if r.profile = i.profiles.of(extra); r.profile != nil {
		r.extra = r.profile.extra
	} else {
		r.extra = append([]attribute.KeyValue(nil), extra...)
	}
}

// unstarted builds the state of a request whose RequestStarted this
// Instrumentation did not see (it was closed, or the events come from
// elsewhere): metrics and logs only.
func (i *Instrumentation) unstarted(ctx context.Context, op string, stream bool) *reqState {
	r := &reqState{Context: ctx, inst: i, queueWait: -1, reqLabels: &noLabels}
	r.op = i.op(opKey{op: op, stream: stream})
	if i.labelled {
		i.readLabels(r, ctx, nil)
	}
	return r
}

func (i *Instrumentation) requestStarted(ctx context.Context, e *fallback.RequestStart) context.Context {
	c := e.Chain
	o := i.opByChain(c)
	parent := ctx
	var span trace.Span
	if i.traces {
		ctx, span = i.tracer.Start(ctx, o.spanName, o.spanStart...)
	}
	// A request whose span records gets the buffer of its spans'
	// attributes in the same allocation; one whose span does not (no SDK,
	// sampled out) carries none.
	var r *reqState
	var own *reqLabels
	if span != nil && span.IsRecording() {
		t := &tracedReq{}
		r, own = &t.reqState, &t.lab
		r.opened = i.buf()
	} else {
		r = &reqState{}
	}
	r.inst, r.started, r.queueWait, r.op, r.span, r.reqLabels = i, true, -1, o, span, &noLabels
	if r.opened != nil {
		i.readLabels(r, parent, own)
		i.requestLabels(r)
	} else if i.labelled {
		i.readLabels(r, parent, nil)
	}
	r.Context = ctx
	i.started(r)
	if i.logEnabled(r, slog.LevelDebug) {
		var b logBuf
		r.common(&b, c.Operation, r.spanContext(nil))
		if len(c.Stages) > 0 && c.Stages[0].Model != "" {
			b.add(slog.String("model", c.Stages[0].Model))
		}
		if c.Stream {
			b.add(slog.Bool("stream", true))
		}
		i.logger.LogAttrs(r, slog.LevelDebug, "request started", b.attrs()...)
	}
	return r
}

// requestLabels puts the request's labels on its span.
func (i *Instrumentation) requestLabels(r *reqState) {
	if r.id == "" && r.tenant == "" && r.scenario == "" && len(r.labels) == 0 {
		return
	}
	kv := r.opened
	kv.reset(r.span)
	if r.id != "" {
		kv.put(KeyRequestID.String(r.id))
	}
	if r.tenant != "" {
		kv.put(KeyTenant.String(r.tenant))
	}
	if r.scenario != "" {
		kv.put(KeyScenario.String(r.scenario))
	}
	kv.flush()
	if len(r.labels) > 0 {
		r.span.SetAttributes(r.labels...)
	}
}

// stageOf returns the precomputed state of stage s calling model, from
// the request's cache when it is the current one.
func (i *Instrumentation) stageOf(r *reqState, s *fallback.StageInfo, model string) *stageState {
	if st := r.cur; st != nil && r.curInfo == s && st.key.model == model {
		return st
	}
	if model == s.Model {
		return i.stageByInfo(s)
	}
	return i.stage(keyOf(s, model))
}

// keyOf is the key of stage s calling model.
func keyOf(s *fallback.StageInfo, model string) stageKey {
	return stageKey{op: s.Operation, tier: s.Tier, model: model, provider: s.Provider, index: s.TierIndex, stream: s.Stream}
}

func (i *Instrumentation) attemptStarted(ctx context.Context, r *reqState, e *fallback.AttemptStart) context.Context {
	st := i.stageOf(r, e.Stage, e.Model)
	r.cur, r.curInfo = st, e.Stage
	r.queueWait = -1
	if e.Attempt == 1 && st.waits.Load() {
		r.queueWait = e.QueueWait
	}
	if !r.started || !i.traces {
		return ctx
	}
	ctx, r.attempt = i.tracer.Start(ctx, st.spanName, st.spanStart...)
	if r.attempt.IsRecording() {
		if r.opened == nil {
			// Recorded under a request span that is not (a sampler's
			// choice): the buffer comes now.
			r.opened = &kvBuf{}
		}
		r.opened.reset(r.attempt)
		kv := r.opened
		kv.put(attrAttempt.Int(e.Attempt))
		if e.Stage.Breaker != nil {
			kv.put(attrBreakerState.String(e.Breaker.String()))
		}
		if e.Remaining != deadline.Unlimited {
			kv.put(attrDeadlineRemaining.Float64(max(e.Remaining, 0).Seconds()))
		}
		if r.queueWait >= 0 {
			kv.put(attrQueueWait.Float64(r.queueWait.Seconds()))
		}
	}
	return ctx
}

// usage adds a billed response's tokens to the usage counters, by
// gen_ai.token.modality: each modality the tier broke its counts down by
// (fallback.Usage) under its own name, and what the breakdown leaves
// uncounted — all of the count when there is none — under "unknown", so
// that the modalities of a counter add up to the response's count. The
// cache and reasoning counters are parts of the input and the output that
// the providers do not break down: they take the modality of their side
// when one modality makes all of it, "unknown" otherwise.
func (i *Instrumentation) usage(ctx context.Context, r *reqState, st *stageState, rep *fallback.Reply) {
	u := &rep.Usage
	model := rep.Response.Model
	in := [numModalities]int64{modText: u.TextInputTokens, modImage: u.ImageInputTokens, modAudio: u.AudioInputTokens, modVideo: u.VideoInputTokens, modDocument: u.DocumentInputTokens}
	out := [numModalities]int64{modText: u.TextOutputTokens, modImage: u.ImageOutputTokens, modAudio: u.AudioOutputTokens}
	inMod := byModality(&in, u.InputTokens)
	outMod := byModality(&out, u.OutputTokens)
	for m := range numModalities {
		// A modality with no tokens gets no data point, but for a side
		// not broken down, whose count (even 0) is all unknown.
		if in[m] > 0 || m == inMod {
			i.m.usageIn.Add(ctx, in[m], r.add(st.usageAttrs(model, m))...)
		}
		if out[m] > 0 || m == outMod {
			i.m.usageOut.Add(ctx, out[m], r.add(st.usageAttrs(model, m))...)
		}
	}
	ia := st.usageAttrs(model, inMod)
	i.addCount(ctx, r, i.m.cacheRead, zeroCacheRead, ia, u.CacheReadInputTokens)
	i.addCount(ctx, r, i.m.cacheWrite, zeroCacheWrite, ia, u.CacheWriteInputTokens)
	i.addCount(ctx, r, i.m.reasoning, zeroReasoning, st.usageAttrs(model, outMod), u.ReasoningOutputTokens)
}

// The counters whose zero counts addCount skips once made.
const (
	zeroCacheRead = iota
	zeroCacheWrite
	zeroReasoning
	numZeroCounters
)

// addCount adds n to counter c (one of the zero counters, which) under
// a. A response that reports 0 cache or reasoning tokens still makes the
// series, so that a dashboard reads 0 rather than nothing. Adding 0 again
// within the same collection interval changes nothing a reader exports,
// and it would cost a measurement, a few hundred nanoseconds of the
// SDK's work, on most responses: few report cache writes (Gemini never
// does). So a 0 is added once per collection for a set. A request with
// labels of its own (Options.MetricAttributes) adds every 0, since its
// set is its own. One 0 reported while a collection runs may count in
// the interval that ends; a delta reader then has no point for the
// series in the next interval, unless another response reports for it,
// and the OpenTelemetry data model reads a missing delta point as no
// change. The intervals are counted by the gauge callback: should views
// drop every instrument it observes, the SDK never calls it, and a 0 is
// added once per set for good.
func (i *Instrumentation) addCount(ctx context.Context, r *reqState, c metric.Int64Counter, which int, a *attrs, n int64) {
	if n != 0 || r.extra != nil {
		c.Add(ctx, n, r.add(a)...)
		return
	}
	now := i.collections.Load() + 1
	if a.zeroAt[which].Load() == now {
		return
	}
	c.Add(ctx, 0, a.add...)
	a.zeroAt[which].Store(now)
}

// byModality completes a side's breakdown by modality: what total leaves
// uncounted goes to modUnknown (never below 0, should a provider's parts
// add up to more than its total). It returns the one modality that holds
// all of total, modUnknown when none does (several, or none reported).
func byModality(parts *[numModalities]int64, total int64) int {
	var sum int64
	only, n := modUnknown, 0
	for m, v := range parts {
		if v > 0 {
			sum += v
			only = m
			n++
		}
	}
	parts[modUnknown] = max(total-sum, 0)
	if n == 1 && parts[modUnknown] == 0 {
		return only
	}
	if n == 0 {
		// Not broken down: the whole count, 0 included, is unknown.
		parts[modUnknown] = total
	}
	return modUnknown
}

// lateReply counts the tokens of a response that came after the chain
// stopped waiting for it (an abandoned call, a hedge that lost): billed
// all the same. It may run on another goroutine than the request's, so it
// reads none of the request's moving state.
func (i *Instrumentation) lateReply(ctx context.Context, r *reqState, e *fallback.LateReply) {
	billed := e.Reply != nil && e.Reply.HasUsage
	if !billed && e.Calls <= 0 {
		return
	}
	st := i.stage(keyOf(e.Stage, e.Model))
	if billed {
		i.usage(ctx, r, st, e.Reply)
	}
	if e.Calls > 0 {
		// The calls of a hedge settled when it returned, after its race:
		// attempts that lost, as the hedges settled with their race are.
		i.addAttempts(ctx, r, st, int(classify.Canceled), e.Member, e.Hedge, int64(e.Calls))
	}
}

// validation returns the rule and reason of a rejected answer; a
// *validate.Error's fields name no part of the answer.
func validation(e *fallback.AttemptEnd) (rule, reason string) {
	if e.Err == nil || e.Verdict.Class != classify.InvalidOutput {
		return "", ""
	}
	var ve *validate.Error
	if errors.As(e.Err, &ve) {
		return ve.Rule, ve.Reason
	}
	return "", ""
}

func (i *Instrumentation) attemptEnded(ctx context.Context, r *reqState, e *fallback.AttemptEnd) {
	st := i.stageOf(r, e.Stage, e.Model)
	rep := e.Reply
	// A stream its consumer stopped ends without an error but with class
	// Canceled: not a success.
	ok := e.Err == nil && e.Verdict.Class == classify.OK
	cls := classIndex(e.Verdict.Class)
	if !ok && cls == int(classify.OK) {
		cls = int(classify.Unknown)
	}
	className := classify.Class(cls).String()
	// committed is set for a stream that delivered chunks: it could not
	// fall back silently, so no retry decision or route applies.
	committed := e.Chunks > 0
	dur := st.dur(cls, rep.Response.Model)
	i.m.duration.Record(ctx, e.Latency.Seconds(), r.rec(dur)...)
	if rep.HasUsage {
		// Every billed response counts, failures included: a rejected
		// answer, a partial stream.
		i.usage(ctx, r, st, rep)
		dr := r.rec(dur)
		i.m.opIn.Record(ctx, rep.Usage.InputTokens, dr...)
		i.m.opOut.Record(ctx, rep.Usage.OutputTokens, dr...)
	}
	if p := st.prev; p != nil {
		if ok {
			i.m.prevDuration.Record(ctx, e.Latency.Seconds(), r.rec(p.durOK)...)
			if rep.HasUsage {
				i.m.prevTokens.Record(ctx, rep.Usage.InputTokens, r.rec(p.tokIn)...)
				i.m.prevTokens.Record(ctx, rep.Usage.OutputTokens, r.rec(p.tokOut)...)
			}
		} else {
			i.m.prevDuration.Record(ctx, e.Latency.Seconds(), r.rec(p.durErr[cls])...)
		}
	}
	if ok {
		r.answered = st
	} else if e.Retry {
		i.m.retryWait.Record(ctx, e.Wait.Seconds(), r.rec(st.retryWait[cls])...)
	}
	// Pool members and hedges are named on the attempt: a bounded set (a
	// pool has at most 64 members), and the member is a hash.
	i.addAttempts(ctx, r, st, cls, e.Member, e.Hedge, 1)
	rule, reason := validation(e)

	asp := r.attempt
	if sp := asp; sp != nil {
		r.attempt = nil
		if sp.IsRecording() {
			i.attemptSpanEnd(r, sp, e, st, ok, committed, className, rule, reason)
			r.opened.reset(nil)
		}
		sp.End()
	}
	if !ok && !committed && !e.Retry && e.Route != classify.RouteFailClosed && r.span != nil && r.span.IsRecording() {
		r.span.AddEvent("tierguard.fallback", trace.WithAttributes(
			attrTier.String(e.Stage.Tier), attrTierIndex.Int(e.Stage.TierIndex), attrClass.String(className), attrRoute.String(e.Route.String())))
	}

	level, msg := slog.LevelDebug, "attempt succeeded"
	switch {
	case ok:
	case committed && e.Err == nil:
		level, msg = slog.LevelInfo, "stream stopped by its consumer"
	case committed:
		level, msg = slog.LevelWarn, "stream broke after its first chunk"
	case e.Retry:
		level, msg = slog.LevelInfo, "attempt failed, retrying"
	case e.Route == classify.RouteNextTier:
		level, msg = slog.LevelWarn, "tier failed, falling back"
	case e.Route == classify.RouteLocal:
		level, msg = slog.LevelWarn, "tier failed, answering locally"
	default:
		level, msg = slog.LevelWarn, "tier failed closed"
	}
	if e.Member != "" && e.Verdict.Class == classify.Auth {
		// A pool member's credentials were refused: the request may still
		// be answered by another member, but someone must replace the key.
		level, msg = slog.LevelError, "tierguard: pool member refused for its credentials, taken out of rotation"
	}
	if i.logEnabled(ctx, level) {
		var b logBuf
		asc := r.spanContext(asp)
		r.common(&b, e.Stage.Operation, asc)
		stageLog(&b, e.Stage, e.Model)
		b.add(slog.Int("attempt", e.Attempt))
		if e.Member != "" {
			b.add(slog.String("member", e.Member))
		}
		if e.Hedge {
			b.add(slog.Bool("hedge", true))
		}
		verdictLog(&b, e.Verdict, className)
		if !ok && !committed {
			b.add(slog.Bool("retryable", e.Retry || (e.Stop != retry.NotStopped && e.Stop != retry.NotRetryable)))
			b.add(slog.Bool("retry", e.Retry))
			if e.Retry {
				b.add(slog.Duration("retry_wait", e.Wait))
			} else {
				b.add(slog.String("stop", e.Stop.String()))
				b.add(slog.String("route", e.Route.String()))
			}
		}
		if committed {
			b.add(slog.Int("chunks", e.Chunks))
			b.add(slog.Bool("incomplete", e.Incomplete))
		}
		if e.Stage.Breaker != nil {
			b.add(slog.String("circuit", e.Breaker.String()))
		}
		if rule != "" {
			b.add(slog.String("validation_rule", rule))
			b.add(slog.String("validation_reason", reason))
		}
		if rep.HasUsage {
			b.add(slog.Int64("input_tokens", rep.Usage.InputTokens))
			b.add(slog.Int64("output_tokens", rep.Usage.OutputTokens))
		}
		if rep.Response.Model != "" {
			b.add(slog.String("response_model", rep.Response.Model))
		}
		b.add(slog.Duration("latency", e.Latency))
		remainingLog(&b, e.Remaining)
		if r.queueWait >= 0 {
			b.add(slog.Duration("queue_wait", r.queueWait))
		}
		i.logger.LogAttrs(spanCtx(ctx, asc), level, msg, b.attrs()...)
	}
	r.queueWait = -1
}

// attemptSpanEnd sets what an attempt's end tells on its span. The span
// follows the conventions' rules for recording errors: an attempt that
// failed is an Error with error.type, even when the chain absorbed the
// failure (the request span, which describes the request, is not).
func (i *Instrumentation) attemptSpanEnd(r *reqState, sp trace.Span, e *fallback.AttemptEnd, st *stageState, ok, committed bool, className, rule, reason string) {
	rep := e.Reply
	kv := r.opened
	kv.sp = sp // the buffer holds what the span learnt as it started
	kv.put(attrClass.String(className))
	if e.Member != "" {
		kv.put(attrMember.String(e.Member))
	}
	if e.Verdict.HTTPStatus != 0 {
		kv.put(attrHTTPStatus.Int(e.Verdict.HTTPStatus))
	}
	if e.Verdict.Status != "" {
		kv.put(attrStatus.String(e.Verdict.Status))
	}
	if committed {
		kv.put(attrChunks.Int(e.Chunks))
		kv.put(attrIncomplete.Bool(e.Incomplete))
	}
	if resp := rep.Response; resp.Model != "" {
		kv.put(attrResponseModel.String(resp.Model))
	}
	if id := rep.Response.ID; id != "" {
		kv.put(attrResponseID.String(id))
	}
	finish := rep.Response.FinishReason
	if !ok || finish == "" && e.Stage.Stream {
		// The finish reason was expected and did not come: the attempt
		// failed, or its stream broke.
		finish = finishError
	}
	if finish != "" {
		kv.put(st.finishReasons(finish))
	}
	// The request's sampling, as the tier reported it: numbers the caller
	// chose, never the prompt.
	if rep.RequestMaxTokens > 0 {
		kv.put(attrRequestMaxTokens.Int64(rep.RequestMaxTokens))
	}
	if rep.HasTemperature {
		kv.put(attrRequestTemperature.Float64(rep.RequestTemperature))
	}
	if rep.HasTopP {
		kv.put(attrRequestTopP.Float64(rep.RequestTopP))
	}
	if rep.HasUsage {
		u := rep.Usage
		kv.put(attrInputTokens.Int64(u.InputTokens))
		kv.put(attrOutputTokens.Int64(u.OutputTokens))
		if u.CacheReadInputTokens > 0 {
			kv.put(attrCacheReadTokens.Int64(u.CacheReadInputTokens))
		}
		if u.CacheWriteInputTokens > 0 {
			kv.put(attrCacheWriteToken.Int64(u.CacheWriteInputTokens))
		}
		if u.ReasoningOutputTokens > 0 {
			kv.put(attrReasoningTokens.Int64(u.ReasoningOutputTokens))
		}
	}
	if !ok {
		kv.put(attrErrorType.String(className))
		if e.Verdict.Reason != "" {
			kv.put(attrReason.String(e.Verdict.Reason))
		}
		if !committed {
			kv.put(attrRetry.Bool(e.Retry))
			if e.Retry {
				kv.put(attrRetryWait.Float64(e.Wait.Seconds()))
			} else {
				kv.put(attrRetryStop.String(e.Stop.String()))
				kv.put(attrRoute.String(e.Route.String()))
			}
		}
		if rule != "" {
			kv.put(attrValidationRule.String(rule))
			kv.put(attrValidationReason.String(reason))
		}
	}
	kv.flush()
	if !ok && e.Err != nil {
		sp.SetStatus(codes.Error, className)
	}
}

// firstChunk reports a stream's commit point: its first chunk arrived, and
// the tier can no longer be switched silently.
func (i *Instrumentation) firstChunk(ctx context.Context, r *reqState, e *fallback.FirstChunk) {
	st := i.stageOf(r, e.Stage, e.Model)
	r.answered = st
	i.m.firstChunk.Record(ctx, e.Latency.Seconds(), r.rec(st.durOK)...)
	if p := st.prev; p != nil {
		i.m.prevFirstChunk.Record(ctx, e.Latency.Seconds(), r.rec(p.durOK)...)
	}
	if sp := r.attempt; sp != nil {
		if sp.IsRecording() {
			r.opened.sp = sp
			r.opened.put(attrTimeToFirstChunk.Float64(e.Latency.Seconds()))
			sp.AddEvent("tierguard.first_chunk")
		}
	}
	if i.logEnabled(ctx, slog.LevelDebug) {
		var b logBuf
		asc := r.spanContext(r.attempt)
		r.common(&b, e.Stage.Operation, asc)
		stageLog(&b, e.Stage, e.Model)
		b.add(slog.Int("attempt", e.Attempt))
		b.add(slog.Duration("latency", e.Latency))
		i.logger.LogAttrs(spanCtx(ctx, asc), slog.LevelDebug, "first chunk received", b.attrs()...)
	}
}

// chunkReceived times a committed stream's chunk after the first.
func (i *Instrumentation) chunkReceived(ctx context.Context, r *reqState, e *fallback.NextChunk) {
	st := i.stageOf(r, e.Stage, e.Model)
	i.m.perChunk.Record(ctx, e.Latency.Seconds(), r.rec(st.durOK)...)
}

func (i *Instrumentation) stageSkipped(ctx context.Context, r *reqState, e *fallback.TierSkip) {
	st := i.stageOf(r, e.Stage, e.Model)
	skip := int(e.Skip)
	if skip >= numSkips {
		skip = 0
	}
	i.m.skips.Add(ctx, 1, r.add(st.skips[skip])...)
	if sp := r.attempt; sp != nil {
		// An attempt that started and found nothing to call (a pool with
		// every member out) is skipped: its span ends with the skip.
		r.attempt = nil
		if sp.IsRecording() {
			r.opened.sp = sp
			r.opened.put(attrSkipReason.String(e.Skip.String()))
			r.opened.flush()
			r.opened.reset(nil)
		}
		sp.End()
	}
	wait := time.Duration(-1)
	if st.waits.Load() && e.Skip == fallback.SkipFull {
		wait = e.QueueWait
	}
	if r.span != nil && r.span.IsRecording() {
		r.span.AddEvent("tierguard.skip", trace.WithAttributes(
			attrTier.String(e.Stage.Tier), attrTierIndex.Int(e.Stage.TierIndex), attrSkipReason.String(e.Skip.String()),
			attrClass.String(e.Verdict.Class.String())))
	}
	if i.logEnabled(ctx, slog.LevelInfo) {
		var b logBuf
		r.common(&b, e.Stage.Operation, r.spanContext(nil))
		stageLog(&b, e.Stage, e.Model)
		b.add(slog.String("skip", e.Skip.String()))
		verdictLog(&b, e.Verdict, e.Verdict.Class.String())
		if e.Stage.Breaker != nil {
			b.add(slog.String("circuit", e.Breaker.String()))
		}
		if e.Verdict.RetryAfter > 0 {
			b.add(slog.Duration("retry_after", e.Verdict.RetryAfter))
		}
		b.add(slog.String("route", e.Route.String()))
		remainingLog(&b, e.Remaining)
		if wait >= 0 {
			b.add(slog.Duration("queue_wait", wait))
		}
		i.logger.LogAttrs(ctx, slog.LevelInfo, "tier skipped", b.attrs()...)
	}
}

func (i *Instrumentation) localAnswered(ctx context.Context, r *reqState, e *fallback.LocalAnswer) {
	if e.Source == fallback.SourceCache {
		i.cacheHit(ctx, r, e.Chain.Operation, e.CacheHit)
	}
	if r.span != nil && r.span.IsRecording() {
		r.span.AddEvent("tierguard.local_answer", trace.WithAttributes(attrSource.String(e.Source.String())))
	}
	if i.logEnabled(ctx, slog.LevelInfo) {
		var b logBuf
		r.common(&b, e.Chain.Operation, r.spanContext(nil))
		b.add(slog.String("source", e.Source.String()))
		b.add(slog.Bool("degraded", true))
		b.add(slog.Int("upstream_calls", e.UpstreamCalls))
		i.logger.LogAttrs(ctx, slog.LevelInfo, "answered locally", b.attrs()...)
	}
}

func (i *Instrumentation) requestEnded(ctx context.Context, r *reqState, e *fallback.RequestEnd) {
	d := 0
	if e.Degraded {
		d = 1
	}
	cls := classIndex(e.Verdict.Class)
	if !e.Answered && cls == int(classify.OK) {
		cls = int(classify.Unknown)
	}
	className := classify.Class(cls).String()
	source := "error"
	var a *attrs
	switch {
	case !e.Answered:
		a = r.op.failed[cls]
	case e.Source == fallback.SourceCache:
		a, source = r.op.cache[d], "cache"
	case e.Source == fallback.SourceDefault:
		a, source = r.op.def[d], "default"
	default:
		tier, index := "", -1
		if e.Stage != nil {
			tier, index = e.Stage.Tier, e.Stage.TierIndex
		}
		st := r.answered
		if st == nil || st.key.index != index || st.key.tier != tier {
			st = i.stage(stageKey{op: e.Chain.Operation, tier: tier, index: index, stream: e.Chain.Stream})
		}
		a, source = st.result[d], "tier"
	}
	i.m.requests.Add(ctx, 1, r.add(a)...)
	i.m.reqDuration.Record(ctx, e.Latency.Seconds(), r.rec(a)...)
	if e.Remaining != deadline.Unlimited {
		i.m.remaining.Record(ctx, max(e.Remaining, 0).Seconds(), r.rec(a)...)
	}
	i.ended(ctx, r)

	if sp := r.span; sp != nil {
		if sp.IsRecording() {
			kv := r.opened
			if r.attempt != nil {
				// An attempt span still open keeps its buffer.
				kv = &kvBuf{}
			}
			kv.reset(sp)
			kv.put(attrSource.String(source))
			kv.put(attrDegraded.Bool(e.Degraded))
			kv.put(attrUpstreamCalls.Int(e.UpstreamCalls))
			if st := e.Stage; e.Answered && st != nil {
				kv.put(attrTier.String(st.Tier))
				kv.put(attrTierIndex.Int(st.TierIndex))
			}
			if e.Remaining != deadline.Unlimited {
				kv.put(attrDeadlineRemaining.Float64(max(e.Remaining, 0).Seconds()))
			}
			if e.Chunks > 0 {
				kv.put(attrChunks.Int(e.Chunks))
				kv.put(attrIncomplete.Bool(e.Incomplete))
			}
			if !e.Answered {
				kv.put(attrErrorType.String(className))
				kv.put(attrClass.String(className))
			}
			kv.flush()
			if !e.Answered {
				sp.SetStatus(codes.Error, className)
			}
		}
		sp.End()
		r.span = nil
		i.release(r)
	}

	level, msg := slog.LevelDebug, "request answered"
	switch {
	case !e.Answered:
		level, msg = slog.LevelError, "request failed"
	case e.Degraded:
		level, msg = slog.LevelWarn, "request answered degraded"
	}
	if i.logEnabled(ctx, level) {
		var b logBuf
		r.common(&b, e.Chain.Operation, r.spanContext(nil))
		b.add(slog.String("source", source))
		if st := e.Stage; e.Answered && st != nil {
			b.add(slog.String("tier", st.Tier))
			b.add(slog.Int("tier_index", st.TierIndex))
		}
		b.add(slog.Bool("degraded", e.Degraded))
		if !e.Answered {
			verdictLog(&b, e.Verdict, className)
		}
		b.add(slog.Int("upstream_calls", e.UpstreamCalls))
		if e.Chunks > 0 {
			b.add(slog.Int("chunks", e.Chunks))
			b.add(slog.Bool("incomplete", e.Incomplete))
		}
		b.add(slog.Duration("latency", e.Latency))
		remainingLog(&b, e.Remaining)
		i.logger.LogAttrs(ctx, level, msg, b.attrs()...)
	}
}
