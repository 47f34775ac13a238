package chaos

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/fallback"
)

// MaxDrill is the longest a drill may last. A drill is a bounded
// experiment; a fault that should stay longer is a test fixture, not a
// drill.
const MaxDrill = 24 * time.Hour

// MaxLead is the furthest ahead a drill may be scheduled: its Start at
// most a day after Switch.Start. A scheduled drill holds its switch — every
// other drill gets ErrRunning until it ends or Stop — so a Start years
// out, a typo more often than a plan, would hold it for years.
const MaxLead = 24 * time.Hour

// ErrRunning is returned by Switch.Start while another drill is running or
// scheduled on the switch.
var ErrRunning = errors.New("chaos: a drill is already running on this switch")

// Drill is a bounded fault-injection experiment: rules that inject faults
// into a share of the calls they match, and breakers forced open, between
// Start and End. Nothing happens outside that window, and the window always
// ends: End (or For) is required, at most MaxDrill after Start, and Start
// is at most MaxLead ahead.
type Drill struct {
	// Name labels the drill in reports. It is not exported as a metric
	// attribute.
	Name string
	// Start is when the drill begins; zero means when Switch.Start is
	// called. It may be at most MaxLead later than that.
	Start time.Time
	// End is when the drill ends; For sets it relative to Start instead.
	// Exactly one of them is required.
	End time.Time
	For time.Duration
	// Seed makes the drill's choices — which calls a rule hits, the random
	// latencies — the same from run to run: the n-th call a rule matches
	// is hit, or not, whatever the clock says.
	Seed uint64
	// Rules are tried in order; a call gets at most one fault, the first
	// rule's that matches it and picks it.
	Rules []Rule
	// Open lists breakers to force open during the drill: the chain skips
	// their tiers without an upstream call, as for a tripped breaker.
	Open []Open
}

// Rule injects Fault into a share of the calls it matches. A call matches
// when it is inside the rule's window and every scope field that is set
// agrees with the call.
type Rule struct {
	// Fault is what the hit calls do. Required.
	Fault Fault
	// Rate is the share of the matched calls hit, in (0, 1]. It is exact
	// over every block of 64 matched calls (to the call, carrying
	// fractions over), and which calls of a block are hit is a
	// pseudo-random choice from the drill's seed: a 20% rule hits 12 or 13
	// of every 64, never a streak of 40.
	Rate float64

	// Tier limits the rule to the wrapper of the tier of that name (a
	// Transport's name). Empty matches every tier.
	Tier string
	// Tenant and Scenario limit the rule to requests whose
	// fallback.Request names that tenant or scenario.
	Tenant   string
	Scenario string
	// Enrolled limits the rule to requests whose context was marked with
	// Enroll: a drill in production can hit only the requests the service
	// chose (internal accounts, a load generator's, a sampled fraction).
	Enrolled bool

	// After delays the rule's start past the drill's; For bounds how long
	// it lasts (0: until the drill ends). "pro answers 503 from 3s to 8s"
	// is After 3s, For 5s.
	After time.Duration
	For   time.Duration
}

// Open forces a breaker open for part of a drill, as a tripped breaker
// would be (breaker.ForceOpen), and gives it back when that part ends.
type Open struct {
	// Breaker is the breaker to open. Run fills it from Tier when nil.
	Breaker *breaker.Breaker
	// Tier names the chain stage whose breaker Run opens, when Breaker is
	// nil.
	Tier string
	// After delays the opening past the drill's start; For bounds how long
	// it stays open (0: until the drill ends).
	After time.Duration
	For   time.Duration
}

// Switch turns drills on and off. The zero value is off, and while it is
// off a wrapper costs one atomic load per call and allocates nothing. It
// is safe for concurrent use: flip it from an admin endpoint while the
// service serves requests. One switch may serve every wrapper of a
// service; a rule's Tier says which tier it hits.
type Switch struct {
	cur  atomic.Pointer[running]
	mu   sync.Mutex
	last *running
}

