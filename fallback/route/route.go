package route

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/spend"
)

// Candidate is one tier a route may call, with the cost group it is billed
// in.
type Candidate[In, Out any] struct {
	// Stage is the tier with its guards. Share a stage's Breaker and
	// Bulkhead between routes that call the same model: one outage trips
	// it once for every route.
	Stage fallback.Stage[In, Out]
	// CostGroup is the group the tier is billed in ("" for the list
	// price), for the ledger.
	CostGroup string
	// Attempts caps the calls to this candidate per request; 0 means the
	// Stage's Retry.MaxAttempts, or the candidate's share of the route's
	// MaxAttempts when that is set.
	Attempts int
}

// FallbackPolicy says who may answer when the first candidate cannot.
type FallbackPolicy uint8

const (
	// AllowFallback lets the later candidates, then the cache and the
	// default, answer.
	AllowFallback FallbackPolicy = iota
	// FailClosed lets only the first candidate answer: no other model, no
	// cache, no default. For scenarios whose answers a generic fallback
	// must never stand in for (risk decisions, medical advice).
	FailClosed
)

// String returns "allow_fallback" or "fail_closed".
func (p FallbackPolicy) String() string {
	if p == FailClosed {
		return "fail_closed"
	}
	return "allow_fallback"
}

// Reservation says how much of a tenant's limits a route's estimate
// (Compiled.Estimate) reserves while a request runs. A request that pays
// for several calls (a rejected answer, then a fallback) spends more than
// one call, so each mode gives its own bound on a tenant's spending. The
// bounds hold in one process, for requests admitted with that estimate
// (spend.Ledger.Admit) whose calls each use at most the usage the
// estimate was made for; with a spend.Store, add what the other
// processes admit between exchanges. Write n for the most calls a
// request may make (Compiled.Calls), c for one call on the route's
// dearest candidate, L for the limit and k for the most requests of the
// tenant in flight at once.
type Reservation uint8

const (
	// ReserveOne, the default, reserves one call on the dearest
	// candidate (c). It admits the most requests near the limit, and the
	// tenant may spend past its limit by what requests in flight spend
	// beyond their reservation: at most k·(n−1)·c past L.
	ReserveOne Reservation = iota
	// ReserveWorstCase reserves every call the route may make on its
	// dearest candidate (n·c): the tenant never spends past L. Near the
	// limit it admits fewer requests (each holds n times more while it
	// runs), and requests that answer at the first call release the rest
	// when they end. The route's calls must be bounded: New refuses a
	// candidate whose retry policy sets no limit (a negative MaxAttempts)
	// in such a route.
	ReserveWorstCase
)

var reservationNames = [...]string{ReserveOne: "reserve_one", ReserveWorstCase: "reserve_worst_case"}

// String returns "reserve_one" or "reserve_worst_case".
func (r Reservation) String() string {
	if int(r) < len(reservationNames) {
		return reservationNames[r]
	}
	return "invalid_reservation"
}

// Route is the chain a tenant's requests of one scenario run through.
type Route[In, Out any] struct {
	// Scenario names what the requests are for ("support",
	// "contract_extraction", "batch_seo"). Required.
	Scenario string
	// Tenant, when set, restricts the route to one tenant; the route with
	// an empty Tenant serves every tenant of the scenario without a route
	// of its own.
	Tenant string
	// Candidates are the tiers in order of preference. At least one.
	Candidates []Candidate[In, Out]
	// Total caps each request's time, every attempt and fallback
	// included. 0 means the context's deadline only.
	Total time.Duration
	// MaxAttempts, when positive, caps the upstream calls of a request,
	// every candidate together: New refuses a route whose candidates'
	// attempts add up to more. Candidates without Attempts share what is
	// left: one each for the fallbacks, the rest for the first.
	MaxAttempts int
	// Fallback says whether anything but the first candidate may answer.
	Fallback FallbackPolicy
	// Reserve says what the route's estimate reserves: one call on its
	// dearest candidate (ReserveOne, the default) or every call it may
	// make (ReserveWorstCase). See Reservation for the bound each gives.
	Reserve Reservation
	// MarkDegraded tells the caller, in Result.ShowDegraded, to mark a
	// fallback answer as degraded to the user.
	MarkDegraded bool
	// ReadOnlyFallback forbids writes and tool calls with side effects to
	// every candidate but the first: their tiers see WritesAllowed(ctx)
	// false, and Result.ReadOnly says the answer came from one.
	ReadOnlyFallback bool
	// Cache and Default answer after the candidates (not on a FailClosed
	// route).
	Cache   fallback.Cache[In, Out]
	Default func(ctx context.Context, in In) (Out, bool)
}

