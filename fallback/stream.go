package fallback

import (
	"context"
	"errors"
	"iter"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/internal/budget"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// Errors that end a stream. They reach the consumer wrapped in an
// *IncompleteError (or, before the first chunk, in the attempt's failure).
var (
	// ErrIncomplete matches every *IncompleteError.
	ErrIncomplete = errors.New("tierguard: stream incomplete")
	// ErrFirstChunkTimeout: no first chunk with content arrived within the
	// stage's FirstChunkTimeout (or before the reserve for later tiers).
	ErrFirstChunkTimeout = errors.New("tierguard: no first chunk in time")
	// ErrIdleTimeout: the gap between two chunks exceeded IdleTimeout.
	ErrIdleTimeout = errors.New("tierguard: stream idle too long")
	// ErrNoFinishReason: the stream ended cleanly without a finish reason.
	ErrNoFinishReason = errors.New("tierguard: stream ended without a finish reason")
	// ErrEmptyStream: the stream ended without a chunk that carries
	// content, and without an error. When no chunk carried a finish reason
	// either (a stream of role-only or reasoning-only chunks that closed),
	// the stream was cut: Transient, retried before the next tier. When one
	// did, the answer is empty: InvalidOutput.
	ErrEmptyStream = errors.New("tierguard: stream ended without any content")
)

// IncompleteError reports a stream that failed after its first chunk with
// content — the commit point, past which a chain never switches tiers
// silently. The consumer has already received Chunks chunks (Bytes bytes of
// text); what it shows must be marked incomplete.
type IncompleteError struct {
	// Tier is the tier that was streaming.
	Tier string
	// Chunks and Bytes measure what was delivered.
	Chunks int
	Bytes  int
	// FinishReason is the last finish reason seen, "" if none.
	FinishReason string
	// Cause is why the stream ended: ErrIdleTimeout, ErrNoFinishReason, the
	// deadline, or the tier's error (a cut connection is usually
	// io.ErrUnexpectedEOF; a safety stop or a recitation after the first
	// chunk is the adapter's typed error for it). An error after a finish
	// reason counts too: a stream is complete only when it closes cleanly
	// after its last finish reason (Vertex AI sends STOP on every chunk).
	Cause error
	// V is the cause's classification; a cut or stalled stream is
	// Transient and counts against the tier's breaker.
	V classify.Verdict
}

// Error says which tier's stream broke, after how much, and why (by class:
// upstream text stays in Cause).
func (e *IncompleteError) Error() string {
	return "tierguard: stream from tier " + e.Tier + " incomplete after " + strconv.Itoa(e.Chunks) +
		" chunks (" + strconv.Itoa(e.Bytes) + " bytes): " + e.V.String()
}

// Is reports whether target is ErrIncomplete.
func (e *IncompleteError) Is(target error) bool { return target == ErrIncomplete }

// Unwrap returns the cause.
func (e *IncompleteError) Unwrap() error { return e.Cause }

// Verdict returns the cause's classification.
func (e *IncompleteError) Verdict() classify.Verdict { return e.V }

// StreamStage attaches guards to a streaming tier, in the unary chain's
// fixed order: bulkhead → breaker → retry → call. The bulkhead slot and the
// breaker's probe are held until the stream ends or the consumer stops.
type StreamStage[In, Chunk any] struct {
	// Tier answers the request. Required.
	Tier StreamTier[In, Chunk]
	// Model, ModelFor and Provider are as in Stage.
	Model    string
	ModelFor func(in In) string
	Provider string
	// Bulkhead, Breaker, Retry and Classifier are as in Stage. Retries
	// happen only before the first chunk with content.
	Bulkhead   *bulkhead.Bulkhead
	Breaker    *breaker.Breaker
	Retry      retry.Policy
	Classifier classify.Classifier
	// FirstChunkTimeout caps each attempt's wait for its first chunk with
	// content (time to first token); the wait also ends where the reserve
	// for later tiers begins. 0 means only the reserve caps it.
	FirstChunkTimeout time.Duration
	// IdleTimeout caps the gap between chunks after the first; 0 means only
	// the request's deadline bounds the stream.
	IdleTimeout time.Duration
	// MinAttempt and Reserve are as in Stage; the reserve applies before
	// the first chunk only.
	MinAttempt time.Duration
	Reserve    time.Duration
	// Validate checks the assembled text (the ChunkInfo.Text of every
	// chunk) when the stream ends; a rejection reaches the consumer as the
	// stream's final error, after the chunks it already showed.
	Validate validate.Validator[string]
	// Tokens is as in Stage: the estimate a rate-limited tier
	// (ratelimit.StreamTier) takes its turn for; the usage a stream
	// reports by its end corrects it.
	Tokens func(in In) int64
}

// StreamConfig configures a StreamChain; fields mean what they mean in
// Config.
//
// Streams have no idempotency key: each consumer reads its own upstream
// stream, since a request joining one in flight would need every chunk
// already sent replayed to it. For requests that may arrive twice, use a
// Chain with Config.Key, or deduplicate before streaming.
type StreamConfig[In, Chunk any] struct {
	// Operation names what the chain does, for observers; default
	// "generate_content".
	Operation string
	// Stages are the streaming tiers, in order of preference.
	Stages []StreamStage[In, Chunk]
	// Total caps each stream, every attempt and fallback included, and the
	// stream itself after its first chunk.
	Total time.Duration
	// MinAttempt is the default StreamStage.MinAttempt.
	MinAttempt time.Duration
	// Table overrides the class table; Classifier classifies tier errors.
	Table      *classify.Table
	Classifier classify.Classifier
	// Catalog lets the chain skip tiers whose model is not served.
	Catalog Catalog
	// QuotaCooldown, MaxQuotaCooldown and RetiredRecheck are as in Config.
	QuotaCooldown    time.Duration
	MaxQuotaCooldown time.Duration
	RetiredRecheck   time.Duration
	// Cache answers with a single chunk when no tier could start a stream,
	// and is given the assembled text of every stream that completed and
	// passed validation.
	Cache StreamCache[In, Chunk]
	// Default answers with a single chunk when no tier could start a
	// stream and the cache had nothing. It is not used once a stream has
	// committed.
	Default func(ctx context.Context, in In) (Chunk, bool)
	// Continue, when set, resumes a stream that broke after its first chunk
	// on the next tier: it receives the original input and the text
	// delivered so far and returns the input for the next tier (or false to
	// give up). Off by default, and risky: the next model may repeat or
	// contradict what was shown. Without it a broken stream ends with an
	// *IncompleteError.
	Continue func(in In, partial string) (In, bool)
	// Observer receives the chain's events; see also StreamChain.Observe.
	Observer Observer
	// AbandonAfter is as in Config: with it, each stream is read on its own
	// goroutine, and a tier that ignores its context is abandoned that long
	// after the wait for its next chunk ended.
	AbandonAfter time.Duration
}

func (cfg *StreamConfig[In, Chunk]) shared() shared {
	return shared{
		op: cfg.Operation, total: cfg.Total, minAttempt: cfg.MinAttempt, table: cfg.Table, classifier: cfg.Classifier,
		catalog: cfg.Catalog, quotaPark: cfg.QuotaCooldown, maxQuotaPark: cfg.MaxQuotaCooldown,
		retirePark: cfg.RetiredRecheck, abandonAfter: cfg.AbandonAfter, observer: cfg.Observer, measure: true, stream: true,
	}
}

func (cfg *StreamConfig[In, Chunk]) specs() []stageSpec {
	specs := make([]stageSpec, len(cfg.Stages))
	for i, s := range cfg.Stages {
		specs[i] = stageSpec{
			model: s.Model, provider: s.Provider, bulkhead: s.Bulkhead, breaker: s.Breaker, retry: s.Retry,
			classifier: s.Classifier, cap: s.FirstChunkTimeout, capName: "FirstChunkTimeout", minAttempt: s.MinAttempt, reserve: s.Reserve, nilTier: s.Tier == nil,
		}
		if s.Tier != nil {
			specs[i].name = s.Tier.Name()
			specs[i].endpoint(s.Tier)
		}
		specs[i].idle = s.IdleTimeout
	}
	return specs
}

// StreamChain answers requests with a stream, falling back across tiers
// until the first chunk with content arrives and never silently after it.
// Build it once with NewStream and share it.
type StreamChain[In, Chunk any] struct {
	base[In]
	tiers      []StreamTier[In, Chunk]
	validators []validate.Validator[string]
	idle       []time.Duration
	cache      StreamCache[In, Chunk]
	def        func(context.Context, In) (Chunk, bool)
	cont       func(In, string) (In, bool)
}

// NewStream compiles a streaming chain, or returns an error naming every
// invalid field.
func NewStream[In, Chunk any](cfg StreamConfig[In, Chunk]) (*StreamChain[In, Chunk], error) {
	e, err := newEngine("stream config", cfg.shared(), cfg.specs())
	if err != nil {
		return nil, err
	}
	n := len(cfg.Stages)
	c := &StreamChain[In, Chunk]{
		base: newBase[In](e, n), tiers: make([]StreamTier[In, Chunk], n), validators: make([]validate.Validator[string], n),
		idle:  make([]time.Duration, n),
		cache: cfg.Cache, def: cfg.Default, cont: cfg.Continue,
	}
	for i, s := range cfg.Stages {
		c.tiers[i], c.validators[i], c.idle[i] = s.Tier, s.Validate, s.IdleTimeout
		c.tokens[i] = s.Tokens
		c.modelFors[i] = s.ModelFor
	}
	return c, nil
}

// Stream is one streaming request. Range over Chunks once; then Result
// describes it.
type Stream[In, Chunk any] struct {
	c    *StreamChain[In, Chunk]
	ctx  context.Context
	in   In
	used bool
	res  StreamResult
}

// Stream prepares a streaming request; nothing is sent until Chunks is
// ranged over.
func (c *StreamChain[In, Chunk]) Stream(ctx context.Context, in In) *Stream[In, Chunk] {
	s := &Stream[In, Chunk]{c: c, ctx: ctx, in: in}
	s.res.TierIndex = -1
	s.res.deadline, s.res.hasDeadline = ctx.Deadline()
	return s
}

// Result describes the stream; complete once Chunks' iteration has ended.
// Before it, its Deadline is the context's only: the chain's Total counts
// from the start of the iteration.
func (s *Stream[In, Chunk]) Result() StreamResult { return s.res }

// Chunks yields the answer's chunks. An error ends the sequence: before the
// first chunk it is the chain's *Error (every tier failed); after it, an
// *IncompleteError or a validation failure. Breaking out of the loop
// cancels the upstream request and releases the tier's bulkhead slot and
// probe. Chunks may be ranged over once.
func (s *Stream[In, Chunk]) Chunks() iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		if s.used {
			var zero Chunk
			yield(zero, errors.New("tierguard: a Stream's chunks can be ranged over once"))
			return
		}
		s.used = true
		s.c.run(s, yield)
	}
}

