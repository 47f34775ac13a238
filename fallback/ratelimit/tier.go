package ratelimit

import (
	"context"
	"iter"
	"time"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/internal/budget"
)

// TierConfig says which limiters a tier's calls take their turn from.
type TierConfig[In any] struct {
	// Limiter keeps the tier's calls under its quota (requests and tokens
	// per minute). A 429 (RateLimited) throttles it for the wait the
	// server asked for and lowers its rate until calls pass again. nil
	// means none.
	Limiter *Limiter
	// PerRequest, when set, returns the limiter of the request's tenant
	// (or feature) on this tier — typically a Group's Get of
	// fallback.RequestFrom(ctx).Tenant — so that one tenant cannot spend
	// another's share of the tier's quota. It may return nil. Its turn is
	// taken before Limiter's.
	PerRequest func(ctx context.Context, in In) *Limiter
	// MaxWait is the longest a call waits for its turn. A wait is decided
	// before it starts, like a retry: only when it leaves the call its
	// stage's MinAttempt before the attempt's deadline. 0 never waits: a
	// tier over its limit is skipped at once.
	MaxWait time.Duration
}

// Tier returns t behind the limiters of cfg. Each call takes its turn —
// for the tokens of the stage's estimate (fallback.Stage.Tokens), from the
// request's limiter and then the tier's — just before it calls t, or
// within the wait it may still make (MaxWait, and what the attempt's
// deadline leaves after its MinAttempt): a limiter whose turn does not
// come in time takes nothing, so callers contending for the last turns
// lose none of them. When one refuses, the turns the others took are
// given back and the call returns a *fallback.SkipError (SkipRateLimited)
// wrapping a *LimitedError that says when to come back: the chain skips
// the tier without an upstream call, as it does a parked one. A call whose
// estimate exceeds a limiter's TokenBurst can never be admitted: it is
// skipped as SkipTooLarge instead, its *LimitedError marked TooLarge
// (ErrTooLarge), and a chain whose every tier skips it so fails closed
// rather than answer from the cache or the default. Once t has
// answered, the limiters' token counts are corrected with the usage its
// responses reported (fallback.Report).
//
// Put the limited tier in the stage, or in a pool member when each key has
// its own quota (pool.Member.Limiter). A hedge on the next tier takes its
// turn the same way.
//
// Tier panics when t is nil or MaxWait is negative: a configuration error.
func Tier[In, Out any](t fallback.ModelTier[In, Out], cfg TierConfig[In]) fallback.ModelTier[In, Out] {
	cfg.check(t == nil)
	return &limitedTier[In, Out]{t: t, cfg: cfg}
}

func (c *TierConfig[In]) check(nilTier bool) {
	switch {
	case nilTier:
		panic("ratelimit: Tier of a nil tier")
	case c.MaxWait < 0:
		panic("ratelimit: TierConfig.MaxWait is negative: " + c.MaxWait.String())
	}
}

type limitedTier[In, Out any] struct {
	t   fallback.ModelTier[In, Out]
	cfg TierConfig[In]
}

func (l *limitedTier[In, Out]) Name() string { return l.t.Name() }

// Unwrap returns the limited tier, for what the chain reads of it (its
// Endpoint).
func (l *limitedTier[In, Out]) Unwrap() any { return l.t }

func (l *limitedTier[In, Out]) Call(ctx context.Context, in In) (Out, error) {
	rec := fallback.RecordOf(ctx)
	g, err := l.cfg.take(ctx, rec, in, l.t.Name())
	if err != nil {
		var zero Out
		return zero, err
	}
	before, _ := rec.Tokens()
	out, err := l.t.Call(ctx, in)
	g.settle(ctx, rec, before, err)
	return out, err
}

// StreamTier returns t behind the limiters of cfg, as Tier does for a
// unary tier: each attempt to start a stream takes its turn, and the usage
// the stream reports by its end corrects the token estimate.
func StreamTier[In, Chunk any](t fallback.StreamTier[In, Chunk], cfg TierConfig[In]) fallback.StreamTier[In, Chunk] {
	cfg.check(t == nil)
	return &limitedStream[In, Chunk]{t: t, cfg: cfg}
}

type limitedStream[In, Chunk any] struct {
	t   fallback.StreamTier[In, Chunk]
	cfg TierConfig[In]
}

func (l *limitedStream[In, Chunk]) Name() string                       { return l.t.Name() }
func (l *limitedStream[In, Chunk]) Unwrap() any                        { return l.t }
func (l *limitedStream[In, Chunk]) Inspect(c Chunk) fallback.ChunkInfo { return l.t.Inspect(c) }

