package pool

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/bits"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/ratelimit"
	"github.com/tierguard/tierguard/internal/keyed"
	"github.com/tierguard/tierguard/internal/park"
	"github.com/tierguard/tierguard/internal/subscribers"
)

// errAllAuth is the failure of a pool whose every member is out for its
// credentials: it fails closed, as Auth on a single tier does.
var errAllAuth = classify.Wrap(errors.New("tierguard: every member of the pool was refused for its credentials"),
	classify.Verdict{Class: classify.Auth, Reason: "every pool member refused for its credentials"})

// maxPoolMembers bounds a pool, so that a request's tried members fit one
// word.
const maxPoolMembers = 64

// defaultAuthCooldown is how long a member refused for its credentials
// stays out when PoolConfig.AuthCooldown is 0.
const defaultAuthCooldown = 10 * time.Minute

// Balance says how a pool chooses among its healthy members.
type Balance uint8

const (
	// LeastInFlight picks the member with the fewest calls in flight (ties
	// go round the members).
	LeastInFlight Balance = iota
	// Weighted spreads calls over the members in proportion to their
	// Weight.
	Weighted
)

// String names the balance.
func (b Balance) String() string {
	switch b {
	case LeastInFlight:
		return "least_in_flight"
	case Weighted:
		return "weighted"
	}
	return "invalid_balance"
}

// Member is one deployment behind a pool tier: an API key, a project, a
// region, an endpoint serving the same model.
type Member[In, Out any] struct {
	// Key identifies the member — typically its API key. It never appears
	// in errors or signals: the member is named "#" and the first 12 hex
	// digits of its SHA-256. Required, unique within the pool.
	Key string
	// Tier makes the member's calls. Required.
	Tier fallback.ModelTier[In, Out]
	// Breaker and Limiter are the member's own; nil means none. The
	// stage's own Breaker, if any, still counts the request once.
	Breaker *breaker.Breaker
	Limiter *ratelimit.Limiter
	// Weight is the member's share with Weighted balance; 0 means 1.
	Weight int
	// CoolDown, when set, decides for this member when its 429s take it
	// out of rotation for every request (see fallback.CoolDown); nil
	// means the stage's (fallback.Stage.CoolDown), or the defaults
	// outside a chain. A member on a key of its own with a quota of its
	// own may warrant a rule of its own.
	CoolDown *fallback.CoolDown
}

// Config configures a Pool.
type Config[In, Out any] struct {
	// Name is the tier's name. Required.
	Name string
	// Members are the deployments, at least one and at most 64.
	Members []Member[In, Out]
	// Balance chooses among healthy members; LeastInFlight by default.
	Balance Balance
	// LatencyAware weighs each member's calls in flight by its observed
	// latency, so a slower region gets fewer calls.
	LatencyAware bool
	// Sticky, when set, returns a request key (a conversation, a user)
	// whose requests go to the same member while it is healthy — for
	// prompt-cache affinity. "" means no affinity for that request.
	Sticky func(in In) string
	// AuthCooldown is how long a member refused for its credentials (Auth)
	// is kept out before it is tried again; 0 means 10m. Restore brings it
	// back at once.
	AuthCooldown time.Duration
}

// Pool is a tier backed by several members of the same model. Each call
// picks a member — healthy (breaker not open, not parked, not refused),
// within its own rate limit, balanced — and acts per member where that is
// right: a 429 or an exhausted quota on one member moves the call to the
// next member at once, before the chain's next tier, and an Auth failure
// takes that member out (reported to Observe and on the request's trail)
// instead of failing the request closed while healthy members remain;
// Auth on every member still fails closed.
//
// A Pool is a tier like any other: it reports each member call to the
// chain through the call's record (fallback.RecordOf), so that the trail and the events name
// the member (by a hash of its key), show each rotation as an upstream
// call of its own, and count upstream calls right — whatever wraps the
// pool (chaos.Tier, MapTier, a route), as long as the wrapper passes its
// context on. Inside a chain it classifies with the stage's classifier and
// table and parks members for the chain's quota cooldowns; a hedge on the
// stage (Stage.Hedge) goes to another member. Called on its own, Call
// picks and rotates the same way, with the default classifier and table.
// Streams gives the pool a stream side, over the same members and the
// same state.
type Pool[In, Out any] struct {
	p      *pool
	tiers  []fallback.ModelTier[In, Out]
	sticky func(In) string
}