// Config configures a Router.
type Config[In, Out any] struct {
	// Routes are the routes, each (Tenant, Scenario) once.
	Routes []Route[In, Out]
	// Base holds the settings every route's chain shares (Operation,
	// Classifier, Table, Catalog, Observer, MinAttempt, AbandonAfter...).
	// Its Stages, Total, Cache and Default must be empty: each route sets
	// its own.
	Base fallback.Config[In, Out]
	// Ledger, when set, is attached to every route's chain, with the
	// candidates' cost groups.
	Ledger *spend.Ledger
}

// Router picks a compiled chain by tenant and scenario. Build it once with
// New: every route's chain is compiled then, and a lookup costs a map
// access and allocates nothing. It is safe for concurrent use.
type Router[In, Out any] struct {
	t *table[Compiled[In, Out]]
}

// Compiled is one route, compiled.
type Compiled[In, Out any] struct {
	// Chain is the route's chain.
	Chain *fallback.Chain[In, Out]
	route Route[In, Out]
	plan  *plan
}

// Route returns the route the chain was compiled from.
func (c *Compiled[In, Out]) Route() Route[In, Out] { return c.route }

// Estimate returns what a request expected to use u (per call) is
// reserved, per the ledger's prices and the route's Reserve: one call on
// the route's dearest candidate (ReserveOne), or Calls calls on it
// (ReserveWorstCase). See Reservation for the bound each gives. Without
// a ledger or prices it counts tokens only. A candidate whose model the
// prices do not price makes the cost spend.UnknownCost, and a tenant
// with a cost limit is refused the request (spend.UnpricedPolicy).
func (c *Compiled[In, Out]) Estimate(u fallback.Usage) spend.Estimate { return c.plan.estimate(u) }

// Calls returns the most upstream calls a request of the route may make
// (n in Reservation's bounds), 0 when a candidate's retry policy sets no
// limit. Each candidate counts its attempts (Candidate.Attempts, its share
// of MaxAttempts, or its Stage's Retry.MaxAttempts, 3 by default), plus
// its Stage's InvalidOutputRetries, and twice its attempts when it hedges
// (each attempt may start one hedge). A pool member's quota or credential
// failure moves to the next member outside the retry policy; such a
// failure is an error, billed nothing, and is not counted.
func (c *Compiled[In, Out]) Calls() int { return c.plan.calls }

// Errors of Lookup, matched with errors.Is.
var (
	// ErrUnknownScenario: no route names the scenario. A configuration
	// error: there is no default route for scenarios nobody declared.
	ErrUnknownScenario = errors.New("route: unknown scenario")
	// ErrNoRoute: the scenario has routes, but none for the tenant and no
	// route for every tenant.
	ErrNoRoute = errors.New("route: no route for the tenant")
)

// LookupError is why Lookup found no route. Its text names the scenario
// (a configuration name) but never the tenant.
type LookupError struct {
	// Scenario and Tenant are what was looked up.
	Scenario, Tenant string
	err              error
}

// Error names the scenario.
func (e *LookupError) Error() string {
	if e.err == ErrUnknownScenario {
		return "route: unknown scenario " + quote(e.Scenario)
	}
	return "route: scenario " + quote(e.Scenario) + " has no route for the tenant"
}

// Unwrap returns ErrUnknownScenario or ErrNoRoute.
func (e *LookupError) Unwrap() error { return e.err }

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// New compiles every route's chain, or returns an error naming every
// invalid route and field.
func New[In, Out any](cfg Config[In, Out]) (*Router[In, Out], error) {
	b := cfg.Base
	t, err := newTable(cfg.Routes, len(b.Stages) > 0 || b.Total != 0 || b.Cache != nil || b.Default != nil,
		Route[In, Out].policy, func(rt Route[In, Out]) (*Compiled[In, Out], error) { return compile(b, cfg.Ledger, rt) })
	if err != nil {
		return nil, err
	}
	return &Router[In, Out]{t: t}, nil
}

func (rt Route[In, Out]) policy() policy {
	return policy{rt.Scenario, rt.Tenant, rt.MaxAttempts, rt.Fallback, rt.Reserve, rt.MarkDegraded, rt.ReadOnlyFallback, rt.Cache != nil || rt.Default != nil}
}