func (c *StreamChain[In, Chunk]) run(s *Stream[In, Chunk], yield func(Chunk, error) bool) {
	var r request
	c.begin(s.ctx, &r)
	defer func() { s.res.Summary = r.sum }()
	defer c.endOnPanic(&r)
	in := s.in
	var last classify.Verdict
	var incomplete *IncompleteError
	keep := c.cont != nil
	var partial strings.Builder
	for i := range c.stages {
		st := &c.stages[i]
		model := c.modelFor(i, in)
		op, h, end := runStage(c.engine, c, &r, st, model, in)
		if end.err == nil {
			p := pump[In, Chunk]{c: c, r: &r, s: s, st: st, model: model, n: end.n, h: h, op: op, yield: yield, in: in}
			if keep {
				p.partial = &partial
			}
			ie, done := p.run(in)
			if done {
				return
			}
			incomplete = ie
			if c.cont != nil && i+1 < len(c.stages) {
				if next, ok := c.cont(s.in, partial.String()); ok {
					in = next
					s.res.Continued = true
					continue
				}
			}
			break
		}
		last = end.verdict
		if incomplete != nil {
			// A continuation tier failed before its first chunk: keep
			// looking, but the stream as a whole stays incomplete.
			continue
		}
		switch end.route {
		case classify.RouteFailClosed:
			c.failStream(&r, yield, end.verdict, true)
			return
		case classify.RouteLocal:
			c.localStream(&r, s, yield, last)
			return
		}
	}
	if incomplete != nil {
		var zero Chunk
		yield(zero, incomplete)
		c.end(&r, incomplete, incomplete.V, s.res.Chunks)
		return
	}
	c.localStream(&r, s, yield, last)
}