// pool is a Pool's state that does not depend on its types.
type pool struct {
	name         string
	members      []poolMember
	balance      Balance
	latencyAware bool
	authCooldown time.Duration
	totalWeight  int
	epoch        time.Time
	next         atomic.Uint64

	observers subscribers.List[func(MemberEvent)]
}

type poolMember struct {
	id string
	// sum is the SHA-256 of the member's key, which Streams matches a
	// stream tier's key against without the pool keeping the key.
	sum      [sha256.Size]byte
	breaker  *breaker.Breaker
	limiter  *ratelimit.Limiter
	weight   int
	inflight atomic.Int64
	// latency is a moving average of the member's successful calls, in
	// nanoseconds; 0 until one is seen.
	latency atomic.Int64
	park.Lot
	// tally is the evidence of the member's recent 429s; coolDown its own
	// rule, with defaults, when it has one.
	tally    park.Tally
	coolDown *fallback.CoolDown
}

// New returns a pool tier, or an error naming every invalid field.
func New[In, Out any](cfg Config[In, Out]) (*Pool[In, Out], error) {
	specs, tiers := split(cfg.Members, func(m Member[In, Out]) (memberSpec, fallback.ModelTier[In, Out]) {
		return memberSpec{key: m.Key, hasTier: m.Tier != nil, breaker: m.Breaker, limiter: m.Limiter, weight: m.Weight, coolDown: m.CoolDown}, m.Tier
	})
	p, err := newPool(poolSpec{name: cfg.Name, balance: cfg.Balance, latencyAware: cfg.LatencyAware, authCooldown: cfg.AuthCooldown}, specs)
	if err != nil {
		return nil, err
	}
	return &Pool[In, Out]{p: p, tiers: tiers, sticky: cfg.Sticky}, nil
}

// split is what New and NewStream check of their members, and the
// members' tiers, in order.
func split[M, T any](members []M, of func(M) (memberSpec, T)) ([]memberSpec, []T) {
	specs, tiers := make([]memberSpec, len(members)), make([]T, len(members))
	for i, m := range members {
		specs[i], tiers[i] = of(m)
	}
	return specs, tiers
}

// poolSpec and memberSpec are a pool's settings as New and NewStream
// check them, whatever the types of its members' tiers.
type poolSpec struct {
	name         string
	balance      Balance
	latencyAware bool
	authCooldown time.Duration
}

type memberSpec struct {
	key      string
	hasTier  bool
	breaker  *breaker.Breaker
	limiter  *ratelimit.Limiter
	weight   int
	coolDown *fallback.CoolDown
}