func (l *limitedStream[In, Chunk]) Stream(ctx context.Context, in In) iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		rec := fallback.RecordOf(ctx)
		g, err := l.cfg.take(ctx, rec, in, l.t.Name())
		if err != nil {
			var zero Chunk
			yield(zero, err)
			return
		}
		before, _ := rec.Tokens()
		var last error
		defer func() { g.settle(ctx, rec, before, last) }()
		for c, err := range l.t.Stream(ctx, in) {
			last = err
			if !yield(c, err) {
				return
			}
		}
	}
}

// turns are the turns one call took.
type turns struct {
	lims  [2]*Limiter
	res   [2]Reservation
	cost  int64
	tier  *Limiter
	rules fallback.Rules
}

// take takes the call's turns, waiting when that fits; tier names the
// tier for a refusal's SkipError.
func (c *TierConfig[In]) take(ctx context.Context, rec *fallback.Record, in In, tier string) (turns, error) {
	g := turns{tier: c.Limiter, cost: rec.Estimate(), rules: rec.Rules()}
	if c.PerRequest != nil {
		g.lims[0] = c.PerRequest(ctx, in)
	}
	g.lims[1] = c.Limiter
	if g.lims[0] == nil && g.lims[1] == nil {
		return g, nil
	}
	var waited time.Duration
	refused := func(err *LimitedError) error {
		// No upstream call: the chain skips the tier — as too large when
		// no wait would ever admit the call.
		rec.Waited(waited)
		rec.CountCalls()
		skip := fallback.SkipRateLimited
		if err.TooLarge {
			skip = fallback.SkipTooLarge
		}
		return &fallback.SkipError{Tier: tier, Skip: skip, Cause: err}
	}
	for {
		wait := c.waitLeft(ctx, g.rules, waited)
		var delay time.Duration
		by, again := 0, false
		for i, l := range g.lims {
			if l == nil {
				continue
			}
			g.res[i] = l.TakeWithin(g.cost, wait)
			if !g.res[i].OK() {
				g.cancel()
				return g, refused(&LimitedError{Name: l.Name(), TooLarge: !l.Admissible(g.cost)})
			}
			if g.res[i].Retry() {
				// A fleet's refusal: nothing held by this one; give back
				// the others' and wait it out if that fits.
				d := g.res[i].Delay()
				g.cancel()
				if d > wait {
					return g, refused(&LimitedError{Name: l.Name(), RetryIn: d})
				}
				if err := budget.Sleep(ctx, d); err != nil {
					rec.Waited(waited + d)
					return g, err
				}
				waited += d
				again = true
				break
			}
			if d := g.res[i].Delay(); d > delay {
				delay, by = d, i
			}
		}
		switch {
		case again:
			continue
		case delay == 0:
			rec.Waited(waited)
			return g, nil
		case delay > c.waitLeft(ctx, g.rules, waited):
			// Scheduling ate the margin the turns were taken within.
			g.cancel()
			return g, refused(&LimitedError{Name: g.lims[by].Name(), RetryIn: delay})
		}
		if err := budget.Sleep(ctx, delay); err != nil {
			g.cancel()
			rec.Waited(waited + delay)
			return g, err
		}
		rec.Waited(waited + delay)
		return g, nil
	}
}

// waitLeft is the longest the call may still wait for its turns: what is
// left of MaxWait, and no more than leaves the stage's MinAttempt before
// the attempt's deadline.
func (c *TierConfig[In]) waitLeft(ctx context.Context, rules fallback.Rules, waited time.Duration) time.Duration {
	wait := c.MaxWait - waited
	if wait <= 0 {
		return 0
	}
	if d, ok := ctx.Deadline(); ok {
		left := time.Until(d) - max(rules.MinAttempt, 1)
		if left <= 0 {
			return 0
		}
		wait = min(wait, left)
	}
	return wait
}

// cancel gives back the turns of a call that is not made.
func (g *turns) cancel() {
	for i, r := range g.res {
		if r.OK() {
			r.Cancel()
		}
		g.res[i] = Reservation{}
	}
}

// settle tells the limiters how the call went: the tokens its responses
// reported since before, and a 429's throttle.
func (g *turns) settle(ctx context.Context, rec *fallback.Record, before int64, err error) {
	if g.lims[0] == nil && g.lims[1] == nil {
		return
	}
	if after, ok := rec.Tokens(); ok {
		if delta := after - before - g.cost; delta != 0 {
			for _, l := range g.lims {
				if l != nil {
					l.Adjust(delta)
				}
			}
		}
	}
	if g.tier == nil {
		return
	}
	if err == nil {
		g.tier.Passed()
		return
	}
	if ctx.Err() != nil {
		return
	}
	if v := g.rules.Classifier.Classify(err); v.Class == classify.RateLimited {
		g.tier.Throttle(v.RetryAfter)
	}
}