func (c *StreamChain[In, Chunk]) localStream(r *request, s *Stream[In, Chunk], yield func(Chunk, error) bool, last classify.Verdict) {
	defer r.finish()
	cause, canceled := c.localCause(r, last)
	if canceled {
		c.failStream(r, yield, cause, true)
		return
	}
	if ch, src, hit, ok := lookup(r.localContext(), c.cache, c.def, s.in); ok {
		c.localAnswered(r, src, hit)
		s.res.Complete, s.res.Chunks = true, 1
		yield(ch, nil)
		c.end(r, nil, classify.Verdict{}, 1)
		return
	}
	c.failStream(r, yield, cause, false)
}

func (c *StreamChain[In, Chunk]) failStream(r *request, yield func(Chunk, error) bool, cause classify.Verdict, closed bool) {
	err := c.failure(r, cause, closed)
	var zero Chunk
	yield(zero, err)
	c.end(r, err, cause, 0)
}

// Why a stream's context was cancelled by the chain.
const (
	cutNone int32 = iota
	cutFirstChunk
	cutIdle
	cutConsumer
)

// opened is a stream that reached its commit point: the chunks read so far
// (those before the first with content, and that one) and the rest to pull.
type opened[Chunk any] struct {
	ctx     *budget.Context
	cut     atomic.Int32
	src     source[Chunk]
	pending []Chunk
	start   time.Duration // c.now() when the attempt began
	// rec is the call's record, when the request listens; the stream's
	// end closes it.
	rec *Record
	// abandoned is set once stopping the source found the tier stuck.
	abandoned, stopped bool
}

