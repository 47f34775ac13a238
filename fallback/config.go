package fallback

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// Defaults applied to zero fields of Config and StreamConfig.
const (
	defaultMinAttempt       = 100 * time.Millisecond
	defaultQuotaCooldown    = time.Minute
	defaultMaxQuotaCooldown = time.Hour
	defaultRetiredRecheck   = 10 * time.Minute
)

// Stage attaches guards to a tier. The chain wraps every stage as
// bulkhead → breaker → retry → call, in that fixed order: retries live
// inside the breaker, so one request counts once toward tripping it, and
// the breaker inside the bulkhead, so an open circuit frees the slot at
// once.
type Stage[In, Out any] struct {
	// Tier answers the request. Required.
	Tier ModelTier[In, Out]
	// Model is the tier's model id ("gemini-2.5-pro"), used for preflight
	// against Config.Catalog, for retirement after a 404, and reported to
	// observers as gen_ai.request.model. Optional.
	Model string
	// ModelFor, when set, names the model a call for in will use ("" for
	// Model) — a batch job that names its model, a tier over several
	// model versions — so that a 404 marks that model retired, not the
	// whole tier, and a later input for the same model is skipped without
	// an upstream call while other models on the tier are still called.
	ModelFor func(in In) string
	// Provider names the API for observers ("gcp.gemini", "openai"),
	// reported as gen_ai.provider.name. Empty means the tier's, when it
	// implements EndpointReporter (the SDK adapters' tiers do).
	Provider string

	// Bulkhead bounds the tier's calls in flight; nil means unbounded.
	Bulkhead *bulkhead.Bulkhead
	// Breaker stops calls to a failing tier; nil means none. The class
	// table decides how each failure counts, so a breaker whose
	// Config.Outcome is set is refused.
	Breaker *breaker.Breaker
	// Retry is the tier's retry policy; the zero value retries transient
	// failures twice with full jitter. Set MaxAttempts to 1 to disable.
	// Its OnAttempt hook sees every attempt the chain makes on the tier.
	// Which classes retry is the chain's Table's; how errors classify, the
	// stage's Classifier.
	Retry retry.Policy
	// Classifier classifies this tier's errors; nil means the chain's.
	Classifier classify.Classifier
	// TryTimeout caps each attempt; 0 means an attempt may use all the time
	// the reserve leaves.
	TryTimeout time.Duration
	// MinAttempt is the least time worth starting an attempt on this tier
	// with, and the floor of the reserve earlier tiers keep for it. 0
	// means Config.MinAttempt.
	MinAttempt time.Duration
	// Reserve is the time this tier's attempts leave for later tiers. 0
	// means what the later tiers need: for each of them, a high quantile
	// of its observed latency (successful calls, and calls cut short by
	// the deadline), bounded by its MinAttempt and its TryTimeout, plus a
	// tenth; a later tier whose breaker is open or that is parked needs
	// nothing; the later tiers never observed yet share half of what
	// remains after the others' needs (see the package doc, One deadline).
	// Negative means none.
	Reserve time.Duration
	// Validate checks the tier's answers; a rejected answer moves on to the
	// next tier and does not count against the breaker. nil accepts all.
	Validate validate.Validator[Out]

	// MaxRetryWait is the longest server-requested delay (a 429's
	// RetryInfo or Retry-After) a request waits for before retrying this
	// tier, while a later tier can take it: a longer delay sends the
	// request to the next tier at once (retry.DelayTooLong on the trail),
	// where waiting would hold it while a healthy tier idles. The last
	// tier that can serve waits whatever fits the budget: after it only
	// the cache and the default remain. 0 means 1s; negative means no cap
	// but the budget. Raise it for a fallback that is much worse than
	// waiting; the price is latency, up to the cap, on every 429.
	MaxRetryWait time.Duration
	// CoolDown decides when a 429 with a server delay takes the tier out
	// of rotation for every request, not just the one that got it (see
	// CoolDown); the zero value applies the defaults. A Pool judges each
	// member by it too, unless the member has its own.
	CoolDown CoolDown

	// Tokens estimates the tokens a call for in will use (prompt and
	// answer), for the tier's decorators that count tokens: rate limits
	// (ratelimit.Tier) and pool members' limiters read it from the call's
	// record (Record.Estimate) and correct it with the usage the answer
	// reports. nil counts no tokens.
	Tokens func(in In) int64

	// InvalidOutputRetries, when positive, retries an answer the
	// validator rejected (InvalidOutput) on the same tier up to this many
	// times before moving to the next tier. Each retry is an attempt in the
	// trail and for observers; none counts against the breaker, the retry
	// policy's attempts or its budget.
	InvalidOutputRetries int
	// Reprompt, when set, adjusts the input before each retry of an
	// invalid answer (say, "answer in valid JSON"); err is the validator's
	// rejection.
	Reprompt func(in In, err error) In

	// Hedge, when enabled, starts a second attempt when the first is slow:
	// on another member of the tier's Pool, or else on the next tier —
	// behind that tier's breaker and bulkhead, neither of them
	// waiting (a hedge that cannot start at once is looked at again every
	// quarter of the delay while the first call runs). The first valid
	// answer wins and the other call is cancelled; each breaker counts the
	// request once, and a call that lost the race counts for nothing (a
	// first call that had failed while its hedge ran counts its failure; a
	// half-open probe that lost to another member of its own pool counts
	// the tier's answer). A loser keeps its bulkhead slot and probe until
	// it returns. A hedged attempt's calls run on goroutines of their own:
	// Config.AbandonAfter applies to them as to any call, and a panic or
	// runtime.Goexit in either is raised again on the caller's goroutine
	// (a panic as a *PanicError with its stack). (StreamStage.Hedge races streams to
	// their first chunk with content.)
	//
	// A hedge is a call like any other: it starts only when the time the
	// request has left, less what the later tiers are owed (Reserve), is
	// at least its tier's MinAttempt (100 ms by default) — with a 100 ms
	// Total, a hedge 10 ms in does not start. When its tier then makes no
	// call (its pool has no other member in rotation, its limiter refuses
	// the turn), it is a skip marked Hedge on the trail and a TierSkip,
	// never an upstream call.
	Hedge Hedge
}

