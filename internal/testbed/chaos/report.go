package chaos

import (
	"fmt"
	"strings"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/fallback"
)

// Report is what a soak run saw.
type Report struct {
	Config Config
	// Elapsed is the run's duration on its clock (fake under synctest).
	Elapsed time.Duration
	// Calls is the number of requests made.
	Calls int
	// Answers counts answers by source: each tier, then cache, then default.
	Answers [numStages + 2]int64
	// Failed and FailedClosed count failed requests by the class of their
	// cause.
	Failed, FailedClosed [maxClasses]int64
	// Panics counts requests that got their tier's panic; SharedPanics the
	// waiters of shared executions that did; DroppedPanics the panics of
	// calls abandoned before they panicked (nobody left to receive them).
	Panics, SharedPanics, DroppedPanics int64
	// Keyed counts requests with an idempotency key, SharedJoins those that
	// joined another's execution, CallerCancels those whose caller
	// cancelled.
	Keyed, SharedJoins, CallerCancels int64
	// Abandoned is Chain.Stats().Abandoned; CallsWithAbandon the requests
	// whose trail holds an abandoned call; StuckBeforeRelease the calls
	// still stuck (and counted) when the run ended.
	Abandoned          uint64
	CallsWithAbandon   int64
	StuckBeforeRelease int64
	// WorstOverrun is the latest any request returned after its deadline
	// (negative: all returned early); WorstOverrunClean the same over
	// requests that no call ignoring its context, no panic and no shared
	// execution touched, which must make it by the deadline itself.
	WorstOverrun, WorstOverrunClean time.Duration
	// Lag is the most a request started after its scheduled time.
	Lag time.Duration
	// SchedulerLag is the most a 1 ms ticker fired late during a
	// real-clock run (0 on the fake clock); every time bound allows it.
	// LateWithinLag counts the requests that overran their own allowance
	// but not by more than it.
	SchedulerLag  time.Duration
	LateWithinLag int64
	// Stages reports each tier.
	Stages []StageReport
	// ViolationCount counts broken invariants; Violations describes the
	// first fifty.
	ViolationCount int64
	Violations     []string
}

// StageReport is one tier's figures.
type StageReport struct {
	Name string
	// Faults counts the faults drawn, by kind.
	Faults [numFaults]int64
	// Attempts, Retries and Successes are upstream calls, those that were
	// retries, and validated successes; RetryAllowance is what the retry
	// budget allowed given the successes.
	Attempts, Retries, Successes, RetryAllowance int64
	// Skips counts the tier passed over, by reason.
	Skips [fallback.SkipBudget + 1]int64
	// PeakInFlight is the most calls in flight at once; Bulkhead its size;
	// BulkheadRejected the acquisitions it refused. Forever is the number
	// of calls stuck until the end.
	PeakInFlight     int64
	Bulkhead         int
	BulkheadRejected uint64
	// PeakWaiting is the most Stats().Waiting the sampler read; Queue the
	// bulkhead's queue size (0: it fails fast).
	PeakWaiting int64
	Queue       int
	Forever     int64
	// Breaker figures: probes allowed at once, probe calls made, the most
	// in flight at once, the most probe permits held at once (across
	// half-open phases), times opened, final state and liveness.
	HalfOpenProbes   int
	ProbeCalls       int64
	PeakProbeCalls   int64
	PeakProbePermits int64
	Opens            int
	FinalState       breaker.State
	LivenessBound    time.Duration
	Liveness         []Liveness
}

// Liveness is one cycle's recovery.
type Liveness struct {
	Cycle int
	// ClosedAfter is how long after the outage ended the breaker last
	// closed (0 if it never opened).
	ClosedAfter time.Duration
	OK          bool
}

