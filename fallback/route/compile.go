package route

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/retry"
)

// What follows is the part of compiling a route that does not depend on
// the kind of its chain: New and NewStream check, split and look routes
// up with the same code, so that a table means the same for a unary
// route and for a stream route.

// policy is a Route's or a StreamRoute's settings that do not depend on
// its chain's kind.
type policy struct {
	scenario, tenant               string
	maxAttempts                    int
	fallback                       FallbackPolicy
	reserve                        Reservation
	markDegraded, readOnlyFallback bool
	// local is set when the route has a cache or a default.
	local bool
}

// candidate is what checking and pricing a route need of a candidate.
type candidate struct {
	model, group string
	// attempts is Candidate.Attempts; retry its Stage.Retry.MaxAttempts.
	attempts, retry int
}

// plan is what compiling decided of a route, whatever its chain's kind.
type plan struct {
	policy
	// attempts are each candidate's attempts; 0 keeps its stage's own.
	attempts []int
	// models and groups are the candidates' (for estimates); calls is
	// the most upstream calls a request may make (0: unbounded).
	models, groups []string
	calls          int
	ledger         *spend.Ledger
}

// newPlan checks a route's settings and splits its MaxAttempts among its
// candidates, or returns an error naming every invalid field.
func newPlan(p policy, cands []candidate, ledger *spend.Ledger) (*plan, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if strings.TrimSpace(p.scenario) == "" {
		bad("Scenario is required")
	}
	n := len(cands)
	switch {
	case n == 0:
		bad("at least one candidate is required")
	case p.fallback == FailClosed && n > 1:
		bad("a FailClosed route lets only its first candidate answer; it lists %d", n)
	}
	if p.fallback == FailClosed && p.local {
		bad("a FailClosed route answers from no cache and no default")
	}
	if p.fallback > FailClosed {
		bad("Fallback: unknown policy %d", p.fallback)
	}
	if p.reserve > ReserveWorstCase {
		bad("Reserve: unknown reservation %d", p.reserve)
	}
	if p.maxAttempts < 0 {
		bad("MaxAttempts must not be negative, got %d", p.maxAttempts)
	}
	pl := &plan{policy: p, attempts: make([]int, n), models: make([]string, n), groups: make([]string, n), ledger: ledger}
	set := 0
	for i, c := range cands {
		pl.models[i], pl.groups[i] = c.model, c.group
		switch {
		case c.attempts < 0:
			bad("Candidates[%d]: Attempts must not be negative, got %d", i, c.attempts)
		case c.attempts > 0:
			pl.attempts[i] = c.attempts
			set += c.attempts
		case p.maxAttempts > 0 && c.retry > 0:
			pl.attempts[i] = c.retry
			set += c.retry
		}
	}
	if p.maxAttempts > 0 && n > 0 {
		if err := split(pl.attempts, set, p.maxAttempts); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return pl, nil
}

// split shares what is left of limit, after the set attempts the
// candidates asked for, among those that asked for none: one each for
// the fallbacks, the rest for the first.
func split(attempts []int, set, limit int) error {
	left := limit - set
	for i := 1; i < len(attempts); i++ {
		if attempts[i] == 0 {
			attempts[i] = 1
			left--
		}
	}
	if attempts[0] == 0 {
		attempts[0] = left
	}
	total, least := 0, attempts[0]
	for _, a := range attempts {
		total += a
		least = min(least, a)
	}
	if total > limit || least < 1 {
		return fmt.Errorf("its candidates need %d attempts at least (%v), more than MaxAttempts %d", max(total, len(attempts)), attempts, limit)
	}
	return nil
}

// retry returns the retry policy of candidate i: its stage's, with the
// attempts the plan gave it.
func (p *plan) retry(i int, r retry.Policy) retry.Policy {
	if p.attempts[i] > 0 {
		r.MaxAttempts = p.attempts[i]
	}
	return r
}

// readOnly reports whether candidate i's tier must not write.
func (p *plan) readOnly(i int) bool { return i > 0 && p.readOnlyFallback }

// verdicts are the Result's flags for an answer summed up by sum.
func (p *plan) verdicts(sum *fallback.Summary) (showDegraded, readOnly bool) {
	return p.markDegraded && sum.Degraded, p.readOnlyFallback && sum.Source == fallback.SourceTier && sum.TierIndex > 0
}

// callCount adds up the most upstream calls a request may make, stage by
// stage.
type callCount struct {
	n         int
	unbounded bool
}

// add counts a stage whose retry policy is r: its attempts, twice when it
// hedges (each attempt may start one hedge), and extra calls made beyond
// them (a unary stage's InvalidOutputRetries).
func (c *callCount) add(r retry.Policy, hedged bool, extra int) {
	a := r.WithDefaults().MaxAttempts
	if a < 0 {
		c.unbounded = true
		return
	}
	if hedged {
		a *= 2
	}
	c.n += a + max(extra, 0)
}

// hedges reports whether a stage with h may start a second call per
// attempt.
func hedges(h fallback.Hedge) bool { return h.Delay > 0 || h.Quantile > 0 }

// candidateOf is a candidate of a route of either kind, whose stage is
// an S.
type candidateOf[S any] interface {
	// describe tells what checking and pricing the route need of it.
	describe() candidate
	// stage returns its stage as the plan has it — candidate i's attempts,
	// its tier read-only when the plan says — and counts its calls.
	stage(p *plan, i int, calls *callCount) S
}

// compileRoute compiles a route of either kind, whose policy is pol and
// candidates are cands: build makes its chain of the candidates' stages,
// which is attached to the ledger with the candidates' cost groups.
func compileRoute[C candidateOf[S], S any, K spend.Chain](pol policy, cands []C, ledger *spend.Ledger, build func([]S) (K, error)) (K, *plan, error) {
	var zero K
	desc := make([]candidate, len(cands))
	for i, c := range cands {
		desc[i] = c.describe()
	}
	p, err := newPlan(pol, desc, ledger)
	if err != nil {
		return zero, nil, err
	}
	stages := make([]S, len(cands))
	var calls callCount
	for i, c := range cands {
		stages[i] = c.stage(p, i, &calls)
	}
	if !calls.unbounded {
		p.calls = calls.n
	}
	if p.reserve == ReserveWorstCase && p.calls == 0 {
		// The message names the field at fault, as the other settings' do.
		return zero, nil, fmt.Errorf("%s: ReserveWorstCase needs a bounded number of calls, and a candidate's Stage.Retry.MaxAttempts is negative (no limit): set the route's MaxAttempts or the candidate's Attempts", "Reserve")
	}
	chain, err := build(stages)
	if err != nil {
		return zero, nil, err
	}
	if p.ledger != nil {
		// The chain's stages are the candidates, in order: the cost groups
		// line up.
		if _, err := p.ledger.Attach(chain, p.groups...); err != nil {
			return zero, nil, err
		}
	}
	return chain, p, nil
}

// estimate is Compiled.Estimate.
func (p *plan) estimate(u fallback.Usage) spend.Estimate {
	var est spend.Estimate
	var prices *spend.Prices
	if p.ledger != nil {
		prices = p.ledger.Prices()
	}
	for i, m := range p.models {
		e := spend.Estimate{Tokens: max(u.InputTokens, 0) + max(u.OutputTokens, 0)}
		if prices != nil {
			e = prices.Estimate(m, p.groups[i], u)
		}
		est.Tokens, est.Cost = max(est.Tokens, e.Tokens), max(est.Cost, e.Cost)
	}
	if p.reserve == ReserveWorstCase {
		n := int64(p.calls)
		est.Tokens = mulSat(est.Tokens, n)
		if est.Cost != spend.UnknownCost {
			est.Cost = spend.Amount(mulSat(int64(est.Cost), n))
		}
	}
	return est
}

// mulSat multiplies two non-negative int64, saturating.
func mulSat(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// table finds a compiled route, a T, by scenario and tenant.
type table[T any] struct {
	scenarios map[string]*scenario[T]
	// all are the compiled routes in the order of the config's Routes.
	all []*T
}

type scenario[T any] struct {
	def     *T
	tenants map[string]*T // nil when no tenant has a route of its own
}

// newTable compiles every route, whose policy policyOf tells, with
// compile. baseSet reports a Base that sets what belongs to each route.
func newTable[R, T any](routes []R, baseSet bool, policyOf func(R) policy, compile func(R) (*T, error)) (*table[T], error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if baseSet {
		bad("Base: Stages, Total, Cache and Default belong to each route")
	}
	t := &table[T]{scenarios: map[string]*scenario[T]{}}
	for i, rt := range routes {
		p := policyOf(rt)
		name := fmt.Sprintf("Routes[%d] (%s)", i, label(p.scenario, p.tenant))
		c, err := compile(rt)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		t.all = append(t.all, c)
		sc := t.scenarios[p.scenario]
		if sc == nil {
			sc = &scenario[T]{}
			t.scenarios[p.scenario] = sc
		}
		switch {
		case p.tenant == "" && sc.def != nil, p.tenant != "" && sc.tenants[p.tenant] != nil:
			bad("%s: declared twice", name)
		case p.tenant == "":
			sc.def = c
		default:
			if sc.tenants == nil {
				sc.tenants = map[string]*T{}
			}
			sc.tenants[p.tenant] = c
		}
	}
	if len(routes) == 0 {
		bad("at least one route is required")
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("route: invalid config: %w", err)
	}
	return t, nil
}

// label names a route in configuration errors, without its tenant.
func label(scenario, tenant string) string {
	if tenant == "" {
		return "scenario " + quote(scenario)
	}
	return "scenario " + quote(scenario) + ", a tenant's route"
}

// lookup is Router.Lookup.
func (t *table[T]) lookup(tenant, scenario string) (*T, error) {
	sc := t.scenarios[scenario]
	if sc == nil {
		return nil, &LookupError{Scenario: scenario, Tenant: tenant, err: ErrUnknownScenario}
	}
	if sc.tenants != nil {
		if c := sc.tenants[tenant]; c != nil {
			return c, nil
		}
	}
	if sc.def == nil {
		return nil, &LookupError{Scenario: scenario, Tenant: tenant, err: ErrNoRoute}
	}
	return sc.def, nil
}

// chains returns the chain of every compiled route, in order.
func chains[T, C any](t *table[T], chain func(*T) C) []C {
	out := make([]C, len(t.all))
	for i, c := range t.all {
		out[i] = chain(c)
	}
	return out
}
