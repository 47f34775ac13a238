// Package reported tells what a tier reports to the chain it runs in
// (fallback.Report), for the tests of tiers: the SDK adapters', the test
// bed's REST client's. Its Recorder keeps every event a chain tells its
// observers, for the tests of chains and observers.
package reported

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/retry"
)

// Call calls tier once for in, inside a one-stage chain without retries,
// and returns its answer and what its response reported.
func Call[In, Out any](t testing.TB, tier fallback.ModelTier[In, Out], in In) (Out, fallback.Reply) {
	t.Helper()
	var rec Recorder
	c, err := fallback.New(fallback.Config[In, Out]{
		Stages:   []fallback.Stage[In, Out]{{Tier: tier, Retry: retry.Policy{MaxAttempts: 1}}},
		Observer: &rec,
	})
	require.NoError(t, err)
	res, err := c.Do(context.Background(), in)
	require.NoError(t, err)
	var rep fallback.Reply
	if ended := Of[fallback.AttemptEnd](&rec); len(ended) > 0 {
		rep = *ended[len(ended)-1].Reply
	}
	return res.Value, rep
}

// Recorder is a fallback.Observer that keeps every event, in the order
// the chain told them, as its typed value (fallback.RequestStart,
// fallback.AttemptEnd, ...). It is safe for concurrent use; its zero value
// is ready.
type Recorder struct {
	fallback.NopObserver
	mu     sync.Mutex
	events []any
}

func (r *Recorder) add(e any) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// Events returns the events recorded so far, in order.
func (r *Recorder) Events() []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]any(nil), r.events...)
}

// Names returns the names of the events recorded so far, in order (see
// Name).
func (r *Recorder) Names() []string {
	evs := r.Events()
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = Name(e)
	}
	return out
}

// Reset forgets the events recorded so far.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.events = nil
	r.mu.Unlock()
}

// Of returns the events of type E that r recorded, in order.
func Of[E any](r *Recorder) []E {
	var out []E
	for _, e := range r.Events() {
		if e, ok := e.(E); ok {
			out = append(out, e)
		}
	}
	return out
}

// Name names an event by the Observer method that received it:
// "request_started", "attempt_started", "attempt_ended", "tier_skipped",
// "local_answered", "request_ended", "first_chunk_received",
// "chunk_received", "late_reply"; "" for anything else.
func Name(e any) string {
	switch e.(type) {
	case fallback.RequestStart:
		return "request_started"
	case fallback.AttemptStart:
		return "attempt_started"
	case fallback.AttemptEnd:
		return "attempt_ended"
	case fallback.TierSkip:
		return "tier_skipped"
	case fallback.LocalAnswer:
		return "local_answered"
	case fallback.RequestEnd:
		return "request_ended"
	case fallback.FirstChunk:
		return "first_chunk_received"
	case fallback.NextChunk:
		return "chunk_received"
	case fallback.LateReply:
		return "late_reply"
	}
	return ""
}

// RequestStarted records e.
func (r *Recorder) RequestStarted(ctx context.Context, e fallback.RequestStart) context.Context {
	r.add(e)
	return ctx
}

// AttemptStarted records e.
func (r *Recorder) AttemptStarted(ctx context.Context, e fallback.AttemptStart) context.Context {
	r.add(e)
	return ctx
}

// AttemptEnded records e. It panics when e has no Reply, which the chain
// promises every AttemptEnd has, so that every test recording events
// checks that promise.
func (r *Recorder) AttemptEnded(_ context.Context, e fallback.AttemptEnd) {
	if e.Reply == nil {
		panic("reported: an AttemptEnd without its Reply")
	}
	r.add(e)
}

// TierSkipped records e.
func (r *Recorder) TierSkipped(_ context.Context, e fallback.TierSkip) { r.add(e) }

// LocalAnswered records e.
func (r *Recorder) LocalAnswered(_ context.Context, e fallback.LocalAnswer) { r.add(e) }

// RequestEnded records e.
func (r *Recorder) RequestEnded(_ context.Context, e fallback.RequestEnd) { r.add(e) }

// FirstChunkReceived records e.
func (r *Recorder) FirstChunkReceived(_ context.Context, e fallback.FirstChunk) { r.add(e) }

// ChunkReceived records e.
func (r *Recorder) ChunkReceived(_ context.Context, e fallback.NextChunk) { r.add(e) }

// LateReplyReceived records e; as AttemptEnded, it panics when e has no
// Reply.
func (r *Recorder) LateReplyReceived(_ context.Context, e fallback.LateReply) {
	if e.Reply == nil {
		panic("reported: a LateReply without its Reply")
	}
	r.add(e)
}
