package chaos

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/deadline"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// Config sizes a soak run. Zero fields take the defaults, which are the CI
// size under testing/synctest.
type Config struct {
	// Calls is the number of requests (default 20,000).
	Calls int
	// Workers is the number of goroutines issuing them (default 2,000).
	Workers int
	// Rate is how many requests start per second (default 4,000); a worker
	// that falls behind starts its request late, and the lag is reported.
	Rate float64
	// Cycle is the length of one light → storm → outage → recovery cycle
	// (default 5s). Calls/Rate should be a multiple of it, so that the run
	// ends after a recovery.
	Cycle time.Duration
	// Seed makes every call's fate (faults, latencies, deadlines) a
	// function of the request number; the interleaving is the scheduler's.
	Seed uint64
	// Slack is the scheduling delay allowed on top of every time bound
	// (deadlines, breaker liveness). Zero under synctest, where time only
	// moves when every goroutine waits.
	Slack time.Duration
	// FakeClock says the run is inside a synctest bubble: it then also
	// checks that no breaker timer fires once the breakers are reset.
	FakeClock bool
	// ShortCooldowns runs the breakers with cooldowns (jitter included)
	// shorter than their tier's TryTimeout plus AbandonAfter, so that a
	// probe of one half-open period is often still running when the next
	// period admits probes: the probe limit is then checked across periods
	// as well as within one.
	ShortCooldowns bool
}

func (c Config) withDefaults() Config {
	if c.Calls <= 0 {
		c.Calls = 20000
	}
	if c.Workers <= 0 {
		c.Workers = 2000
	}
	if c.Rate <= 0 {
		c.Rate = 4000
	}
	if c.Cycle <= 0 {
		c.Cycle = 5 * time.Second
	}
	return c
}

// promptMarker is in every prompt. Upstream error messages echo the prompt;
// no error the library makes may.
const promptMarker = "PROMPT-SECRET"

type (
	callKey  struct{}
	probeKey struct{}
)

// tierPanic is the value a tier panics with.
type tierPanic struct {
	id    int
	stage int
}

func (p tierPanic) String() string {
	return "chaos panic in call " + strconv.Itoa(p.id) + " on stage " + strconv.Itoa(p.stage)
}

type callState struct {
	total    atomic.Int32
	stage    [numStages]atomic.Int32
	returned atomic.Int32
	panicked atomic.Bool
	// ignoredCtx is set when one of the request's calls ignored its
	// context: the chain may then wait up to AbandonAfter for it.
	ignoredCtx atomic.Bool
	// probe is set for the stages the request entered as a half-open
	// probe: all their attempts are probe calls.
	probe [numStages]atomic.Bool
}

type stageState struct {
	p      stageProfile
	bh     *bulkhead.Bulkhead
	br     *breaker.Breaker
	member *probeMember
	budget *retry.Budget

	inflight, peakInflight   atomic.Int64
	peakWaiting              atomic.Int64
	probeLive, peakProbeLive atomic.Int64
	probeCalls               atomic.Int64
	forever                  atomic.Int64
	faults                   [numFaults]atomic.Int64
	attempts, retries        atomic.Int64
	successes                atomic.Int64
	skips                    [fallback.SkipBudget + 1]atomic.Int64

	tmu         sync.Mutex
	transitions []breaker.Transition
}

type harness struct {
	fallback.NopObserver
	cfg     Config
	t0      time.Time
	chain   *fallback.Chain[string, string]
	stages  [numStages]stageState
	release chan struct{}
	calls   []callState
	cache   *cache
	table   classify.Table

	nviol atomic.Int64
	vmu   sync.Mutex
	viol  []string

	answers        [numStages + 2]atomic.Int64 // tiers, cache, default
	failures       [2][maxClasses]atomic.Int64
	panics         atomic.Int64
	sharedPanics   atomic.Int64
	droppedPanics  atomic.Int64
	sharedJoins    atomic.Int64
	keyed          atomic.Int64
	canceled       atomic.Int64
	abandonedCalls atomic.Int64
	worstOver      atomic.Int64
	worstOverClean atomic.Int64
	lag            atomic.Int64
	// schedLag is the most a 1 ms ticker fired late during the run (real
	// clock only): what the machine's scheduling, not the library, added
	// to every time bound. late holds the calls that overran their bound,
	// judged against it once the run is over.
	schedLag atomic.Int64
	lmu      sync.Mutex
	late     []lateCall
}

// lateCall is a call that returned after its deadline by more than its
// allowance, before the scheduler's lag is taken into account.
type lateCall struct {
	over, allowed time.Duration
	msg           string
}