// newPool checks a pool's settings and builds its state, or returns an
// error naming every invalid field.
func newPool(s poolSpec, members []memberSpec) (*pool, error) {
	var errs []error
	if s.name == "" {
		errs = append(errs, errors.New("Name is required"))
	}
	if n := len(members); n == 0 || n > maxPoolMembers {
		errs = append(errs, fmt.Errorf("Members must hold 1 to %d members, got %d", maxPoolMembers, n))
	}
	if s.balance > Weighted {
		errs = append(errs, fmt.Errorf("invalid Balance %d", s.balance))
	}
	if s.authCooldown < 0 {
		errs = append(errs, fmt.Errorf("negative AuthCooldown %v", s.authCooldown))
	}
	p := &pool{name: s.name, balance: s.balance, latencyAware: s.latencyAware,
		authCooldown: cmp.Or(s.authCooldown, defaultAuthCooldown), epoch: time.Now()}
	p.members = make([]poolMember, len(members))
	seen := map[string]bool{}
	for i, m := range members {
		id := "#" + keyed.Hash(m.key)
		switch {
		case m.key == "":
			errs = append(errs, fmt.Errorf("member %d: Key is required", i))
		case seen[m.key]:
			errs = append(errs, fmt.Errorf("member %d (%s): Key is used twice", i, id))
		}
		seen[m.key] = true
		if !m.hasTier {
			errs = append(errs, fmt.Errorf("member %d (%s): Tier is required", i, id))
		}
		if m.weight < 0 {
			errs = append(errs, fmt.Errorf("member %d (%s): negative Weight %d", i, id, m.weight))
		}
		if m.coolDown != nil {
			if err := m.coolDown.Validate(); err != nil {
				errs = append(errs, fmt.Errorf("member %d (%s): %w", i, id, err))
			}
		}
		if m.breaker != nil && customOutcome(m.breaker) {
			errs = append(errs, fmt.Errorf("member %d (%s): breaker %q has a Config.Outcome, which a chain cannot honour", i, id, m.breaker.Name()))
		}
		pm := &p.members[i]
		pm.id, pm.sum, pm.breaker, pm.limiter, pm.weight = id, sha256.Sum256([]byte(m.key)), m.breaker, m.limiter, max(m.weight, 1)
		if m.coolDown != nil {
			c := m.coolDown.WithDefaults()
			pm.coolDown = &c
		}
		p.totalWeight += pm.weight
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("pool: invalid pool %q: %w", s.name, err)
	}
	return p, nil
}

// customOutcome reports whether b decides outcomes itself: a chain's
// class table decides them for a member's breaker, as for a stage's.
func customOutcome(b *breaker.Breaker) bool {
	f := b.Config().Outcome
	return f != nil && reflect.ValueOf(f).Pointer() != reflect.ValueOf(breaker.OutcomeOf).Pointer()
}

// Name returns the pool's tier name.
func (p *Pool[In, Out]) Name() string { return p.p.name }

// Call answers in from one member, rotating to the next member after a
// 429, an exhausted quota or an Auth failure. When no member can take the
// call (every breaker open, every member parked or over its rate limit)
// it makes no upstream call and returns a *SkipError; when every member
// was refused for its credentials, an error of class Auth.
func (p *Pool[In, Out]) Call(ctx context.Context, in In) (Out, error) {
	rec := fallback.RecordOf(ctx)
	rules := rec.Rules()
	tokens := rec.Estimate()
	rec.CountCalls()
	tried := p.p.avoided(rec)
	key := stickyKey(p.sticky, in)
	m, tok, probe, why := p.p.enter(key, tried, tokens)
	if m < 0 {
		return *new(Out), p.p.none(why)
	}
	// mixed is set once a member's wrapper refused the call for a reason
	// other than its size: the pool is then not one that can never admit
	// it.
	mixed := false
	for {
		tried |= 1 << m
		out, v, latency, err := p.callMember(ctx, rec, m, tok, probe, rules, tokens, in)
		next := -1
		if refused(err) {
			// The member's own wrapper made no call: the next member is
			// tried, with no rotation to tell.
			large := errors.Is(err, fallback.ErrTooLarge)
			mixed = mixed || !large
			if next, tok, probe, why = p.p.enter(key, tried, tokens); next < 0 {
				if large && (mixed || why != outTooLarge && bits.OnesCount64(tried) < len(p.p.members)) {
					// Too large for this member, not for the pool.
					return out, &fallback.SkipError{Tier: p.p.name, Skip: fallback.SkipRateLimited, Cause: err}
				}
				return out, err
			}
			m = next
			continue
		}
		if err != nil && rotates(v.Class) && ctx.Err() == nil {
			// The next member is taken before the failure is reported as a
			// rotation: a rotation is followed by a call, so the failure
			// is told once, as a rotation or as the attempt's end, never
			// both.
			next, tok, probe, _ = p.p.enter(key, tried, tokens)
		}
		if next < 0 {
			if err != nil && (v.Class == classify.QuotaExhausted || v.Class == classify.RateLimited) {
				// The failure is this member's: it is parked, cooling down,
				// or its 429 was its request's own; the tier is not.
				rec.MemberFailed()
			}
			return out, err
		}
		ctx = rec.Rotated(ctx, err, v, latency)
		m = next
	}
}

