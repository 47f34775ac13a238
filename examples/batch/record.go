package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/fallback/riverjob"
)

// attempt is one job attempt as the worker reported it.
type attempt struct {
	at       time.Duration // when it ended, since the story's start
	report   riverjob.Report
	replayed bool // made after the dead letters were replayed
}

// recorder keeps every attempt's report, per job.
type recorder struct {
	start time.Time

	mu       sync.Mutex
	changed  *sync.Cond
	byJob    map[int64][]attempt
	counts   [riverjob.Interrupted + 1]int
	calls    int
	replayed bool
	// attempted, when set, is told of every attempt: a story paced by the
	// workers moves on with them.
	attempted func(job int64, rep riverjob.Report, at time.Duration)
}

func newRecorder(start time.Time) *recorder {
	r := &recorder{start: start, byJob: map[int64][]attempt{}}
	r.changed = sync.NewCond(&r.mu)
	return r
}

// observe is the worker's observer.
func (r *recorder) observe(ev riverjob.Event) {
	r.mu.Lock()
	at := time.Since(r.start)
	r.byJob[ev.JobID] = append(r.byJob[ev.JobID], attempt{at: at, report: ev.Report, replayed: r.replayed})
	r.counts[ev.Report.Outcome]++
	r.calls += ev.Report.UpstreamCalls
	r.mu.Unlock()
	if r.attempted != nil {
		r.attempted(ev.JobID, ev.Report, at)
	}
	r.changed.Broadcast()
}

func final(o riverjob.Outcome) bool { return o == riverjob.Completed || o == riverjob.Discarded }

// lastFinal reports whether the job's last attempt ended it.
func (r *recorder) lastFinal(id int64, replayedOnly bool) bool {
	as := r.byJob[id]
	if len(as) == 0 {
		return false
	}
	last := as[len(as)-1]
	return final(last.report.Outcome) && (!replayedOnly || last.replayed)
}

// discardedJobs counts the jobs whose last attempt discarded them.
func (r *recorder) discardedJobs(ids []int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, id := range ids {
		if as := r.byJob[id]; len(as) > 0 && as[len(as)-1].report.Outcome == riverjob.Discarded {
			n++
		}
	}
	return n
}

// waitFinal waits until every submitted job has completed or been
// discarded.
func (r *recorder) waitFinal(ctx context.Context, sum *summary, timeout time.Duration) error {
	return r.wait(ctx, sum.jobs, false, timeout, "jobs")
}

// markReplay marks the attempts that follow as replays.
func (r *recorder) markReplay() {
	r.mu.Lock()
	r.replayed = true
	r.mu.Unlock()
}

// waitReplayed waits until every replayed job has ended again, and counts
// those that completed.
func (r *recorder) waitReplayed(ctx context.Context, ids []int64, timeout time.Duration, sum *summary) error {
	if err := r.wait(ctx, ids, true, timeout, "replayed jobs"); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		as := r.byJob[id]
		if as[len(as)-1].report.Outcome == riverjob.Completed {
			sum.replayedDone++
		}
	}
	return nil
}

func (r *recorder) wait(ctx context.Context, ids []int64, replayedOnly bool, timeout time.Duration, what string) error {
	deadline := time.Now().Add(timeout)
	wake := time.AfterFunc(timeout, r.changed.Broadcast)
	defer wake.Stop()
	stop := context.AfterFunc(ctx, r.changed.Broadcast)
	defer stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		open := 0
		for _, id := range ids {
			if !r.lastFinal(id, replayedOnly) {
				open++
			}
		}
		switch {
		case open == 0:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case time.Now().After(deadline):
			return fmt.Errorf("%d of %d %s still open after %v", open, len(ids), what, timeout)
		}
		r.changed.Wait()
	}
}

// progress is one line: the time, what the attempts decided so far, the
// upstream calls and the breakers' states.
func (r *recorder) progress(breakers []*breaker.Breaker) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%5.1fs  attempts: completed %d, retried %d, snoozed %d, discarded %d  |  upstream calls %d  |  breakers",
		time.Since(r.start).Seconds(), r.counts[riverjob.Completed], r.counts[riverjob.Retried], r.counts[riverjob.Snoozed], r.counts[riverjob.Discarded], r.calls)
	for _, br := range breakers {
		fmt.Fprintf(&b, " %s %s", br.Name(), br.State())
	}
	return b.String()
}
