package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
)

// progressEvery is how often the live line is refreshed on a terminal;
// elsewhere it is printed every fourth time.
const progressEvery = 500 * time.Millisecond

// console writes the live progress line and the events around it. On a
// terminal the line is redrawn in place with a carriage return; into a
// pipe or a file, lines are printed whole and less often.
type console struct {
	mu   sync.Mutex
	w    io.Writer // nil: say nothing
	tty  bool
	last string
}

func newConsole(w io.Writer) *console {
	c := &console{w: w}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			c.tty = true
		}
	}
	return c
}

// mute drops everything printed from now on.
func (c *console) mute() {
	c.mu.Lock()
	c.w = nil
	c.mu.Unlock()
}

// event prints a line above the progress line.
func (c *console) event(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.w == nil:
	case c.tty:
		fmt.Fprintf(c.w, "\r%-*s\n%s", len(c.last), s, c.last)
	default:
		fmt.Fprintln(c.w, s)
	}
}

// progress redraws the progress line (always on a terminal, only when
// whole is set elsewhere).
func (c *console) progress(s string, whole bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.w == nil:
	case c.tty:
		fmt.Fprintf(c.w, "\r%-*s", len(c.last), s)
		c.last = s
	case whole:
		fmt.Fprintln(c.w, s)
	}
}

