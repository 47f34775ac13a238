package fallback

import (
	"context"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/retry"
)

// Observer receives the decisions of a chain, one method per kind of
// event, each with a type that holds only what that kind has. It runs on
// the request's goroutine (LateReplyReceived excepted: on the goroutine of
// the call that replied late), and for many requests at once: keep it
// fast, non-blocking and safe for concurrent use. otelx and spend provide
// observers.
//
// An observer embeds NopObserver and implements only the events it
// handles; the interface cannot be implemented without it, so that a
// later release can add a kind of event without breaking observers.
//
// No event holds a prompt or an answer; an Err may hold an upstream
// error, whose text an observer must not export unless its user opts in.
// The *ChainInfo and *StageInfo an event points to are the chain's own,
// built once and shared by every request: an observer must not modify
// them, and may use their addresses as keys.
type Observer interface {
	// RequestStarted opens a request. The returned context becomes the
	// request's (a span, a request id); return ctx when there is nothing
	// to add.
	RequestStarted(ctx context.Context, e RequestStart) context.Context
	// AttemptStarted comes before each upstream call. The returned context
	// is the parent of the one the tier receives (the chain adds the
	// attempt's deadline on top of it); return ctx when there is nothing to
	// add.
	AttemptStarted(ctx context.Context, e AttemptStart) context.Context
	// AttemptEnded reports a call's outcome and what follows it.
	AttemptEnded(ctx context.Context, e AttemptEnd)
	// TierSkipped reports a tier passed over without a call.
	TierSkipped(ctx context.Context, e TierSkip)
	// LocalAnswered reports an answer from the cache or the default.
	LocalAnswered(ctx context.Context, e LocalAnswer)
	// RequestEnded closes a request, answered or not.
	RequestEnded(ctx context.Context, e RequestEnd)
	// FirstChunkReceived reports a stream's commit point: its first chunk
	// arrived. From here on the stream cannot silently switch tiers.
	FirstChunkReceived(ctx context.Context, e FirstChunk)
	// ChunkReceived reports each chunk a committed stream receives after
	// the first, for per-chunk timing.
	ChunkReceived(ctx context.Context, e NextChunk)
	// LateReplyReceived reports a billed upstream response that arrived
	// after the chain stopped waiting for its call (see LateReply). It may
	// come from any goroutine, after the request's RequestEnded; ctx is
	// the request's.
	LateReplyReceived(ctx context.Context, e LateReply)

	// nop is NopObserver's: embedding it is what makes an Observer.
	nop()
}

// NopObserver is an Observer that does nothing with any event. Embed it in
// an observer and implement the methods of the events it handles; the
// others do nothing, and the chain's context goes on unchanged.
type NopObserver struct{}

// RequestStarted returns ctx.
func (NopObserver) RequestStarted(ctx context.Context, _ RequestStart) context.Context { return ctx }

// AttemptStarted returns ctx.
func (NopObserver) AttemptStarted(ctx context.Context, _ AttemptStart) context.Context { return ctx }

// AttemptEnded does nothing.
func (NopObserver) AttemptEnded(context.Context, AttemptEnd) {}

// TierSkipped does nothing.
func (NopObserver) TierSkipped(context.Context, TierSkip) {}

// LocalAnswered does nothing.
func (NopObserver) LocalAnswered(context.Context, LocalAnswer) {}

// RequestEnded does nothing.
func (NopObserver) RequestEnded(context.Context, RequestEnd) {}

// FirstChunkReceived does nothing.
func (NopObserver) FirstChunkReceived(context.Context, FirstChunk) {}

// ChunkReceived does nothing.
func (NopObserver) ChunkReceived(context.Context, NextChunk) {}

// LateReplyReceived does nothing.
func (NopObserver) LateReplyReceived(context.Context, LateReply) {}

func (NopObserver) nop() {}

// ChainInfo describes a chain, for the events about a whole request. The
// chain builds it once; its Stages are the ones stage events point to.
type ChainInfo struct {
	// Operation is the chain's Config.Operation.
	Operation string
	// Stream is set for a StreamChain.
	Stream bool
	// Stages describes the chain's stages, in order.
	Stages []StageInfo
}

// RequestStart opens a request (Observer.RequestStarted).
type RequestStart struct {
	// Chain is the chain the request runs in.
	Chain *ChainInfo
	// Shared is set for a request that joined another's execution
	// (Config.Key): it makes no upstream call of its own, and the
	// execution's events go to the request that started it.
	Shared bool
}

