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
	// MaxRetryWait and CoolDown are as in Stage.
	MaxRetryWait time.Duration
	CoolDown     CoolDown
	// Validate checks the assembled text (the ChunkInfo.Text of every
	// chunk) when the stream ends; a rejection reaches the consumer as the
	// stream's final error, after the chunks it already showed.
	Validate validate.Validator[string]
	// Tokens is as in Stage: the estimate a rate-limited tier
	// (ratelimit.StreamTier) takes its turn for; the usage a stream
	// reports by its end corrects it.
	Tokens func(in In) int64
	// Hedge, when enabled, races a second stream against a first that has
	// sent no content by the hedge's delay (Hedge.Delay, or the Quantile
	// of the tier's time to its first chunk with content): on another
	// member when the tier is a pool (however wrapped), or else on the same
	// tier, behind a bulkhead slot of its own taken without waiting. The
	// first stream to send content wins, and the consumer reads it alone:
	// the other is cancelled, and what it was billed reaches observers
	// (its AttemptEnd, or a LateReply). Never two models in one answer:
	// the race ends at the commit point, before anything is shown.
	//
	// Its cost is in calls: at most Hedge.MaxExtra more upstream streams
	// than attempts (0.1 by default), each billed for its input and for
	// what it generated before it was cancelled. A hedged attempt reads
	// both streams on goroutines of their own, which hand each chunk over
	// to the consumer's goroutine: about one goroutine switch per chunk,
	// which an unhedged stage does not pay. The stage's breaker counts the
	// request once. The hedge budget and the quantile are the process's:
	// each pod of a fleet spends its own MaxExtra.
	Hedge Hedge
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
			maxRetryWait: s.MaxRetryWait, coolDown: s.CoolDown, hedge: s.Hedge,
		}
		if s.Tier != nil {
			specs[i].name = s.Tier.Name()
			specs[i].endpoint(s.Tier)
			specs[i].outdated = outdatedOf(s.Tier, outdatedMethods[In, Chunk]("Chunk", s.ModelFor != nil))
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

	// What the run keeps: its request (whose summary is the result's),
	// what Result adds to it, the consumer's yield, the attempt being
	// read, and, for Continue, the text shown so far.
	r                   request
	chunks, bytes       int
	finish              string
	complete, continued bool
	toFirstChunk        time.Duration
	yield               func(Chunk, error) bool
	at                  *reading[Chunk]
	// firstRead is the first attempt's reading, held here to save an
	// allocation; later attempts make their own, since a timer of an
	// earlier one may still fire.
	firstRead reading[Chunk]
	partial   *strings.Builder
}

// Stream prepares a streaming request; nothing is sent until Chunks is
// ranged over.
func (c *StreamChain[In, Chunk]) Stream(ctx context.Context, in In) *Stream[In, Chunk] {
	return &Stream[In, Chunk]{c: c, ctx: ctx, in: in}
}

// Result describes the stream; complete once Chunks' iteration has ended.
// Before it, its Deadline is the context's only: the chain's Total counts
// from the start of the iteration.
func (s *Stream[In, Chunk]) Result() StreamResult {
	res := StreamResult{Summary: s.r.sum, Chunks: s.chunks, Bytes: s.bytes, FinishReason: s.finish, Complete: s.complete,
		Continued: s.continued, TimeToFirstChunk: s.toFirstChunk}
	if !s.used {
		res.TierIndex = -1
		res.deadline, res.hasDeadline = s.ctx.Deadline()
	}
	return res
}

// Chunks yields the answer's chunks. An error ends the sequence: before the
// first chunk it is the chain's *Error (every tier failed); after it, an
// *IncompleteError or a validation failure. Breaking out of the loop
// cancels the upstream request and releases the tier's bulkhead slot and
// probe. Chunks may be ranged over once.
//
// The loop's body runs as the tier's sequence yields each chunk, on the
// caller's goroutine: no chunk is read ahead, and none is held back but
// those before the first with content. (With AbandonAfter the tier runs
// on a goroutine of its own, which hands its chunks over one at a time.)
func (s *Stream[In, Chunk]) Chunks() iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		if s.used {
			var zero Chunk
			yield(zero, errors.New("tierguard: a Stream's chunks can be ranged over once"))
			return
		}
		s.used = true
		s.yield = yield
		s.c.run(s)
	}
}

