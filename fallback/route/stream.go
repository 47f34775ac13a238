package route

import (
	"context"
	"iter"
	"time"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/spend"
)

// StreamCandidate is one streaming tier a stream route may call, with
// the cost group it is billed in; its fields mean what Candidate's do.
type StreamCandidate[In, Chunk any] struct {
	// Stage is the tier with its guards. A stream stage and a unary one
	// that call the same model share their Breaker and Bulkhead.
	Stage fallback.StreamStage[In, Chunk]
	// CostGroup is the group the tier is billed in ("" for the list
	// price), for the ledger.
	CostGroup string
	// Attempts caps the calls to this candidate per request, as
	// Candidate.Attempts does; a stream is retried only before its first
	// chunk with content.
	Attempts int
}

// StreamRoute is the stream chain a tenant's requests of one scenario run
// through. Its fields mean what Route's do: a table of stream routes is
// checked and split as the same table of unary routes is.
type StreamRoute[In, Chunk any] struct {
	// Scenario names what the requests are for. Required.
	Scenario string
	// Tenant, when set, restricts the route to one tenant.
	Tenant string
	// Candidates are the streaming tiers in order of preference. A stream
	// falls back to the next only before its first chunk with content.
	Candidates []StreamCandidate[In, Chunk]
	// Total caps each stream, every attempt and fallback included, and the
	// stream itself after its first chunk.
	Total time.Duration
	// MaxAttempts, when positive, caps the upstream calls of a request,
	// every candidate together (see Route.MaxAttempts).
	MaxAttempts int
	// Fallback says whether anything but the first candidate may answer.
	Fallback FallbackPolicy
	// Reserve says what the route's estimate reserves (see Reservation).
	Reserve Reservation
	// MarkDegraded tells the caller, in StreamResult.ShowDegraded, to mark
	// a stream a fallback answered as degraded to the user.
	MarkDegraded bool
	// ReadOnlyFallback forbids writes and tool calls with side effects to
	// every candidate but the first: their streams see WritesAllowed(ctx)
	// false.
	ReadOnlyFallback bool
	// Cache and Default answer with a single chunk after the candidates
	// (not on a FailClosed route).
	Cache   fallback.StreamCache[In, Chunk]
	Default func(ctx context.Context, in In) (Chunk, bool)
}

// StreamConfig configures a StreamRouter.
type StreamConfig[In, Chunk any] struct {
	// Routes are the routes, each (Tenant, Scenario) once.
	Routes []StreamRoute[In, Chunk]
	// Base holds the settings every route's chain shares (Operation,
	// Classifier, Table, Catalog, Observer, Continue, AbandonAfter...).
	// Its Stages, Total, Cache and Default must be empty: each route sets
	// its own.
	Base fallback.StreamConfig[In, Chunk]
	// Ledger, when set, is attached to every route's chain, with the
	// candidates' cost groups.
	Ledger *spend.Ledger
}

// StreamRouter picks a compiled stream chain by tenant and scenario, as
// Router does a unary one. It is safe for concurrent use.
type StreamRouter[In, Chunk any] struct {
	t *table[CompiledStream[In, Chunk]]
}

// CompiledStream is one stream route, compiled.
type CompiledStream[In, Chunk any] struct {
	// Chain is the route's chain.
	Chain *fallback.StreamChain[In, Chunk]
	route StreamRoute[In, Chunk]
	plan  *plan
}

// Route returns the route the chain was compiled from.
func (c *CompiledStream[In, Chunk]) Route() StreamRoute[In, Chunk] { return c.route }

// Estimate returns what a request expected to use u (per call) is
// reserved, as Compiled.Estimate does.
func (c *CompiledStream[In, Chunk]) Estimate(u fallback.Usage) spend.Estimate {
	return c.plan.estimate(u)
}

// Calls returns the most upstream calls a request of the route may make,
// 0 when a candidate's retry policy sets no limit: each candidate's
// attempts, twice them when it hedges its first chunk (StreamStage.Hedge),
// counted as Compiled.Calls counts them.
func (c *CompiledStream[In, Chunk]) Calls() int { return c.plan.calls }

// NewStream compiles every stream route's chain, or returns an error
// naming every invalid route and field. It checks a table as New does.
func NewStream[In, Chunk any](cfg StreamConfig[In, Chunk]) (*StreamRouter[In, Chunk], error) {
	b := cfg.Base
	t, err := newTable(cfg.Routes, len(b.Stages) > 0 || b.Total != 0 || b.Cache != nil || b.Default != nil,
		StreamRoute[In, Chunk].policy, func(rt StreamRoute[In, Chunk]) (*CompiledStream[In, Chunk], error) {
			return compileStream(b, cfg.Ledger, rt)
		})
	if err != nil {
		return nil, err
	}
	return &StreamRouter[In, Chunk]{t: t}, nil
}

func (rt StreamRoute[In, Chunk]) policy() policy {
	return policy{rt.Scenario, rt.Tenant, rt.MaxAttempts, rt.Fallback, rt.Reserve, rt.MarkDegraded, rt.ReadOnlyFallback, rt.Cache != nil || rt.Default != nil}
}