// stop cancels the stream and stops reading it, once: the tier's sequence
// returns (and reports its usage) before the attempt's end is recorded.
func (op *opened[Chunk]) stop() bool {
	if !op.stopped {
		op.stopped = true
		op.ctx.Cancel()
		op.abandoned = op.src.stop()
	}
	return op.abandoned
}

// attempt starts a stream and reads it up to its first chunk with content,
// within the first-chunk window per. Chunks before it are kept, to be
// shown once the stream commits; a stream that fails before it fails like
// a unary call.
func (c *StreamChain[In, Chunk]) attempt(st *stage, b budget.Budget, base context.Context, per, remaining time.Duration, in In, tok breaker.Token) (*opened[Chunk], attemptEnd) {
	var deadline time.Time
	if d, ok := b.Deadline(); ok {
		deadline = d
	}
	op := &opened[Chunk]{ctx: budget.NewContext(base, deadline), start: c.now()}
	op.rec, _ = base.(*Record)
	var timer *time.Timer
	if per != budget.Unlimited && (st.try.Cap > 0 || per < remaining) {
		timer = time.AfterFunc(per, func() {
			if op.cut.CompareAndSwap(cutNone, cutFirstChunk) {
				op.ctx.Cancel()
			}
		})
	}
	op.src = read(c.engine, st, op.ctx, c.tiers[st.index].Stream(op.ctx, in), tok)
	tier := c.tiers[st.index]
	finished := false // a chunk before the first with content had a finish reason
	for {
		ch, err, ok := op.src.next()
		if ok && err == nil {
			op.pending = append(op.pending, ch)
			info := tier.Inspect(ch)
			if !info.NonTextContent && strings.TrimSpace(info.Text) == "" {
				finished = finished || info.FinishReason != ""
				continue
			}
			if timer == nil || timer.Stop() {
				return op, attemptEnd{}
			}
			// The timer fired as the chunk arrived: the stream's context is
			// cancelled and it cannot go on. Nothing was shown yet, so this
			// is a first-chunk timeout, not an incomplete stream.
			err = ErrFirstChunkTimeout
		}
		if timer != nil {
			timer.Stop()
		}
		op.ctx.Cancel()
		abandoned := op.src.stop()
		end := attemptEnd{err: err, timedOut: op.cut.Load() == cutFirstChunk, abandoned: abandoned}
		switch {
		case end.timedOut:
			end.err = classify.Wrap(ErrFirstChunkTimeout, classify.Verdict{Class: classify.Transient, Reason: "no first chunk in time"})
		case err == nil && finished:
			end.err = classify.Wrap(ErrEmptyStream, classify.Verdict{Class: classify.InvalidOutput, Reason: "empty stream"})
		case err == nil:
			// Closed without content and without a finish reason: cut.
			end.err = classify.Wrap(ErrEmptyStream, classify.Verdict{Class: classify.Transient, Reason: "stream ended without a finish reason"})
		}
		return nil, end
	}
}