// callMember makes one call on member m, holding its breaker token tok,
// and settles it: the member's breaker, limiter, latency and parking.
func (p *Pool[In, Out]) callMember(ctx context.Context, rec *fallback.Record, m int, tok breaker.Token, probe int64, rules fallback.Rules, tokens int64, in In) (Out, classify.Verdict, time.Duration, error) {
	defer p.p.members[m].EndProbe(probe)
	rec.Member(p.p.members[m].id)
	before, _ := rec.Tokens()
	start := time.Now()
	settled := false
	defer func() {
		if !settled {
			// A panic: free the member without deciding anything.
			p.p.done(m, tok, classify.Verdict{Class: classify.Canceled, Reason: "the call panicked"}, breaker.Ignored, 0, rules, false)
		}
	}()
	out, err := p.tiers[m].Call(ctx, in)
	latency := time.Since(start)
	if refused(err) {
		settled = true
		rec.NoCall()
		p.p.free(m, tok)
		return out, classify.Verdict{}, 0, err
	}
	v, o := outcome(rules, ctx, err)
	if l := p.p.members[m].limiter; l != nil && err == nil {
		if after, ok := rec.Tokens(); ok {
			if delta := after - before - tokens; delta != 0 {
				l.Adjust(delta)
			}
		}
	}
	settled = true
	p.p.done(m, tok, v, o, latency, rules, probe != 0)
	return out, v, latency, err
}

// outcome classifies a member's call and says how it counts for the
// member's breaker. A call whose context was cancelled (a hedge race
// lost, the caller gone) says nothing of the member; one that outlived
// its deadline failed, even if it answered late.
func outcome(r fallback.Rules, ctx context.Context, err error) (classify.Verdict, breaker.Outcome) {
	cerr := ctx.Err()
	switch {
	case err == nil && cerr == nil:
		return classify.Verdict{}, breaker.Success
	case errors.Is(cerr, context.Canceled):
		return classify.Verdict{Class: classify.Canceled, Reason: "call cancelled"}, breaker.Ignored
	case cerr != nil:
		return classify.Verdict{Class: classify.Transient, Reason: "member call past its deadline"}, breaker.Failure
	}
	v := r.Classifier.Classify(err)
	if r.Table.Action(v.Class).BreakerFailure {
		return v, breaker.Failure
	}
	return v, breaker.Ignored
}

// stickyKey is the request key of in, "" without affinity.
func stickyKey[In any](sticky func(In) string, in In) string {
	if sticky == nil {
		return ""
	}
	return sticky(in)
}

// avoided is the set of members a call must not take: for a hedge, the
// member the first call holds.
func (p *pool) avoided(rec *fallback.Record) (tried uint64) {
	if avoid := rec.Avoid(); avoid != "" {
		if i := p.index(avoid); i >= 0 {
			tried = 1 << i
		}
	}
	return tried
}

// none is the failure of a call no member could take, why being what
// enter said: a skip, which makes no upstream call, or Auth when every
// member was refused for its credentials.
func (p *pool) none(why uint8) error {
	if why == outAuth {
		return errAllAuth
	}
	return &fallback.SkipError{Tier: p.name, Skip: fallback.Skip(why)}
}

// rotates reports whether a member's failure of class c sends the request
// to another member first.
func rotates(c classify.Class) bool {
	return c == classify.RateLimited || c == classify.QuotaExhausted || c == classify.Auth
}

// MemberInfo describes a pool member.
type MemberInfo struct {
	// ID is the member's name: "#" and a short hash of its key.
	ID string
	// Out says why the member is out of rotation now (SkipQuota after an
	// exhausted quota, SkipAuth after its credentials were refused);
	// NotSkipped when it is in.
	Out MemberOut
	// InFlight is its calls in flight now.
	InFlight int
	// Breaker is its breaker's state, when it has one.
	Breaker    breaker.State
	HasBreaker bool
}