// AttemptStart comes before an upstream call (Observer.AttemptStarted).
type AttemptStart struct {
	// Stage is the stage the call is made on.
	Stage *StageInfo
	// Model is the model the call uses: the stage's, or what its
	// Stage.ModelFor chose.
	Model string
	// Attempt is the attempt's number on its tier, from 1.
	Attempt int
	// Member names the pool member the attempt uses ("#" and a short hash
	// of its key) when a member was chosen before the call; "" otherwise.
	Member string
	// Breaker is the stage's breaker state, when Stage.Breaker is set.
	Breaker breaker.State
	// Remaining is the time left in the request's budget, or
	// deadline.Unlimited.
	Remaining time.Duration
	// QueueWait is how long the request waited for the tier's bulkhead (a
	// bulkhead with Config.MaxWait), on the tier's first attempt; 0
	// otherwise.
	QueueWait time.Duration
}

// AttemptEnd reports an upstream call's outcome and what follows it
// (Observer.AttemptEnded).
type AttemptEnd struct {
	// Stage is the stage the call was made on.
	Stage *StageInfo
	// Model is the model the call used.
	Model string
	// Attempt is the attempt's number on its tier, from 1.
	Attempt int
	// Member names the pool member the call used; "" for a tier without
	// members (see package pool).
	Member string
	// Hedge is set for the second call of a hedged attempt.
	Hedge bool
	// Breaker is the stage's breaker state when the call ended, when
	// Stage.Breaker is set.
	Breaker breaker.State
	// Remaining is the time left in the request's budget, or
	// deadline.Unlimited.
	Remaining time.Duration
	// Latency is the call's duration.
	Latency time.Duration
	// LimitWait is how long the call waited for a rate limit's turn before
	// its upstream call (a decorator's Record.Waited), within Latency.
	LimitWait time.Duration
	// Verdict is the outcome: class OK for an answer. Err is the failure;
	// nil for an answer, and for a stream its consumer stopped (class
	// Canceled).
	Verdict classify.Verdict
	Err     error
	// Retry, Wait and Stop say what follows a failure before a stream's
	// first chunk: another attempt after Wait, or why not. Route says where
	// the request goes when no retry follows. All are zero for an answer,
	// for a committed stream and for the call that lost a hedged race
	// (Verdict says so): no decision followed them.
	Retry bool
	Wait  time.Duration
	Stop  retry.StopReason
	Route classify.Route
	// Cooling is set when the failure, a 429 with a server delay, took
	// the tier out of rotation for every request: by which rule, until
	// when; nil otherwise. A 429 that did not is its request's own (see
	// CoolDown).
	Cooling *Cooling
	// Reply is what the call's upstream responses reported (see Report)
	// while the chain waited for them: a success's, a rejected answer's, a
	// partial stream's — tokens billed all the same. It is never nil: a
	// call that reported nothing points to an empty Reply. It is the
	// call's own, shared by every observer and never written again: read
	// it, keep it, do not modify it.
	Reply *Reply
	// Chunks counts the chunks a committed stream delivered (0 for a call
	// that never reached its first chunk, and for a unary call);
	// Incomplete is set when it broke after its first chunk.
	Chunks     int
	Incomplete bool
}

// TierSkip reports a tier passed over without a call (Observer.TierSkipped).
type TierSkip struct {
	// Stage is the stage skipped.
	Stage *StageInfo
	// Model is the model the call would have used.
	Model string
	// Skip says why.
	Skip Skip
	// Hedge is set when the skip is a hedge's: the tier it went to made
	// no call (a pool with no other member in rotation, a limiter's turn
	// refused). The request goes on waiting for the call it hedged; Route
	// is what a skip of the tier itself would have done.
	Hedge bool
	// Verdict is the skip's outcome, Err its error, and Route where the
	// request goes.
	Verdict classify.Verdict
	Err     error
	Route   classify.Route
	// Breaker is the stage's breaker state, when Stage.Breaker is set.
	Breaker breaker.State
	// Remaining is the time left in the request's budget, or
	// deadline.Unlimited.
	Remaining time.Duration
	// QueueWait is how long the request waited for the tier's bulkhead
	// before finding it full (a bulkhead with Config.MaxWait); 0 otherwise.
	QueueWait time.Duration
	// Cooling says which rule took the tier out, until when, for a skip
	// (SkipRateLimited) of a tier cooling down after a server's 429s; nil
	// otherwise.
	Cooling *Cooling
}

// LocalAnswer reports an answer from the cache or the default, after the
// tiers failed (Observer.LocalAnswered). Such an answer is degraded.
type LocalAnswer struct {
	// Chain is the chain the request runs in.
	Chain *ChainInfo
	// Source is SourceCache or SourceDefault; CacheHit says how the cache
	// matched, in its own words (Cache.Get), for SourceCache.
	Source   Source
	CacheHit string
	// UpstreamCalls counts the upstream calls the request made before.
	UpstreamCalls int
}