// compileStream builds one stream route's chain.
func compileStream[In, Chunk any](base fallback.StreamConfig[In, Chunk], ledger *spend.Ledger, rt StreamRoute[In, Chunk]) (*CompiledStream[In, Chunk], error) {
	chain, p, err := compileRoute(rt.policy(), rt.Candidates, ledger, func(stages []fallback.StreamStage[In, Chunk]) (*fallback.StreamChain[In, Chunk], error) {
		// newPlan refused a cache or a default on a FailClosed route.
		cfg := base
		cfg.Stages, cfg.Total, cfg.Cache, cfg.Default = stages, rt.Total, rt.Cache, rt.Default
		return fallback.NewStream(cfg)
	})
	if err != nil {
		return nil, err
	}
	return &CompiledStream[In, Chunk]{Chain: chain, route: rt, plan: p}, nil
}

func (c StreamCandidate[In, Chunk]) describe() candidate {
	return candidate{c.Stage.Model, c.CostGroup, c.Attempts, c.Stage.Retry.MaxAttempts}
}

func (c StreamCandidate[In, Chunk]) stage(p *plan, i int, calls *callCount) fallback.StreamStage[In, Chunk] {
	st := c.Stage
	st.Retry = p.retry(i, st.Retry)
	if p.readOnly(i) && st.Tier != nil {
		st.Tier = readOnlyStream[In, Chunk]{inner: st.Tier}
	}
	// A stream stage has no InvalidOutputRetries: its validator's
	// rejection ends the stream. Each attempt may race a hedge.
	calls.add(st.Retry, hedges(st.Hedge), 0)
	return st
}

// Chains returns every route's chain, in the order of
// StreamConfig.Routes, for what watches them all (otelx.AttachRouter).
func (r *StreamRouter[In, Chunk]) Chains() []*fallback.StreamChain[In, Chunk] {
	return chains(r.t, func(c *CompiledStream[In, Chunk]) *fallback.StreamChain[In, Chunk] { return c.Chain })
}

// Lookup returns the stream route of a tenant's scenario, as
// Router.Lookup does.
func (r *StreamRouter[In, Chunk]) Lookup(tenant, scenario string) (*CompiledStream[In, Chunk], error) {
	return r.t.lookup(tenant, scenario)
}

// Stream prepares a streaming request through the route of the request's
// tenant and scenario, read from ctx's fallback.Request as Router.Do
// reads them. A lookup error comes back here, before anything is sent,
// so that a server can answer it before it starts its response.
func (r *StreamRouter[In, Chunk]) Stream(ctx context.Context, in In) (*Stream[In, Chunk], error) {
	req := fallback.RequestFrom(ctx)
	c, err := r.Lookup(req.Tenant, req.Scenario)
	if err != nil {
		return nil, err
	}
	return c.Stream(ctx, in), nil
}

// Stream prepares a streaming request through the route; nothing is sent
// until Chunks is ranged over.
func (c *CompiledStream[In, Chunk]) Stream(ctx context.Context, in In) *Stream[In, Chunk] {
	return &Stream[In, Chunk]{s: c.Chain.Stream(ctx, in), plan: c.plan}
}

// Stream is one routed streaming request: a fallback.Stream whose Result
// carries the route's verdicts.
type Stream[In, Chunk any] struct {
	s    *fallback.Stream[In, Chunk]
	plan *plan
}

// Chunks yields the answer's chunks, as fallback.Stream.Chunks does.
func (s *Stream[In, Chunk]) Chunks() iter.Seq2[Chunk, error] { return s.s.Chunks() }

// Result describes the stream, as fallback.Stream.Result does, with the
// route's verdicts. Inside the loop over Chunks it already says who is
// answering, from the first chunk on: a caller may mark the answer as
// degraded before showing it.
func (s *Stream[In, Chunk]) Result() StreamResult {
	res := StreamResult{StreamResult: s.s.Result()}
	res.ShowDegraded, res.ReadOnly = s.plan.verdicts(&res.Summary)
	return res
}

// StreamResult describes a routed stream.
type StreamResult struct {
	fallback.StreamResult
	// ShowDegraded is set when the route asks for a degraded answer to be
	// marked as such to the user (StreamRoute.MarkDegraded) and the chunks
	// shown came from a fallback, the cache or the default, whether or not
	// the stream then completed.
	ShowDegraded bool
	// ReadOnly is set when the chunks came from a candidate that could not
	// write (StreamRoute.ReadOnlyFallback).
	ReadOnly bool
}

// readOnlyStream wraps a fallback stream tier so that its streams see
// WritesAllowed false; what the tier reports (fallback.Report) passes
// through.
type readOnlyStream[In, Chunk any] struct {
	inner fallback.StreamTier[In, Chunk]
}

func (t readOnlyStream[In, Chunk]) Name() string { return t.inner.Name() }

func (t readOnlyStream[In, Chunk]) Stream(ctx context.Context, in In) iter.Seq2[Chunk, error] {
	return t.inner.Stream(readOnlyCtx{ctx}, in)
}

func (t readOnlyStream[In, Chunk]) Inspect(c Chunk) fallback.ChunkInfo { return t.inner.Inspect(c) }

// Unwrap lets the chain see the wrapped tier, as readOnly's does.
func (t readOnlyStream[In, Chunk]) Unwrap() any { return t.inner }