// MemberOut says why a pool member is out of rotation.
type MemberOut uint8

const (
	// MemberIn: the member is in rotation.
	MemberIn MemberOut = iota
	// MemberQuota: its quota is exhausted; it is parked.
	MemberQuota
	// MemberAuth: its credentials were refused (401, 403, an invalid key).
	MemberAuth
	// MemberCooling: the server answered 429 with a time to come back
	// (RetryInfo, Retry-After), and the evidence says the key's quota is
	// spent for every caller (fallback.CoolDown); it is out until then.
	MemberCooling
)

var memberOutNames = [...]string{MemberIn: "in", MemberQuota: "quota", MemberAuth: "auth", MemberCooling: "cooling"}

// String names the reason.
func (o MemberOut) String() string {
	if int(o) < len(memberOutNames) {
		return memberOutNames[o]
	}
	return "invalid"
}

// Members describes the pool's members, in order.
func (p *Pool[In, Out]) Members() []MemberInfo { return p.p.describe() }

func (p *pool) describe() []MemberInfo {
	out := make([]MemberInfo, len(p.members))
	for i := range p.members {
		m := &p.members[i]
		out[i] = MemberInfo{ID: m.id, Out: m.out(p.epoch), InFlight: int(m.inflight.Load())}
		if m.breaker != nil {
			out[i].Breaker, out[i].HasBreaker = m.breaker.State(), true
		}
	}
	return out
}

// MemberBreakers returns the members' own breakers, in order, those that
// have one: a chain lists them in its stage's StageInfo, and
// instrumentation (otelx.Watch) watches them with the stage.
func (p *Pool[In, Out]) MemberBreakers() []*breaker.Breaker { return p.p.breakers() }

func (p *pool) breakers() []*breaker.Breaker {
	var out []*breaker.Breaker
	for i := range p.members {
		if b := p.members[i].breaker; b != nil {
			out = append(out, b)
		}
	}
	return out
}

// Restore puts the member named id back in rotation at once (say, after
// its key was replaced), and reports whether there was one.
func (p *Pool[In, Out]) Restore(id string) bool { return p.p.restore(id) }

func (p *pool) restore(id string) bool {
	if i := p.index(id); i >= 0 {
		p.members[i].Clear()
		p.tell(MemberEvent{Pool: p.name, Member: id, Out: MemberIn})
		return true
	}
	return false
}

// MemberEvent reports a pool member leaving or rejoining rotation.
type MemberEvent struct {
	// Pool and Member name the pool and the member.
	Pool, Member string
	// Out says why it left (MemberQuota, MemberAuth, MemberCooling), or
	// MemberIn when it is back by Restore.
	Out MemberOut
	// For is how long it stays out.
	For time.Duration
	// Rule says which evidence took it out, for MemberCooling: a
	// per-minute quota named, a storm of 429s, a failed probe.
	Rule fallback.CoolRule
	// Verdict is the failure that took it out.
	Verdict classify.Verdict
}

// Observe hands every member leaving or rejoining rotation to fn, and
// returns the function that stops it. A member refused for its
// credentials is a configuration error to fix: alert on MemberAuth. The
// events of a pool with a stream side (Streams) come from both sides'
// calls, and reach what either side's Observe was given.
func (p *Pool[In, Out]) Observe(fn func(MemberEvent)) (remove func()) {
	return p.p.observers.Add(fn)
}

func (p *pool) tell(e MemberEvent) {
	for _, fn := range p.observers.Load() {
		fn(e)
	}
}

// out says why m is out of rotation now.
func (m *poolMember) out(epoch time.Time) MemberOut {
	switch m.Check(epoch) {
	case outQuota:
		return MemberQuota
	case outAuth:
		return MemberAuth
	case outCooling:
		return MemberCooling
	}
	return MemberIn
}