// committed is true: a stream's first chunk is its commit point, and its
// end comes later.
func (c *StreamChain[In, Chunk]) committed() bool { return true }

// pump streams a committed attempt to the consumer and settles its stage.
type pump[In, Chunk any] struct {
	c       *StreamChain[In, Chunk]
	r       *request
	s       *Stream[In, Chunk]
	st      *stage
	model   string
	n       int
	h       held
	op      *opened[Chunk]
	yield   func(Chunk, error) bool
	partial *strings.Builder
	in      In
	// outcome is how the stream counts for its breaker when it ends.
	outcome breaker.Outcome
}

// run streams the rest of the answer. done is set when the request is over
// (complete, rejected by validation, or stopped by the consumer); otherwise
// the stream broke and ie says how.
func (p *pump[In, Chunk]) run(in In) (ie *IncompleteError, done bool) {
	c, r, st, op := p.c, p.r, p.st, p.op
	res := &p.s.res
	p.outcome = breaker.Ignored
	defer func() {
		// Cancel first, so the tier sees its context end as its sequence is
		// stopped. An abandoned reader keeps the slot and the token.
		if op.stop() {
			r.slotHandedOff, r.tokenHandedOff = p.h.slot, p.h.tok.IsProbe()
			p.outcome = breaker.Failure
		}
		c.exit(r, st, &p.h, p.outcome)
	}()
	c.answeredBy(r, st, st.index > 0 || res.Continued)
	if res.Chunks == 0 {
		res.TimeToFirstChunk = c.now() - r.start
	}
	// last is when the latest chunk arrived, for NextChunk events.
	var last time.Duration
	if r.obs != nil {
		last = c.now()
		r.obs.FirstChunkReceived(r.ctx, FirstChunk{Stage: st.info, Model: p.model, Attempt: p.n, Member: r.member, Latency: last - op.start})
	}
	// d is what the stream said about its response, for observers; the
	// usage comes from the tier's Report.
	var d Reply
	var rl relayed
	if p.relay(&rl, last) {
		// The consumer stopped: cancel upstream, decide nothing.
		op.cut.CompareAndSwap(cutNone, cutConsumer)
		v := classify.Verdict{Class: classify.Canceled, Reason: "consumer stopped"}
		p.ended(rl.chunks, v, nil, false, &d)
		c.end(r, nil, v, res.Chunks)
		return nil, true
	}
	op.pending = nil
	res.FinishReason = rl.finish
	d.Response.FinishReason = rl.finish
	return p.settle(in, &rl, &d)
}

// relayed is what a stream delivered to its consumer.
type relayed struct {
	chunks, bytes int
	finish        string
	text          strings.Builder
	// err is the error that ended the stream; nil for a clean end.
	err error
}

// relay hands the stream's chunks to the consumer — those held back
// before the commit point first — until the stream ends or the consumer
// stops (stopped), keeping in rl what it delivered.
func (p *pump[In, Chunk]) relay(rl *relayed, last time.Duration) (stopped bool) {
	c, r, st, op := p.c, p.r, p.st, p.op
	res := &p.s.res
	tier := c.tiers[st.index]
	keepText := p.partial != nil || c.validators[st.index] != nil || c.cache != nil
	idleFor := c.idle[st.index]
	var idle *time.Timer
	if idleFor > 0 {
		// It runs only while waiting on the upstream, so a slow consumer is
		// never mistaken for a stalled stream.
		idle = time.AfterFunc(idleFor, func() {
			if op.cut.CompareAndSwap(cutNone, cutIdle) {
				op.ctx.Cancel()
			}
		})
		idle.Stop()
		defer idle.Stop()
	}
	for i := 0; ; i++ {
		var ch Chunk
		if i < len(op.pending) {
			ch = op.pending[i]
		} else {
			if idle != nil {
				idle.Reset(idleFor)
			}
			var ok bool
			ch, rl.err, ok = op.src.next()
			if idle != nil {
				idle.Stop()
			}
			if !ok || rl.err != nil {
				return false
			}
			if r.obs != nil {
				now := c.now()
				r.obs.ChunkReceived(r.ctx, NextChunk{Stage: st.info, Model: p.model, Attempt: p.n, Latency: now - last})
				last = now
			}
		}
		info := tier.Inspect(ch)
		rl.chunks++
		res.Chunks++
		res.Bytes += len(info.Text)
		rl.bytes += len(info.Text)
		if info.FinishReason != "" {
			rl.finish = info.FinishReason
		}
		if keepText {
			rl.text.WriteString(info.Text)
			if p.partial != nil {
				p.partial.WriteString(info.Text)
			}
		}
		if !p.yield(ch, nil) {
			return true
		}
	}
}

