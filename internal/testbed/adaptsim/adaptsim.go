// Package adaptsim is the adaptive-concurrency scenario of issue 48, as a
// library so that the scenarios command (tierguard's fixed and adaptive
// bulkheads) and benchcmp (the same, beside failsafe-go's adaptive
// limiter, which the root module must not import) run the very same
// provider and load: a provider whose concurrency capacity drops from 64
// to 24 — beyond it a fast 503, near it rising latency — and recovers,
// under 48 concurrent clients of three priorities (interactive 16, batch
// 24, free 8). A refused or failed call falls to a fallback (a sleep) and
// the client comes back.
//
// Time is scaled: Config.Scale model seconds pass in one real second, so
// a 1 s median latency is 50 ms at the default scale of 20; every
// duration reported is in model time.
package adaptsim

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/bulkhead"
)

// Config is the scenario's shape, in model time.
type Config struct {
	// Scale is how many model seconds pass in one real second.
	Scale float64
	// Median is the provider's median latency far from its capacity.
	Median time.Duration
	// Healthy, Drop and Recovered are the phases' lengths; High and Low
	// the provider's capacity in them (High again once recovered).
	Healthy, Drop, Recovered time.Duration
	High, Low                int
	// Clients by priority: Interactive, Batch and Sheddable ("free").
	Interactive, Batch, Free int
	// Fallback is how long a refused or failed call's fallback takes.
	Fallback time.Duration
}

// Default is the scenario.
func Default() Config {
	return Config{Scale: 20, Median: time.Second, Healthy: 20 * time.Second, Drop: 40 * time.Second, Recovered: 40 * time.Second,
		High: 64, Low: 24, Interactive: 16, Batch: 24, Free: 8, Fallback: 300 * time.Millisecond}
}

// HandSize is the static bulkhead's size by the hand formula: mean
// latency × target QPS × 1.3, halved so that one feature cannot starve
// the others. The target QPS is the offered load at the median latency.
func (c Config) HandSize() int {
	clients := float64(c.Interactive + c.Batch + c.Free)
	qps := clients / c.Median.Seconds()
	return int(math.Ceil(c.Median.Seconds() * qps * 1.3 / 2))
}

// real converts model time to real time.
func (c Config) real(d time.Duration) time.Duration { return time.Duration(float64(d) / c.Scale) }

// model converts real time to model time.
func (c Config) model(d time.Duration) time.Duration { return time.Duration(float64(d) * c.Scale) }

// Limiter is one contender: it admits a call of priority p, or refuses
// it; done reports how the admitted call ended (its upstream latency,
// whether the provider refused it for overload) and frees its slot.
type Limiter interface {
	Acquire(ctx context.Context, p bulkhead.Priority) (done func(latency time.Duration, overloaded bool), ok bool)
	// Limit is the limit now.
	Limit() int
}

// Static returns a fixed bulkhead of n slots.
func Static(n int) Limiter {
	b, err := bulkhead.New(bulkhead.Config{Name: "static", Max: n})
	if err != nil {
		panic(err)
	}
	return bulkheadLimiter{b}
}

// Bulkhead returns a contender of a tierguard bulkhead, fed with each
// call's latency and overload as throttle.Feed feeds a chain's.
func Bulkhead(cfg bulkhead.Config) Limiter {
	b, err := bulkhead.New(cfg)
	if err != nil {
		panic(err)
	}
	return bulkheadLimiter{b}
}

type bulkheadLimiter struct{ b *bulkhead.Bulkhead }

func (l bulkheadLimiter) Limit() int { return l.b.Limit() }

func (l bulkheadLimiter) Acquire(ctx context.Context, _ bulkhead.Priority) (func(time.Duration, bool), bool) {
	if l.b.Acquire(ctx) != nil {
		return nil, false
	}
	return func(lat time.Duration, over bool) {
		s := bulkhead.Latency
		if over {
			s = bulkhead.Overload
		}
		l.b.Record(lat, s)
		l.b.Release()
	}, true
}

// Oracle returns a limiter that knows the provider's capacity at every
// instant and admits up to share of it, first come, priorities aside: the
// mark no limiter that learns from calls can pass, since it never spends
// a call learning. Make it just before Run: its phases are timed from
// when it is made.
func Oracle(c Config, share float64) Limiter {
	return &oracle{c: c, share: share, start: time.Now()}
}

type oracle struct {
	c     Config
	share float64
	start time.Time
	mu    sync.Mutex
	n     int
}

