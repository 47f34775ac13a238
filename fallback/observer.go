package fallback

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/retry"
)

// EventKind says which decision an Event reports.
type EventKind uint8

const (
	// RequestStarted opens a request. The context the observer returns
	// becomes the request's (a span, a request id).
	RequestStarted EventKind = iota
	// AttemptStarted comes before each upstream call. The context the
	// observer returns is the parent of the one the tier receives (the
	// chain adds the attempt's deadline on top of it).
	AttemptStarted
	// AttemptEnded reports a call's outcome and what follows it.
	AttemptEnded
	// StageSkipped reports a tier passed over without a call.
	StageSkipped
	// LocalAnswered reports an answer from the cache or the default.
	LocalAnswered
	// RequestEnded closes a request, answered or not.
	RequestEnded
	// FirstChunkReceived reports a stream's commit point: its first chunk
	// arrived (Latency is the time to first chunk). From here on the
	// stream cannot silently switch tiers.
	FirstChunkReceived
	// ChunkReceived reports each chunk a committed stream receives after
	// the first (Latency is the time since the previous chunk arrived), for
	// per-chunk timing. Observers that do not time chunks ignore it.
	ChunkReceived
	// LateReply reports a billed upstream response that arrived after the
	// chain stopped waiting for its call: a call abandoned for ignoring its
	// context (Config.AbandonAfter), the loser of a hedged race. It carries
	// the call's Tier, TierIndex, Model, Attempt, Member, Hedge, Usage and
	// Response. It may come from any goroutine, after the request's
	// RequestEnded; the request's context is the one passed. A reply that
	// arrives in time rides its AttemptEnded instead, so that a ledger
	// counting both counts every response once.
	LateReply
)

var eventNames = [...]string{
	RequestStarted: "request_started", AttemptStarted: "attempt_started", AttemptEnded: "attempt_ended",
	StageSkipped: "tier_skipped", LocalAnswered: "local_answered", RequestEnded: "request_ended",
	FirstChunkReceived: "first_chunk_received", ChunkReceived: "chunk_received", LateReply: "late_reply",
}

// String names the kind.
func (k EventKind) String() string { return name(eventNames[:], k, "invalid_event") }