// run refreshes the progress line until the returned stop is called.
func (c *console) run(rec *recorder, g *guards) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	ps := phases(rec.cfg)
	wg.Go(func() {
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		cur := -1
		var prevTotal int64
		prevSource := make([]int64, len(sources))
		for n := 0; ; n++ {
			elapsed := time.Since(rec.t0)
			// Announce every phase entered since the last tick, even one
			// shorter than a tick (or passed while this goroutine waited
			// for a busy CPU).
			for p := phaseAt(ps, elapsed); cur < p && elapsed < rec.cfg.Duration; {
				cur++
				c.event(fmt.Sprintf("%5.1fs  ▸ %s", ps[cur].from.Seconds(), describe(ps[cur].label)))
			}
			if n > 0 {
				total := rec.total.Load()
				mix := make([]int64, len(sources))
				for i := range mix {
					v := rec.bySource[i].Load()
					mix[i], prevSource[i] = v-prevSource[i], v
				}
				c.progress(progressLine(rec, g, ps[cur].label, elapsed, total, total-prevTotal, mix), n%4 == 0)
				prevTotal = total
			}
			select {
			case <-tick.C:
			case <-done:
				c.mu.Lock()
				if c.tty && c.last != "" {
					fmt.Fprintln(c.w)
				}
				c.mu.Unlock()
				return
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// describe says what a phase means, for the event line.
func describe(label string) string {
	switch label {
	case "pro 503 outage":
		return "pro outage: " + proModel + " answers 503 UNAVAILABLE"
	case "pro 429 storm":
		return "429 storm: " + proModel + " answers 429 RESOURCE_EXHAUSTED with RetryInfo"
	case "healthy":
		return "healthy: every model answers (pro sometimes malformed JSON or a stall)"
	}
	return label
}

// progressLine is one live line, short enough for an 80-column terminal
// in the usual case: time, phase, requests so far and their rate, the share
// answered so far, where the last half second's answers came from (local:
// cache and default), and the breakers that are not closed.
func progressLine(rec *recorder, g *guards, phase string, elapsed time.Duration, total, recent int64, mix []int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%5.1fs %-15s %5d req %4.0f/s ok %5.1f%% |", elapsed.Seconds(), phase, total,
		float64(recent)/progressEvery.Seconds(), pct(rec.answered.Load(), total))
	local := mix[sourceIndex("cache")] + mix[sourceIndex("default")]
	for i, name := range sources {
		switch name {
		case "cache", "default":
			continue
		case "error":
			if local > 0 && recent > 0 {
				fmt.Fprintf(&b, " local %.0f%%", pct(local, recent))
			}
		}
		if mix[i] > 0 && recent > 0 {
			fmt.Fprintf(&b, " %s %.0f%%", name, pct(mix[i], recent))
		}
	}
	b.WriteString(" |")
	closed := true
	for _, br := range g.breakers {
		if st := br.State(); st != breaker.Closed {
			fmt.Fprintf(&b, " %s %s", br.Name(), st)
			closed = false
		}
	}
	if closed {
		b.WriteString(" breakers closed")
	}
	return b.String()
}

func pct[N int | int64](n, of N) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

// summary is the run's outcome, ready to print and to check.
type summary struct {
	cfg         config
	requests    int
	answered    int
	bySource    []int
	p50, p95    time.Duration
	p99, max    time.Duration
	overrun     time.Duration // worst, 0 when none was late
	phases      []phaseRow
	transitions []transition
	recovery    time.Duration // from the outage's end to pro's breaker closing
	recovered   bool
	tiers       []tierRow
	errors      map[classify.Class]int
	streams     streamSummary
	metrics     *metricsReport // nil without -metrics
	// stopMetrics ends the instrumentation behind a Prometheus exporter
	// (-prometheus); nil otherwise.
	stopMetrics func()
	// bulkheads are the unary chain's bulkheads' figures at the end.
	bulkheads map[string]bulkhead.Stats
	// records and streamRecords are the run's raw outcomes, for -report.
	records       []record
	streamRecords []streamRecord
	// spend is the ledger's figures per tenant.
	spend []spendRow
}

type phaseRow struct {
	phase
	requests int
	bySource []int
	proCalls int
	p99      time.Duration
}

type tierRow struct {
	name, model string
	upstream    fakegemini.ModelStats
	calls       int
	retries     int
	waited      int
	rejects     int
	skips       map[fallback.Skip]int
	streamCalls int
}

// summarize turns the records into a summary.
func (r *recorder) summarize(stats map[string]fakegemini.ModelStats, stages []fallback.StageInfo) *summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := &r.merged
	s := &summary{cfg: r.cfg, requests: len(m.records), bySource: make([]int, len(sources)),
		transitions: slices.Clone(r.transitions), errors: map[classify.Class]int{}}
	slices.SortFunc(s.transitions, func(a, b transition) int { return int(a.at - b.at) })

	ps := phases(r.cfg)
	s.phases = make([]phaseRow, len(ps))
	lat := make([][]time.Duration, len(ps))
	var all []time.Duration
	for i, p := range ps {
		s.phases[i] = phaseRow{phase: p, bySource: make([]int, len(sources))}
	}
	for _, rec := range m.records {
		s.bySource[rec.source]++
		if rec.class == classify.OK {
			s.answered++
		} else {
			s.errors[rec.class]++
		}
		s.overrun = max(s.overrun, rec.overrun)
		all = append(all, rec.latency)
		i := phaseAt(ps, rec.start)
		row := &s.phases[i]
		row.requests++
		row.bySource[rec.source]++
		row.proCalls += rec.proCalls
		lat[i] = append(lat[i], rec.latency)
	}
	slices.Sort(all)
	s.p50, s.p95, s.p99 = quantile(all, 0.50), quantile(all, 0.95), quantile(all, 0.99)
	if len(all) > 0 {
		s.max = all[len(all)-1]
	}
	for i := range s.phases {
		slices.Sort(lat[i])
		s.phases[i].p99 = quantile(lat[i], 0.99)
	}

	if r.cfg.OutageLen > 0 {
		end := r.cfg.OutageStart + r.cfg.OutageLen
		for _, t := range s.transitions {
			if t.name == "pro" && t.to == breaker.Closed && t.at >= end {
				s.recovery, s.recovered = t.at-end, true
				break
			}
		}
	}

	for _, st := range stages {
		s.tiers = append(s.tiers, tierRow{
			name: st.Tier, model: st.Model, upstream: stats[st.Model],
			calls: m.calls[st.Tier], retries: m.retries[st.Tier], waited: m.waited[st.Tier], rejects: m.rejects[st.Tier], skips: m.skips[st.Tier],
			streamCalls: m.streamCalls[st.Tier],
		})
	}
	s.streams = summarizeStreams(m)
	s.records, s.streamRecords = slices.Clone(m.records), slices.Clone(m.streams)
	return s
}

// quantile is the nearest-rank quantile of sorted durations.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// successRate is the share of requests answered from any source.
func (s *summary) successRate() float64 {
	if s.requests == 0 {
		return 0
	}
	return float64(s.answered) / float64(s.requests)
}

// violations lists the broken invariants.
func (s *summary) violations() []string {
	var v []string
	if s.requests == 0 {
		v = append(v, "no request was made")
	}
	if s.overrun > s.cfg.Slack {
		v = append(v, fmt.Sprintf("an answer came %v after its deadline (slack %v)", round(s.overrun), s.cfg.Slack))
	}
	if s.streams.overrun > s.cfg.Slack {
		v = append(v, fmt.Sprintf("a stream ended %v after its deadline (slack %v)", round(s.streams.overrun), s.cfg.Slack))
	}
	if s.requests > 0 && s.successRate() < s.cfg.MinSuccess {
		v = append(v, fmt.Sprintf("%.2f%% of requests answered, below %.2f%%", 100*s.successRate(), 100*s.cfg.MinSuccess))
	}
	return v
}

// round shortens a duration for display.
func round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Microsecond)
}

func okOrBroken(ok bool) string {
	if ok {
		return "ok"
	}
	return "BROKEN"
}