func (o *oracle) Limit() int {
	capacity := o.c.High
	if at := o.c.model(time.Since(o.start)); at >= o.c.Healthy && at < o.c.Healthy+o.c.Drop {
		capacity = o.c.Low
	}
	return int(o.share * float64(capacity))
}

func (o *oracle) Acquire(context.Context, bulkhead.Priority) (func(time.Duration, bool), bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n >= o.Limit() {
		return nil, false
	}
	o.n++
	return func(time.Duration, bool) {
		o.mu.Lock()
		o.n--
		o.mu.Unlock()
	}, true
}

// provider is the fake LLM API: a concurrency capacity, a 503 beyond it,
// latency rising as calls in flight near it.
type provider struct {
	c        Config
	capacity atomic.Int64
	inflight atomic.Int64
	n503     atomic.Int64
}

// call makes one call; it reports the latency (real time) and whether the
// provider answered.
func (p *provider) call(rng *rand.Rand) (time.Duration, bool) {
	n := p.inflight.Add(1)
	defer p.inflight.Add(-1)
	c := p.capacity.Load()
	if n > c {
		p.n503.Add(1)
		d := p.c.real(p.c.Median / 20)
		time.Sleep(d)
		return d, false
	}
	u := float64(n) / float64(c)
	d := time.Duration(float64(p.c.real(p.c.Median)) * (0.6 + 0.8*rng.Float64()) * (1 + 0.5*u*u*u*u))
	time.Sleep(d)
	return d, true
}

// Report is one contender's run.
type Report struct {
	Name string
	// Answers are the calls the provider answered, Goodput the same per
	// model second.
	Answers int
	Goodput float64
	// Upstream503 counts the provider's refusals; Refused, the local ones,
	// and Failed (refused locally or upstream), by priority.
	Upstream503 int
	Refused     map[bulkhead.Priority]int
	Failed      map[bulkhead.Priority]int
	// P99 is each priority's 99th percentile latency of answers (from the
	// acquisition on), in the healthy phase and in the drop.
	P99Healthy, P99Drop map[bulkhead.Priority]time.Duration
	// InteractiveFirstRefusal and LowFirstShed are when, after the drop,
	// the limiter first refused an interactive call, and a batch or free
	// one (-1: never). The provider's own 503s are not refusals.
	InteractiveFirstRefusal, LowFirstShed time.Duration
	// ConvergeDrop and ConvergeRecover are how long after each change the
	// limit first came within 20% of the capacity (-1: never).
	ConvergeDrop, ConvergeRecover time.Duration
	// Limits are the limit at the end of each phase; PhaseGoodput, the
	// answers per model second in each.
	Limits       [3]int
	PhaseGoodput [3]float64
}

type answer struct {
	at, lat time.Duration
	p       bulkhead.Priority
}