// probeLag measures how late a 1 ms ticker fires until stop closes: the
// scheduler lag a loaded machine adds to every timer and wake-up.
func (h *harness) probeLag(stop <-chan struct{}) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	prev := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			now := time.Now()
			raise(&h.schedLag, int64(now.Sub(prev)-time.Millisecond))
			prev = now
		}
	}
}

// maxClasses bounds the number of classify classes the report counts.
const maxClasses = 16

var classNames = func() []string {
	var out []string
	for _, c := range classify.Classes() {
		out = append(out, c.String())
	}
	return out
}()

func (h *harness) violate(format string, args ...any) {
	if h.nviol.Add(1) > 50 {
		return
	}
	msg := fmt.Sprintf(format, args...)
	h.vmu.Lock()
	h.viol = append(h.viol, fmt.Sprintf("t=%v %s", time.Since(h.t0).Round(time.Microsecond), msg))
	h.vmu.Unlock()
}

// Run runs a soak and reports what it saw. It fails only to build its
// chain; broken invariants are in Report.Violations.
func Run(cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	h := &harness{cfg: cfg, release: make(chan struct{}), calls: make([]callState, cfg.Calls), cache: &cache{m: map[string]string{}}, table: classify.DefaultTable()}
	h.worstOver.Store(math.MinInt64)
	h.worstOverClean.Store(math.MinInt64)
	stages := make([]fallback.Stage[string, string], numStages)
	var unsubscribe []func()
	for i := range profile {
		st := &h.stages[i]
		st.p = profile[i]
		var err error
		if st.budget, err = retry.NewBudget(st.p.budgetTokens, st.p.budgetRatio); err != nil {
			return nil, err
		}
		if st.bh, err = bulkhead.New(bulkhead.Config{Name: st.p.name, Max: st.p.bulkhead, MaxWait: st.p.bulkWait, Queue: st.p.bulkQueue}); err != nil {
			return nil, err
		}
		if st.p.breaker != nil {
			if cfg.ShortCooldowns {
				// The liveness bound follows the cooldowns run.
				short := *st.p.breaker
				short.Cooldown, short.MaxCooldown = shortCooldowns[i][0], shortCooldowns[i][1]
				st.p.breaker = &short
			}
			bc := *st.p.breaker
			st.member = newProbeMember()
			bc.Store = probeStore{st.member}
			if st.br, err = breaker.New(bc); err != nil {
				return nil, err
			}
			unsubscribe = append(unsubscribe, st.br.Observe(func(tr breaker.Transition) {
				st.tmu.Lock()
				st.transitions = append(st.transitions, tr)
				st.tmu.Unlock()
			}))
		}
		stages[i] = fallback.Stage[string, string]{
			Tier:     fallback.Tier(st.p.name, func(ctx context.Context, in string) (string, error) { return h.upstream(ctx, i, in) }),
			Model:    "chaos-" + st.p.name,
			Bulkhead: st.bh,
			Retry: retry.Policy{MaxAttempts: st.p.maxAttempts, BaseDelay: st.p.baseDelay, MaxDelay: st.p.maxDelay,
				Budget: st.budget},
			TryTimeout: st.p.tryTimeout,
			Validate:   validate.All(validate.NonEmpty(), validate.Func[string](markedOK)),
		}
		if st.br != nil {
			stages[i].Breaker = st.br
		}
	}
	defer func() {
		for _, u := range unsubscribe {
			u()
		}
	}()
	chain, err := fallback.New(fallback.Config[string, string]{
		Stages:        stages,
		Total:         total,
		MinAttempt:    minAttempt,
		Cache:         h.cache,
		Default:       defaultAnswer,
		QuotaCooldown: parkFor,
		// A server's delay (RetryInfo, Retry-After) is honoured across
		// requests up to MaxQuotaCooldown: the hostile ones drawn here
		// (a verdict asking for math.MaxInt64) park a tier for as long as
		// a quota does, not for the 5 minutes the library allows a 429.
		MaxQuotaCooldown: parkFor,
		RetiredRecheck:   parkFor,
		Key:              keyOf,
		Observer:         h,
		AbandonAfter:     abandonAfter,
	})
	if err != nil {
		return nil, err
	}
	h.chain = chain
	return h.run(), nil
}

func markedOK(s string) error {
	if !strings.HasSuffix(s, "|ok") {
		return validate.Errorf("chaos_marker", "answer not marked ok")
	}
	return nil
}

func keyOf(in string) string {
	if strings.HasPrefix(in, "k-") {
		return in
	}
	return ""
}

// hasDefault says whether the default answers for in (two inputs in three).
func hasDefault(in string) bool {
	h := uint32(2166136261)
	for i := 0; i < len(in); i++ {
		h ^= uint32(in[i])
		h *= 16777619
	}
	return h%3 != 0
}