// Event describes one decision of a chain. Which fields are set depends on
// Kind. No field holds a prompt or an answer; Err may hold an upstream
// error, whose text an observer must not export unless its user opts in.
type Event struct {
	// Kind says which decision this is.
	Kind EventKind
	// Operation is the chain's Config.Operation.
	Operation string
	// Stream is set for the events of a StreamChain.
	Stream bool

	// Tier, TierIndex, Model and Provider name the tier (attempt and skip
	// events); TierIndex is -1 otherwise.
	Tier      string
	TierIndex int
	Model     string
	Provider  string
	// Breaker is the tier's breaker state when the event happened, if it
	// has a breaker.
	Breaker    breaker.State
	HasBreaker bool

	// Attempt is the attempt's number on its tier.
	Attempt int
	// Member names the pool member the attempt used ("#" and a short hash
	// of its key); "" for a tier that is not a Pool.
	Member string
	// Hedge is set for the second call of a hedged attempt.
	Hedge bool
	// LimitWait is how long the attempt's call waited for a rate limit's
	// turn before its upstream call (Record.Waited; AttemptEnded).
	LimitWait time.Duration
	// Verdict is the attempt's outcome (AttemptEnded), the skip's
	// (StageSkipped), or the request's (RequestEnded, class OK if answered).
	Verdict classify.Verdict
	// Retry, Wait and Stop say what follows a failed attempt: another
	// attempt after Wait, or why not (AttemptEnded).
	Retry bool
	Wait  time.Duration
	Stop  retry.StopReason
	// Route says where the request goes after a tier was given up
	// (AttemptEnded without Retry, StageSkipped).
	Route classify.Route
	// Latency is the attempt's duration (AttemptEnded), the request's
	// (RequestEnded), the time to the first chunk (FirstChunkReceived) or
	// since the previous chunk (ChunkReceived).
	Latency time.Duration
	// Usage is the token usage the attempt's upstream responses reported
	// (see Report) while the chain waited for them (AttemptEnded), or that
	// a late response reported (LateReply): a success's, a rejected
	// answer's, a partial stream's — tokens billed all the same.
	Usage    Usage
	HasUsage bool
	// Response describes the attempt's response, as reported (AttemptEnded,
	// LateReply).
	Response ResponseInfo
	// Skip says why a tier was passed over (StageSkipped).
	Skip Skip

	// Source, Degraded and UpstreamCalls describe the answer
	// (LocalAnswered, RequestEnded).
	Source        Source
	Degraded      bool
	UpstreamCalls int
	// Answered is set on RequestEnded when the request got an answer.
	Answered bool
	// CacheHit says how the cache matched, when Source is SourceCache
	// (LocalAnswered, RequestEnded).
	CacheHit string
	// Remaining is the time left in the request's budget, or
	// deadline.Unlimited (AttemptStarted, AttemptEnded, RequestEnded).
	Remaining time.Duration

	// QueueWait is how long the request waited for the tier's bulkhead
	// (a bulkhead with Config.MaxWait), on the tier's first AttemptStarted or
	// on its StageSkipped for a full bulkhead; 0 otherwise.
	QueueWait time.Duration

	// Chunks counts the chunks a streamed attempt delivered, and
	// Incomplete is set when it failed after its first chunk (AttemptEnded
	// of a stream).
	Chunks     int
	Incomplete bool

	// Shared is set on the RequestStarted and RequestEnded of a request
	// that joined another's execution (Config.Key): it made no upstream
	// call of its own, and the execution's events went to the request
	// that started it.
	Shared bool

	// Err is the failure (AttemptEnded, StageSkipped, RequestEnded).
	Err error
}

// Observer receives every decision of a chain. It runs on the request's
// goroutine (LateReply excepted: on the goroutine of the call that
// replied late), and for many requests at once: keep it fast,
// non-blocking and safe for concurrent use. otelx provides one.
type Observer interface {
	// Observe reports e. For RequestStarted and AttemptStarted the returned
	// context replaces ctx; for other kinds it is ignored. Return ctx when
	// there is nothing to add.
	Observe(ctx context.Context, e Event) context.Context
}

// ObserverFunc adapts a function to the Observer interface.
type ObserverFunc func(ctx context.Context, e Event) context.Context

// Observe calls f(ctx, e).
func (f ObserverFunc) Observe(ctx context.Context, e Event) context.Context { return f(ctx, e) }

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

func (os observers) Observe(ctx context.Context, e Event) context.Context {
	for _, o := range os {
		ctx = o.Observe(ctx, e)
	}
	return ctx
}

// observerSlot holds a chain's observers; the request path reads it with one
// atomic load.
type observerSlot struct {
	p    atomic.Pointer[observerBox]
	mu   sync.Mutex
	list []*observerEntry
}

type observerBox struct{ o Observer }

type observerEntry struct{ o Observer }

func (s *observerSlot) load() Observer {
	if b := s.p.Load(); b != nil {
		return b.o
	}
	return nil
}

// add appends o and returns the function that removes it.
func (s *observerSlot) add(o Observer) (remove func()) {
	e := &observerEntry{o: o}
	s.mu.Lock()
	s.list = append(s.list, e)
	s.publishLocked()
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, x := range s.list {
			if x == e {
				s.list = append(s.list[:i:i], s.list[i+1:]...)
				s.publishLocked()
				return
			}
		}
	}
}

func (s *observerSlot) publishLocked() {
	if len(s.list) == 0 {
		s.p.Store(nil)
		return
	}
	os := make([]Observer, len(s.list))
	for i, e := range s.list {
		os[i] = e.o
	}
	s.p.Store(&observerBox{o: Observers(os...)})
}
