package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/chaos"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	"github.com/tierguard/tierguard/internal/testbed/gemrest"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// The models of scenarios 2–6: a primary and its fallback.
const (
	proModel   = "gemini-2.5-pro"
	flashModel = "gemini-2.5-flash"
)

const apiKey = "scenario-key"

// client returns a gemrest client for model on srv, over srv's keep-alive
// HTTP client.
func client(srv *fakegemini.Server, model, name string) *gemrest.Client {
	c, err := gemrest.New(gemrest.Config{BaseURL: srv.URL(), APIKey: apiKey, Model: model, Name: name, HTTPClient: srv.Client()})
	if err != nil {
		panic(err)
	}
	return c
}

// clock measures offsets from the start of a run.
type clock struct{ t0 time.Time }

func (c clock) since(t time.Time) time.Duration { return t.Sub(c.t0) }
func (c clock) now() time.Duration              { return time.Since(c.t0) }

// callLog records the upstream calls a run makes, per tier, client-side:
// when each started and how it was classified.
type callLog struct {
	clock
	mu    sync.Mutex
	calls map[string][]call
}

type call struct {
	at    time.Duration
	class classify.Class
}

func newCallLog(c clock) *callLog { return &callLog{clock: c, calls: map[string][]call{}} }

func (l *callLog) add(tier string, at time.Duration, class classify.Class) {
	l.mu.Lock()
	l.calls[tier] = append(l.calls[tier], call{at: at, class: class})
	l.mu.Unlock()
}

// count returns how many calls to tier started in [from, until).
func (l *callLog) count(tier string, from, until time.Duration) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.calls[tier] {
		if c.at >= from && c.at < until {
			n++
		}
	}
	return n
}

// loggedTier records every call of a tier in a callLog.
type loggedTier[In any] struct {
	inner fallback.ModelTier[In, gemrest.Response]
	log   *callLog
}

func (t loggedTier[In]) Name() string { return t.inner.Name() }

func (t loggedTier[In]) Call(ctx context.Context, in In) (gemrest.Response, error) {
	at := t.log.now()
	out, err := t.inner.Call(ctx, in)
	class := classify.OK
	if err != nil {
		class = classify.Classify(err).Class
	}
	t.log.add(t.inner.Name(), at, class)
	return out, err
}

// transitions records breaker transitions.
type transitions struct {
	clock
	mu  sync.Mutex
	all []transition
}

type transition struct {
	name     string
	at       time.Duration
	from, to breaker.State
}

func (t *transitions) record(tr breaker.Transition) {
	t.mu.Lock()
	t.all = append(t.all, transition{name: tr.Name, at: t.since(tr.At), from: tr.From, to: tr.To})
	t.mu.Unlock()
}

// first returns the first transition of breaker name to state to at or
// after from.
func (t *transitions) first(name string, to breaker.State, from time.Duration) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tr := range t.all {
		if tr.name == name && tr.to == to && tr.at >= from {
			return tr.at, true
		}
	}
	return 0, false
}

// countTo counts the transitions of breaker name to state to in [from, until).
func (t *transitions) countTo(name string, to breaker.State, from, until time.Duration) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, tr := range t.all {
		if tr.name == name && tr.to == to && tr.at >= from && tr.at < until {
			n++
		}
	}
	return n
}

func (t *transitions) total(name string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, tr := range t.all {
		if tr.name == name {
			n++
		}
	}
	return n
}

// answer is the JSON every tier is asked for; a valid answer decodes to it.
type answer struct {
	Model  string `json:"model"`
	Answer string `json:"answer"`
}

// validText accepts a text that is JSON with a non-empty answer: what a
// unary answer carries, and what a stream's chunks assemble to.
var validText = validate.Decode(func(a answer) error {
	if a.Answer == "" {
		return validate.Errorf("decode", "empty answer")
	}
	return nil
})

// validAnswer accepts answers whose text is JSON with a non-empty answer.
var validAnswer = validate.Field(func(r gemrest.Response) string { return r.Text }, validText)

// tierOpts configures one stage of the two-tier chain of scenarios 2–6.
type tierOpts struct {
	attempts   int
	tryTimeout time.Duration
	budget     bool // a gRPC-style retry budget (10 tokens, 0.1 per success)
}

// chainOpts configures the two-tier chain of scenarios 2–6.
type chainOpts struct {
	deadline time.Duration
	clients  int
	cooldown time.Duration
	pro      tierOpts
	flash    tierOpts
	// proFaults, when set, wraps pro's tier with chaos.Tier on this
	// switch, inside the call log: injected calls count as pro calls, as
	// the fake's faults do.
	proFaults *chaos.Switch
	// proOnly leaves the fallback tier out.
	proOnly bool
}

