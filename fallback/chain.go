package fallback

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/internal/budget"
	"github.com/tierguard/tierguard/validate"
)

// Chain answers requests from a list of model tiers, then a cache, then a
// default, all inside one deadline. Build it once with New and share it:
// it is safe for concurrent use, and Do keeps its per-call state on the
// stack.
type Chain[In, Out any] struct {
	base[In]
	tiers      []ModelTier[In, Out]
	validators []validate.Validator[Out]
	usages     []UsageReporter[Out]
	cache      Cache[In, Out]
	writer     CacheWriter[In, Out]
	def        func(context.Context, In) (Out, bool)
	key        func(In) string

	flightMu sync.Mutex
	flights  map[string]*flight[Out]
}

// New compiles a chain from cfg, or returns an error naming every invalid
// field.
func New[In, Out any](cfg Config[In, Out]) (*Chain[In, Out], error) {
	e, err := newEngine("config", cfg.shared(), cfg.specs())
	if err != nil {
		return nil, err
	}
	c := &Chain[In, Out]{
		base: newBase[In](e, len(cfg.Stages)), tiers: make([]ModelTier[In, Out], len(cfg.Stages)), validators: make([]validate.Validator[Out], len(cfg.Stages)),
		usages: make([]UsageReporter[Out], len(cfg.Stages)),
		cache:  cfg.Cache, def: cfg.Default, key: cfg.Key, flights: make(map[string]*flight[Out]),
	}
	for i, s := range cfg.Stages {
		c.tiers[i], c.validators[i] = s.Tier, s.Validate
		c.usages[i], _ = s.Tier.(UsageReporter[Out])
		c.selectors[i], _ = s.Tier.(ModelSelector[In])
	}
	c.writer, _ = cfg.Cache.(CacheWriter[In, Out])
	return c, nil
}

// Do answers in. It tries each tier in order — preflight, bulkhead,
// breaker, then attempts with retries — inside one deadline, then the cache,
// then the default. On failure the error is an *Error that wraps every
// tier's error; a fail-closed class (Auth, Safety, InvalidRequest,
// Canceled by default) returns at once with its cause.
//
// A panic in a tier propagates to the caller after the tier's bulkhead slot
// and probe are released.
func (c *Chain[In, Out]) Do(ctx context.Context, in In) (Result[Out], error) {
	if c.key != nil && ctx.Value(inFlight{}) == nil {
		if k := c.key(in); k != "" {
			return c.shared(ctx, k, in)
		}
	}
	var r request
	c.begin(ctx, &r)
	if r.obs != nil {
		defer c.endOnPanic(&r)
	}
	var res Result[Out]
	var last classify.Verdict
	for i := range c.stages {
		st := &c.stages[i]
		model := c.modelFor(i, in)
		out, h, end := runStage(c.engine, c, &r, st, model, in)
		if end.err == nil {
			c.exit(&r, st, &h, breaker.Success)
			c.answeredBy(&r, st, i > 0)
			if c.writer != nil {
				c.writer.Put(r.ctx, in, out)
			}
			c.end(&r, nil, classify.Verdict{}, 0)
			return Result[Out]{Value: out, Summary: r.sum}, nil
		}
		last = end.verdict
		switch end.route {
		case classify.RouteFailClosed:
			return c.fail(&r, &res, end.verdict, true)
		case classify.RouteLocal:
			return c.local(&r, &res, in, end.verdict)
		}
	}
	return c.local(&r, &res, in, last)
}

// attempt makes one call and validates its answer.
func (c *Chain[In, Out]) attempt(st *stage, b budget.Budget, base context.Context, per, remaining time.Duration, in In, tok breaker.Token) (out Out, end attemptEnd) {
	ctx, ctl := b.Context(base, per, remaining)
	tier := c.tiers[st.index]
	if c.abandonAfter > 0 {
		// A call is a stream of one answer, read on its own goroutine.
		src := read(c.engine, st, ctx, func(yield func(Out, error) bool) { yield(tier.Call(ctx, in)) }, tok)
		out, end.err, _ = src.next()
		end.abandoned = src.stop()
	} else {
		out, end.err = tier.Call(ctx, in)
	}
	if ctl != nil {
		end.timedOut = end.err != nil && ctl.Expired()
		ctl.Cancel()
	}
	if end.err == nil {
		if v := c.validators[st.index]; v != nil {
			if verr := v.Validate(out); verr != nil {
				end.err = asInvalidOutput(verr)
			}
		}
	}
	return out, end
}

// usage reads the token usage of an answer.
func (c *Chain[In, Out]) usage(st *stage, out Out) (Usage, bool) {
	if u := c.usages[st.index]; u != nil {
		return u.Usage(out)
	}
	return Usage{}, false
}

// committed is false: a call's success is its end.
func (c *Chain[In, Out]) committed() bool { return false }

// local answers from the cache or the default after the tiers failed.
func (c *Chain[In, Out]) local(r *request, res *Result[Out], in In, last classify.Verdict) (Result[Out], error) {
	defer r.finish()
	cause, canceled := c.localCause(r, last)
	if canceled {
		return c.fail(r, res, cause, true)
	}
	if out, src, hit, ok := c.localAnswer(r.localContext(), in); ok {
		res.Value = out
		c.localAnswered(r, src, hit)
		c.end(r, nil, classify.Verdict{}, 0)
		res.Summary = r.sum
		return *res, nil
	}
	return c.fail(r, res, cause, false)
}

// localAnswer asks the cache, then the default.
func (c *Chain[In, Out]) localAnswer(ctx context.Context, in In) (Out, Source, CacheHit, bool) {
	return lookup(ctx, c.cache, c.def, in)
}

// lookup asks a cache, then a default, for in.
func lookup[In, T any](ctx context.Context, cache Cache[In, T], def func(context.Context, In) (T, bool), in In) (T, Source, CacheHit, bool) {
	if m, ok := cache.(CacheMatcher[In, T]); ok {
		if out, hit, ok := m.Match(ctx, in); ok {
			return out, SourceCache, hit, true
		}
	} else if cache != nil {
		if out, ok := cache.Get(ctx, in); ok {
			return out, SourceCache, CacheHitUnknown, true
		}
	}
	if def != nil {
		if out, ok := def(ctx, in); ok {
			return out, SourceDefault, CacheHitUnknown, true
		}
	}
	var zero T
	return zero, SourceTier, CacheHitUnknown, false
}

// fail ends the request with its *Error.
func (c *Chain[In, Out]) fail(r *request, res *Result[Out], cause classify.Verdict, closed bool) (Result[Out], error) {
	err := c.failure(r, cause, closed)
	var zero Out
	res.Value = zero
	c.end(r, err, cause, 0)
	res.Summary = r.sum
	return *res, err
}

// asInvalidOutput makes sure a validator's err classifies as InvalidOutput:
// a *validate.Error is returned as is, anything else is wrapped in one of
// rule "custom" whose text does not repeat err's (a custom validator may
// quote the answer).
func asInvalidOutput(err error) error {
	var ve *validate.Error
	if errors.As(err, &ve) {
		return err
	}
	return &validate.Error{Rule: "custom", Reason: "rejected by a custom validator", Err: err}
}