func defaultAnswer(_ context.Context, in string) (string, bool) {
	if !hasDefault(in) {
		return "", false
	}
	return "default|" + in, true
}

func answerOf(stage int, in string) string { return profile[stage].name + "|" + in + "|ok" }

// cache is the chain's Cache and CacheWriter. It checks that only validated
// tier answers are written back.
type cache struct {
	h  *harness
	mu sync.RWMutex
	m  map[string]string
}

func (c *cache) Get(_ context.Context, in string) (string, string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	v, ok := c.m[in]
	return v, "", ok
}

func (c *cache) Put(_ context.Context, in, out string) {
	if !validAnswer(in, out) && c.h != nil {
		c.h.violate("cache write-back of an answer that is not a validated tier answer for its input")
	}
	c.mu.Lock()
	c.m[in] = out
	c.mu.Unlock()
}

func validAnswer(in, out string) bool {
	for i := range profile {
		if out == answerOf(i, in) {
			return true
		}
	}
	return false
}

func (h *harness) phaseAt(t time.Time) Phase {
	el := t.Sub(h.t0)
	if el < 0 {
		el = 0
	}
	frac := float64(el%h.cfg.Cycle) / float64(h.cfg.Cycle)
	for p := Light; p < numPhases; p++ {
		if frac < phaseEnds[p] {
			return p
		}
	}
	return Recovery
}

// AttemptStarted counts attempts and retries per tier, and marks the
// attempt context of probes: the harness is the chain's observer.
func (h *harness) AttemptStarted(ctx context.Context, e fallback.AttemptStart) context.Context {
	i := e.Stage.TierIndex
	st := &h.stages[i]
	st.attempts.Add(1)
	if e.Attempt > 1 {
		st.retries.Add(1)
	}
	if st.member == nil {
		return ctx
	}
	id, ok := ctx.Value(callKey{}).(int)
	if !ok {
		return ctx
	}
	pc := &h.calls[id]
	if e.Attempt == 1 && st.member.bind() {
		pc.probe[i].Store(true)
	}
	if pc.probe[i].Load() {
		return context.WithValue(ctx, probeKey{}, true)
	}
	return ctx
}

// AttemptEnded counts successes per tier and checks every planned retry
// against the time left.
func (h *harness) AttemptEnded(_ context.Context, e fallback.AttemptEnd) {
	st := &h.stages[e.Stage.TierIndex]
	if e.Err == nil && e.Verdict.Class == classify.OK {
		st.successes.Add(1)
	}
	if e.Wait < 0 {
		h.violate("%s: negative retry wait %v", st.p.name, e.Wait)
	}
	if e.Retry && e.Remaining != deadline.Unlimited && e.Wait >= e.Remaining {
		h.violate("%s: retry planned after %v with %v left (%s)", st.p.name, e.Wait, e.Remaining, e.Verdict)
	}
}

// TierSkipped counts skips per tier and reason.
func (h *harness) TierSkipped(_ context.Context, e fallback.TierSkip) {
	if skips := &h.stages[e.Stage.TierIndex].skips; int(e.Skip) < len(skips) {
		skips[e.Skip].Add(1)
	}
}

// rng is splitmix64: a call's fate is a function of (seed, call, stage,
// attempt).
type rng struct{ s uint64 }

func newRNG(seed, a, b, c uint64) rng {
	r := rng{s: seed ^ a*0x9E3779B97F4A7C15 ^ b*0xC2B2AE3D27D4EB4F ^ c*0x165667B19E3779F9}
	r.next()
	return r
}

func (r *rng) next() uint64 {
	r.s += 0x9E3779B97F4A7C15
	z := r.s
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

func (r *rng) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.next()%uint64(hi-lo+1))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// upstream is every tier's call: it checks the invariants seen from the
// upstream's side, draws a fault and acts it.
func (h *harness) upstream(ctx context.Context, si int, in string) (string, error) {
	id, ok := ctx.Value(callKey{}).(int)
	if !ok {
		h.violate("an upstream call lost its request's context values")
		return "", errors.New("chaos: no call id")
	}
	st := &h.stages[si]
	pc := &h.calls[id]
	n := pc.stage[si].Add(1)
	if n > int32(st.p.maxAttempts) {
		h.violate("call %d: attempt %d on %s, MaxAttempts %d", id, n, st.p.name, st.p.maxAttempts)
	}
	if tot := pc.total.Add(1); tot > maxCalls {
		h.violate("call %d: %d upstream calls, at most %d allowed", id, tot, maxCalls)
	}
	v := st.inflight.Add(1)
	raise(&st.peakInflight, v)
	if v > int64(st.p.bulkhead) {
		h.violate("%s: %d calls in flight, bulkhead max %d", st.p.name, v, st.p.bulkhead)
	}
	defer st.inflight.Add(-1)

	probe, _ := ctx.Value(probeKey{}).(bool)
	probeOpen := false
	endProbe := func() {
		if probeOpen {
			probeOpen = false
			st.probeLive.Add(-1)
		}
	}
	if probe {
		probeOpen = true
		st.probeCalls.Add(1)
		live := st.probeLive.Add(1)
		raise(&st.peakProbeLive, live)
		if p := int64(st.p.breaker.HalfOpenProbes); live > p {
			h.violate("%s: %d half-open probe calls in flight, HalfOpenProbes %d", st.p.name, live, p)
		}
	}
	defer endProbe()

	r := newRNG(h.cfg.Seed, uint64(id), uint64(si)+1, uint64(n))
	f := mixes[h.phaseAt(time.Now())][si].pick(r.next())
	if f == StuckForever && st.forever.Add(1) > foreverPerRun {
		f = Stuck
	}
	st.faults[f].Add(1)
	return h.act(ctx, si, id, f, in, &r, endProbe)
}