// rig is a two-tier chain (pro → flash) against a fake server, with its
// instrumentation.
type rig struct {
	srv   *fakegemini.Server
	chain *fallback.Chain[string, gemrest.Response]
	log   *callLog
	trs   *transitions
	pro   *breaker.Breaker
	clock clock
}

// newRig builds the chain. Each tier sits behind a bulkhead as large as the
// client count, a breaker (5 failures in a row or half of at least 20 calls
// over 2s; cooldown o.cooldown; one probe at a time, one success closes)
// and a retry policy with full jitter (50ms base, 250ms cap), every answer
// validated as JSON; one deadline (o.deadline) per request.
func newRig(srv *fakegemini.Server, o chainOpts) *rig {
	r := &rig{srv: srv, clock: clock{t0: time.Now()}}
	r.log = newCallLog(r.clock)
	r.trs = &transitions{clock: r.clock}
	stage := func(name, model string, t tierOpts) fallback.Stage[string, gemrest.Response] {
		bh, err := bulkhead.New(bulkhead.Config{Name: name, Max: o.clients})
		must(err)
		br, err := breaker.New(breaker.Config{
			Name: name, ConsecutiveFailures: 5, FailureRatio: 0.5, MinCalls: 20, Window: 2 * time.Second,
			Cooldown: o.cooldown,
		})
		must(err)
		br.Observe(r.trs.record)
		pol := retry.Policy{MaxAttempts: t.attempts, BaseDelay: 50 * time.Millisecond, MaxDelay: 250 * time.Millisecond}
		if t.budget {
			pol.Budget, err = retry.NewBudget(10, 0.1)
			must(err)
		}
		var tier fallback.ModelTier[string, gemrest.Response] = gemrest.NewTier(client(srv, model, name), func(q string) gemrest.Request {
			return gemrest.Request{Prompt: q, JSON: true}
		})
		if o.proFaults != nil && name == "pro" {
			tier = chaos.Tier(tier, o.proFaults)
		}
		return fallback.Stage[string, gemrest.Response]{
			Tier: loggedTier[string]{inner: tier, log: r.log}, Model: model, Provider: "gcp.gemini",
			Bulkhead: bh, Breaker: br, Retry: pol, TryTimeout: t.tryTimeout, Validate: validAnswer,
		}
	}
	stages := []fallback.Stage[string, gemrest.Response]{stage("pro", proModel, o.pro)}
	if !o.proOnly {
		stages = append(stages, stage("flash", flashModel, o.flash))
	}
	r.pro = stages[0].Breaker
	chain, err := fallback.New(fallback.Config[string, gemrest.Response]{Stages: stages, Total: o.deadline})
	must(err)
	r.chain = chain
	return r
}