// settle ends a stream that ran to its end: complete (validated, written
// back), or incomplete with why.
func (p *pump[In, Chunk]) settle(in In, rl *relayed, d *Reply) (ie *IncompleteError, done bool) {
	c, r, st, op := p.c, p.r, p.st, p.op
	res := &p.s.res
	var cause error
	var v classify.Verdict
	switch {
	case rl.finish != "" && rl.err == nil:
		// The answer ended with its finish reason and the stream closed
		// cleanly after it. A finish reason alone does not end an answer:
		// Vertex AI puts STOP on every chunk, and an error event after it
		// means the answer was cut.
		if validator := c.validators[st.index]; validator != nil {
			if verr := validator.Validate(rl.text.String()); verr != nil {
				verr = asInvalidOutput(verr)
				v = classify.Classify(verr)
				p.ended(rl.chunks, v, verr, false, d)
				var zero Chunk
				p.yield(zero, verr)
				c.end(r, verr, v, res.Chunks)
				return nil, true
			}
		}
		res.Complete = true
		p.outcome = breaker.Success
		p.ended(rl.chunks, classify.Verdict{}, nil, false, d)
		if c.cache != nil {
			c.cache.Put(r.ctx, in, rl.text.String())
		}
		c.end(r, nil, classify.Verdict{}, res.Chunks)
		return nil, true
	case op.cut.Load() == cutIdle && r.ctx.Err() == nil:
		cause = ErrIdleTimeout
		v = classify.Verdict{Class: classify.Transient, Reason: "stream idle too long"}
	case rl.err == nil:
		cause = ErrNoFinishReason
		v = classify.Verdict{Class: classify.Transient, Reason: "stream ended without a finish reason"}
	default:
		cause = rl.err
		// Past the commit point the deadline cutting a long answer is not
		// the tier hanging: classified, not counted as a timeout.
		v, _, _ = c.classifyFailure(r, st, st.try, failed{err: rl.err})
	}
	a := c.table.Action(v.Class)
	if a.BreakerFailure {
		p.outcome = breaker.Failure
	}
	c.park(st, p.model, v, a.Park)
	ie = &IncompleteError{Tier: st.name, Chunks: rl.chunks, Bytes: rl.bytes, FinishReason: rl.finish, Cause: cause, V: v}
	p.ended(rl.chunks, v, ie, true, d)
	return ie, false
}

// ended reports a committed stream's end.
func (p *pump[In, Chunk]) ended(chunks int, v classify.Verdict, err error, incomplete bool, d *Reply) {
	r := p.r
	latency := p.c.now() - p.op.start
	// The tier reports its usage as its sequence returns: stop it first.
	p.op.stop()
	reported, _ := p.op.rec.close()
	finish := d.Response.FinishReason
	*d = reported
	if finish != "" {
		d.Response.FinishReason = finish
	}
	r.sum.record(Attempt{Tier: p.st.name, TierIndex: p.st.index, Model: p.model, N: p.n, Verdict: v, Latency: latency, Err: err})
	if r.obs != nil {
		ev := p.c.event(r, p.st, p.model, p.n)
		ev.Verdict, ev.Latency, ev.Err, ev.Chunks, ev.Incomplete = v, latency, err, chunks, incomplete
		ev.Reply = *d
		r.obs.AttemptEnded(r.ctx, ev)
	}
}

// mergeResponse keeps what earlier chunks said unless a later one says
// more: the id and the model come with any chunk, the finish reason with
// the last.
func mergeResponse(prev, next ResponseInfo) ResponseInfo {
	if next.ID == "" {
		next.ID = prev.ID
	}
	if next.Model == "" {
		next.Model = prev.Model
	}
	if next.FinishReason == "" {
		next.FinishReason = prev.FinishReason
	}
	return next
}
