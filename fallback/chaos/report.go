package chaos

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/deadline"
	"github.com/tierguard/tierguard/fallback"
)

// Report is what a drill run saw: the five signals a resilient chain is
// watched by — breaker trips, bulkhead rejection rate, fallback rate,
// cache-hit ratio, end-to-end success — with the latency and the deadline
// overrun, what each rule injected, and each check's verdict.
type Report struct {
	// Name is the run's; Start and Duration its span.
	Name     string
	Start    time.Time
	Duration time.Duration

	// Requests counts the requests the chain ended during the run; Dropped
	// the load's requests not sent because Concurrency were in flight.
	Requests int
	Dropped  int
	// Where the answers came from: the first tier (Primary), a later one
	// (Fallback), the cache, the default; Failed got no answer.
	Primary, Fallback, Cache, Default, Failed int

	// BreakerTrips counts closed → open transitions of the chain's
	// breakers, forced ones (a drill's Open) aside: they are in ForcedOpens.
	BreakerTrips int
	ForcedOpens  int
	// BulkheadRejectionRate is rejected / (rejected + accepted) over the
	// chain's bulkheads during the run.
	BulkheadRejectionRate float64
	// FallbackRate is the share of answers a tier other than the first gave.
	FallbackRate float64
	// CacheHitRatio is the share of requests the cache answered, and
	// DefaultRatio the share the default answer did.
	CacheHitRatio float64
	DefaultRatio  float64
	// Success is the share of requests that got an answer, from any source:
	// what users see.
	Success float64

	// Latency is the requests' end-to-end latency.
	Latency Latencies
	// WorstOverrun is how far past its deadline the latest request ended;
	// 0 when none did.
	WorstOverrun time.Duration

	// Breakers and Bulkheads detail the guards; Rules what each of the
	// drill's rules did.
	Breakers  []BreakerReport
	Bulkheads []BulkheadReport
	Rules     []RuleStatus

	// Checks holds each check's verdict, in order.
	Checks []CheckResult

	samples []time.Duration
}

// Latencies summarises end-to-end latencies (nearest rank).
type Latencies struct {
	P50, P90, P99, Max time.Duration
}

// BreakerReport is one breaker's part of a run.
type BreakerReport struct {
	// Name is the breaker's name.
	Name string
	// Trips and ForcedOpens count its closed → open transitions.
	Trips, ForcedOpens int
	// Transitions lists its transitions during the run (the first 256).
	Transitions []breaker.Transition
}

// BulkheadReport is one bulkhead's part of a run.
type BulkheadReport struct {
	// Name is the bulkhead's name.
	Name string
	// Accepted and Rejected count its acquisitions during the run.
	Accepted, Rejected uint64
}

// CheckResult is one check's verdict.
type CheckResult struct {
	// Check says what was required ("success ≥ 99.9%"), Got what was seen.
	Check, Got string
	// Passed is set when the requirement held.
	Passed bool
}

// Passed reports whether every check held.
func (r *Report) Passed() bool {
	for _, c := range r.Checks {
		if !c.Passed {
			return false
		}
	}
	return true
}