// running is a drill in progress.
type running struct {
	drill      Drill
	start, end time.Time
	rules      []runningRule
	opens      []*opening
	// over is set when the drill ended, by its end time or by Stop.
	over atomic.Bool
	// endTimer ends the drill (releasing breakers) at its end time.
	endTimer atomic.Pointer[time.Timer]
	sw       *Switch
}

type runningRule struct {
	Rule
	from, until time.Time
	// rate is Rate in 32.32 fixed point, rounded up so that ⌊n·rate⌋
	// is not one short for a rate like 0.2 that has no exact binary form.
	rate      uint64
	key       uint64
	labels    bool
	matched   atomic.Uint64
	injected  atomic.Uint64
	unfitting atomic.Uint64
}

// Start begins d on the switch (or schedules it, for a Start in the
// future), or returns an error naming every invalid field; ErrRunning if
// the switch already has a drill that has not ended. Breakers whose
// opening is due are forced open before Start returns.
func (s *Switch) Start(d Drill) error {
	now := time.Now()
	r, err := compile(d, now)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.cur.Load(); cur != nil && !cur.over.Load() && now.Before(cur.end) {
		return ErrRunning
	}
	if cur := s.cur.Load(); cur != nil {
		cur.finish()
	}
	r.sw = s
	s.last = r
	s.cur.Store(r)
	for _, o := range r.opens {
		o.schedule(now)
	}
	r.endTimer.Store(time.AfterFunc(r.end.Sub(now), r.finish))
	return nil
}

// Stop ends the switch's drill now, if there is one: rules stop injecting
// and forced breakers are given back.
func (s *Switch) Stop() {
	if r := s.cur.Load(); r != nil {
		r.finish()
	}
}

// finish ends the drill: the switch goes off and breakers are given back.
// It is safe to call more than once, from any goroutine.
func (r *running) finish() {
	if r.over.Swap(true) {
		return
	}
	r.sw.cur.CompareAndSwap(r, nil)
	if t := r.endTimer.Load(); t != nil {
		t.Stop()
	}
	for _, o := range r.opens {
		o.release()
	}
}

func compile(d Drill, now time.Time) (*running, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	start := d.Start
	if start.IsZero() {
		start = now
	}
	end := d.End
	switch {
	case !d.End.IsZero() && d.For != 0:
		bad("End and For are both set; set one")
	case d.End.IsZero() && d.For <= 0:
		bad("End or a positive For is required: a drill always ends")
	case d.End.IsZero():
		end = start.Add(d.For)
	}
	if !end.IsZero() {
		switch {
		case !end.After(start):
			bad("End %v is not after Start %v", end.Format(time.RFC3339Nano), start.Format(time.RFC3339Nano))
		case end.Sub(start) > MaxDrill:
			bad("the drill lasts %v, more than MaxDrill (%v)", end.Sub(start), MaxDrill)
		case !end.After(now):
			bad("End %v has passed", end.Format(time.RFC3339Nano))
		}
	}
	if start.Sub(now) > MaxLead {
		bad("Start %v is %v ahead, more than MaxLead (%v)", start.Format(time.RFC3339Nano), start.Sub(now), MaxLead)
	}
	if len(d.Rules) == 0 && len(d.Open) == 0 {
		bad("no Rules and no Open: the drill would do nothing")
	}
	r := &running{drill: d, start: start, end: end}
	r.drill.Rules = append([]Rule(nil), d.Rules...)
	r.drill.Open = append([]Open(nil), d.Open...)
	r.rules = make([]runningRule, len(d.Rules))
	for i, rule := range d.Rules {
		if err := rule.Fault.check(); err != nil {
			bad("Rules[%d]: Fault: %v", i, err)
		}
		if !(rule.Rate > 0 && rule.Rate <= 1) {
			bad("Rules[%d]: Rate %v is not in (0, 1]", i, rule.Rate)
		}
		if rule.After < 0 || rule.For < 0 {
			bad("Rules[%d]: After and For must not be negative", i)
		}
		rr := &r.rules[i]
		rr.Rule = rule
		rr.from, rr.until = window(start, end, rule.After, rule.For)
		rr.rate = uint64(math.Ceil(rule.Rate * (1 << 32)))
		rr.key = mix(d.Seed ^ (uint64(i)+1)*0x9e3779b97f4a7c15)
		rr.labels = rule.Tenant != "" || rule.Scenario != "" || rule.Enrolled
	}
	for i, o := range d.Open {
		switch {
		case o.Breaker == nil && o.Tier != "":
			bad("Open[%d]: Breaker is nil (Run resolves Tier %q from the chain's stages; Switch.Start needs the breaker)", i, o.Tier)
		case o.Breaker == nil:
			bad("Open[%d]: Breaker is required", i)
		}
		if o.After < 0 || o.For < 0 {
			bad("Open[%d]: After and For must not be negative", i)
		}
		from, until := window(start, end, o.After, o.For)
		r.opens = append(r.opens, &opening{b: o.Breaker, from: from, until: until})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("chaos: invalid drill: %w", err)
	}
	return r, nil
}

