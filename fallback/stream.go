package fallback

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/deadline"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// ChunkInfo is what a streaming chain needs to know about one chunk.
type ChunkInfo struct {
	// Text is the text the chunk adds; its length is accounted, and the
	// assembled text is validated at the end when the stage has a
	// validator. It is never logged or exported.
	Text string
	// FinishReason is set on the chunk that ends the answer ("STOP",
	// "MAX_TOKENS"). A stream that ends without one is incomplete.
	FinishReason string
	// NonTextContent is set when the chunk carries content other than its
	// Text — a function call, an image, code. The first chunk with
	// content, text that is not blank or this, is the stream's commit
	// point.
	NonTextContent bool
}

// StreamTier is a tier that answers with a stream of chunks, the shape the
// genai SDK's GenerateContentStream has.
type StreamTier[In, Chunk any] interface {
	// Name identifies the tier, as for ModelTier.
	Name() string
	// Stream starts one upstream call. It must honour ctx: the chain
	// cancels it when the first chunk or the next one is late, when the
	// deadline passes, and when the consumer stops.
	Stream(ctx context.Context, in In) iter.Seq2[Chunk, error]
	// Inspect describes a chunk.
	Inspect(c Chunk) ChunkInfo
}

// StreamTierFunc adapts functions to the StreamTier interface.
func StreamTierFunc[In, Chunk any](name string, stream func(ctx context.Context, in In) iter.Seq2[Chunk, error], inspect func(Chunk) ChunkInfo) StreamTier[In, Chunk] {
	return funcStreamTier[In, Chunk]{name: name, stream: stream, inspect: inspect}
}

type funcStreamTier[In, Chunk any] struct {
	name    string
	stream  func(context.Context, In) iter.Seq2[Chunk, error]
	inspect func(Chunk) ChunkInfo
}

func (t funcStreamTier[In, Chunk]) Name() string { return t.name }
func (t funcStreamTier[In, Chunk]) Stream(ctx context.Context, in In) iter.Seq2[Chunk, error] {
	return t.stream(ctx, in)
}
func (t funcStreamTier[In, Chunk]) Inspect(c Chunk) ChunkInfo { return t.inspect(c) }

// Errors that end a stream. They reach the consumer wrapped in an
// *IncompleteError (or, before the first chunk, in the attempt's failure).
var (
	// ErrIncomplete matches every *IncompleteError.
	ErrIncomplete = errors.New("tierguard: stream incomplete")
	// ErrFirstChunkTimeout: no first chunk arrived within the stage's
	// FirstChunkTimeout (or before the reserve for later tiers).
	ErrFirstChunkTimeout = errors.New("tierguard: no first chunk in time")
	// ErrIdleTimeout: the gap between two chunks exceeded IdleTimeout.
	ErrIdleTimeout = errors.New("tierguard: stream idle too long")
	// ErrNoFinishReason: the stream ended cleanly without a finish reason.
	ErrNoFinishReason = errors.New("tierguard: stream ended without a finish reason")
	// ErrEmptyStream: the stream ended before its first chunk without an
	// error.
	ErrEmptyStream = errors.New("tierguard: stream ended without any chunk")
)

// IncompleteError reports a stream that failed after its first chunk — the
// commit point, past which a chain never switches tiers silently. The
// consumer has already received Chunks chunks (Bytes bytes of text); what
// it shows must be marked incomplete.
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
	// io.ErrUnexpectedEOF).
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
	// Model and Provider are as in Stage.
	Model    string
	Provider string
	// Bulkhead, Breaker and Retry are as in Stage. Retries happen only
	// before the first chunk.
	Bulkhead *bulkhead.Bulkhead
	Breaker  *breaker.Breaker
	// Retry is the stage's retry policy, as in Stage.
	Retry retry.Policy
	// FirstChunkTimeout caps each attempt's wait for its first chunk (time
	// to first token); the wait also ends where the reserve for later tiers
	// begins. 0 means only the reserve caps it.
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
}

