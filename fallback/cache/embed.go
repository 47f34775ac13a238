package cache

import (
	"context"
	"errors"
	"runtime"
	"time"
	"unicode/utf8"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/internal/detach"
)

// Embedder turns a text into an embedding. The adapters provide one for
// the Gemini API (fallback/gemini) and for OpenAI-compatible APIs
// (fallback/oaicompat).
type Embedder interface {
	// Embed embeds text. It must honour ctx: the cache gives each call a
	// short deadline of its own.
	Embed(ctx context.Context, text string) (Embedding, error)
}

// EmbedderFunc adapts a function to the Embedder interface.
type EmbedderFunc func(ctx context.Context, text string) (Embedding, error)

// Embed calls f(ctx, text).
func (f EmbedderFunc) Embed(ctx context.Context, text string) (Embedding, error) { return f(ctx, text) }

// Embedding is an embedder's answer.
type Embedding struct {
	// Vector is the embedding; the cache scales it to unit length.
	Vector []float32
	// Model is the embedding model that answered, for the usage record.
	Model string
	// Usage is the call's token usage, when the API reports it (OpenAI's
	// does; the Gemini API's embedContent reports none).
	Usage    fallback.Usage
	HasUsage bool
}

// EmbeddingUsage describes one embedding call, for a spend ledger.
type EmbeddingUsage struct {
	// Model is the embedding model.
	Model string
	// Usage is the reported token usage, if HasUsage.
	Usage    fallback.Usage
	HasUsage bool
	// Characters is the length of the embedded text in characters, which
	// an API that reports no tokens bills by, or a ledger can estimate
	// tokens from.
	Characters int
	// Lookup is set for the embedding of a lookup's prompt, unset for
	// that of a written answer's prompt.
	Lookup bool
}

// UsageRecorder receives the usage of embedding calls. The context is the
// request's (its values, such as the tenant, without its cancellation).
type UsageRecorder interface {
	RecordEmbedding(ctx context.Context, u EmbeddingUsage)
}

// UsageFunc adapts a function to the UsageRecorder interface.
type UsageFunc func(ctx context.Context, u EmbeddingUsage)

// RecordEmbedding calls f(ctx, u).
func (f UsageFunc) RecordEmbedding(ctx context.Context, u EmbeddingUsage) { f(ctx, u) }

// embedder runs embedding calls under their own deadline and breaker.
type embedder struct {
	e         Embedder
	br        *breaker.Breaker
	timeout   time.Duration
	minBudget time.Duration
	usage     UsageRecorder
}

// embedResult is what one call produced.
type embedResult struct {
	vec []float32
	err error
}

// endedError carries an embedder's panic (or runtime.Goexit) out of the
// goroutine it ran on. A lookup raises it again on the caller's goroutine,
// a panic as a *fallback.PanicError with its stack, as the chain does for
// tiers; the background worker, which has no caller, counts it as a
// failed embedding.
type endedError struct{ o detach.Outcome }

func (e *endedError) Error() string { return "cache: the embedder panicked" }

// raise ends the calling goroutine as the embedder's did.
func (e *endedError) raise() {
	if e.o.Goexit {
		runtime.Goexit()
	}
	panic(&fallback.PanicError{Value: e.o.Panic, Stack: e.o.Stack})
}

// errEmbedBudget is the outcome of a lookup with too little time left.
var errEmbedBudget = errors.New("cache: too little time left to embed")

// embed embeds text inside ctx's deadline and the embedder's timeout,
// whichever ends first, and returns the unit vector. It never waits past
// that deadline, even for an embedder that ignores its context: the call
// is abandoned and its result, when it comes, dropped (its usage still
// recorded).
func (m *embedder) embed(ctx context.Context, text string, lookup bool) ([]float32, error) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) < m.minBudget {
		return nil, errEmbedBudget
	}
	tok, err := m.br.Allow()
	if err != nil {
		return nil, err
	}
	ectx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	done := make(chan embedResult, 1)
	uctx := context.WithoutCancel(ctx)
	go func() {
		var r embedResult
		detach.Run(func() {
			emb, err := m.e.Embed(ectx, text)
			if err == nil && m.usage != nil {
				m.usage.RecordEmbedding(uctx, EmbeddingUsage{
					Model: emb.Model, Usage: emb.Usage, HasUsage: emb.HasUsage,
					Characters: utf8.RuneCountInString(text), Lookup: lookup,
				})
			}
			r = embedResult{vec: emb.Vector, err: err}
		}, func(o detach.Outcome) {
			if o.Ended() {
				r = embedResult{err: &endedError{o: o}}
			}
			done <- r
		})
	}()
	var r embedResult
	select {
	case r = <-done:
	case <-ectx.Done():
		r.err = ectx.Err()
	}
	var ended *endedError
	switch {
	case errors.As(r.err, &ended):
		// A panic says nothing of the embedder's availability.
		tok.Done(breaker.Ignored)
		return nil, r.err
	case r.err == nil:
		tok.Done(breaker.Success)
	case ctx.Err() != nil:
		// The request ended: says nothing about the embedder.
		tok.Done(breaker.Ignored)
		return nil, r.err
	case ectx.Err() != nil:
		// Our own timeout: the embedder is too slow.
		tok.Done(breaker.Failure)
		return nil, r.err
	default:
		tok.Report(r.err)
		return nil, r.err
	}
	return unit(r.vec)
}
