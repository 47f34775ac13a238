package main

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tierguard/tierguard/fallback"
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
	perJob        []int
	maxPerAttempt int
	outageJobs    []int
	// outageRetried is, for each of outageJobs, how many of its attempts
	// the outage failed and River retried.
	outageRetried []int
	// outageOpen counts the attempts the outage failed that passed a tier
	// over for its open breaker.
	outageOpen int
	timeline   string
	quotaCalls int
	final      map[int64]riverjob.Outcome

	// The upstream calls, counted three times: reported is the sum of
	// the workers' reports (every attempt, replays included), client
	// what the tiers' requests came to on the client side, serverCalls
	// what the fake server's handlers read, by model.
	reported    int
	client      clientCalls
	serverCalls map[string]int64
}

// fill reads the recorder and the fake server.
func (r *recorder) fill(s *summary, st *story) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s.attempts = r.counts
	s.byTier, s.discarded, s.snoozeWhy, s.final = map[string]int{}, map[string]int{}, map[string]int{}, map[int64]riverjob.Outcome{}
	s.timeline = st.timeline()
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
			// The outage's calls are those of the attempts it failed, told
			// by what failed them rather than by when they ended: under
			// load an attempt may end well after the fault that failed it.
			if failedByOutage(a.report) {
				inOutage += a.report.UpstreamCalls
				touched = true
				if slices.ContainsFunc(a.report.Tiers, func(t riverjob.TierReport) bool { return t.Skip == fallback.SkipOpen.String() }) {
					s.outageOpen++
				}
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
	// Every attempt the workers reported, replays and the attempts of
	// jobs still open included: the client and the server saw them all.
	s.reported = r.calls
	s.client = st.calls.snapshot()
	s.serverCalls = map[string]int64{}
	for m, ms := range st.srv.Stats() {
		s.serverCalls[m] = ms.Requests
	}
}

// failedByOutage reports whether the outage failed an attempt: it did not
// complete, and a tier answered 503 or was passed over for an open
// breaker. Nothing else in the story answers 503, and quota and invalid
// answers do not count against a breaker; a loaded machine's timeouts do,
// so an attempt may be put down to the outage that a breaker opened by
// timeouts failed, which only makes the outage's figures larger.
func failedByOutage(rep riverjob.Report) bool {
	if rep.Outcome == riverjob.Completed {
		return false
	}
	for _, t := range rep.Tiers {
		if t.HTTPStatus == http.StatusServiceUnavailable || t.Skip == fallback.SkipOpen.String() {
			return true
		}
	}
	return false
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
	// Upstream amplification during the outage. Until a breaker opens, a
	// job pays at most the chain's limit; once open, only its probes reach
	// the upstream, and how many of those there are follows how many
	// cooldowns the outage lasted, which is the clock's business, not the
	// queue's. So the bound is on the 503s no breaker stood in front of:
	// a job retried by River before the breakers opened would break it.
	if s.cfg.Breakers && s.client.Closed503 > attemptLimit*len(s.outageJobs) {
		v = append(v, fmt.Sprintf("the outage's %d jobs had %d calls answered 503 while the breakers were closed, more than the chain's %d per job: the queue multiplied the chain's retries",
			len(s.outageJobs), s.client.Closed503, attemptLimit))
	}
	v = append(v, s.countViolations()...)
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

// countViolations checks the three counts of upstream calls against each
// other. The workers and the client count the same event, the chain
// handing a request to the tier's HTTP client, so they agree exactly. The
// server counts a request once its handler has read it: never one the
// client did not send, and not one cut before it got that far, which a
// loaded machine (a deadline ending while the request waits for a
// connection or a CPU) makes more likely. So server ≤ workers ≤ server +
// cut, and equal when nothing was cut.
func (s *summary) countViolations() []string {
	var v []string
	if s.reported != s.client.Sent {
		v = append(v, fmt.Sprintf("the workers reported %d upstream calls, the tiers sent %d requests", s.reported, s.client.Sent))
	}
	server := 0
	for _, n := range s.serverCalls {
		server += int(n)
	}
	switch {
	case server > s.reported:
		v = append(v, fmt.Sprintf("the server counted %d upstream calls, more than the %d the workers reported", server, s.reported))
	case s.reported > server+s.client.Cut:
		v = append(v, fmt.Sprintf("the workers reported %d upstream calls, the server counted %d, and only %d were cut before an answer", s.reported, server, s.client.Cut))
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
		fmt.Fprintf(w, "        503 answers: %d while the tier's breaker was closed (%.2f per job, the chain's limit %d), %d to breaker probes\n",
			s.client.Closed503, float64(s.client.Closed503)/float64(len(s.outageJobs)), attemptLimit, s.client.Probe503)
	}
	fmt.Fprintf(w, "upstream calls: %d reported by the workers, %d sent by the tiers (%d cut before an answer), %d counted by the server (pro %d, flash %d)\n",
		s.reported, s.client.Sent, s.client.Cut, s.serverCalls[proModel]+s.serverCalls[flashModel], s.serverCalls[proModel], s.serverCalls[flashModel])

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
		held := "nothing lost, every completed job stored once, no discarded result stored, no duplicate run, the upstream calls counted alike by the workers and the tiers (the server missing only cut ones)"
		if c.Breakers {
			held += ", no queue-level multiplication of upstream calls"
		}
		fmt.Fprintf(w, "invariants held: %s\n", held)
	}
}