// A member's reasons to be out of rotation, as its park.Lot holds them:
// the stage's skip reasons where a skip follows (a pool with no member
// left is skipped for the last one's), and outAuth, which is never a
// stage's skip (every member refused fails closed instead).
const (
	outOpen    = uint8(fallback.SkipOpen)
	outQuota   = uint8(fallback.SkipQuota)
	outCooling = uint8(fallback.SkipRateLimited)
	// outTooLarge: every member's limiter can never admit the call (its
	// tokens exceed their TokenBurst).
	outTooLarge = uint8(fallback.SkipTooLarge)
	outAuth     = uint8(255)
)

// enter picks a member for a call — not in tried, in rotation, its breaker
// admitting it, its limiter admitting tokens now — and takes its breaker
// token and a place in flight. m is -1 when none can serve; why says what
// kept the last candidate out (SkipRateLimited, SkipQuota, SkipOpen),
// outTooLarge when no member's limiter could ever admit the call, or
// outAuth when every member is out for its credentials. probe is set
// when the call is the one let through at the end of the member's
// cool-down (done ends its hold).
func (p *pool) enter(key string, tried uint64, tokens int64) (m int, tok breaker.Token, probe int64, why uint8) {
	n := len(p.members)
	why = outOpen
	auth, tooLarge := 0, 0
	for range n {
		m = p.choose(key, tried)
		if m < 0 {
			break
		}
		tried |= 1 << m
		pm := &p.members[m]
		if pm.limiter != nil && !pm.limiter.Admissible(tokens) {
			// Never this member, whatever its state: no wait admits it.
			// Over its limit, if another member could take it.
			tooLarge++
			why = outCooling
			continue
		}
		out, held := pm.Enter(p.epoch)
		switch out {
		case outAuth:
			auth++
			continue
		case outQuota, outCooling:
			why = out
			continue
		}
		if pm.breaker != nil {
			t, err := pm.breaker.Allow()
			if err != nil {
				pm.EndProbe(held)
				why = outOpen
				continue
			}
			tok = t
		}
		if pm.limiter != nil && !pm.limiter.Allow(tokens) {
			pm.EndProbe(held)
			tok.Done(breaker.Ignored)
			tok, why = breaker.Token{}, outCooling
			continue
		}
		pm.inflight.Add(1)
		return m, tok, held, park.None
	}
	switch {
	case auth == n:
		why = outAuth
	case tooLarge == n:
		why = outTooLarge
	}
	return -1, breaker.Token{}, 0, why
}

// choose returns the best member not in tried (regardless of health:
// enter checks it), or -1.
func (p *pool) choose(key string, tried uint64) int {
	n := len(p.members)
	if key != "" {
		// Rendezvous hashing: the member with the highest hash of key and
		// its id, so that a member leaving moves only its own keys.
		best, bestH := -1, uint64(0)
		for i := range p.members {
			if tried&(1<<i) != 0 {
				continue
			}
			if h := fnv(key, p.members[i].id); best < 0 || h > bestH {
				best, bestH = i, h
			}
		}
		return best
	}
	start := int(p.next.Add(1) % uint64(n))
	if p.balance == Weighted {
		// A point on the weight line, then the first untried member from
		// the one it falls on.
		w := int(p.next.Load()*0x9E3779B97F4A7C15>>33) % p.totalWeight
		for i := range p.members {
			if w -= p.members[i].weight; w < 0 {
				start = i
				break
			}
		}
		for j := range n {
			if i := (start + j) % n; tried&(1<<i) == 0 {
				return i
			}
		}
		return -1
	}
	best, bestScore := -1, int64(0)
	for j := range n {
		i := (start + j) % n
		if tried&(1<<i) != 0 || p.members[i].Check(p.epoch) != park.None {
			continue
		}
		pm := &p.members[i]
		score := pm.inflight.Load() + 1
		if p.latencyAware {
			score *= max(pm.latency.Load()/int64(time.Microsecond), 1)
		}
		if best < 0 || score < bestScore {
			best, bestScore = i, score
		}
	}
	if best < 0 {
		// Only parked members are left: enter tells why.
		for j := range n {
			if i := (start + j) % n; tried&(1<<i) == 0 {
				return i
			}
		}
	}
	return best
}