func httpErr(in string, f classify.Facts) error {
	f.Message += " (request was: " + in + ")"
	return fmt.Errorf("POST chaos %s: %w", in, &classify.HTTPError{Facts: f})
}

func (h *harness) act(ctx context.Context, si, id int, f Fault, in string, r *rng, endProbe func()) (string, error) {
	ok := answerOf(si, in)
	switch f {
	case OK, SlowOK:
		d := r.between(time.Millisecond, maxOKLatency)
		if f == SlowOK {
			d = r.between(110*time.Millisecond, 140*time.Millisecond)
		}
		if err := sleepCtx(ctx, d); err != nil {
			return "", err
		}
		return ok, nil
	case Stall:
		<-ctx.Done()
		return "", ctx.Err()
	case Stuck, StuckForever:
		h.calls[id].ignoredCtx.Store(true)
		var timer <-chan time.Time
		if f == Stuck {
			t := time.NewTimer(r.between(stuckMin, stuckMax))
			defer t.Stop()
			timer = t.C
		}
		done := ctx.Done()
		for {
			select {
			case <-done:
				// Noted, and ignored: the call goes on.
				endProbe()
				done = nil
			case <-timer:
				return ok, nil
			case <-h.release:
				return ok, nil
			}
		}
	case Panic:
		h.calls[id].panicked.Store(true)
		panic(tierPanic{id: id, stage: si})
	case InvalidOutput:
		return profile[si].name + "|" + in + "|garbage", nil
	case ZeroValue:
		return "", nil
	}

	if err := sleepCtx(ctx, r.between(time.Millisecond, maxErrLatency)); err != nil {
		return "", err
	}
	switch f {
	case Transient:
		return "", httpErr(in, classify.Facts{HTTPStatus: 503, Status: "UNAVAILABLE", Message: "The model is overloaded."})
	case RateLimited:
		delay := r.between(5*time.Millisecond, 150*time.Millisecond)
		return "", httpErr(in, classify.Facts{HTTPStatus: 429, Status: "RESOURCE_EXHAUSTED", Message: "Quota exceeded.",
			Details: []map[string]any{{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": fmt.Sprintf("%.3fs", delay.Seconds())}}})
	case RateLimitedHuge:
		// A 429 asking for this long would be a quota (the tier parked);
		// a hostile delay on a retryable failure is what this exercises:
		// the retry is decided before sleeping and the request moves on.
		return "", httpErr(in, classify.Facts{HTTPStatus: 503, Status: "UNAVAILABLE", Message: "slow down", RetryAfterHeader: "1000000000"})
	case HugeVerdict:
		return "", classify.Wrap(errors.New("sdk: too many requests for "+in),
			classify.Verdict{Class: classify.RateLimited, HTTPStatus: 429, RetryAfter: math.MaxInt64, Reason: "rate limited"})
	case Quota:
		return "", httpErr(in, classify.Facts{HTTPStatus: 429, Status: "RESOURCE_EXHAUSTED", Message: "Quota exceeded for the day.",
			Details: []map[string]any{{"@type": "type.googleapis.com/google.rpc.QuotaFailure",
				"violations": []any{map[string]any{"quotaId": "GenerateRequestsPerDayPerProjectPerModel"}}}}})
	case Retired:
		return "", httpErr(in, classify.Facts{HTTPStatus: 404, Status: "NOT_FOUND", Message: "models/x is not found"})
	case Auth:
		return "", httpErr(in, classify.Facts{HTTPStatus: 400, Status: "INVALID_ARGUMENT", Message: "API key not valid.",
			Details: []map[string]any{{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}}})
	case BadRequest:
		return "", httpErr(in, classify.Facts{HTTPStatus: 400, Status: "INVALID_ARGUMENT", Message: "Invalid JSON payload."})
	}
	return "", errors.New("chaos: something odd happened to " + in)
}

func (h *harness) run() *Report {
	h.cache.h = h
	h.t0 = time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range h.cfg.Workers {
		wg.Go(func() {
			for {
				id := int(next.Add(1) - 1)
				if id >= h.cfg.Calls {
					return
				}
				at := h.t0.Add(time.Duration(float64(id) / h.cfg.Rate * float64(time.Second)))
				if d := time.Until(at); d > 0 {
					time.Sleep(d)
				} else {
					raise(&h.lag, int64(-d))
				}
				h.one(id)
			}
		})
	}
	stopSampler := make(chan struct{})
	var samplerDone sync.WaitGroup
	samplerDone.Go(func() { h.sample(stopSampler) })
	if !h.cfg.FakeClock {
		samplerDone.Go(func() { h.probeLag(stopSampler) })
	}
	wg.Wait()
	end := time.Now()
	close(stopSampler)
	samplerDone.Wait()
	return h.finish(end)
}

// sample checks the guards' own figures while the run goes on.
func (h *harness) sample(stop <-chan struct{}) {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		for i := range h.stages {
			st := &h.stages[i]
			s := st.bh.Stats()
			if s.InFlight > s.Max || s.InFlight < 0 {
				h.violate("%s: bulkhead reports %d in flight, max %d", st.p.name, s.InFlight, s.Max)
			}
			// A newcomer counts itself in Waiting (under the queue's lock)
			// before it checks whether the queue has room, so Waiting may
			// read one above the queue's size for that instant; the queue
			// itself never holds more (see the report of issue 9).
			raise(&st.peakWaiting, int64(s.Waiting))
			if s.Waiting < 0 || st.p.bulkQueue > 0 && s.Waiting > st.p.bulkQueue+1 || st.p.bulkQueue == 0 && s.Waiting != 0 {
				h.violate("%s: bulkhead reports %d waiting, queue %d", st.p.name, s.Waiting, st.p.bulkQueue)
			}
		}
	}
}

// one makes request id and checks what came back.
func (h *harness) one(id int) {
	r := newRNG(h.cfg.Seed, uint64(id), 0, 0)
	keyed := r.next()%100 < 15
	var in string
	if keyed {
		in = "k-" + promptMarker + "-" + strconv.Itoa(id%48)
		h.keyed.Add(1)
	} else {
		in = "u-" + promptMarker + "-" + strconv.Itoa(id%4096)
	}
	var budget time.Duration
	switch x := r.next() % 100; {
	case x < 15: // no deadline of its own: the chain's Total applies
	case x < 25:
		budget = 30 * time.Millisecond
	case x < 50:
		budget = 200 * time.Millisecond
	case x < 75:
		budget = 500 * time.Millisecond
	default:
		budget = 2 * time.Second
	}
	ctx := context.WithValue(context.Background(), callKey{}, id)
	start := time.Now()
	due := start.Add(total)
	if budget > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, budget)
		defer cancel()
		due = start.Add(min(budget, total))
	}
	if r.next()%100 < 2 {
		after := r.between(0, 300*time.Millisecond)
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		t := time.AfterFunc(after, cancel)
		defer t.Stop()
		if c := start.Add(after); c.Before(due) {
			due = c
		}
		h.canceled.Add(1)
	}

	var res fallback.Result[string]
	var err error
	var p any
	func() {
		defer func() { p = recover() }()
		res, err = h.chain.Do(ctx, in)
	}()
	end := time.Now()
	if n := h.calls[id].returned.Add(1); n != 1 {
		h.violate("call %d returned %d times", id, n)
	}
	h.check(id, in, keyed, res, err, p, end.Sub(due))
}

func (h *harness) check(id int, in string, keyed bool, res fallback.Result[string], err error, p any, over time.Duration) {
	abandoned := false
	if p == nil {
		for _, a := range res.Attempts() {
			if errors.Is(a.Err, fallback.ErrAbandoned) {
				abandoned = true
			}
		}
	}
	raise(&h.worstOver, int64(over))
	// A call that ignores its context may hold the request AbandonAfter past
	// the attempt's end, whether it is then abandoned or returns within the
	// grace. A shared execution's calls are counted on its first caller, so
	// a waiter that got a shared result gets the same allowance.
	allowed := h.cfg.Slack
	if abandoned || p != nil || res.Shared || h.calls[id].ignoredCtx.Load() {
		allowed += abandonAfter
	} else {
		raise(&h.worstOverClean, int64(over))
	}
	if abandoned {
		h.abandonedCalls.Add(1)
	}
	if over > allowed {
		msg := fmt.Sprintf("call %d returned %v after its deadline (allowed %v; abandoned=%v, panic=%v, shared=%v, error=%v): %s",
			id, over, allowed, abandoned, p != nil, res.Shared, err, trail(res))
		if h.cfg.FakeClock {
			h.violate("%s", msg)
		} else {
			h.lmu.Lock()
			h.late = append(h.late, lateCall{over: over, allowed: allowed, msg: msg})
			h.lmu.Unlock()
		}
	}

	if p != nil {
		h.checkPanic(id, keyed, p)
		return
	}
	if !keyed && h.calls[id].panicked.Load() {
		if abandoned {
			h.droppedPanics.Add(1) // a panic after abandonment has no one to reach
		} else {
			h.violate("call %d: a tier panicked and the caller did not see it", id)
		}
	}
	if res.UpstreamCalls > int(maxCalls) || res.UpstreamCalls < 0 {
		h.violate("call %d: Result.UpstreamCalls %d", id, res.UpstreamCalls)
	}
	// The tiers attribute each call to the request that made it (a shared
	// execution's to its first caller). Without a key the figures must
	// match; with one, the first caller may have left the execution before
	// it ended, so its result may report fewer.
	if seen := int(h.calls[id].total.Load()); !keyed && seen != res.UpstreamCalls || keyed && !res.Shared && seen < res.UpstreamCalls {
		h.violate("call %d: Result.UpstreamCalls %d, the tiers saw %d", id, res.UpstreamCalls, seen)
	}
	if res.Shared {
		h.sharedJoins.Add(1)
	}
	if err != nil {
		h.checkError(id, in, err)
		return
	}
	switch res.Source {
	case fallback.SourceTier:
		i := res.TierIndex
		if i < 0 || i >= numStages {
			h.violate("call %d: answer from tier index %d", id, i)
			return
		}
		if res.Value != answerOf(i, in) || res.Tier != profile[i].name || res.Degraded != (i > 0) {
			h.violate("call %d: tier answer %q from %q (#%d, degraded %v) for input %q", id, res.Value, res.Tier, i, res.Degraded, in)
		}
		h.answers[i].Add(1)
	case fallback.SourceCache:
		if !validAnswer(in, res.Value) || !res.Degraded || res.TierIndex != -1 {
			h.violate("call %d: cache answer %q for %q (degraded %v, index %d)", id, res.Value, in, res.Degraded, res.TierIndex)
		}
		h.answers[numStages].Add(1)
	case fallback.SourceDefault:
		if res.Value != "default|"+in || !hasDefault(in) || !res.Degraded {
			h.violate("call %d: default answer %q for %q", id, res.Value, in)
		}
		h.answers[numStages+1].Add(1)
	default:
		h.violate("call %d: unknown source %v", id, res.Source)
	}
}

func (h *harness) checkPanic(id int, keyed bool, p any) {
	// A panic carried across goroutines (a shared execution, a detached
	// call) arrives as a *fallback.PanicError holding the tier's own value
	// and the stack it happened on.
	if pe, ok := p.(*fallback.PanicError); ok && len(pe.Stack) > 0 {
		p = pe.Value
	}
	if keyed {
		// A shared execution's panic reaches every waiter with the tier's
		// own value (the panic of the call that ran, not necessarily this
		// one's).
		if _, ok := p.(tierPanic); !ok {
			h.violate("call %d: waiter of a shared execution panicked with %v", id, p)
		}
		h.sharedPanics.Add(1)
		return
	}
	tp, ok := p.(tierPanic)
	if !ok || tp.id != id {
		h.violate("call %d: panicked with %v, not its tier's panic", id, p)
	}
	h.panics.Add(1)
}

func (h *harness) checkError(id int, in string, err error) {
	var fe *fallback.Error
	if !errors.As(err, &fe) {
		h.violate("call %d: error %T is not a *fallback.Error", id, err)
		return
	}
	msg := err.Error()
	if strings.Contains(msg, promptMarker) {
		h.violate("call %d: the error quotes the prompt: %q", id, msg)
	}
	if !utf8.ValidString(msg) {
		h.violate("call %d: the error is not valid UTF-8", id)
	}
	if v := classify.Classify(err); v != fe.Cause {
		h.violate("call %d: the error classifies as %v, its cause is %v", id, v, fe.Cause)
	}
	closed := 0
	if fe.FailedClosed {
		closed = 1
		if h.table.Action(fe.Cause.Class).Route != classify.RouteFailClosed {
			h.violate("call %d: failed closed on %v, which the table routes %v: %s", id, fe.Cause, h.table.Action(fe.Cause.Class).Route, msg)
		}
	} else if hasDefault(in) {
		h.violate("call %d: failed although the default answers its input: %s", id, msg)
	}
	if c := int(fe.Cause.Class); c < len(classNames) {
		h.failures[closed][c].Add(1)
	}
}

// finish drains the stuck calls and checks the end state.
func (h *harness) finish(end time.Time) *Report {
	rep := &Report{Config: h.cfg, Elapsed: end.Sub(h.t0), SchedulerLag: time.Duration(h.schedLag.Load())}
	// On the real clock a call may overrun by what the scheduler lagged in
	// the same run: a starved machine delays the chain's wake-ups as much
	// as the probe's.
	h.lmu.Lock()
	for _, l := range h.late {
		if l.over > l.allowed+rep.SchedulerLag {
			h.violate("%s (scheduler lag in this run %v)", l.msg, rep.SchedulerLag)
		}
		rep.LateWithinLag += boolInt(l.over <= l.allowed+rep.SchedulerLag)
	}
	h.lmu.Unlock()
	// Every request has returned. Calls that ignore their context for a
	// while finish on their own; those stuck for good hold their slot until
	// released, counted in Stats().Stuck.
	forever := int64(0)
	for i := range h.stages {
		forever += min(h.stages[i].forever.Load(), foreverPerRun)
	}
	settled := h.waitFor(5*time.Second, func() bool {
		if h.chain.Stats().Stuck != forever {
			return false
		}
		for i := range h.stages {
			st := &h.stages[i]
			if st.inflight.Load() != min(st.forever.Load(), foreverPerRun) {
				return false
			}
		}
		return true
	})
	rep.StuckBeforeRelease = h.chain.Stats().Stuck
	if !settled {
		h.violate("before release: Stats().Stuck = %d, want %d (the calls stuck for good)", rep.StuckBeforeRelease, forever)
	}
	for i := range h.stages {
		st := &h.stages[i]
		if in := st.bh.Stats().InFlight; int64(in) != st.inflight.Load() {
			h.violate("%s: bulkhead holds %d slots for %d calls in flight", st.p.name, in, st.inflight.Load())
		}
	}
	close(h.release)
	if !h.waitFor(5*time.Second, func() bool {
		if h.chain.Stats().Stuck != 0 {
			return false
		}
		for i := range h.stages {
			if h.stages[i].inflight.Load() != 0 || h.stages[i].bh.Stats().InFlight != 0 {
				return false
			}
		}
		return true
	}) {
		h.violate("after release: Stats() = %+v", h.chain.Stats())
	}
	stats := h.chain.Stats()
	rep.Abandoned = stats.Abandoned
	for i := range h.stages {
		st := &h.stages[i]
		bs := st.bh.Stats()
		if bs.InFlight != 0 || bs.Waiting != 0 {
			h.violate("%s: bulkhead left with %d in flight, %d waiting", st.p.name, bs.InFlight, bs.Waiting)
		}
		if st.member != nil {
			if held := st.member.held.Load(); held != 0 {
				h.violate("%s: %d probe permits never returned", st.p.name, held)
			}
			if st.probeLive.Load() != 0 {
				h.violate("%s: %d probe calls still counted", st.p.name, st.probeLive.Load())
			}
		}
	}
	for id := range h.calls {
		if n := h.calls[id].returned.Load(); n != 1 {
			h.violate("call %d returned %d times", id, n)
			break
		}
	}

	for i := range h.stages {
		st := &h.stages[i]
		sr := StageReport{
			Name: st.p.name, Attempts: st.attempts.Load(), Retries: st.retries.Load(), Successes: st.successes.Load(),
			PeakInFlight: st.peakInflight.Load(), Bulkhead: st.p.bulkhead, BulkheadRejected: st.bh.Stats().Rejected,
			PeakWaiting: st.peakWaiting.Load(), Queue: st.p.bulkQueue,
			Forever: min(st.forever.Load(), foreverPerRun),
		}
		for f := range st.faults {
			sr.Faults[f] = st.faults[f].Load()
		}
		for s := range st.skips {
			sr.Skips[s] = st.skips[s].Load()
		}
		// gRPC throttling: a retry needs more than half the tokens, each
		// retryable failure takes one, each success gives TokenRatio back.
		sr.RetryAllowance = int64(math.Floor(st.p.budgetTokens/2+st.p.budgetRatio*float64(sr.Successes))) + 1
		if sr.Retries > sr.RetryAllowance {
			h.violate("%s: %d retries, the budget allows %d", st.p.name, sr.Retries, sr.RetryAllowance)
		}
		if st.br != nil {
			sr.HalfOpenProbes = st.p.breaker.HalfOpenProbes
			sr.ProbeCalls = st.probeCalls.Load()
			sr.PeakProbeCalls = st.peakProbeLive.Load()
			sr.PeakProbePermits = st.member.peak.Load()
			sr.FinalState = st.br.State()
			h.liveness(st, end, &sr)
		}
		rep.Stages = append(rep.Stages, sr)
	}

	if h.cfg.FakeClock {
		// No breaker timer may outlive the run: reset them (which stops a
		// pending cooldown), wait an hour of fake time, and see nothing.
		counts := make([]int, numStages)
		for i := range h.stages {
			if st := &h.stages[i]; st.br != nil {
				st.br.Reset()
				st.tmu.Lock()
				counts[i] = len(st.transitions)
				st.tmu.Unlock()
			}
		}
		time.Sleep(time.Hour)
		for i := range h.stages {
			if st := &h.stages[i]; st.br != nil {
				st.tmu.Lock()
				if n := len(st.transitions); n != counts[i] {
					h.violate("%s: breaker changed state %d times an hour after reset", st.p.name, n-counts[i])
				}
				st.tmu.Unlock()
			}
		}
	}

	rep.Calls = len(h.calls)
	for i := range h.answers {
		rep.Answers[i] = h.answers[i].Load()
	}
	for c := range classNames {
		rep.Failed[c] = h.failures[0][c].Load()
		rep.FailedClosed[c] = h.failures[1][c].Load()
	}
	rep.Panics, rep.SharedPanics, rep.DroppedPanics = h.panics.Load(), h.sharedPanics.Load(), h.droppedPanics.Load()
	rep.Keyed, rep.SharedJoins, rep.CallerCancels = h.keyed.Load(), h.sharedJoins.Load(), h.canceled.Load()
	rep.CallsWithAbandon = h.abandonedCalls.Load()
	rep.WorstOverrun = time.Duration(h.worstOver.Load())
	rep.WorstOverrunClean = time.Duration(h.worstOverClean.Load())
	rep.Lag = time.Duration(h.lag.Load())
	rep.ViolationCount = h.nviol.Load()
	h.vmu.Lock()
	rep.Violations = append([]string(nil), h.viol...)
	h.vmu.Unlock()
	return rep
}

func (h *harness) waitFor(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// liveness checks, for every completed cycle, that the breaker is closed
// by the bound after the outage ends and stays closed to the cycle's end.
func (h *harness) liveness(st *stageState, end time.Time, sr *StageReport) {
	st.tmu.Lock()
	trs := append([]breaker.Transition(nil), st.transitions...)
	st.tmu.Unlock()
	for _, tr := range trs {
		if tr.To == breaker.Open {
			sr.Opens++
		}
	}
	gap := time.Duration(float64(time.Second) / h.cfg.Rate)
	bound := livenessBound(st.p, h.cfg.Slack+time.Duration(h.schedLag.Load()), gap)
	sr.LivenessBound = bound
	stateAt := func(t time.Time) (breaker.State, time.Time) {
		s, since := breaker.Closed, h.t0
		for _, tr := range trs {
			if tr.At.After(t) {
				break
			}
			s, since = tr.To, tr.At
		}
		return s, since
	}
	for k := 0; ; k++ {
		cycle := h.t0.Add(time.Duration(k) * h.cfg.Cycle)
		recovery := cycle.Add(time.Duration(phaseEnds[Outage] * float64(h.cfg.Cycle)))
		cycleEnd := cycle.Add(h.cfg.Cycle)
		if cycleEnd.After(end.Add(h.cfg.Slack)) {
			break
		}
		check := recovery.Add(bound)
		s, since := stateAt(check)
		closedAfter := max(since.Sub(recovery), 0)
		ok := s == breaker.Closed
		for _, tr := range trs {
			if tr.At.After(check) && !tr.At.After(cycleEnd) {
				ok = false
			}
		}
		sr.Liveness = append(sr.Liveness, Liveness{Cycle: k, ClosedAfter: closedAfter, OK: ok})
		if !ok {
			h.violate("%s: cycle %d: breaker %v %v after the outage ended (bound %v), or reopened before the cycle's end", st.p.name, k, s, bound, bound)
		}
	}
}

// trail renders a result's attempts for a violation message.
func trail(res fallback.Result[string]) string {
	var b strings.Builder
	for _, a := range res.Attempts() {
		if a.Skip != fallback.NotSkipped {
			fmt.Fprintf(&b, "[%s skipped: %v] ", a.Tier, a.Skip)
			continue
		}
		fmt.Fprintf(&b, "[%s #%d %s in %v, wait %v] ", a.Tier, a.N, a.Verdict.Class, a.Latency, a.Wait)
	}
	return b.String()
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