// window is the part [from, until) of a drill [start, end) that begins
// after and lasts span (0: to the end).
func window(start, end time.Time, after, span time.Duration) (from, until time.Time) {
	from = start.Add(after)
	until = end
	if span > 0 && from.Add(span).Before(end) {
		until = from.Add(span)
	}
	if from.After(until) {
		from = until
	}
	return from, until
}

// pick decides whether a call at w on tier, with ctx, gets a fault, and
// which. u is a draw from the drill's seed for the fault's random parts.
// It is called only while the switch holds a drill.
func (s *Switch) pick(ctx context.Context, r *running, tier string, w where) (f Fault, u uint64, ok bool) {
	now := time.Now()
	if now.Before(r.start) {
		return Fault{}, 0, false
	}
	if !now.Before(r.end) {
		// Past its end and its timer has not run yet (or runs now).
		r.finish()
		return Fault{}, 0, false
	}
	var lab labels
	read := false
	for i := range r.rules {
		rr := &r.rules[i]
		if now.Before(rr.from) || !now.Before(rr.until) || (rr.Tier != "" && rr.Tier != tier) {
			continue
		}
		if rr.labels {
			if !read {
				lab, read = labelsOf(ctx), true
			}
			if (rr.Tenant != "" && rr.Tenant != lab.tenant) || (rr.Scenario != "" && rr.Scenario != lab.scenario) || (rr.Enrolled && !lab.enrolled) {
				continue
			}
		}
		if !rr.Fault.fits(w) {
			rr.unfitting.Add(1)
			continue
		}
		n := rr.matched.Add(1) - 1
		if !hit(rr.rate, rr.key, n) {
			continue
		}
		rr.injected.Add(1)
		return rr.Fault, mix(rr.key ^ mix(n+0x632be59bd9b4e019)), true
	}
	return Fault{}, 0, false
}

// hit reports whether the n-th matched call of a rule of rate (32.32 fixed
// point) and key is hit. Calls come in blocks of 64: block b hits
// count(64(b+1)) − count(64b) of its calls, where count(m) = ⌊m·rate⌋, so
// any prefix of whole blocks hits ⌊rate·calls⌋ exactly; the calls hit are
// those whose position a keyed permutation of the block sends below that
// number.
func hit(rate, key, n uint64) bool {
	b, j := n>>6, n&63
	k := count(rate, (b+1)<<6) - count(rate, b<<6)
	return permute(j, mix(key^b)) < k
}

// count is ⌊m·rate⌋ for rate in 32.32 fixed point.
func count(rate, m uint64) uint64 {
	hi, lo := bits.Mul64(m, rate)
	return hi<<32 | lo>>32
}

// permute is a keyed bijection of [0, 64): rounds of a multiplication by
// an odd number, an addition and an xorshift, each a bijection mod 64.
func permute(x, h uint64) uint64 {
	for range 3 {
		x = (x*(h&63|1) + h>>6&63) & 63
		x ^= x >> 3
		h >>= 12
	}
	return x
}