// StreamConfig configures a StreamChain; fields mean what they mean in
// Config.
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
	Catalog *Catalog
	// QuotaCooldown and RetiredRecheck are as in Config.
	QuotaCooldown  time.Duration
	RetiredRecheck time.Duration
	// Default answers with a single chunk when no tier could start a
	// stream. It is not used once a stream has committed.
	Default func(ctx context.Context, in In) (Chunk, bool)
	// Continue, when set, resumes a stream that broke after its first chunk
	// on the next tier: it receives the original input and the text
	// delivered so far and returns the input for the next tier (or false to
	// give up). Off by default, and risky: the next model may repeat or
	// contradict what was shown. Without it a broken stream ends with an
	// *IncompleteError.
	Continue func(in In, partial string) (In, bool)
	// Observer receives every decision.
	Observer Observer
}

// StreamChain answers requests with a stream, falling back across tiers
// until the first chunk arrives and never silently after it. Build it once
// with NewStream and share it.
type StreamChain[In, Chunk any] struct {
	op         string
	stages     []streamStage[In, Chunk]
	total      time.Duration
	table      classify.Table
	classifier classify.Classifier
	catalog    *Catalog
	quotaPark  time.Duration
	retirePark time.Duration
	def        func(context.Context, In) (Chunk, bool)
	cont       func(In, string) (In, bool)
	epoch      time.Time
	observer   observerSlot
}

type streamStage[In, Chunk any] struct {
	StreamStage[In, Chunk]
	name   string
	policy retry.Policy
	usage  ChunkUsageReporter[Chunk]
	guards
	parking
}

// ChunkUsageReporter is implemented by stream tiers whose chunks carry token
// usage (Gemini sends it on the last chunk). The chain reports the last
// usage a stream carried to observers, which export
// gen_ai.client.token.usage.
type ChunkUsageReporter[Chunk any] interface {
	// ChunkUsage returns the usage c carries, and false when it carries
	// none.
	ChunkUsage(c Chunk) (Usage, bool)
}