// compile builds one route's chain.
func compile[In, Out any](base fallback.Config[In, Out], ledger *spend.Ledger, rt Route[In, Out]) (*Compiled[In, Out], error) {
	chain, p, err := compileRoute(rt.policy(), rt.Candidates, ledger, func(stages []fallback.Stage[In, Out]) (*fallback.Chain[In, Out], error) {
		// newPlan refused a cache or a default on a FailClosed route.
		cfg := base
		cfg.Stages, cfg.Total, cfg.Cache, cfg.Default = stages, rt.Total, rt.Cache, rt.Default
		return fallback.New(cfg)
	})
	if err != nil {
		return nil, err
	}
	return &Compiled[In, Out]{Chain: chain, route: rt, plan: p}, nil
}

func (c Candidate[In, Out]) describe() candidate {
	return candidate{c.Stage.Model, c.CostGroup, c.Attempts, c.Stage.Retry.MaxAttempts}
}

func (c Candidate[In, Out]) stage(p *plan, i int, calls *callCount) fallback.Stage[In, Out] {
	st := c.Stage
	st.Retry = p.retry(i, st.Retry)
	if p.readOnly(i) && st.Tier != nil {
		st.Tier = readOnly[In, Out]{inner: st.Tier}
	}
	calls.add(st.Retry, hedges(st.Hedge), st.InvalidOutputRetries)
	return st
}

// Chains returns every route's chain, in the order of Config.Routes, for
// what watches them all (otelx.InstrumentRouter).
func (r *Router[In, Out]) Chains() []*fallback.Chain[In, Out] {
	return chains(r.t, func(c *Compiled[In, Out]) *fallback.Chain[In, Out] { return c.Chain })
}

// Lookup returns the route of a tenant's scenario: the tenant's own, or
// the scenario's route for every tenant. A scenario nobody declared is an
// error (ErrUnknownScenario), never a default route.
func (r *Router[In, Out]) Lookup(tenant, scenario string) (*Compiled[In, Out], error) {
	return r.t.lookup(tenant, scenario)
}

// Result is a routed request's answer.
type Result[Out any] struct {
	fallback.Result[Out]
	// ShowDegraded is set when the route asks for a degraded answer to be
	// marked as such to the user (Route.MarkDegraded) and the answer is
	// degraded.
	ShowDegraded bool
	// ReadOnly is set when the answer came from a candidate that could not
	// write (Route.ReadOnlyFallback).
	ReadOnly bool
}

// Do runs in through the route of the request's tenant and scenario, read
// from ctx's fallback.Request (fallback.WithRequest, or the spend.Ticket
// of spend.Ledger.Admit): the tenant the route is chosen for is the one the
// ledger bills and the cache isolates.
func (r *Router[In, Out]) Do(ctx context.Context, in In) (Result[Out], error) {
	req := fallback.RequestFrom(ctx)
	tenant, scenario := req.Tenant, req.Scenario
	c, err := r.Lookup(tenant, scenario)
	if err != nil {
		return Result[Out]{}, err
	}
	return c.Do(ctx, in)
}

// Do runs in through the route.
func (c *Compiled[In, Out]) Do(ctx context.Context, in In) (Result[Out], error) {
	res, err := c.Chain.Do(ctx, in)
	out := Result[Out]{Result: res}
	if err == nil {
		out.ShowDegraded, out.ReadOnly = c.plan.verdicts(&res.Summary)
	}
	return out, err
}

// readOnlyKey marks a context whose tier may not write.
type readOnlyKey struct{}

// readOnlyCtx is a context that says writes are not allowed.
type readOnlyCtx struct{ context.Context }

func (c readOnlyCtx) Value(key any) any {
	if key == (readOnlyKey{}) {
		return true
	}
	return c.Context.Value(key)
}

// WritesAllowed reports whether the tier that received ctx may write or
// make tool calls with side effects: false on a fallback candidate of a
// route with ReadOnlyFallback. A tier with side effects checks it before
// acting.
func WritesAllowed(ctx context.Context) bool {
	ro, _ := ctx.Value(readOnlyKey{}).(bool)
	return !ro
}

// readOnly wraps a fallback tier so that its calls see WritesAllowed
// false; what the tier reports (fallback.Report) passes through.
type readOnly[In, Out any] struct{ inner fallback.ModelTier[In, Out] }

func (t readOnly[In, Out]) Name() string { return t.inner.Name() }

func (t readOnly[In, Out]) Call(ctx context.Context, in In) (Out, error) {
	return t.inner.Call(readOnlyCtx{ctx}, in)
}

// Unwrap lets the chain see the wrapped tier: its endpoint, and the
// breakers of a pool's members, which otelx watches.
func (t readOnly[In, Out]) Unwrap() any { return t.inner }