// close stops the breakers' cooldown timers.
func (r *rig) close() {
	for _, st := range r.chain.Stages() {
		st.Breaker.Reset()
	}
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// outcome is one request of a closed-loop run.
type outcome struct {
	start, end time.Duration
	tier       string // the tier that answered, "" for none
	calls      int    // upstream calls the request made
	deadline   time.Duration
	err        error
}

func (o outcome) latency() time.Duration { return o.end - o.start }

// overrun is how far past its deadline the request ended (≤ 0: in time).
func (o outcome) overrun() time.Duration { return o.latency() - o.deadline }

// closedLoop runs clients that send one request after another until
// duration has passed since c.t0, and returns every request's outcome (an
// outcome, or a scenario's own record that embeds one).
func closedLoop[O any](c clock, clients int, duration time.Duration, do func(n int) O) []O {
	var mu sync.Mutex
	var all []O
	var seq atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			var mine []O
			for c.now() < duration {
				mine = append(mine, do(int(seq.Add(1))))
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return all
}

// doChain sends one request through the rig's chain.
func (r *rig) doChain(n int, deadline time.Duration) outcome {
	q := fmt.Sprintf("Question %d: what is the answer?", n)
	o := outcome{start: r.clock.now(), deadline: deadline}
	res, err := r.chain.Do(context.Background(), q)
	o.end = r.clock.now()
	o.calls = res.UpstreamCalls
	o.err = err
	if err == nil {
		o.tier = res.Tier
	}
	return o
}

// summary are the measures common to the closed-loop scenarios.
type summary struct {
	requests, answered int
	byTier             map[string]int
	p50, p99           time.Duration
	late               int
	worstOverrun       time.Duration
}

func summarize(os []outcome) summary {
	s := summary{byTier: map[string]int{}}
	lat := make([]time.Duration, 0, len(os))
	for _, o := range os {
		s.requests++
		if o.err == nil {
			s.answered++
			s.byTier[o.tier]++
		}
		lat = append(lat, o.latency())
		if ov := o.overrun(); ov > 0 {
			s.late++
		}
		s.worstOverrun = max(s.worstOverrun, o.overrun())
	}
	s.p50, s.p99 = percentile(lat, 0.50), percentile(lat, 0.99)
	return s
}

func (s summary) fill(out sample) {
	out["requests"] = float64(s.requests)
	out["success"] = ratio(s.answered, s.requests)
	out["p50"] = millis(s.p50)
	out["p99"] = millis(s.p99)
	out["late"] = float64(s.late)
	out["overrun"] = millis(max(s.worstOverrun, 0))
}

func ratio(a, b int) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

// within returns the outcomes that started in [from, until).
func within(os []outcome, from, until time.Duration) []outcome {
	var out []outcome
	for _, o := range os {
		if o.start >= from && o.start < until {
			out = append(out, o)
		}
	}
	return out
}

// plainTwoTier is a hand-written client without tierguard, for reference:
// for each model in order, up to attempts calls, retrying what classify
// calls retryable after max(server's retry-after, base·2ⁿ⁻¹), as long as
// the wait fits the deadline; then the next model.
func plainTwoTier(ctx context.Context, log *callLog, tiers []*gemrest.Client, attempts int, base time.Duration, q string) (string, int, error) {
	calls := 0
	var last error
	for _, c := range tiers {
		for n := 1; n <= attempts; n++ {
			at := log.now()
			resp, err := c.Call(ctx, gemrest.Request{Prompt: q, JSON: true})
			calls++
			if err == nil {
				err = validAnswer.Validate(resp)
			}
			v := classify.InContext(ctx, classify.Classify(err))
			log.add(c.Name(), at, v.Class)
			if err == nil {
				return c.Name(), calls, nil
			}
			last = err
			if !classify.DefaultTable().Action(v.Class).Retry || n == attempts {
				break
			}
			wait := max(v.RetryAfter, base<<(n-1))
			if d, ok := ctx.Deadline(); ok && time.Until(d) < wait+10*time.Millisecond {
				break
			}
			if sleep(ctx, wait) != nil {
				return "", calls, ctx.Err()
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	if last == nil {
		last = errors.New("no tier")
	}
	return "", calls, last
}

// stalls measures how late a 1 ms timer fires while a run goes on: the
// times the process was kept from running. On a shared machine this is what
// turns an on-time return into a late one, whatever the library does; every
// table shows the longest stall next to the worst overrun, and the in-time
// check discounts the stalls that overlapped each late request.
type stalls struct {
	clock
	stop  chan struct{}
	done  chan struct{}
	worst time.Duration
	spans []span // stalls longer than a millisecond
}

type span struct{ from, to time.Duration }

func watchStalls(c clock) *stalls {
	s := &stalls{clock: c, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTimer(time.Millisecond)
		defer t.Stop()
		for {
			start := s.now()
			t.Reset(time.Millisecond)
			select {
			case <-s.stop:
				return
			case <-t.C:
				end := s.now()
				late := end - start - time.Millisecond
				s.worst = max(s.worst, late)
				if late > time.Millisecond {
					s.spans = append(s.spans, span{from: start + time.Millisecond, to: end})
				}
			}
		}
	}()
	return s
}

// end stops the watch and returns the longest stall seen.
func (s *stalls) end() time.Duration {
	close(s.stop)
	<-s.done
	return s.worst
}

// during returns how long the process was stalled within [from, to). Call
// it after end.
func (s *stalls) during(from, to time.Duration) time.Duration {
	var d time.Duration
	for _, sp := range s.spans {
		if lo, hi := max(sp.from, from), min(sp.to, to); hi > lo {
			d += hi - lo
		}
	}
	return d
}

// excess returns the worst overrun of os beyond the stalls that overlapped
// each request (≤ 0: every request was in time but for the machine).
func (s *stalls) excess(os []outcome) time.Duration {
	worst := time.Duration(math.MinInt64)
	for _, o := range os {
		worst = max(worst, o.overrun()-s.during(o.start, o.end))
	}
	return worst
}

// sleep waits d or until ctx ends, whichever comes first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