// Err returns nil when every check held, or an error listing those that
// did not: require.NoError(t, report.Err()) in a test.
func (r *Report) Err() error {
	var errs []error
	for _, c := range r.Checks {
		if !c.Passed {
			errs = append(errs, fmt.Errorf("%s: got %s", c.Check, c.Got))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("chaos: drill %q failed: %w", r.Name, errors.Join(errs...))
}

// Quantile returns the q-quantile (0 < q ≤ 1) of the requests' latency,
// nearest rank; 0 without requests.
func (r *Report) Quantile(q float64) time.Duration { return quantile(r.samples, q) }

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 || !(q > 0) {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// String renders the report for a terminal or a test log.
func (r *Report) String() string {
	var b strings.Builder
	verdict := "PASS"
	if !r.Passed() {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "drill %q: %s, %v, %d requests (%d dropped by the load)\n", r.Name, verdict, r.Duration, r.Requests, r.Dropped)
	fmt.Fprintf(&b, "  end-to-end success  %s  (primary %d, fallback %d, cache %d, default %d, failed %d)\n",
		pct(r.Success), r.Primary, r.Fallback, r.Cache, r.Default, r.Failed)
	fmt.Fprintf(&b, "  fallback rate       %s\n", pct(r.FallbackRate))
	fmt.Fprintf(&b, "  cache-hit ratio     %s  (default %s)\n", pct(r.CacheHitRatio), pct(r.DefaultRatio))
	fmt.Fprintf(&b, "  breaker trips       %d  (forced open %d)\n", r.BreakerTrips, r.ForcedOpens)
	fmt.Fprintf(&b, "  bulkhead rejections %s\n", pct(r.BulkheadRejectionRate))
	fmt.Fprintf(&b, "  latency             p50 %v, p90 %v, p99 %v, max %v; worst deadline overrun %v\n",
		r.Latency.P50, r.Latency.P90, r.Latency.P99, r.Latency.Max, r.WorstOverrun)
	for _, br := range r.Breakers {
		fmt.Fprintf(&b, "  breaker %s: %d trips, %d forced, %d transitions\n", br.Name, br.Trips, br.ForcedOpens, len(br.Transitions))
	}
	for _, bh := range r.Bulkheads {
		fmt.Fprintf(&b, "  bulkhead %s: %d accepted, %d rejected\n", bh.Name, bh.Accepted, bh.Rejected)
	}
	for _, ru := range r.Rules {
		fmt.Fprintf(&b, "  rule %s: %d of %d matched calls injected", ru.Fault, ru.Injected, ru.Matched)
		if ru.Unsupported > 0 {
			fmt.Fprintf(&b, ", %d unsupported", ru.Unsupported)
		}
		b.WriteByte('\n')
	}
	for _, c := range r.Checks {
		mark := "ok  "
		if !c.Passed {
			mark = "FAIL"
		}
		fmt.Fprintf(&b, "  %s %s: %s\n", mark, c.Check, c.Got)
	}
	return b.String()
}

func pct(x float64) string { return strconv.FormatFloat(100*x, 'f', 2, 64) + "%" }

func (r *Report) judge(checks []Check) {
	for _, c := range checks {
		got, ok := c.eval(r)
		r.Checks = append(r.Checks, CheckResult{Check: c.name, Got: got, Passed: ok})
	}
}

// Check is a requirement on a drill's report; build it with MinSuccess,
// MaxFallbackRate, MaxCacheHitRatio, MaxDefaultRatio, MaxBulkheadRejectionRate,
// MaxBreakerTrips, MinBreakerTrips, MaxLatency or MaxOverrun.
type Check struct {
	name string
	eval func(*Report) (got string, ok bool)
}

// MinSuccess requires an end-to-end success of at least share.
func MinSuccess(share float64) Check {
	return Check{"success ≥ " + pct(share), func(r *Report) (string, bool) { return pct(r.Success), r.Success >= share }}
}

// MaxFallbackRate requires a fallback rate of at most share: a chain that
// answers mostly from its fallback looks healthy while its primary is down.
func MaxFallbackRate(share float64) Check {
	return Check{"fallback rate ≤ " + pct(share), func(r *Report) (string, bool) { return pct(r.FallbackRate), r.FallbackRate <= share }}
}

// MaxCacheHitRatio requires a cache-hit ratio of at most share.
func MaxCacheHitRatio(share float64) Check {
	return Check{"cache-hit ratio ≤ " + pct(share), func(r *Report) (string, bool) { return pct(r.CacheHitRatio), r.CacheHitRatio <= share }}
}

// MaxDefaultRatio requires the default answer to answer at most share of
// the requests: it keeps end-to-end success up whatever happens, so a
// drill bounds it too.
func MaxDefaultRatio(share float64) Check {
	return Check{"default ratio ≤ " + pct(share), func(r *Report) (string, bool) { return pct(r.DefaultRatio), r.DefaultRatio <= share }}
}

// MaxBulkheadRejectionRate requires a bulkhead rejection rate of at most
// share.
func MaxBulkheadRejectionRate(share float64) Check {
	return Check{"bulkhead rejection rate ≤ " + pct(share), func(r *Report) (string, bool) {
		return pct(r.BulkheadRejectionRate), r.BulkheadRejectionRate <= share
	}}
}

// MaxBreakerTrips requires at most n breaker trips (forced opens aside).
func MaxBreakerTrips(n int) Check {
	return Check{"breaker trips ≤ " + strconv.Itoa(n), func(r *Report) (string, bool) { return strconv.Itoa(r.BreakerTrips), r.BreakerTrips <= n }}
}

// MinBreakerTrips requires at least n breaker trips: a drill that breaks a
// tier expects its breaker to notice.
func MinBreakerTrips(n int) Check {
	return Check{"breaker trips ≥ " + strconv.Itoa(n), func(r *Report) (string, bool) { return strconv.Itoa(r.BreakerTrips), r.BreakerTrips >= n }}
}

// MaxLatency requires the q-quantile (0 < q ≤ 1) of the end-to-end latency
// to be at most d.
func MaxLatency(q float64, d time.Duration) Check {
	name := "p" + strconv.FormatFloat(100*q, 'f', -1, 64) + " latency ≤ " + d.String()
	return Check{name, func(r *Report) (string, bool) { got := r.Quantile(q); return got.String(), got <= d }}
}

// MaxOverrun requires every request to end within d of its deadline.
func MaxOverrun(d time.Duration) Check {
	return Check{"worst deadline overrun ≤ " + d.String(), func(r *Report) (string, bool) { return r.WorstOverrun.String(), r.WorstOverrun <= d }}
}

// maxSamples bounds the latencies a run keeps; past it, a uniform sample of
// that size stands for them.
const maxSamples = 1 << 20

// maxTransitions bounds the transitions a report lists per breaker.
const maxTransitions = 256

// collector is the run's fallback.Observer, and watches the chain's
// breakers and bulkheads.
type collector struct {
	fallback.NopObserver
	mu        sync.Mutex
	counting  bool
	start     time.Time
	requests  int
	answered  [3]int // by fallback.Source
	primary   int
	failed    int
	overrun   time.Duration
	samples   []time.Duration
	seen      uint64
	dropped   int
	breakers  []*breakerWatch
	bulkheads []*bulkhead.Bulkhead
	base      []bulkhead.Stats
}

type breakerWatch struct {
	b      *breaker.Breaker
	remove func()
	rep    BreakerReport
}

func newCollector(stages []fallback.StageInfo) *collector {
	c := &collector{}
	for _, s := range stages {
		if s.Breaker != nil && !slices.ContainsFunc(c.breakers, func(w *breakerWatch) bool { return w.b == s.Breaker }) {
			w := &breakerWatch{b: s.Breaker, rep: BreakerReport{Name: s.Breaker.Name()}}
			c.breakers = append(c.breakers, w)
		}
		if s.Bulkhead != nil && !slices.Contains(c.bulkheads, s.Bulkhead) {
			c.bulkheads = append(c.bulkheads, s.Bulkhead)
		}
	}
	return c
}

// begin starts counting.
func (c *collector) begin(start time.Time) {
	c.mu.Lock()
	c.counting, c.start = true, start
	c.base = make([]bulkhead.Stats, len(c.bulkheads))
	for i, b := range c.bulkheads {
		c.base[i] = b.Stats()
	}
	c.mu.Unlock()
	for _, w := range c.breakers {
		w.remove = w.b.Observe(func(tr breaker.Transition) { c.transition(w, tr) })
	}
}

func (c *collector) close() {
	for _, w := range c.breakers {
		if w.remove != nil {
			w.remove()
		}
	}
}

func (c *collector) transition(w *breakerWatch, tr breaker.Transition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.counting {
		return
	}
	if tr.From == breaker.Closed && tr.To == breaker.Open {
		if tr.Forced {
			w.rep.ForcedOpens++
		} else {
			w.rep.Trips++
		}
	}
	if len(w.rep.Transitions) < maxTransitions {
		w.rep.Transitions = append(w.rep.Transitions, tr)
	}
}

func (c *collector) drop() {
	c.mu.Lock()
	c.dropped++
	c.mu.Unlock()
}

// RequestEnded counts every request the chain ends.
func (c *collector) RequestEnded(_ context.Context, e fallback.RequestEnd) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.counting {
		return
	}
	c.requests++
	switch {
	case !e.Answered:
		c.failed++
	case e.Source == fallback.SourceTier && !e.Degraded:
		c.primary++
	case int(e.Source) < len(c.answered):
		c.answered[e.Source]++
	}
	if e.Remaining != deadline.Unlimited && -e.Remaining > c.overrun {
		c.overrun = -e.Remaining
	}
	c.seen++
	if len(c.samples) < maxSamples {
		c.samples = append(c.samples, e.Latency)
	} else if j := mix(c.seen) % c.seen; j < maxSamples {
		c.samples[j] = e.Latency
	}
}

// report stops counting and summarises.
func (c *collector) report(name string, start time.Time, d time.Duration) *Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counting = false
	r := &Report{
		Name: name, Start: start, Duration: d, Requests: c.requests, Dropped: c.dropped,
		Primary: c.primary, Fallback: c.answered[fallback.SourceTier], Cache: c.answered[fallback.SourceCache],
		Default: c.answered[fallback.SourceDefault], Failed: c.failed, WorstOverrun: c.overrun,
	}
	answered := r.Requests - r.Failed
	r.Success = ratio(answered, r.Requests)
	r.FallbackRate = ratio(r.Fallback, answered)
	r.CacheHitRatio = ratio(r.Cache, r.Requests)
	r.DefaultRatio = ratio(r.Default, r.Requests)
	for _, w := range c.breakers {
		r.Breakers = append(r.Breakers, w.rep)
		r.BreakerTrips += w.rep.Trips
		r.ForcedOpens += w.rep.ForcedOpens
	}
	var acc, rej uint64
	for i, b := range c.bulkheads {
		now := b.Stats()
		br := BulkheadReport{Name: b.Name(), Accepted: now.Accepted - c.base[i].Accepted, Rejected: now.Rejected - c.base[i].Rejected}
		acc, rej = acc+br.Accepted, rej+br.Rejected
		r.Bulkheads = append(r.Bulkheads, br)
	}
	if acc+rej > 0 {
		r.BulkheadRejectionRate = float64(rej) / float64(acc+rej)
	}
	r.samples = slices.Clone(c.samples)
	slices.Sort(r.samples)
	r.Latency = Latencies{P50: quantile(r.samples, 0.5), P90: quantile(r.samples, 0.9), P99: quantile(r.samples, 0.99)}
	if n := len(r.samples); n > 0 {
		r.Latency.Max = r.samples[n-1]
	}
	return r
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