// NewStream compiles a streaming chain, or returns an error naming every
// invalid field.
func NewStream[In, Chunk any](cfg StreamConfig[In, Chunk]) (*StreamChain[In, Chunk], error) {
	var errs []error
	if len(cfg.Stages) == 0 {
		errs = append(errs, errors.New("at least one stage is required"))
	}
	if cfg.Total < 0 || cfg.MinAttempt < 0 || cfg.QuotaCooldown < 0 || cfg.RetiredRecheck < 0 {
		errs = append(errs, errors.New("negative duration: Total, MinAttempt, QuotaCooldown and RetiredRecheck must not be negative"))
	}
	names := map[string]bool{}
	for i, st := range cfg.Stages {
		if st.Tier == nil {
			errs = append(errs, fmt.Errorf("stage %d: Tier is required", i))
			continue
		}
		name := st.Tier.Name()
		if name == "" || names[name] {
			errs = append(errs, fmt.Errorf("stage %d: tier name %q is empty or used twice", i, name))
		}
		names[name] = true
		if st.FirstChunkTimeout < 0 || st.IdleTimeout < 0 || st.MinAttempt < 0 {
			errs = append(errs, fmt.Errorf("stage %d (%s): timeouts must not be negative", i, name))
		}
		if err := st.Retry.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("stage %d (%s): %w", i, name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("fallback: invalid stream config: %w", err)
	}
	c := &StreamChain[In, Chunk]{
		op: cfg.Operation, total: cfg.Total, table: classify.DefaultTable(), classifier: cfg.Classifier,
		catalog: cfg.Catalog, quotaPark: cfg.QuotaCooldown, retirePark: cfg.RetiredRecheck,
		def: cfg.Default, cont: cfg.Continue, epoch: time.Now(),
		stages: make([]streamStage[In, Chunk], len(cfg.Stages)),
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
	if c.quotaPark == 0 {
		c.quotaPark = DefaultQuotaCooldown
	}
	if c.retirePark == 0 {
		c.retirePark = DefaultRetiredRecheck
	}
	minAttempt := cmpOr(cfg.MinAttempt, DefaultMinAttempt)
	for i, s := range cfg.Stages {
		st := &c.stages[i]
		st.StreamStage = s
		st.name = s.Tier.Name()
		st.policy = s.Retry
		if st.policy.Table == nil {
			st.policy.Table = &c.table
		}
		if st.policy.Classifier == nil {
			st.policy.Classifier = c.classifier
		}
		st.policy = st.policy.WithDefaults()
		st.guards = guards{bulkhead: s.Bulkhead, breaker: s.Breaker, try: deadline.Try{Cap: s.FirstChunkTimeout, MinUseful: cmpOr(s.MinAttempt, minAttempt)}}
		if u, ok := s.Tier.(ChunkUsageReporter[Chunk]); ok {
			st.usage = u
		}
	}
	for i := range c.stages {
		st := &c.stages[i]
		switch {
		case st.Reserve < 0:
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

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Observe adds an observer; see Chain.Observe.
func (c *StreamChain[In, Chunk]) Observe(o Observer) (remove func()) { return c.observer.add(o) }

// Operation returns the chain's operation name.
func (c *StreamChain[In, Chunk]) Operation() string { return c.op }

// Stages describes the chain's stages, in order.
func (c *StreamChain[In, Chunk]) Stages() []StageInfo {
	out := make([]StageInfo, len(c.stages))
	for i := range c.stages {
		st := &c.stages[i]
		out[i] = StageInfo{Tier: st.name, Index: i, Model: st.Model, Provider: st.Provider, Breaker: st.Breaker, Bulkhead: st.Bulkhead}
	}
	return out
}

// StreamResult describes how a stream was answered. Read it after the
// iteration ends.
type StreamResult struct {
	// Source is SourceTier, or SourceDefault for a default chunk.
	Source Source
	// Tier and TierIndex name the tier that streamed (the last one, after a
	// continuation); "" and -1 when none did.
	Tier      string
	TierIndex int
	// Degraded is set for any answer but the first tier's.
	Degraded bool
	// UpstreamCalls counts the streams started.
	UpstreamCalls int
	// Chunks and Bytes measure what the consumer received.
	Chunks int
	Bytes  int
	// FinishReason is the finish reason that ended the stream.
	FinishReason string
	// Complete is set when the stream ended with a finish reason and passed
	// validation.
	Complete bool
	// Continued is set when Continue resumed the stream on another tier.
	Continued bool
	// TimeToFirstChunk is measured from the start of the request.
	TimeToFirstChunk time.Duration
	// Attempts is the trail of attempts and skips.
	Attempts []Attempt
}

// Stream is one streaming request. Range over Chunks once; then Result
// describes it.
type Stream[In, Chunk any] struct {
	c    *StreamChain[In, Chunk]
	ctx  context.Context
	in   In
	used bool
	res  StreamResult

	deadline    time.Time
	hasDeadline bool
}

// Stream prepares a streaming request; nothing is sent until Chunks is
// ranged over.
func (c *StreamChain[In, Chunk]) Stream(ctx context.Context, in In) *Stream[In, Chunk] {
	s := &Stream[In, Chunk]{c: c, ctx: ctx, in: in, res: StreamResult{TierIndex: -1}}
	s.deadline, s.hasDeadline = ctx.Deadline()
	return s
}

// Deadline returns the request's deadline (the earlier of its context's
// and the chain's Total), and false when it has none. The chain's Total
// counts from the start of the iteration: before it, Deadline reports the
// context's deadline only.
func (s *Stream[In, Chunk]) Deadline() (time.Time, bool) { return s.deadline, s.hasDeadline }

// Result describes the stream; complete once Chunks' iteration has ended.
func (s *Stream[In, Chunk]) Result() StreamResult { return s.res }

// Chunks yields the answer's chunks. An error ends the sequence: before the
// first chunk it is the chain's *Error (every tier failed); after it, an
// *IncompleteError or a validation failure. Breaking out of the loop
// cancels the upstream request and releases the tier's bulkhead slot and
// probe. Chunks may be ranged over once.
func (s *Stream[In, Chunk]) Chunks() iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		var zero Chunk
		if s.used {
			yield(zero, errors.New("tierguard: a Stream's chunks can be ranged over once"))
			return
		}
		s.used = true
		s.c.run(s, yield)
	}
}

// stageEnd says how a stage's stream ended.
type stageEnd uint8

const (
	// endDone: the stream completed, failed validation, or the consumer
	// stopped; nothing more to do.
	endDone stageEnd = iota
	// endBeforeCommit: the tier failed before its first chunk; route by
	// class.
	endBeforeCommit
	// endIncomplete: the stream broke after its first chunk.
	endIncomplete
)

type streamRun[In, Chunk any] struct {
	s       *Stream[In, Chunk]
	yield   func(Chunk, error) bool
	ctx     context.Context
	budget  deadline.Budget
	obs     Observer
	start   time.Time
	partial strings.Builder
	keep    bool // keep the partial text: needed for Continue or Validate
	// queueWait is the current stage's bulkhead wait, reported once.
	queueWait time.Duration
}

func (c *StreamChain[In, Chunk]) run(s *Stream[In, Chunk], yield func(Chunk, error) bool) {
	ctx := s.ctx
	if c.total > 0 {
		if d, ok := ctx.Deadline(); !ok || time.Until(d) > c.total {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, c.total)
			defer cancel()
		}
	}
	r := &streamRun[In, Chunk]{s: s, yield: yield, ctx: ctx, budget: deadline.New(ctx, 0), start: time.Now(), keep: c.cont != nil}
	s.deadline, s.hasDeadline = r.budget.Deadline()
	if o := c.observer.load(); o != nil {
		r.obs = o
		r.ctx = o.Observe(r.ctx, Event{Kind: RequestStarted, Operation: c.op, TierIndex: -1, Model: c.stages[0].Model, Provider: c.stages[0].Provider})
		defer func() {
			if p := recover(); p != nil {
				c.end(r, &PanicError{Value: p}, classify.Verdict{Class: classify.Unknown, Reason: "tier panicked"})
				panic(p)
			}
		}()
	}
	in := s.in
	var last classify.Verdict
	var incomplete *IncompleteError
	for i := range c.stages {
		st := &c.stages[i]
		end, v, err := c.runStage(r, i, st, in)
		switch end {
		case endDone:
			c.end(r, err, v)
			return
		case endIncomplete:
			incomplete = err.(*IncompleteError)
			if c.cont != nil && i+1 < len(c.stages) {
				if next, ok := c.cont(s.in, r.partial.String()); ok {
					in = next
					s.res.Continued = true
					continue
				}
			}
			yield(*new(Chunk), incomplete)
			c.end(r, incomplete, incomplete.V)
			return
		}
		last = v
		if incomplete != nil {
			// A continuation tier failed before its first chunk: keep
			// looking, but the stream as a whole stays incomplete.
			continue
		}
		switch c.table.Action(v.Class).Route {
		case classify.RouteFailClosed:
			c.failStream(r, v, true)
			return
		case classify.RouteLocal:
			c.localStream(r, last)
			return
		}
	}
	if incomplete != nil {
		yield(*new(Chunk), incomplete)
		c.end(r, incomplete, incomplete.V)
		return
	}
	c.localStream(r, last)
}

func (c *StreamChain[In, Chunk]) localStream(r *streamRun[In, Chunk], last classify.Verdict) {
	if err := r.ctx.Err(); err == nil || !errors.Is(err, context.Canceled) {
		if c.def != nil {
			if ch, ok := c.def(r.ctx, r.s.in); ok {
				r.s.res.Source, r.s.res.Degraded, r.s.res.Complete = SourceDefault, true, true
				r.s.res.Tier, r.s.res.TierIndex = "", -1
				r.s.res.Chunks = 1
				if r.obs != nil {
					r.obs.Observe(r.ctx, Event{Kind: LocalAnswered, Operation: c.op, TierIndex: -1, Source: SourceDefault, Degraded: true, UpstreamCalls: r.s.res.UpstreamCalls})
				}
				r.yield(ch, nil)
				c.end(r, nil, classify.Verdict{})
				return
			}
		}
		if r.budget.Remaining() <= 0 {
			last = classify.Verdict{Class: classify.DeadlineExhausted, Reason: "deadline budget exhausted"}
		}
		c.failStream(r, last, false)
		return
	}
	c.failStream(r, classify.InContext(r.ctx, last), true)
}

func (c *StreamChain[In, Chunk]) failStream(r *streamRun[In, Chunk], cause classify.Verdict, closed bool) {
	names := make([]string, len(c.stages))
	for i := range c.stages {
		names[i] = c.stages[i].name
	}
	e := buildError(names, r.s.res.Attempts, cause, closed)
	r.s.res.Tier, r.s.res.TierIndex = "", -1
	r.yield(*new(Chunk), e)
	c.end(r, e, cause)
}

func (c *StreamChain[In, Chunk]) end(r *streamRun[In, Chunk], err error, v classify.Verdict) {
	if r.obs == nil {
		return
	}
	res := &r.s.res
	r.obs.Observe(r.ctx, Event{
		Kind: RequestEnded, Operation: c.op, TierIndex: res.TierIndex, Tier: res.Tier, Verdict: v,
		Source: res.Source, Degraded: res.Degraded, UpstreamCalls: res.UpstreamCalls, Answered: err == nil,
		Remaining: r.budget.Remaining(), Latency: time.Since(r.start), Err: err, Chunks: res.Chunks,
		Incomplete: errors.Is(err, ErrIncomplete),
	})
}

func (c *StreamChain[In, Chunk]) event(r *streamRun[In, Chunk], kind EventKind, i int, st *streamStage[In, Chunk], n int) Event {
	e := Event{Kind: kind, Operation: c.op, Tier: st.name, TierIndex: i, Model: st.Model, Provider: st.Provider, Attempt: n, Remaining: r.budget.Remaining()}
	if st.Breaker != nil {
		e.Breaker, e.HasBreaker = st.Breaker.State(), true
	}
	return e
}

func (c *StreamChain[In, Chunk]) skip(r *streamRun[In, Chunk], i int, st *streamStage[In, Chunk], why Skip, err error) classify.Verdict {
	v := classify.Verdict{Class: classify.Rejected, Reason: skipReasons[why]}
	if why == SkipBudget && r.budget.Remaining() <= 0 {
		v = classify.Verdict{Class: classify.DeadlineExhausted, Reason: "deadline budget exhausted"}
	}
	r.s.res.Attempts = append(r.s.res.Attempts, Attempt{Tier: st.name, TierIndex: i, Skip: why, Verdict: v, Err: err})
	if r.obs != nil {
		e := c.event(r, StageSkipped, i, st, 0)
		e.Skip, e.Verdict, e.Err, e.Route = why, v, err, c.table.Action(v.Class).Route
		e.QueueWait, r.queueWait = r.queueWait, 0
		r.obs.Observe(r.ctx, e)
	}
	return v
}

// runStage streams from one tier behind its guards.
func (c *StreamChain[In, Chunk]) runStage(r *streamRun[In, Chunk], i int, st *streamStage[In, Chunk], in In) (end stageEnd, v classify.Verdict, err error) {
	if skip := st.preflight(c.epoch, c.catalog, st.Model); skip != NotSkipped {
		err = skipError(st.name, st.Model, skip)
		return endBeforeCommit, c.skip(r, i, st, skip, err), err
	}
	if oerr := st.open(); oerr != nil {
		return endBeforeCommit, c.skip(r, i, st, SkipOpen, oerr), oerr
	}
	e, why, gerr := st.enter(r.ctx, r.budget, r.obs != nil)
	r.queueWait = e.queueWait
	if gerr != nil {
		if why == NotSkipped {
			return endBeforeCommit, classify.InContext(r.ctx, classify.Verdict{Class: classify.Canceled}), gerr
		}
		return endBeforeCommit, c.skip(r, i, st, why, gerr), gerr
	}
	if e.slot {
		defer st.Bulkhead.Release()
	}
	tok := e.tok
	outcome := breaker.Ignored
	defer func() { tok.Done(outcome) }()

	for n := 1; ; n++ {
		end, v, err, retryable := c.attempt(r, i, st, in, n, tok)
		if end != endBeforeCommit {
			outcome = streamOutcome(c.table, end, v)
			if end == endIncomplete {
				st.park(c.epoch, c.catalog, st.Model, v, c.quotaPark, c.retirePark)
			}
			return end, v, err
		}
		if !retryable {
			if errors.Is(err, deadline.ErrExhausted) && n == 1 {
				return endBeforeCommit, v, err
			}
			outcome = breaker.OutcomeFor(c.table, v.Class)
			st.park(c.epoch, c.catalog, st.Model, v, c.quotaPark, c.retirePark)
			return endBeforeCommit, v, err
		}
	}
}

func streamOutcome(t classify.Table, end stageEnd, v classify.Verdict) breaker.Outcome {
	if end == endDone && v.Class == classify.OK {
		return breaker.Success
	}
	return breaker.OutcomeFor(t, v.Class)
}

// attempt makes one streaming call. Before its first chunk it reports
// endBeforeCommit with whether a retry follows (after sleeping); from the
// first chunk on it streams to the consumer and reports how it ended.
func (c *StreamChain[In, Chunk]) attempt(r *streamRun[In, Chunk], i int, st *streamStage[In, Chunk], in In, n int, tok breaker.Token) (end stageEnd, v classify.Verdict, err error, retryAgain bool) {
	remaining := r.budget.Remaining()
	avail := remaining - st.try.Reserve
	if avail <= 0 || avail < st.try.MinUseful {
		err = deadline.Exhausted(remaining, nil)
		if n == 1 {
			return endBeforeCommit, c.skip(r, i, st, SkipBudget, err), err, false
		}
		return endBeforeCommit, classify.Verdict{Class: classify.DeadlineExhausted, Reason: "deadline budget exhausted"}, err, false
	}
	firstWait := time.Duration(-1)
	if st.FirstChunkTimeout > 0 {
		firstWait = st.FirstChunkTimeout
	}
	if remaining != deadline.Unlimited && st.try.Reserve > 0 && (firstWait < 0 || avail < firstWait) {
		firstWait = avail
	}

	actx, cancel := context.WithCancelCause(r.ctx)
	defer cancel(nil)
	var timer *time.Timer
	if firstWait >= 0 {
		timer = time.AfterFunc(firstWait, func() { cancel(ErrFirstChunkTimeout) })
	}
	if r.obs != nil {
		e := c.event(r, AttemptStarted, i, st, n)
		e.QueueWait, r.queueWait = r.queueWait, 0
		actx = r.obs.Observe(actx, e)
	}
	start := time.Now()
	next, stop := iter.Pull2(st.Tier.Stream(actx, in))
	defer stop()
	r.s.res.UpstreamCalls++

	chunk, cerr, ok := next()
	if timer != nil && !timer.Stop() && ok && cerr == nil {
		// The timer fired as the first chunk arrived: the attempt's context
		// is cancelled and the stream cannot go on. Nothing was shown yet,
		// so this is a first-chunk timeout, not an incomplete stream.
		cerr = ErrFirstChunkTimeout
	}
	if !ok || cerr != nil {
		// Failed before the first chunk: the unary chain's rules apply.
		switch cause := context.Cause(actx); {
		case errors.Is(cause, ErrFirstChunkTimeout) && r.ctx.Err() == nil:
			cerr = classify.Wrap(ErrFirstChunkTimeout, classify.Verdict{Class: classify.Transient, Reason: "no first chunk in time"})
		case !ok && cerr == nil:
			cerr = classify.Wrap(ErrEmptyStream, classify.Verdict{Class: classify.InvalidOutput, Reason: "empty stream"})
		}
		v = classify.InContext(r.ctx, st.policy.Classifier.Classify(cerr))
		a := st.policy.Decide(n, v, r.budget, st.try)
		if a.Retry && tok.Stale() {
			a.Retry, a.Wait, a.Stop = false, 0, retry.CircuitOpen
		}
		latency := time.Since(start)
		r.s.res.Attempts = append(r.s.res.Attempts, Attempt{Tier: st.name, TierIndex: i, N: n, Verdict: v, Latency: latency, Wait: a.Wait, Err: cerr})
		if r.obs != nil {
			e := c.event(r, AttemptEnded, i, st, n)
			e.Verdict, e.Latency, e.Err, e.Retry, e.Wait, e.Stop = v, latency, cerr, a.Retry, a.Wait, a.Stop
			e.Route = c.table.Action(v.Class).Route
			r.obs.Observe(r.ctx, e)
		}
		if !a.Retry {
			return endBeforeCommit, v, cerr, false
		}
		stop()
		if serr := retry.Sleep(r.ctx, a.Wait); serr != nil {
			return endBeforeCommit, classify.InContext(r.ctx, v), cerr, false
		}
		return endBeforeCommit, v, cerr, !tok.Stale()
	}

	// The commit point: from here on, no silent switch.
	res := &r.s.res
	res.Source, res.Tier, res.TierIndex, res.Degraded = SourceTier, st.name, i, i > 0 || res.Continued
	ttfc := time.Since(r.start)
	if res.Chunks == 0 {
		res.TimeToFirstChunk = ttfc
	}
	if r.obs != nil {
		e := c.event(r, FirstChunkReceived, i, st, n)
		e.Latency = time.Since(start)
		r.obs.Observe(r.ctx, e)
	}
	keepText := r.keep || st.Validate != nil
	var text strings.Builder
	chunks, bytes := 0, 0
	var finish string
	var usage Usage
	var hasUsage bool
	// The idle timer runs only while waiting on the upstream, so a slow
	// consumer is never mistaken for a stalled stream.
	var idle *time.Timer
	if st.IdleTimeout > 0 {
		idle = time.AfterFunc(st.IdleTimeout, func() { cancel(ErrIdleTimeout) })
		idle.Stop()
		defer idle.Stop()
	}
	for {
		info := st.Tier.Inspect(chunk)
		chunks++
		res.Chunks++
		res.Bytes += len(info.Text)
		bytes += len(info.Text)
		if st.usage != nil {
			if u, ok := st.usage.ChunkUsage(chunk); ok {
				usage, hasUsage = u, true
			}
		}
		if info.FinishReason != "" {
			finish = info.FinishReason
		}
		if keepText {
			text.WriteString(info.Text)
			if r.keep {
				r.partial.WriteString(info.Text)
			}
		}
		if !r.yield(chunk, nil) {
			// The consumer stopped: cancel upstream, decide nothing.
			cancel(context.Canceled)
			c.attemptEnded(r, i, st, n, start, chunks, classify.Verdict{Class: classify.Canceled, Reason: "consumer stopped"}, nil, false, usage, hasUsage)
			return endDone, classify.Verdict{Class: classify.Canceled, Reason: "consumer stopped"}, nil, false
		}
		if idle != nil {
			idle.Reset(st.IdleTimeout)
		}
		chunk, cerr, ok = next()
		if idle != nil {
			idle.Stop()
		}
		if !ok || cerr != nil {
			break
		}
	}
	res.FinishReason = finish
	var cause error
	switch cause = context.Cause(actx); {
	case cerr == nil && finish != "":
		// A clean end with a finish reason: validate the whole answer.
		if st.Validate != nil {
			if verr := st.Validate.Validate(text.String()); verr != nil {
				verr = validate.AsInvalidOutput(verr)
				v = st.policy.Classifier.Classify(verr)
				c.attemptEnded(r, i, st, n, start, chunks, v, verr, false, usage, hasUsage)
				r.yield(*new(Chunk), verr)
				return endDone, v, verr, false
			}
		}
		res.Complete = true
		c.attemptEnded(r, i, st, n, start, chunks, classify.Verdict{}, nil, false, usage, hasUsage)
		return endDone, classify.Verdict{}, nil, false
	case errors.Is(cause, ErrIdleTimeout) && r.ctx.Err() == nil:
		cause = ErrIdleTimeout
		v = classify.Verdict{Class: classify.Transient, Reason: "stream idle too long"}
	case cerr == nil:
		cause = ErrNoFinishReason
		v = classify.Verdict{Class: classify.Transient, Reason: "stream ended without a finish reason"}
	default:
		cause = cerr
		v = classify.InContext(r.ctx, st.policy.Classifier.Classify(cerr))
	}
	ie := &IncompleteError{Tier: st.name, Chunks: chunks, Bytes: bytes, FinishReason: finish, Cause: cause, V: v}
	c.attemptEnded(r, i, st, n, start, chunks, v, ie, true, usage, hasUsage)
	return endIncomplete, v, ie, false
}

func (c *StreamChain[In, Chunk]) attemptEnded(r *streamRun[In, Chunk], i int, st *streamStage[In, Chunk], n int, start time.Time, chunks int, v classify.Verdict, err error, incomplete bool, usage Usage, hasUsage bool) {
	latency := time.Since(start)
	r.s.res.Attempts = append(r.s.res.Attempts, Attempt{Tier: st.name, TierIndex: i, N: n, Verdict: v, Latency: latency, Err: err})
	if r.obs != nil {
		e := c.event(r, AttemptEnded, i, st, n)
		e.Verdict, e.Latency, e.Err, e.Chunks, e.Incomplete = v, latency, err, chunks, incomplete
		e.Usage, e.HasUsage = usage, hasUsage
		r.obs.Observe(r.ctx, e)
	}
}