// Run runs the scenario against lim and reports it.
func Run(c Config, name string, lim Limiter, seed uint64) Report {
	p := &provider{c: c}
	p.capacity.Store(int64(c.High))
	start := time.Now()
	total := c.Healthy + c.Drop + c.Recovered
	end := start.Add(c.real(total))
	since := func() time.Duration { return c.model(time.Since(start)) }

	var mu sync.Mutex
	var answers []answer
	refused := map[bulkhead.Priority]int{}
	failed := map[bulkhead.Priority]int{}
	firstInteractive, firstLow := time.Duration(-1), time.Duration(-1)
	fail := func(pr bulkhead.Priority, local bool) {
		at := since()
		mu.Lock()
		failed[pr]++
		if local {
			refused[pr]++
		}
		if local && at >= c.Healthy && at < c.Healthy+c.Drop {
			if pr == bulkhead.Interactive && firstInteractive < 0 {
				firstInteractive = at - c.Healthy
			}
			if pr != bulkhead.Interactive && firstLow < 0 {
				firstLow = at - c.Healthy
			}
		}
		mu.Unlock()
	}

	var wg sync.WaitGroup
	worker := func(pr bulkhead.Priority, i int) {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		ctx := bulkhead.WithPriority(context.Background(), pr)
		for time.Now().Before(end) {
			t0 := time.Now()
			done, ok := lim.Acquire(ctx, pr)
			if !ok {
				fail(pr, true)
				time.Sleep(c.real(c.Fallback))
				continue
			}
			lat, answered := p.call(rng)
			done(lat, !answered)
			if !answered {
				fail(pr, false)
				time.Sleep(c.real(c.Fallback))
				continue
			}
			a := answer{at: since(), lat: c.model(time.Since(t0)), p: pr}
			mu.Lock()
			answers = append(answers, a)
			mu.Unlock()
		}
	}
	i := 0
	for _, g := range []struct {
		p bulkhead.Priority
		n int
	}{{bulkhead.Interactive, c.Interactive}, {bulkhead.Batch, c.Batch}, {bulkhead.Sheddable, c.Free}} {
		for range g.n {
			i++
			id := i
			wg.Go(func() { worker(g.p, id) })
		}
	}

	// The sampler moves the capacity and watches the limit.
	r := Report{Name: name, ConvergeDrop: -1, ConvergeRecover: -1}
	tick := time.NewTicker(c.real(c.Median / 20))
	phase := 0
	for now := range tick.C {
		at := c.model(now.Sub(start))
		if at >= total {
			break
		}
		l := float64(lim.Limit())
		switch {
		case phase == 0 && at >= c.Healthy:
			r.Limits[0] = int(l)
			p.capacity.Store(int64(c.Low))
			phase = 1
		case phase == 1 && at >= c.Healthy+c.Drop:
			r.Limits[1] = int(l)
			p.capacity.Store(int64(c.High))
			phase = 2
		}
		within := func(capacity int) bool { return math.Abs(l-float64(capacity)) <= 0.2*float64(capacity) }
		if phase == 1 && r.ConvergeDrop < 0 && within(c.Low) {
			r.ConvergeDrop = at - c.Healthy
		}
		if phase == 2 && r.ConvergeRecover < 0 && within(c.High) {
			r.ConvergeRecover = at - c.Healthy - c.Drop
		}
	}
	tick.Stop()
	r.Limits[2] = lim.Limit()
	wg.Wait()

	r.Answers = len(answers)
	for _, a := range answers {
		switch {
		case a.at < c.Healthy:
			r.PhaseGoodput[0]++
		case a.at < c.Healthy+c.Drop:
			r.PhaseGoodput[1]++
		default:
			r.PhaseGoodput[2]++
		}
	}
	for k, d := range []time.Duration{c.Healthy, c.Drop, c.Recovered} {
		r.PhaseGoodput[k] /= d.Seconds()
	}
	r.Goodput = float64(len(answers)) / total.Seconds()
	r.Upstream503 = int(p.n503.Load())
	r.Refused, r.Failed = refused, failed
	r.InteractiveFirstRefusal, r.LowFirstShed = firstInteractive, firstLow
	r.P99Healthy, r.P99Drop = map[bulkhead.Priority]time.Duration{}, map[bulkhead.Priority]time.Duration{}
	for _, pr := range []bulkhead.Priority{bulkhead.Interactive, bulkhead.Batch, bulkhead.Sheddable} {
		var healthy, drop []time.Duration
		for _, a := range answers {
			switch {
			case a.p != pr:
			case a.at < c.Healthy:
				healthy = append(healthy, a.lat)
			case a.at < c.Healthy+c.Drop:
				drop = append(drop, a.lat)
			}
		}
		r.P99Healthy[pr], r.P99Drop[pr] = p99(healthy), p99(drop)
	}
	return r
}

func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[int(math.Ceil(0.99*float64(len(ds))))-1]
}

