package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/tierguard/tierguard/fallback/riverjob"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
)

// phase is a part of the story paced by the workers (config.Steps).
type phase int

const (
	phHealthy    phase = iota // until Steps jobs completed
	phOutage                  // both models 503, until Steps jobs each had a second attempt failed by it
	phRecovery                // until Steps jobs completed on pro
	phProQuota                // pro out of daily quota, until Steps jobs completed on flash
	phBothQuotas              // flash out too, until Steps attempts were snoozed for quota
	phEnd                     // healthy to the end
)

// pacing is the state of a story paced by the workers.
type pacing struct {
	mu    sync.Mutex
	phase phase
	n     int                      // what the phase counts, so far
	fails map[int64]int            // attempts each job failed in the outage
	began [phEnd + 1]time.Duration // since the story's start
}

// attempted moves a paced story on with an attempt that ended at (since
// the start).
func (st *story) attempted(job int64, rep riverjob.Report, at time.Duration) {
	if st.cfg.Steps == 0 {
		return
	}
	p := &st.pacing
	p.mu.Lock()
	defer p.mu.Unlock()
	count := false
	switch p.phase {
	case phHealthy:
		count = rep.Outcome == riverjob.Completed
	case phOutage:
		// What the summary puts down to the outage, so that the jobs
		// counted here are among those it counts.
		if rep.Outcome == riverjob.Retried && failedByOutage(rep) {
			p.fails[job]++
			count = p.fails[job] == 2
		}
	case phRecovery:
		count = rep.Outcome == riverjob.Completed && rep.Tier == "pro"
	case phProQuota:
		count = rep.Outcome == riverjob.Completed && rep.Tier == "flash"
	case phBothQuotas:
		count = rep.Outcome == riverjob.Snoozed && rep.Why == riverjob.WhyQuota
	default:
		return
	}
	if count {
		p.n++
	}
	if p.n >= st.cfg.Steps {
		p.phase, p.n = p.phase+1, 0
		p.began[p.phase] = max(at, time.Since(st.start))
		st.setPacedScripts(p.phase)
	}
}

// setPacedScripts gives both models the faults of phase ph.
func (st *story) setPacedScripts(ph phase) {
	quota := fakegemini.Rule{Kind: fakegemini.QuotaExhausted, P: fakegemini.Always, Params: fakegemini.Params{RetryDelay: st.cfg.QuotaCooldown / 2}}
	outage := fakegemini.Rule{Kind: fakegemini.Unavailable, P: fakegemini.Always}
	var pro, flash []fakegemini.Rule
	switch ph {
	case phOutage:
		pro, flash = []fakegemini.Rule{outage}, []fakegemini.Rule{outage}
	case phProQuota:
		pro = []fakegemini.Rule{quota}
	case phBothQuotas:
		pro, flash = []fakegemini.Rule{quota}, []fakegemini.Rule{quota}
	}
	st.setScripts(pro, flash)
}

// timeline says when each phase was.
func (st *story) timeline() string {
	c := st.cfg
	if c.Steps == 0 {
		return fmt.Sprintf("outage (both models 503) %v–%v · pro out of daily quota %v–%v · flash too %v–%v",
			c.OutageStart, c.OutageStart+c.OutageLen, c.QuotaStart, c.QuotaStart+c.QuotaLen,
			c.QuotaStart+c.FlashQuotaDelay, c.QuotaStart+c.FlashQuotaDelay+c.FlashQuotaLen)
	}
	p := &st.pacing
	p.mu.Lock()
	defer p.mu.Unlock()
	b := func(ph phase) string {
		if ph > p.phase {
			return "—"
		}
		return p.began[ph].Round(time.Millisecond).String()
	}
	return fmt.Sprintf("paced by the workers, %d steps a phase: outage (both models 503) %v–%v · pro out of daily quota %v–%v, flash too from %v",
		c.Steps, b(phOutage), b(phRecovery), b(phProQuota), b(phEnd), b(phBothQuotas))
}
