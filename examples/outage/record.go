package main

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/internal/testbed/gemrest"
)

// sources are where an answer can come from, in report order: the tiers
// of buildChain, then the local answers, then no answer at all.
var sources = []string{"pro", "legacy", "flash", "cache", "default", "error"}

func sourceIndex(name string) int {
	if i := slices.Index(sources, name); i >= 0 {
		return i
	}
	return len(sources) - 1
}

// tiers are the unary chain's tiers, in order; the stream chain uses pro
// and flash.
var tiers = []string{"pro", "legacy", "flash"}

const numTiers = 3

// tierIndex returns the index of the named tier, or -1.
func tierIndex(name string) int { return slices.Index(tiers, name) }

// record is one request's outcome.
type record struct {
	start    time.Duration // since t0
	latency  time.Duration
	overrun  time.Duration // past the request's deadline; ≤ 0 when on time
	source   int           // index into sources
	class    classify.Class
	proCalls int
	calls    [numTiers]uint16 // upstream calls per tier
	retired  uint8            // bit i: tier i's model was retired (a 404, or skipped as retired)
}

// tally is what one client saw; clients merge theirs at the end, so the
// request path takes no shared lock.
type tally struct {
	records []record
	calls   map[string]int // upstream attempts per tier, from the trails
	retries map[string]int // attempts after the first, per tier
	waited  map[string]int // retries after a 429, which waited for RetryInfo
	rejects map[string]int // answers a validator rejected, per tier
	skips   map[string]map[fallback.Skip]int

	streams            []streamRecord
	streamCalls        map[string]int // upstream streams started per tier
	firstChunkTimeouts map[string]int // stream attempts with no first chunk in time
}

func bump[K comparable](m *map[K]int, k K) {
	if *m == nil {
		*m = make(map[K]int)
	}
	(*m)[k]++
}

// transition is a breaker state change, timed from the start.
type transition struct {
	at       time.Duration
	name     string
	from, to breaker.State
	reason   string
}

// recorder collects the run: live counters for the progress line, the
// clients' tallies and the breaker transitions.
type recorder struct {
	cfg config
	t0  time.Time

	total    atomic.Int64
	answered atomic.Int64
	bySource [8]atomic.Int64

	mu          sync.Mutex
	frozen      bool
	transitions []transition
	merged      tally
}

func newRecorder(cfg config) *recorder { return &recorder{cfg: cfg} }

func (r *recorder) start(t0 time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.t0 = t0
}

// record files one request's result in the client's tally.
func (r *recorder) record(t *tally, start, end time.Time, res *fallback.Result[gemrest.Response], err error) {
	rec := record{start: start.Sub(r.t0), latency: end.Sub(start), class: classify.OK}
	if d, ok := res.Deadline(); ok {
		rec.overrun = end.Sub(d)
	}
	switch {
	case err != nil:
		rec.source = sourceIndex("error")
		rec.class = classify.Classify(err).Class
	case res.Source == fallback.SourceTier:
		rec.source = sourceIndex(res.Tier)
	default:
		rec.source = sourceIndex(res.Source.String())
	}
	trail := res.Attempts()
	for j, a := range trail {
		if a.Skip != fallback.NotSkipped {
			if t.skips == nil {
				t.skips = make(map[string]map[fallback.Skip]int)
			}
			if t.skips[a.Tier] == nil {
				t.skips[a.Tier] = make(map[fallback.Skip]int)
			}
			t.skips[a.Tier][a.Skip]++
			if i := tierIndex(a.Tier); i >= 0 && a.Skip == fallback.SkipRetired {
				rec.retired |= 1 << i
			}
			continue
		}
		if i := tierIndex(a.Tier); i >= 0 && a.Verdict.Class == classify.Retired {
			rec.retired |= 1 << i
		}
		bump(&t.calls, a.Tier)
		if a.N > 1 {
			bump(&t.retries, a.Tier)
			if trail[j-1].Verdict.Class == classify.RateLimited {
				bump(&t.waited, a.Tier)
			}
		}
		if a.Verdict.Class == classify.InvalidOutput {
			bump(&t.rejects, a.Tier)
		}
		if a.Tier == "pro" {
			rec.proCalls++
		}
		if i := tierIndex(a.Tier); i >= 0 {
			rec.calls[i]++
		}
	}
	t.records = append(t.records, rec)
	r.total.Add(1)
	if err == nil {
		r.answered.Add(1)
	}
	r.bySource[rec.source].Add(1)
}

// merge adds a client's tally to the run's.
func (r *recorder) merge(t *tally) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := &r.merged
	m.records = append(m.records, t.records...)
	m.streams = append(m.streams, t.streams...)
	for _, pair := range []struct{ dst, src *map[string]int }{{&m.calls, &t.calls}, {&m.retries, &t.retries}, {&m.waited, &t.waited}, {&m.rejects, &t.rejects},
		{&m.streamCalls, &t.streamCalls}, {&m.firstChunkTimeouts, &t.firstChunkTimeouts}} {
		for k, v := range *pair.src {
			if *pair.dst == nil {
				*pair.dst = make(map[string]int)
			}
			(*pair.dst)[k] += v
		}
	}
	for tier, bySkip := range t.skips {
		if m.skips == nil {
			m.skips = make(map[string]map[fallback.Skip]int)
		}
		if m.skips[tier] == nil {
			m.skips[tier] = make(map[fallback.Skip]int)
		}
		for s, n := range bySkip {
			m.skips[tier][s] += n
		}
	}
}

// transition records a breaker's state change, unless the run is over.
func (r *recorder) transition(tr breaker.Transition) (transition, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frozen {
		return transition{}, false
	}
	t := transition{at: tr.At.Sub(r.t0), name: tr.Name, from: tr.From, to: tr.To, reason: tr.Reason}
	r.transitions = append(r.transitions, t)
	return t, true
}

// freeze stops recording transitions.
func (r *recorder) freeze() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frozen = true
}

// phase is a stretch of the timeline with the same faults.
type phase struct {
	label    string
	from, to time.Duration
}

// phases cuts [0, Duration) at every fault window's edge.
func phases(cfg config) []phase {
	cuts := []time.Duration{0, cfg.Duration}
	for _, d := range []time.Duration{cfg.OutageStart, cfg.OutageStart + cfg.OutageLen, cfg.StormStart, cfg.StormStart + cfg.StormLen} {
		if d > 0 && d < cfg.Duration {
			cuts = append(cuts, d)
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	in := func(t, from, length time.Duration) bool { return length > 0 && t >= from && t < from+length }
	var out []phase
	for i := 0; i+1 < len(cuts); i++ {
		from, to := cuts[i], cuts[i+1]
		outage, storm := in(from, cfg.OutageStart, cfg.OutageLen), in(from, cfg.StormStart, cfg.StormLen)
		label := "healthy"
		switch {
		case outage && storm:
			label = "pro 503 outage + 429 storm"
		case outage:
			label = "pro 503 outage"
		case storm:
			label = "pro 429 storm"
		}
		if n := len(out); n > 0 && out[n-1].label == label {
			out[n-1].to = to
			continue
		}
		out = append(out, phase{label: label, from: from, to: to})
	}
	return out
}

// phaseAt returns the index of the phase that contains t (the last one for
// t past the end).
func phaseAt(ps []phase, t time.Duration) int {
	for i, p := range ps {
		if t < p.to {
			return i
		}
	}
	return len(ps) - 1
}