func fnv(a, b string) uint64 {
	h := uint64(14695981039346656037)
	for _, s := range [2]string{a, b} {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= 1099511628211
		}
		h ^= 0xff
		h *= 1099511628211
	}
	return h
}

// done settles a member's call: its breaker's outcome, its limiter, its
// latency, and the member-level action of its class. probe is set when
// the call was the one let through at the end of the member's cool-down.
// refused reports whether a member's call ended in a *fallback.SkipError:
// a wrapper of the member's tier (a rate limit around it) refused it
// before any upstream call. Such a call is not one: it is taken back
// from the record (Record.NoCall), decides nothing for the member, and
// the next member is tried.
func refused(err error) bool {
	if err == nil {
		return false
	}
	// errors.AsType, not errors.As: the target errors.As fills escapes,
	// one allocation on every call made through the pool.
	_, ok := errors.AsType[*fallback.SkipError](err)
	return ok
}

// free gives back member m's place in flight and its breaker token, for a
// call that was never made.
func (p *pool) free(m int, tok breaker.Token) {
	p.members[m].inflight.Add(-1)
	tok.Done(breaker.Ignored)
}

func (p *pool) done(m int, tok breaker.Token, v classify.Verdict, o breaker.Outcome, latency time.Duration, rules fallback.Rules, probe bool) {
	pm := &p.members[m]
	pm.inflight.Add(-1)
	tok.Done(o)
	cd := rules.CoolDown
	if pm.coolDown != nil {
		cd = *pm.coolDown
	}
	if v.Class != classify.RateLimited || v.RetryAfter <= 0 {
		pm.tally.Call(p.epoch, cd.Window)
	}
	switch v.Class {
	case classify.OK:
		if pm.limiter != nil {
			pm.limiter.Passed()
		}
		if latency > 0 {
			old := pm.latency.Load()
			if old == 0 {
				pm.latency.Store(int64(latency))
			} else {
				pm.latency.Store(old + (int64(latency)-old)/8)
			}
		}
	case classify.RateLimited:
		if pm.limiter != nil {
			pm.limiter.Throttle(v.RetryAfter)
		}
		if v.RetryAfter <= 0 || cd.Off {
			break
		}
		// The server said when this key may come back: when the evidence
		// says its quota is spent for everyone, the member is out of
		// rotation until then, limiter or not; otherwise the request moves
		// to another member and the others keep calling this one.
		rule := fallback.CoolRule(pm.tally.Judge(p.epoch, v.PerMinute, probe, cd.Window, cd.Count, cd.Share))
		d := min(v.RetryAfter, classify.LongRetryAfter)
		if rule == fallback.NotCooled {
			break
		}
		// Told once per stay: the calls in flight when the member cooled
		// come back 429 too, and lengthen it without a new one.
		if _, fresh := pm.CoolDownFresh(p.epoch, outCooling, uint8(rule), d); fresh {
			p.tell(MemberEvent{Pool: p.name, Member: pm.id, Out: MemberCooling, For: d, Verdict: v, Rule: rule})
		}
	case classify.QuotaExhausted:
		// Reported once per time out of rotation, however many calls in
		// flight come back refused.
		d := min(max(rules.QuotaCooldown, v.RetryAfter), rules.MaxQuotaCooldown)
		if pm.ParkOnce(p.epoch, outQuota, d) {
			p.tell(MemberEvent{Pool: p.name, Member: pm.id, Out: MemberQuota, For: d, Verdict: v})
		}
	case classify.Auth:
		if pm.ParkOnce(p.epoch, outAuth, p.authCooldown) {
			p.tell(MemberEvent{Pool: p.name, Member: pm.id, Out: MemberAuth, For: p.authCooldown, Verdict: v})
		}
	}
}

// index returns the position of the member named id, or -1.
func (p *pool) index(id string) int {
	for i := range p.members {
		if p.members[i].id == id {
			return i
		}
	}
	return -1
}