func (s *summary) print(w io.Writer) {
	c := s.cfg
	fmt.Fprintf(w, "\ntierguard outage demo: %v, %d clients, deadline %v, seed %d\n", c.Duration, c.Clients, c.Deadline, c.Seed)
	fmt.Fprintln(w, "chain: pro ("+proModel+") → legacy ("+legacyModel+", retired) → flash ("+flashModel+") → cache → default")
	fmt.Fprintln(w)

	fmt.Fprintf(w, "%-14s %d, answered %.2f%%   (invariant ≥ %.2f%%: %s)\n", "requests", s.requests, 100*s.successRate(), 100*c.MinSuccess,
		okOrBroken(s.requests > 0 && s.successRate() >= c.MinSuccess))
	fmt.Fprintf(w, "%-14s p50 %v   p95 %v   p99 %v   max %v\n", "latency", round(s.p50), round(s.p95), round(s.p99), round(s.max))
	fmt.Fprintf(w, "%-14s %v past the deadline   (invariant ≤ %v: %s)\n", "worst overrun", round(max(s.overrun, 0)), c.Slack, okOrBroken(s.overrun <= c.Slack))

	fmt.Fprintln(w, "\nanswers by source")
	for i, name := range sources {
		fmt.Fprintf(w, "  %-8s %6d  %5.1f%%\n", name, s.bySource[i], pct(s.bySource[i], s.requests))
	}
	if len(s.errors) > 0 {
		var parts []string
		for _, cl := range classify.Classes() {
			if n := s.errors[cl]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", cl, n))
			}
		}
		fmt.Fprintln(w, "  errors by class:", strings.Join(parts, ", "))
	}

	fmt.Fprintln(w, "\nby phase (requests by start time; local = cache + default)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  phase\twindow\trequests\tpro\tflash\tlocal\terror\tpro calls/req\tp99\t")
	for _, p := range s.phases {
		local := p.bySource[sourceIndex("cache")] + p.bySource[sourceIndex("default")]
		fmt.Fprintf(tw, "  %s\t%v–%v\t%d\t%.1f%%\t%.1f%%\t%.1f%%\t%.1f%%\t%.2f\t%v\t\n", p.label, round(p.from), round(p.to), p.requests,
			pct(p.bySource[sourceIndex("pro")], p.requests), pct(p.bySource[sourceIndex("flash")], p.requests),
			pct(local, p.requests), pct(p.bySource[sourceIndex("error")], p.requests),
			ratio(p.proCalls, p.requests), round(p.p99))
	}
	tw.Flush()

	if s.streams.streams > 0 {
		s.streams.print(w, c)
	}

	fmt.Fprintln(w, "\nbreaker transitions (time since start)")
	if len(s.transitions) == 0 {
		fmt.Fprintln(w, "  none")
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range s.transitions {
		fmt.Fprintf(tw, "  %6.2fs\t%s\t%s → %s\t(%s)\n", t.at.Seconds(), t.name, t.from, t.to, t.reason)
	}
	tw.Flush()
	switch {
	case s.recovered:
		fmt.Fprintf(w, "  pro's breaker closed %v after the outage ended\n", round(s.recovery))
	case c.OutageLen > 0 && c.OutageStart+c.OutageLen < c.Duration:
		fmt.Fprintln(w, "  pro's breaker did not close after the outage before the run ended")
	}

	fmt.Fprintln(w, "\nupstream calls, as the fake server counted them (unary and streams; cancelled: the client gave up)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  tier\tmodel\tcalls\tok\t503\t429\t404\tmalformed\tcut\tno finish\tcancelled\tother\t")
	for _, t := range s.tiers {
		o := t.upstream.Outcomes
		stalled := o[fakegemini.Canceled] + o[fakegemini.Stall]
		listed := o[fakegemini.Success] + o[fakegemini.Unavailable] + o[fakegemini.RateLimited] + o[fakegemini.Retired] + o[fakegemini.MalformedJSON] +
			o[fakegemini.StreamCut] + o[fakegemini.NoFinishReason] + stalled
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", t.name, t.model, t.upstream.Requests, o[fakegemini.Success],
			o[fakegemini.Unavailable], o[fakegemini.RateLimited], o[fakegemini.Retired], o[fakegemini.MalformedJSON],
			o[fakegemini.StreamCut], o[fakegemini.NoFinishReason], stalled, t.upstream.Requests-listed)
	}
	tw.Flush()

	fmt.Fprintln(w, "\nper tier, from the chains' trails (streams: started by the stream chain; the rest: the unary chain)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  tier\tcalls\tretries\t(after a 429)\tvalidation rejects\tskipped without a call\tstreams\t")
	for _, t := range s.tiers {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%s\t%d\t\n", t.name, t.calls, t.retries, t.waited, t.rejects, skipText(t.skips), t.streamCalls)
	}
	tw.Flush()

	printSpend(w, s.spend)

	if s.metrics != nil {
		s.metrics.print(w)
	}

	fmt.Fprintln(w)
	if v := s.violations(); len(v) > 0 {
		for _, msg := range v {
			fmt.Fprintln(w, "INVARIANT BROKEN:", msg)
		}
		return
	}
	what := "every answer"
	if s.streams.streams > 0 {
		what = "every answer and every stream"
	}
	fmt.Fprintln(w, "invariants hold: "+what+" within its deadline (+"+c.Slack.String()+"), "+
		fmt.Sprintf("%.2f%% answered", 100*s.successRate()))
}

func ratio(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

func skipText(m map[fallback.Skip]int) string {
	var parts []string
	for _, s := range []fallback.Skip{fallback.SkipOpen, fallback.SkipFull, fallback.SkipRetired, fallback.SkipQuota, fallback.SkipBudget} {
		if n := m[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, n))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