// Hedge configures hedged attempts. It is enabled when Delay or Quantile
// is set.
type Hedge struct {
	// Delay is how long the first attempt runs alone before the hedge
	// starts. With Quantile, it is the delay used until the tier's latency
	// has been observed, and the least the quantile may give.
	Delay time.Duration
	// Quantile, within (0, 1), starts the hedge at that quantile of the
	// tier's observed latency (successful attempts): 0.9 hedges the
	// slowest tenth.
	Quantile float64
	// MaxExtra bounds the extra calls hedging adds, as a share of the
	// tier's attempts (0.1: at most one hedge per ten attempts, shared by
	// every request, plus a bank of twenty that a burst may spend at once),
	// so that hedging cannot multiply load during an outage. 0 means 0.1.
	MaxExtra float64
}

func (h Hedge) enabled() bool { return h.Delay > 0 || h.Quantile > 0 }

// Config configures a Chain.
type Config[In, Out any] struct {
	// Operation names what the chain does, for observers
	// (gen_ai.operation.name: "generate_content", "chat"). Defaults to
	// "generate_content".
	Operation string
	// Stages are the tiers, in order of preference. At least one.
	Stages []Stage[In, Out]
	// Total caps each request's time, every attempt and fallback included;
	// the context's deadline applies too, and the earlier wins. 0 means the
	// context's deadline only.
	Total time.Duration
	// MinAttempt is the default Stage.MinAttempt. 0 means 100ms.
	MinAttempt time.Duration

	// Table overrides the class table — each class's whole behaviour:
	// retry, breaker, route and park. nil means classify.DefaultTable().
	Table *classify.Table
	// Classifier classifies tier errors; nil means classify.Classify. SDK
	// adapters provide one that knows their error types.
	Classifier classify.Classifier

	// Cache answers after every tier failed, and is given every tier
	// answer that passed validation.
	Cache Cache[In, Out]
	// Default answers last, from the input alone.
	Default func(ctx context.Context, in In) (Out, bool)

	// Catalog, when set, lets the chain skip tiers whose model is not
	// served, without an upstream call.
	Catalog Catalog
	// QuotaCooldown is how long a tier whose quota is exhausted is parked
	// at least. The server's retry-after, when longer, extends it, up to
	// MaxQuotaCooldown. 0 means 1m.
	QuotaCooldown time.Duration
	// MaxQuotaCooldown caps a quota's parking however long the server
	// asked to wait ("try again in 114h"): a parked tier costs at most one
	// upstream call per MaxQuotaCooldown, and notices a raised quota
	// within it. 0 means 1h.
	MaxQuotaCooldown time.Duration
	// RetiredRecheck is how long a model that answered 404 is skipped when
	// there is no Catalog to say when it is back. 0 means 10m.
	RetiredRecheck time.Duration

	// Key, when set, returns an idempotency key for a request; requests
	// with the same non-empty key that are in flight together share one
	// execution, and each receives its result. A waiter whose own deadline
	// passes first is answered from the cache or the default; once every
	// waiter has left, the execution is cancelled and a later request
	// starts afresh. The key never appears in errors or signals.
	Key func(in In) string

	// Observer receives every decision; see also Chain.Observe.
	Observer Observer
	// MeasureLatency times every attempt even without an observer (two
	// clock reads per attempt).
	MeasureLatency bool

	// AbandonAfter, when positive, protects the request from tiers that
	// ignore their context: each call runs on its own goroutine, and once
	// the attempt's context has ended the chain waits at most AbandonAfter
	// more before it abandons the call, classifies it Transient ("call
	// abandoned") and moves on. The abandoned call keeps its bulkhead slot
	// until it really returns — a half-open probe keeps its probe slot too,
	// and reports its failure then — and Chain.Stats counts it, so a stuck
	// call is accounted for instead of leaked silently. 0 (the default) calls
	// tiers directly: no goroutine, no allocation, and a tier that ignores
	// its context holds the request.
	AbandonAfter time.Duration
}