// String renders the report for a test log.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "soak: %d calls by %d goroutines at %.0f/s, cycle %v, seed %d, slack %v, fake clock %v, short cooldowns %v\n",
		r.Calls, r.Config.Workers, r.Config.Rate, r.Config.Cycle, r.Config.Seed, r.Config.Slack, r.Config.FakeClock, r.Config.ShortCooldowns)
	fmt.Fprintf(&b, "  elapsed %v (on the run's clock), worst start lag %v\n", r.Elapsed.Round(time.Millisecond), r.Lag.Round(time.Microsecond))
	fmt.Fprintf(&b, "  answers:")
	for i, n := range r.Answers {
		name := "cache"
		switch {
		case i < numStages:
			name = profile[i].name
		case i == numStages+1:
			name = "default"
		}
		fmt.Fprintf(&b, " %s=%d", name, n)
	}
	fmt.Fprintf(&b, "\n  failed:")
	for c, n := range r.Failed {
		if n > 0 {
			fmt.Fprintf(&b, " %s=%d", classNames[c], n)
		}
	}
	fmt.Fprintf(&b, "; failed closed:")
	for c, n := range r.FailedClosed {
		if n > 0 {
			fmt.Fprintf(&b, " %s=%d", classNames[c], n)
		}
	}
	fmt.Fprintf(&b, "\n  panics=%d shared_panics=%d dropped_after_abandon=%d keyed=%d shared_joins=%d caller_cancels=%d\n",
		r.Panics, r.SharedPanics, r.DroppedPanics, r.Keyed, r.SharedJoins, r.CallerCancels)
	fmt.Fprintf(&b, "  abandoned=%d calls_with_abandon=%d stuck_before_release=%d\n", r.Abandoned, r.CallsWithAbandon, r.StuckBeforeRelease)
	fmt.Fprintf(&b, "  worst overrun %v (untouched by a context-ignoring call, a panic or sharing: %v), allowed %v + AbandonAfter %v\n",
		r.WorstOverrun, r.WorstOverrunClean, r.Config.Slack, abandonAfter)
	if !r.Config.FakeClock {
		fmt.Fprintf(&b, "  scheduler lag %v (a 1 ms ticker's worst delay, allowed on top); %d requests late within it\n", r.SchedulerLag, r.LateWithinLag)
	}
	for _, s := range r.Stages {
		fmt.Fprintf(&b, "  %s: attempts=%d retries=%d (allowance %d) successes=%d in_flight_peak=%d/%d bulkhead_rejected=%d stuck_forever=%d\n",
			s.Name, s.Attempts, s.Retries, s.RetryAllowance, s.Successes, s.PeakInFlight, s.Bulkhead, s.BulkheadRejected, s.Forever)
		if s.Queue > 0 {
			fmt.Fprintf(&b, "    bulkhead queue: peak waiting %d/%d\n", s.PeakWaiting, s.Queue)
		}
		fmt.Fprintf(&b, "    skips:")
		for k, n := range s.Skips {
			if n > 0 {
				fmt.Fprintf(&b, " %s=%d", fallback.Skip(k), n)
			}
		}
		fmt.Fprintf(&b, "\n    faults:")
		for f, n := range s.Faults {
			if n > 0 {
				fmt.Fprintf(&b, " %s=%d", Fault(f), n)
			}
		}
		b.WriteByte('\n')
		if s.HalfOpenProbes > 0 {
			worst, bad := time.Duration(0), 0
			for _, l := range s.Liveness {
				worst = max(worst, l.ClosedAfter)
				if !l.OK {
					bad++
				}
			}
			fmt.Fprintf(&b, "    breaker: opened %d times, probe calls=%d peak in flight=%d/%d (permits held peak %d), final %v; closed after outage: %d cycles, worst %v (bound %v), %d late\n",
				s.Opens, s.ProbeCalls, s.PeakProbeCalls, s.HalfOpenProbes, s.PeakProbePermits, s.FinalState,
				len(s.Liveness), worst, s.LivenessBound, bad)
		}
	}
	fmt.Fprintf(&b, "  violations: %d\n", r.ViolationCount)
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "    %s\n", v)
	}
	return b.String()
}