func (c *StreamChain[In, Chunk]) run(s *Stream[In, Chunk]) {
	r := &s.r
	c.begin(s.ctx, r)
	defer c.endOnPanic(r)
	in := s.in
	var last classify.Verdict
	var incomplete *IncompleteError
	if c.cont != nil {
		s.partial = new(strings.Builder)
	}
	for i := range c.stages {
		st := &c.stages[i]
		run := stageRun[In, struct{}, *Stream[In, Chunk]]{e: c.engine, a: s, st: st, model: c.modelFor(i, in), in: in}
		run.run(r)
		end := &run.end
		if end.err == nil {
			ie, done := s.settle(&run.h, end.n, in)
			if done {
				return
			}
			incomplete = ie
			if c.cont != nil && i+1 < len(c.stages) {
				if next, ok := c.cont(s.in, s.partial.String()); ok {
					in = next
					s.continued = true
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
			c.failStream(r, s.yield, end.verdict, true)
			return
		case classify.RouteLocal:
			c.localStream(r, s, last)
			return
		}
	}
	if incomplete != nil {
		var zero Chunk
		s.yield(zero, incomplete)
		c.end(r, incomplete, incomplete.V, s.chunks)
		return
	}
	c.localStream(r, s, last)
}

func (c *StreamChain[In, Chunk]) localStream(r *request, s *Stream[In, Chunk], last classify.Verdict) {
	defer r.finish()
	cause, canceled := c.localCause(r, last)
	if canceled {
		c.failStream(r, s.yield, cause, true)
		return
	}
	if ch, src, hit, ok := lookup(r.localContext(), c.cache, c.def, s.in); ok {
		c.localAnswered(r, src, hit)
		s.complete, s.chunks = true, 1
		s.yield(ch, nil)
		c.end(r, nil, classify.Verdict{}, 1)
		return
	}
	c.failStream(r, s.yield, cause, false)
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

// reading is one attempt's stream as its chunks are pushed: before its
// commit point (its first chunk with content) the chunks without content
// are held back; from it on each chunk goes to the consumer as it comes.
//
// Each attempt has its own: its timers may still fire as the next begins.
type reading[Chunk any] struct {
	st    *stage
	model string
	n     int
	ctx   budget.Context
	// live is the context of the stream the consumer reads: ctx, or a
	// hedge's that won the race (hedgeWon).
	live     *budget.Context
	hedgeWon bool
	cut      atomic.Int32
	rec      *Record
	start    time.Duration // c.now() when the attempt began
	// first ends the wait for the first chunk with content; idle, the wait
	// for each later one (it runs only while waiting on the upstream, so a
	// slow consumer is never mistaken for a stalled stream).
	first, idle *time.Timer
	idleFor     time.Duration
	// pending holds the chunks before the commit point, in buf while
	// they fit.
	pending []Chunk
	buf     [2]Chunk
	// finished is set when a chunk before the commit point had a finish
	// reason.
	finished bool
	// committed is set at the commit point; rotations and toCommit are
	// then what it recorded and when (attemptEnd's fields of the same
	// names), last when the latest chunk arrived.
	committed bool
	rotations int
	toCommit  time.Duration
	last      time.Duration
	// over is set once the stream must not be read further: stopped by
	// the consumer (stopped), or ended by err.
	over, stopped, abandoned bool
	err                      error
	// What the consumer received.
	chunks, bytes int
	finish        string
	text          strings.Builder
	keepText      bool
}

func (a *reading[Chunk]) cutFirstChunk() {
	if a.cut.CompareAndSwap(cutNone, cutFirstChunk) {
		a.live.Cancel()
	}
}

func (a *reading[Chunk]) cutIdle() {
	if a.cut.CompareAndSwap(cutNone, cutIdle) {
		a.live.Cancel()
	}
}

// committed is true: a stream's first chunk is its commit point, and its
// end comes later.
func (s *Stream[In, Chunk]) committed() bool { return true }

func (s *Stream[In, Chunk]) estimate(st *stage, in In) int64 { return s.c.estimate(st, in) }

func (s *Stream[In, Chunk]) reprompt(st *stage, in In, err error) In {
	return s.c.reprompt(st, in, err)
}

// attempt starts a stream and reads it, within the first-chunk window
// per until its first chunk with content. A stream that fails before it
// fails like a unary call; one that reached it is read to its end, or
// until the consumer stops, and settled by settle.
func (s *Stream[In, Chunk]) attempt(st *stage, n int, model string, b budget.Budget, base context.Context, per, remaining time.Duration, in In, tok breaker.Token) (struct{}, attemptEnd) {
	c := s.c
	var deadline time.Time
	if d, ok := b.Deadline(); ok {
		deadline = d
	}
	a := &s.firstRead
	if s.at != nil {
		a = new(reading[Chunk])
	}
	s.at = a
	a.st, a.model, a.n, a.start, a.idleFor = st, model, n, c.now(), c.idle[st.index]
	a.keepText = s.partial != nil || c.validators[st.index] != nil || c.cache != nil
	a.ctx.Init(base, deadline)
	a.live = &a.ctx
	a.rec = ownRecord(base)
	a.pending = a.buf[:0]
	defer a.ctx.Cancel()
	if st.hedge.enabled() {
		return struct{}{}, s.race(a, b, base, per, remaining, in, tok)
	}
	if st.cutsFirstChunk(per, remaining) {
		a.first = time.AfterFunc(per, a.cutFirstChunk)
		defer a.first.Stop()
	}
	seq := c.tiers[st.index].Stream(&a.ctx, in)
	if c.abandonAfter > 0 {
		rd := readDetached(c.engine, st, &a.ctx, seq, tok)
		for {
			ch, err, ok := nextOf(rd)
			if !ok || !s.push(ch, err) {
				break
			}
		}
		a.abandoned = rd.Stop()
	} else {
		seq(s.push)
	}
	if a.idle != nil {
		a.idle.Stop()
	}
	if a.committed {
		return struct{}{}, attemptEnd{rotations: a.rotations, toCommit: a.toCommit}
	}
	a.ctx.Cancel()
	end := attemptEnd{err: a.err, timedOut: a.cut.Load() == cutFirstChunk, abandoned: a.abandoned}
	switch {
	case end.timedOut:
		end.err = classify.Wrap(ErrFirstChunkTimeout, classify.Verdict{Class: classify.Transient, Reason: "no first chunk in time"})
	case a.err == nil && a.finished:
		end.err = classify.Wrap(ErrEmptyStream, classify.Verdict{Class: classify.InvalidOutput, Reason: "empty stream"})
	case a.err == nil:
		// Closed without content and without a finish reason: cut.
		end.err = classify.Wrap(ErrEmptyStream, classify.Verdict{Class: classify.Transient, Reason: "stream ended without a finish reason"})
	}
	return struct{}{}, end
}

// push takes the stream's next pair; false stops the tier's sequence.
func (s *Stream[In, Chunk]) push(ch Chunk, err error) bool {
	a := s.at
	if a.over {
		// A sequence that goes on after it was told to stop.
		return false
	}
	if a.idle != nil {
		a.idle.Stop()
	}
	if err != nil {
		a.err, a.over = err, true
		return false
	}
	tier := s.c.tiers[a.st.index]
	info := tier.Inspect(ch)
	if !a.committed {
		if !info.NonTextContent && strings.TrimSpace(info.Text) == "" {
			a.pending = append(a.pending, ch)
			a.finished = a.finished || info.FinishReason != ""
			return true
		}
		if a.first != nil && !a.first.Stop() {
			// The timer fired as the chunk arrived: the stream's context
			// is cancelled and it cannot go on. Nothing was shown yet, so
			// this is a first-chunk timeout, not an incomplete stream.
			a.err, a.over = ErrFirstChunkTimeout, true
			return false
		}
		s.commit()
		for _, p := range a.pending {
			if !s.deliver(p, tier.Inspect(p)) {
				return false
			}
		}
		a.pending = nil
	} else if r := &s.r; r.obs != nil {
		now := s.c.now()
		r.obs.ChunkReceived(r.ctx, NextChunk{Stage: a.st.info, Model: a.model, Attempt: a.n + a.rotations, Latency: now - a.last})
		a.last = now
	}
	if !s.deliver(ch, info) {
		return false
	}
	if a.idleFor > 0 {
		if a.idle == nil {
			a.idle = time.AfterFunc(a.idleFor, a.cutIdle)
		} else {
			a.idle.Reset(a.idleFor)
		}
	}
	return true
}

// commit marks the stream's commit point: the member calls a pool made
// before this one go on the trail, the probe of a cooled-down tier ends,
// the tier is the request's answer, and observers hear of the first chunk.
func (s *Stream[In, Chunk]) commit() {
	a, r, c := s.at, &s.r, s.c
	a.committed = true
	a.toCommit = c.now() - a.start
	a.rotations = c.rotations(r, a.st, a.model, a.n, a.rec.takeRotated())
	a.st.parking.EndProbe(r.probe)
	r.probe = 0
	c.answeredBy(r, a.st, a.st.index > 0 || s.continued)
	if s.chunks == 0 {
		s.toFirstChunk = c.now() - r.start
	}
	if r.obs != nil {
		a.last = c.now()
		r.obs.FirstChunkReceived(r.ctx, FirstChunk{Stage: a.st.info, Model: a.model, Attempt: a.n + a.rotations,
			Member: a.rec.CurrentMember(), Latency: a.last - a.start})
	}
}

// deliver hands a chunk to the consumer and counts it; false when the
// consumer stopped, which cancels the upstream.
func (s *Stream[In, Chunk]) deliver(ch Chunk, info ChunkInfo) bool {
	a := s.at
	a.chunks++
	s.chunks++
	s.bytes += len(info.Text)
	a.bytes += len(info.Text)
	if info.FinishReason != "" {
		a.finish = info.FinishReason
	}
	if a.keepText {
		a.text.WriteString(info.Text)
		if s.partial != nil {
			s.partial.WriteString(info.Text)
		}
	}
	if s.yield(ch, nil) {
		return true
	}
	a.over, a.stopped = true, true
	a.cut.CompareAndSwap(cutNone, cutConsumer)
	a.live.Cancel()
	return false
}

// settle ends a committed stream with the guards h of its stage still
// held, n its attempt's number: complete (validated, written back), cut
// short by the consumer, or incomplete with why. done is set when the
// request is over; otherwise ie says how the stream broke.
func (s *Stream[In, Chunk]) settle(h *held, n int, in In) (ie *IncompleteError, done bool) {
	c, r, a := s.c, &s.r, s.at
	st := a.st
	outcome := breaker.Ignored
	defer func() {
		if a.abandoned {
			// The reader gave up on a tier that ignored its context: the
			// stuck call keeps the slot and the token.
			r.slotHandedOff, r.tokenHandedOff = h.slot, h.tok.IsProbe()
			outcome = breaker.Failure
		}
		c.exit(r, st, h, outcome)
	}()
	if a.stopped {
		// The consumer stopped: the upstream is cancelled, nothing decided.
		v := classify.Verdict{Class: classify.Canceled, Reason: "consumer stopped"}
		s.ended(n, v, nil, false, "")
		c.end(r, nil, v, s.chunks)
		return nil, true
	}
	s.finish = a.finish
	var cause error
	var v classify.Verdict
	switch {
	case a.finish != "" && a.err == nil:
		// The answer ended with its finish reason and the stream closed
		// cleanly after it. A finish reason alone does not end an answer:
		// Vertex AI puts STOP on every chunk, and an error event after it
		// means the answer was cut.
		if validator := c.validators[st.index]; validator != nil {
			if verr := validator.Validate(a.text.String()); verr != nil {
				verr = asInvalidOutput(verr)
				v = classify.Classify(verr)
				s.ended(n, v, verr, false, a.finish)
				var zero Chunk
				s.yield(zero, verr)
				c.end(r, verr, v, s.chunks)
				return nil, true
			}
		}
		s.complete = true
		outcome = breaker.Success
		s.ended(n, classify.Verdict{}, nil, false, a.finish)
		if c.cache != nil {
			// Within the request's budget, the chain's Total included.
			c.cache.Put(r.localContext(), in, a.text.String())
			r.finish()
		}
		c.end(r, nil, classify.Verdict{}, s.chunks)
		return nil, true
	case a.cut.Load() == cutIdle && r.ctx.Err() == nil:
		cause = ErrIdleTimeout
		v = classify.Verdict{Class: classify.Transient, Reason: "stream idle too long"}
	case a.err == nil:
		cause = ErrNoFinishReason
		v = classify.Verdict{Class: classify.Transient, Reason: "stream ended without a finish reason"}
	default:
		cause = a.err
		// Past the commit point the deadline cutting a long answer is not
		// the tier hanging: classified, not counted as a timeout.
		v, _, _ = c.classifyFailure(r, st, st.try, failed{err: a.err})
	}
	if c.table.Action(v.Class).BreakerFailure {
		outcome = breaker.Failure
	}
	if !a.rec.memberFailed() {
		// A pool member's exhausted quota parks the member, which the
		// pool did; the tier's other members still serve.
		c.park(st, a.model, v, c.table.Action(v.Class).Park)
	}
	ie = &IncompleteError{Tier: st.name, Chunks: a.chunks, Bytes: a.bytes, FinishReason: a.finish, Cause: cause, V: v}
	s.ended(n, v, ie, true, a.finish)
	return ie, false
}

// ended records a committed stream's end: on the trail, and to observers
// with what its tier reported (finish, when set, is the finish reason the
// chunks said last).
func (s *Stream[In, Chunk]) ended(n int, v classify.Verdict, err error, incomplete bool, finish string) {
	c, r, a := s.c, &s.r, s.at
	latency := c.now() - a.start
	// The tier's sequence has returned: what it reported is all there is.
	d := a.rec.close()
	if finish != "" && d.Response.FinishReason != finish {
		// The record is closed: its Reply is the chain's to finish. A
		// stream that reported nothing gets one of its own.
		if d == noReply {
			d = new(Reply)
		}
		d.Response.FinishReason = finish
	}
	member := a.rec.CurrentMember()
	r.sum.record(Attempt{Tier: a.st.name, TierIndex: a.st.index, Model: a.model, N: n, Member: member, Hedge: a.hedgeWon, Verdict: v, Latency: latency, Err: err})
	if r.obs != nil {
		r.member = member
		ev := c.event(r, a.st, a.model, n)
		r.member = ""
		ev.Verdict, ev.Latency, ev.Err, ev.Chunks, ev.Incomplete = v, latency, err, a.chunks, incomplete
		ev.Hedge = a.hedgeWon
		ev.Reply = d
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