// shared are the settings both kinds of chain have.
type shared struct {
	op                       string
	total, minAttempt        time.Duration
	table                    *classify.Table
	classifier               classify.Classifier
	catalog                  Catalog
	quotaPark, maxQuotaPark  time.Duration
	retirePark, abandonAfter time.Duration
	observer                 Observer
	measure                  bool
	stream                   bool
}

// stageSpec is what compiling a stage needs, for either kind of chain.
type stageSpec struct {
	name, model, provider string
	address               string
	port                  int
	bulkhead              *bulkhead.Bulkhead
	breaker               *breaker.Breaker
	retry                 retry.Policy
	classifier            classify.Classifier
	cap, minAttempt       time.Duration
	capName               string
	reserve, idle         time.Duration
	nilTier               bool
	invalidRetries        int
	hedge                 Hedge
	maxRetryWait          time.Duration
	coolDown              CoolDown
	// members are the breakers of the tier's members (a pool's).
	members []*breaker.Breaker
	// outdated names the methods of a contract the chain no longer
	// calls that the tier (or a tier it wraps) still has, each with what
	// to write instead.
	outdated []string
}

// outdatedMethod is a method of a tier contract the chain no longer
// calls: a tier that still has it was written for an earlier release, and
// what it meant to say (usage to bill, the model a call used) would be
// silently lost. A method of the same name and another signature is the
// tier's own business.
type outdatedMethod struct {
	name    string
	arg     reflect.Type
	results []reflect.Type
	instead string
}

// on reports whether t has the method, with its signature.
func (m outdatedMethod) on(t reflect.Type) bool {
	f, ok := t.MethodByName(m.name)
	// A method of a concrete type takes its receiver first.
	if !ok || f.Type.NumIn() != 2 || f.Type.In(1) != m.arg || f.Type.NumOut() != len(m.results) {
		return false
	}
	for i, r := range m.results {
		if f.Type.Out(i) != r {
			return false
		}
	}
	return true
}

