package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/tierguard/tierguard/fallback/riverjob"
)

// summary is what the run measured.
type summary struct {
	cfg   config
	where string
	wall  time.Duration

	// jobs are the jobs River created, keyOf their idempotency keys;
	// dupSubmitted resubmissions were made, dupSkipped of them skipped.
	jobs         []int64
	keyOf        map[int64]string
	dupSubmitted int
	dupSkipped   int

	deadLetters  []riverjob.DeadLetter
	replayed     int
	replayedDone int
	stored       map[string]int

	// Filled from the recorder.
	attempts      [riverjob.Interrupted + 1]int
	completed     int
	byTier        map[string]int
	degraded      int
	discarded     map[string]int
	retriedJobs   int
	snoozedJobs   int
	snoozeWhy     map[string]int
	open          int
	calls         int
	perJob        []int
	maxPerAttempt int
	outageJobs    []int
	// outageRetried is, for each of outageJobs, how many of its attempts
	// the outage failed and River retried.
	outageRetried []int
	timeline      string
	quotaCalls    int
	serverCalls   map[string]int64
	final         map[int64]riverjob.Outcome
}

// fill reads the recorder and the fake server.
func (r *recorder) fill(s *summary, st *story) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s.attempts = r.counts
	s.byTier, s.discarded, s.snoozeWhy, s.final = map[string]int{}, map[string]int{}, map[string]int{}, map[int64]riverjob.Outcome{}
	s.timeline = st.timeline()
	outFrom, outTo := st.outageWindow()
	if outTo > outFrom {
		outTo += st.cfg.Deadline
	}
	for _, id := range s.jobs {
		as := r.byJob[id]
		var first []attempt // before any replay
		for _, a := range as {
			if !a.replayed {
				first = append(first, a)
			}
		}
		if len(first) == 0 || !final(first[len(first)-1].report.Outcome) {
			s.open++
			continue
		}
		last := first[len(first)-1].report
		s.final[id] = last.Outcome
		if last.Outcome == riverjob.Completed {
			s.completed++
			s.byTier[last.Tier]++
			if last.Degraded {
				s.degraded++
			}
		} else {
			s.discarded[last.Why]++
		}
		calls, inOutage, retriedIn, touched := 0, 0, 0, false
		retried, snoozed := false, false
		for _, a := range first {
			calls += a.report.UpstreamCalls
			s.maxPerAttempt = max(s.maxPerAttempt, a.report.UpstreamCalls)
			// The outage's calls are those of the attempts it failed: an
			// attempt that ended in it, or up to a deadline after it, and
			// did not complete.
			if a.at >= outFrom && a.at < outTo && a.report.Outcome != riverjob.Completed {
				inOutage += a.report.UpstreamCalls
				touched = true
				if a.report.Outcome == riverjob.Retried {
					retriedIn++
				}
			}
			switch a.report.Outcome {
			case riverjob.Retried:
				retried = true
			case riverjob.Snoozed:
				snoozed = true
				s.snoozeWhy[a.report.Why]++
				s.quotaCalls += a.report.UpstreamCalls
			}
		}
		s.calls += calls
		s.perJob = append(s.perJob, calls)
		if touched {
			s.outageJobs = append(s.outageJobs, inOutage)
			s.outageRetried = append(s.outageRetried, retriedIn)
		}
		if retried {
			s.retriedJobs++
		}
		if snoozed {
			s.snoozedJobs++
		}
	}
	s.serverCalls = map[string]int64{}
	for m, ms := range st.srv.Stats() {
		s.serverCalls[m] = ms.Requests
	}
	r.countReplays(s)
}

// countReplays adds the replays' calls to the server's count check.
func (r *recorder) countReplays(s *summary) {
	for _, as := range r.byJob {
		for _, a := range as {
			if a.replayed {
				s.calls += a.report.UpstreamCalls
			}
		}
	}
}