// RequestEnd closes a request, answered or not (Observer.RequestEnded).
type RequestEnd struct {
	// Chain is the chain the request ran in.
	Chain *ChainInfo
	// Stage is the stage whose tier answered; nil when the request was
	// answered locally or not at all.
	Stage *StageInfo
	// Answered is set when the request got an answer; otherwise Verdict is
	// the cause and Err the error the caller got.
	Answered bool
	Verdict  classify.Verdict
	Err      error
	// Source, CacheHit and Degraded describe the answer: where it came
	// from, how the cache matched (SourceCache), and whether it came from
	// anything but the first tier.
	Source   Source
	CacheHit string
	Degraded bool
	// UpstreamCalls counts the upstream calls the request made.
	UpstreamCalls int
	// Remaining is the time left in the request's budget, or
	// deadline.Unlimited; Latency is the request's duration (for a tier's
	// answer with no cache to write, to the end of its call: the clock is
	// not read again for the bookkeeping after it).
	Remaining time.Duration
	Latency   time.Duration
	// Chunks counts the chunks a stream delivered; Incomplete is set when
	// it broke after its first chunk.
	Chunks     int
	Incomplete bool
	// Shared is set for a request that joined another's execution: it made
	// no upstream call of its own.
	Shared bool
}

// FirstChunk reports a stream's commit point (Observer.FirstChunkReceived).
type FirstChunk struct {
	// Stage, Model, Attempt and Member are the attempt's, as on its
	// AttemptStart.
	Stage   *StageInfo
	Model   string
	Attempt int
	Member  string
	// Latency is the time from the attempt's start to its first chunk.
	Latency time.Duration
}

// NextChunk reports a chunk a committed stream received after its first
// (Observer.ChunkReceived).
type NextChunk struct {
	// Stage, Model and Attempt are the attempt's.
	Stage   *StageInfo
	Model   string
	Attempt int
	// Latency is the time since the previous chunk arrived.
	Latency time.Duration
}

// LateReply reports what a call told the chain after the chain stopped
// waiting for it (Observer.LateReplyReceived): a billed response of a call
// abandoned for ignoring its context (Config.AbandonAfter) or of the loser
// of a hedged race, and the upstream calls of a hedge that was still
// running when its attempt ended. A reply that arrives in time rides its
// AttemptEnd instead, so that a ledger counting both counts every response
// and every call once.
type LateReply struct {
	// Stage, Model, Attempt, Member and Hedge are the call's.
	Stage   *StageInfo
	Model   string
	Attempt int
	Member  string
	Hedge   bool
	// Reply is what the response reported; as AttemptEnd.Reply, never
	// nil and not to be modified. A report of Calls alone carries an
	// empty one.
	Reply *Reply
	// Calls counts upstream calls that no AttemptEnd counted: those of a
	// hedge still running when its attempt ended, known once it returned
	// (0 when it made none: cancelled before its tier called out, or its
	// pool had no member to call). An AttemptEnd stands for one call; a
	// ledger adds Calls to those.
	Calls int
}

// Observers combines observers; each sees every event, in order, and each
// one's returned context feeds the next.
func Observers(os ...Observer) Observer {
	var list observers
	for _, o := range os {
		switch o := o.(type) {
		case nil:
		case observers:
			list = append(list, o...)
		default:
			list = append(list, o)
		}
	}
	if len(list) == 1 {
		return list[0]
	}
	return list
}

type observers []Observer

func (os observers) RequestStarted(ctx context.Context, e RequestStart) context.Context {
	for _, o := range os {
		ctx = o.RequestStarted(ctx, e)
	}
	return ctx
}

func (os observers) AttemptStarted(ctx context.Context, e AttemptStart) context.Context {
	for _, o := range os {
		ctx = o.AttemptStarted(ctx, e)
	}
	return ctx
}

func (os observers) AttemptEnded(ctx context.Context, e AttemptEnd) {
	for _, o := range os {
		o.AttemptEnded(ctx, e)
	}
}

func (os observers) TierSkipped(ctx context.Context, e TierSkip) {
	for _, o := range os {
		o.TierSkipped(ctx, e)
	}
}

func (os observers) LocalAnswered(ctx context.Context, e LocalAnswer) {
	for _, o := range os {
		o.LocalAnswered(ctx, e)
	}
}

func (os observers) RequestEnded(ctx context.Context, e RequestEnd) {
	for _, o := range os {
		o.RequestEnded(ctx, e)
	}
}

func (os observers) FirstChunkReceived(ctx context.Context, e FirstChunk) {
	for _, o := range os {
		o.FirstChunkReceived(ctx, e)
	}
}

func (os observers) ChunkReceived(ctx context.Context, e NextChunk) {
	for _, o := range os {
		o.ChunkReceived(ctx, e)
	}
}

func (os observers) LateReplyReceived(ctx context.Context, e LateReply) {
	for _, o := range os {
		o.LateReplyReceived(ctx, e)
	}
}

func (observers) nop() {}