// outdatedMethods are the removed contracts of a tier whose answers (or
// chunks) are of type T and whose input is In (see CHANGELOG.md): prefix
// is "" for a unary tier, "Chunk" for a streaming one. A ModelFor method
// is outdated only on a stage without a ModelFor of its own (modelFor
// unset): with one, the stage knows each call's model, and the method may
// well be what it was set to.
func outdatedMethods[In, T any](prefix string, modelFor bool) []outdatedMethod {
	usage, info, ok := reflect.TypeFor[Usage](), reflect.TypeFor[ResponseInfo](), reflect.TypeFor[bool]()
	report := "call fallback.Report(ctx, fallback.Reply{...}) in Call, once per response"
	if prefix != "" {
		report = "call fallback.Report once as the stream's sequence returns, with what its chunks said"
	}
	ms := []outdatedMethod{
		{name: prefix + "Usage", arg: reflect.TypeFor[T](), results: []reflect.Type{usage, ok}, instead: report},
		{name: prefix + "Response", arg: reflect.TypeFor[T](), results: []reflect.Type{info, ok}, instead: report},
	}
	if !modelFor {
		ms = append(ms, outdatedMethod{name: "ModelFor", arg: reflect.TypeFor[In](), results: []reflect.Type{reflect.TypeFor[string]()},
			instead: "set the stage's ModelFor (to the method itself, if it still says the model)"})
	}
	return ms
}

// outdatedOf lists the outdated methods tier has, itself or any tier it
// wraps (Unwrap), however deep.
func outdatedOf(tier any, methods []outdatedMethod) []string {
	var found []string
	seen := make([]bool, len(methods))
	for range 64 {
		t := reflect.TypeOf(tier)
		for j, m := range methods {
			if !seen[j] && m.on(t) {
				seen[j] = true
				found = append(found, fmt.Sprintf("method %s (on %v), which the chain no longer calls: %s", m.name, t, m.instead))
			}
		}
		u, ok := tier.(interface{ Unwrap() any })
		if !ok {
			break
		}
		tier = u.Unwrap()
	}
	return found
}

func (cfg *Config[In, Out]) shared() shared {
	return shared{
		op: cfg.Operation, total: cfg.Total, minAttempt: cfg.MinAttempt, table: cfg.Table, classifier: cfg.Classifier,
		catalog: cfg.Catalog, quotaPark: cfg.QuotaCooldown, maxQuotaPark: cfg.MaxQuotaCooldown,
		retirePark: cfg.RetiredRecheck, abandonAfter: cfg.AbandonAfter, observer: cfg.Observer, measure: cfg.MeasureLatency,
	}
}

func (cfg *Config[In, Out]) specs() []stageSpec {
	specs := make([]stageSpec, len(cfg.Stages))
	for i, s := range cfg.Stages {
		specs[i] = stageSpec{
			model: s.Model, provider: s.Provider, bulkhead: s.Bulkhead, breaker: s.Breaker, retry: s.Retry,
			classifier: s.Classifier, cap: s.TryTimeout, capName: "TryTimeout", minAttempt: s.MinAttempt, reserve: s.Reserve, nilTier: s.Tier == nil,
			invalidRetries: s.InvalidOutputRetries, hedge: s.Hedge, maxRetryWait: s.MaxRetryWait, coolDown: s.CoolDown,
		}
		if s.Tier != nil {
			specs[i].name = s.Tier.Name()
			specs[i].endpoint(s.Tier)
			specs[i].outdated = outdatedOf(s.Tier, outdatedMethods[In, Out]("", s.ModelFor != nil))
		}
	}
	return specs
}

// endpoint fills the provider (when the stage leaves it empty) and the
// server from a tier that reports its endpoint, and the breakers of a
// tier's members (a pool's), from the tier or from the tier a decorator
// wraps (Unwrap), however deep.
func (s *stageSpec) endpoint(tier any) {
	var r EndpointReporter
	for range 64 {
		if m, ok := tier.(interface{ MemberBreakers() []*breaker.Breaker }); ok && s.members == nil {
			s.members = m.MemberBreakers()
		}
		if e, ok := tier.(EndpointReporter); ok && r == nil {
			r = e
		}
		u, ok := tier.(interface{ Unwrap() any })
		if !ok {
			break
		}
		tier = u.Unwrap()
	}
	if r == nil {
		return
	}
	ep := r.Endpoint()
	if s.provider == "" {
		s.provider = ep.Provider
	}
	s.address, s.port = ep.Address, ep.Port
}