// mix is SplitMix64's finaliser.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// opening is one breaker forced open by a drill.
type opening struct {
	b           *breaker.Breaker
	from, until time.Time

	mu sync.Mutex
	// opened is set once the breaker was forced open by this drill (it was
	// not forced open already); released once it was given back.
	opened, released bool
	timer            *time.Timer
	// changes counts the breaker's transitions after the forcing: any
	// means someone else took the breaker over, and the drill leaves it be.
	changes atomic.Int64
	forced  int64
	remove  func()
}

func (o *opening) schedule(now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.released {
		// Stopped before it was scheduled.
		return
	}
	if !now.Before(o.until) {
		o.released = true
		return
	}
	if !now.Before(o.from) {
		o.openLocked()
	} else {
		o.timer = time.AfterFunc(o.from.Sub(now), o.open)
		return
	}
	o.timer = time.AfterFunc(o.until.Sub(now), o.release)
}

func (o *opening) open() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.released || o.opened {
		return
	}
	o.openLocked()
	o.timer = time.AfterFunc(time.Until(o.until), o.release)
}

func (o *opening) openLocked() {
	o.remove = o.b.Observe(func(breaker.Transition) { o.changes.Add(1) })
	before := o.changes.Load()
	o.b.ForceOpen()
	after := o.changes.Load()
	// ForceOpen announces its transition before it returns. None means the
	// breaker was forced open already, by someone else: it is theirs to
	// give back.
	o.opened = after != before
	o.forced = after
}

// release gives the breaker back: a fresh closed breaker (breaker.Reset),
// unless it changed hands since the drill forced it.
func (o *opening) release() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.released {
		return
	}
	o.released = true
	if o.timer != nil {
		o.timer.Stop()
	}
	if o.remove != nil {
		o.remove()
	}
	if o.opened && o.changes.Load() == o.forced {
		o.b.Reset()
	}
}

// Status describes a switch's current drill, or its last one.
type Status struct {
	// Name, Start and End are the drill's; Active is set while it runs
	// (from Start to End, unless stopped).
	Name       string
	Start, End time.Time
	Active     bool
	// Rules has one entry per rule, in order.
	Rules []RuleStatus
}

// RuleStatus counts what one rule did.
type RuleStatus struct {
	// Fault names the rule's fault.
	Fault string
	// Matched counts the calls the rule matched, Injected those it hit.
	Matched, Injected uint64
	// Unsupported counts calls the rule matched where its fault cannot be
	// injected (a Keepalive on a wrapped tier, an answer of a type the
	// wrapper cannot make); they went through untouched.
	Unsupported uint64
}

// Status returns the state of the switch's current or last drill; the zero
// Status if it never ran one.
func (s *Switch) Status() Status {
	s.mu.Lock()
	r := s.last
	s.mu.Unlock()
	if r == nil {
		return Status{}
	}
	now := time.Now()
	st := Status{Name: r.drill.Name, Start: r.start, End: r.end,
		Active: !r.over.Load() && !now.Before(r.start) && now.Before(r.end)}
	for i := range r.rules {
		rr := &r.rules[i]
		st.Rules = append(st.Rules, RuleStatus{Fault: rr.Fault.String(), Matched: rr.matched.Load(),
			Injected: rr.injected.Load(), Unsupported: rr.unfitting.Load()})
	}
	return st
}

// labels are the request labels rules can be scoped by: the tenant and
// scenario of the request's fallback.Request, and whether it is enrolled.
type labels struct {
	tenant, scenario string
	enrolled         bool
}

type enrolledKey struct{}

func labelsOf(ctx context.Context) labels {
	r := fallback.RequestFrom(ctx)
	enrolled, _ := ctx.Value(enrolledKey{}).(bool)
	return labels{tenant: r.Tenant, scenario: r.Scenario, enrolled: enrolled}
}

// Enroll returns a context whose requests take part in drills whose rules
// ask for Enrolled ones.
func Enroll(ctx context.Context) context.Context {
	return context.WithValue(ctx, enrolledKey{}, true)
}