// violations are the invariants the run broke.
func (s *summary) violations() []string {
	var v []string
	if s.open > 0 {
		v = append(v, fmt.Sprintf("%d jobs neither completed nor discarded", s.open))
	}
	if s.maxPerAttempt > attemptLimit {
		v = append(v, fmt.Sprintf("a job attempt made %d upstream calls, more than the chain's %d", s.maxPerAttempt, attemptLimit))
	}
	// Upstream amplification during the outage: calls per job. Beyond a
	// job's first attempt, only the breakers' half-open probes reach the
	// upstream, a few per cooldown whichever jobs carry them.
	if amp := mean(s.outageJobs); s.cfg.Breakers && amp > attemptLimit {
		v = append(v, fmt.Sprintf("%.2f upstream calls per job during the outage, more than the chain's %d: the queue multiplied the chain's retries", amp, attemptLimit))
	}
	var server int64
	for _, n := range s.serverCalls {
		server += n
	}
	if int64(s.calls) != server {
		v = append(v, fmt.Sprintf("the workers reported %d upstream calls, the server counted %d", s.calls, server))
	}
	for id, o := range s.final {
		key := s.keyOf[id]
		writes := s.stored[key]
		switch {
		case o == riverjob.Completed && writes != 1:
			v = append(v, fmt.Sprintf("completed job %d (%s) stored %d times", id, key, writes))
		case o == riverjob.Discarded && writes > 0 && !s.wasReplayed(id):
			v = append(v, fmt.Sprintf("discarded job %d (%s) has a stored result", id, key))
		}
	}
	// A key may have a second job only when its first was a dead letter
	// by then: River's unique states leave discarded and cancelled jobs
	// out, so that the work can be submitted again.
	for key, ids := range s.jobsByKey() {
		for _, id := range ids[:len(ids)-1] {
			if s.final[id] != riverjob.Discarded {
				v = append(v, fmt.Sprintf("key %s has %d jobs, and job %d was not a dead letter", key, len(ids), id))
			}
		}
	}
	if s.replayedDone != s.replayed {
		v = append(v, fmt.Sprintf("%d of %d replayed dead letters did not complete", s.replayed-s.replayedDone, s.replayed))
	}
	return v
}

// jobsByKey lists each key's jobs, in order.
func (s *summary) jobsByKey() map[string][]int64 {
	m := map[string][]int64{}
	for _, id := range s.jobs {
		m[s.keyOf[id]] = append(m[s.keyOf[id]], id)
	}
	return m
}

func (s *summary) wasReplayed(id int64) bool {
	for _, dl := range s.deadLetters {
		if dl.Job.ID == id && dl.HasReport && dl.Report.Why == riverjob.WhyInvalidOutput && s.cfg.Replay {
			return true
		}
	}
	return false
}

func pct(xs []int, p float64) int {
	if len(xs) == 0 {
		return 0
	}
	ys := slices.Clone(xs)
	slices.Sort(ys)
	return ys[min(len(ys)-1, int(p*float64(len(ys))))]
}

func mean(xs []int) float64 {
	if len(xs) == 0 {
		return 0
	}
	t := 0
	for _, x := range xs {
		t += x
	}
	return float64(t) / float64(len(xs))
}