// check reports every invalid setting of a chain's config at once.
func check(kind string, sh shared, specs []stageSpec) error {
	var errs []error
	if len(specs) == 0 {
		errs = append(errs, errors.New("at least one stage is required"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Total", sh.total}, {"MinAttempt", sh.minAttempt}, {"QuotaCooldown", sh.quotaPark},
		{"MaxQuotaCooldown", sh.maxQuotaPark}, {"RetiredRecheck", sh.retirePark}, {"AbandonAfter", sh.abandonAfter}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("negative %s %v", d.name, d.v))
		}
	}
	if sh.maxQuotaPark > 0 && sh.quotaPark > sh.maxQuotaPark {
		errs = append(errs, fmt.Errorf("QuotaCooldown %v exceeds MaxQuotaCooldown %v", sh.quotaPark, sh.maxQuotaPark))
	}
	names := map[string]bool{}
	for i, s := range specs {
		if s.nilTier {
			errs = append(errs, fmt.Errorf("stage %d: Tier is required", i))
			continue
		}
		switch {
		case s.name == "":
			errs = append(errs, fmt.Errorf("stage %d: tier name is empty", i))
		case names[s.name]:
			errs = append(errs, fmt.Errorf("stage %d: tier name %q is used twice", i, s.name))
		}
		names[s.name] = true
		for _, d := range []struct {
			name string
			v    time.Duration
		}{{s.capName, s.cap}, {"MinAttempt", s.minAttempt}, {"IdleTimeout", s.idle}, {"Hedge.Delay", s.hedge.Delay}} {
			if d.v < 0 {
				errs = append(errs, fmt.Errorf("stage %d (%s): negative %s %v", i, s.name, d.name, d.v))
			}
		}
		for _, m := range s.outdated {
			errs = append(errs, fmt.Errorf("stage %d (%s): tier has %s", i, s.name, m))
		}
		if s.invalidRetries < 0 {
			errs = append(errs, fmt.Errorf("stage %d (%s): negative InvalidOutputRetries %d", i, s.name, s.invalidRetries))
		}
		if q := s.hedge.Quantile; q != 0 && !(q > 0 && q < 1) {
			errs = append(errs, fmt.Errorf("stage %d (%s): Hedge.Quantile must be within (0, 1), got %v", i, s.name, q))
		}
		if x := s.hedge.MaxExtra; !(x >= 0 && x <= 1) {
			errs = append(errs, fmt.Errorf("stage %d (%s): Hedge.MaxExtra must be within [0, 1], got %v", i, s.name, x))
		}
		if err := s.retry.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("stage %d (%s): %w", i, s.name, err))
		}
		if err := s.coolDown.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("stage %d (%s): %w", i, s.name, err))
		}
		if s.breaker != nil && customOutcome(s.breaker) {
			errs = append(errs, fmt.Errorf("stage %d (%s): breaker %q has a Config.Outcome, which a chain cannot honour: the class table decides how a failure counts", i, s.name, s.breaker.Name()))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("fallback: invalid %s: %w", kind, err)
	}
	return nil
}

// customOutcome reports whether a breaker was given its own Outcome
// function rather than the default.
func customOutcome(b *breaker.Breaker) bool {
	f := b.Config().Outcome
	return f != nil && reflect.ValueOf(f).Pointer() != reflect.ValueOf(breaker.OutcomeOf).Pointer()
}

// PickByHash returns a Config.Default that answers with one of answers,
// chosen by a stable hash of key(in): the same input always gets the same
// default, and different inputs spread over the list.
func PickByHash[In, Out any](answers []Out, key func(In) string) func(context.Context, In) (Out, bool) {
	answers = append([]Out(nil), answers...)
	return func(_ context.Context, in In) (Out, bool) {
		if len(answers) == 0 {
			var zero Out
			return zero, false
		}
		// FNV-1a: stable across processes and releases, unlike maphash.
		h := uint64(14695981039346656037)
		k := key(in)
		for i := 0; i < len(k); i++ {
			h ^= uint64(k[i])
			h *= 1099511628211
		}
		return answers[h%uint64(len(answers))], true
	}
}