func sec(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// Write prints the reports as a Markdown table, with the goals
// checked below it against the adaptive row named adaptive.
func Write(w io.Writer, c Config, rs []Report, adaptive string) {
	fmt.Fprintf(w, "Capacity %d → %d at %v → %d at %v; %d clients (interactive %d, batch %d, free %d); median latency %v; time ×%g (model seconds below). Static by hand formula: %d.\n\n",
		c.High, c.Low, c.Healthy, c.High, c.Healthy+c.Drop, c.Interactive+c.Batch+c.Free, c.Interactive, c.Batch, c.Free, c.Median, c.Scale, c.HandSize())
	fmt.Fprintln(w, "| variant | goodput/s | by phase | answers | upstream 503 | refused I/B/F | failed I/B/F | p99 I healthy | p99 I/B/F drop | 1st I / 1st B,F refusal in drop | converge drop / recover | limit at phase ends |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	I, B, F := bulkhead.Interactive, bulkhead.Batch, bulkhead.Sheddable
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %.1f | %.1f/%.1f/%.1f | %d | %d | %d/%d/%d | %d/%d/%d | %s | %s / %s / %s | %s / %s | %s / %s | %v |\n",
			r.Name, r.Goodput, r.PhaseGoodput[0], r.PhaseGoodput[1], r.PhaseGoodput[2], r.Answers, r.Upstream503, r.Refused[I], r.Refused[B], r.Refused[F], r.Failed[I], r.Failed[B], r.Failed[F],
			ms(r.P99Healthy[I]), ms(r.P99Drop[I]), ms(r.P99Drop[B]), ms(r.P99Drop[F]),
			secMs(r.InteractiveFirstRefusal), secMs(r.LowFirstShed), sec(r.ConvergeDrop), sec(r.ConvergeRecover), r.Limits)
	}
	var a *Report
	bestStatic, others := 0.0, map[string]float64{}
	for i := range rs {
		switch {
		case rs[i].Name == adaptive:
			a = &rs[i]
		case strings.HasPrefix(rs[i].Name, "static"):
			bestStatic = max(bestStatic, rs[i].Goodput)
		case strings.HasPrefix(rs[i].Name, adaptive), strings.HasPrefix(rs[i].Name, OracleName):
		default:
			others[rs[i].Name] = rs[i].Goodput
		}
	}
	if a == nil {
		return
	}
	fmt.Fprintln(w)
	check := func(what string, ok bool, got string) {
		verdict := "MET"
		if !ok {
			verdict = "MISS"
		}
		fmt.Fprintf(w, "- %s: %s (%s)\n", verdict, what, got)
	}
	check("goodput ≥ the best static size's", a.Goodput >= bestStatic, fmt.Sprintf("%.1f vs %.1f", a.Goodput, bestStatic))
	for n, g := range others {
		check("goodput ≥ "+n+"'s", a.Goodput >= g, fmt.Sprintf("%.1f vs %.1f", a.Goodput, g))
	}
	ratio := float64(a.P99Drop[I]) / float64(a.P99Healthy[I])
	check("interactive p99 in the drop ≤ 1.2× healthy", ratio <= 1.2, fmt.Sprintf("%.2f×", ratio))
	check("batch and free shed before any interactive call is refused in the drop",
		a.LowFirstShed >= 0 && (a.InteractiveFirstRefusal < 0 || a.InteractiveFirstRefusal > a.LowFirstShed),
		"first interactive refusal "+secMs(a.InteractiveFirstRefusal)+", first batch/free shed "+secMs(a.LowFirstShed))
	check("limit within 20% of capacity ≤ 5 s after the drop", a.ConvergeDrop >= 0 && a.ConvergeDrop <= 5*time.Second, sec(a.ConvergeDrop))
	check("limit within 20% of capacity ≤ 5 s after the recovery", a.ConvergeRecover >= 0 && a.ConvergeRecover <= 5*time.Second, sec(a.ConvergeRecover))
}

func secMs(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return fmt.Sprintf("%.3f s", d.Seconds())
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// TierguardAdaptive names the adaptive contender the goals are checked
// against.
const TierguardAdaptive = "tierguard adaptive"

// Contender is a named limiter, made fresh for each run.
type Contender struct {
	Name string
	New  func() Limiter
}

// OracleName names the oracle's row: a mark, not a contender.
const OracleName = "oracle"

// Contenders are tierguard's side of the scenario: fixed bulkheads of
// the hand formula's size, of the low capacity and of the offered load,
// and the adaptive bulkhead — starting at the hand formula's size, its
// other parameters the defaults, a Reserve of 0.1 — failing fast and
// with a wait of a quarter of the median latency (highest priority
// first); and the oracle at 0.9 of the capacity, the best a limiter can
// do here (the provider answers most per second there).
func Contenders(c Config) []Contender {
	hand := c.HandSize()
	clients := c.Interactive + c.Batch + c.Free
	adaptive := func(wait time.Duration) func() Limiter {
		return func() Limiter {
			cfg := bulkhead.Config{Name: "adaptive", Max: hand, Reserve: 0.1, Adaptive: &bulkhead.Adaptive{Floor: 4, Ceiling: 128}}
			if wait > 0 {
				cfg.MaxWait, cfg.Queue = c.real(wait), clients
			}
			return Bulkhead(cfg)
		}
	}
	return []Contender{
		{fmt.Sprintf("static %d (hand formula)", hand), func() Limiter { return Static(hand) }},
		{fmt.Sprintf("static %d", c.Low), func() Limiter { return Static(c.Low) }},
		{fmt.Sprintf("static %d", clients), func() Limiter { return Static(clients) }},
		{TierguardAdaptive, adaptive(0)},
		{TierguardAdaptive + " + wait", adaptive(c.Median / 4)},
		{OracleName + " (knows the capacity, admits 0.9 of it)", func() Limiter { return Oracle(c, 0.9) }},
	}
}