func (s *summary) print(w io.Writer) {
	c := s.cfg
	fmt.Fprintf(w, "\ntierguard batch demo: %d contract extractions through River on %s\n", c.Jobs, s.where)
	fmt.Fprintf(w, "chain: pro (%s) → flash (%s), 2 attempts per tier (at most %d upstream calls per job attempt), %v per job attempt\n",
		proModel, flashModel, attemptLimit, c.Deadline)
	fmt.Fprintf(w, "queue: %d River workers, %d jobs in flight per tenant (%d tenants), %d attempts per job\n", c.Workers, c.PerTen, c.Tenants, c.MaxAttempts)
	fmt.Fprintf(w, "story: %s\n\n", s.timeline)

	fmt.Fprintf(w, "jobs         %4d   (%d duplicate submissions: %d skipped by River as their key's job was pending, running or done; %d became new jobs, their key's first job being a dead letter already)\n",
		len(s.jobs), s.dupSubmitted, s.dupSkipped, s.dupSubmitted-s.dupSkipped)
	fmt.Fprintf(w, "  completed  %4d   pro %d, flash %d (degraded)\n", s.completed, s.byTier["pro"], s.byTier["flash"])
	disc := 0
	for _, n := range s.discarded {
		disc += n
	}
	fmt.Fprintf(w, "  discarded  %4d   invalid output %d, no tier can answer %d, attempts exhausted %d, failed closed %d\n", disc,
		s.discarded[riverjob.WhyInvalidOutput]+s.discarded[riverjob.WhyRejectedOutput], s.discarded[riverjob.WhyNoTierCan], s.discarded[riverjob.WhyExhausted], s.discarded[riverjob.WhyFailedClosed])
	fmt.Fprintf(w, "  lost       %4d\n", s.open)
	fmt.Fprintf(w, "attempts     %4d   completed %d, retried %d (%d jobs), snoozed %d (%d jobs: quota %d, tenant busy %d; no attempt spent), discarded %d\n",
		s.attempts[riverjob.Completed]+s.attempts[riverjob.Retried]+s.attempts[riverjob.Snoozed]+s.attempts[riverjob.Discarded]+s.attempts[riverjob.Interrupted],
		s.attempts[riverjob.Completed], s.attempts[riverjob.Retried], s.retriedJobs, s.attempts[riverjob.Snoozed], s.snoozedJobs,
		s.snoozeWhy[riverjob.WhyQuota], s.snoozeWhy[riverjob.WhyTenantBusy], s.attempts[riverjob.Discarded])
	fmt.Fprintf(w, "upstream calls per job: mean %.2f, p50 %d, p99 %d, max %d over all its attempts; at most %d in one attempt (the chain's limit: %d)\n",
		mean(s.perJob), pct(s.perJob, 0.5), pct(s.perJob, 0.99), slices.Max(append([]int{0}, s.perJob...)), s.maxPerAttempt, attemptLimit)
	if len(s.outageJobs) > 0 {
		over := 0
		for _, n := range s.outageJobs {
			if n > attemptLimit {
				over++
			}
		}
		why := "by carrying breaker probes"
		if !c.Breakers {
			why = "no breakers: every retried attempt calls the models again"
		}
		fmt.Fprintf(w, "outage: %d jobs had attempts it failed; upstream calls per job in those attempts (amplification): mean %.2f, p99 %d, max %d (the chain's limit per request: %d; %d jobs above it, %s)\n",
			len(s.outageJobs), mean(s.outageJobs), pct(s.outageJobs, 0.99), slices.Max(s.outageJobs), attemptLimit, over, why)
	}
	fmt.Fprintf(w, "upstream calls counted by the server: pro %d, flash %d\n", s.serverCalls[proModel], s.serverCalls[flashModel])

	fmt.Fprintf(w, "\ndead letters (River's discarded and cancelled jobs; replay one with client.JobRetry):\n")
	for i, dl := range s.deadLetters {
		if i == 12 {
			fmt.Fprintf(w, "  ... and %d more\n", len(s.deadLetters)-i)
			break
		}
		what := "(no report)"
		if dl.HasReport {
			what = dl.Report.String()
		}
		fmt.Fprintf(w, "  job %-5d %-13s %-9s attempt %d  %s\n", dl.Job.ID, s.keyOf[dl.Job.ID], dl.Job.State, dl.Job.Attempt, what)
	}
	if len(s.deadLetters) == 0 {
		fmt.Fprintf(w, "  none\n")
	}
	if c.Replay {
		fmt.Fprintf(w, "replayed the %d misread contracts after a better reading: %d completed\n", s.replayed, s.replayedDone)
	}
	fmt.Fprintf(w, "\nwall time %.1fs\n", s.wall.Seconds())
	if v := s.violations(); len(v) > 0 {
		fmt.Fprintf(w, "\nINVARIANTS BROKEN:\n  %s\n", strings.Join(v, "\n  "))
	} else {
		held := "nothing lost, every completed job stored once, no discarded result stored, no duplicate run"
		if c.Breakers {
			held += ", no queue-level multiplication of upstream calls"
		}
		fmt.Fprintf(w, "invariants held: %s\n", held)
	}
}
