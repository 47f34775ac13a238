package riverjob_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/riverjob"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	"github.com/tierguard/tierguard/internal/testbed/gemrest"
	"github.com/tierguard/tierguard/validate"
)

const (
	pro   = "gemini-2.5-pro"
	flash = "gemini-2.5-flash"
)

func always(k fakegemini.Kind, p fakegemini.Params) fakegemini.Script {
	return fakegemini.Script{Rules: []fakegemini.Rule{{Kind: k, P: fakegemini.Always, Params: p}}}
}

func firstN(n int, k fakegemini.Kind, p fakegemini.Params) fakegemini.Script {
	return fakegemini.Script{Rules: []fakegemini.Rule{{Kind: k, P: fakegemini.Always, FirstN: n, Params: p}}}
}

// report decodes the report the worker recorded as the job's output.
func report(t *testing.T, job *rivertype.JobRow) riverjob.Report {
	t.Helper()
	var r riverjob.Report
	require.NoError(t, json.Unmarshal(job.Output(), &r), "output %s", job.Output())
	return r
}

// TestClassOutcomes runs one job per class through River on SQLite, the
// chain's tiers calling the fake Gemini server, and checks the fate River
// gave it: its state, its attempts, the recorded report, the store.
func TestClassOutcomes(t *testing.T) {
	cases := []struct {
		name        string
		pro, flash  fakegemini.Script
		maxAttempts int
		// what the first attempt decides
		outcome riverjob.Outcome
		why     string
		class   classify.Class
		calls   int
		// River's state after the first attempt
		state rivertype.JobState
		// attempts is River's attempt count after it; stored whether a
		// result was kept.
		attempts int
		stored   bool
	}{
		{name: "ok", outcome: riverjob.Completed, why: riverjob.WhyAnswered, calls: 1, state: rivertype.JobStateCompleted, attempts: 1, stored: true},
		{name: "transient_on_pro_flash_answers", pro: always(fakegemini.Unavailable, fakegemini.Params{}),
			outcome: riverjob.Completed, why: riverjob.WhyAnswered, calls: 3, state: rivertype.JobStateCompleted, attempts: 1, stored: true},
		{name: "quota_on_pro_flash_answers", pro: always(fakegemini.QuotaExhausted, fakegemini.Params{RetryDelay: 100 * time.Millisecond}),
			outcome: riverjob.Completed, why: riverjob.WhyAnswered, calls: 2, state: rivertype.JobStateCompleted, attempts: 1, stored: true},
		{name: "transient_everywhere", pro: always(fakegemini.Unavailable, fakegemini.Params{}), flash: always(fakegemini.Unavailable, fakegemini.Params{}),
			outcome: riverjob.Retried, why: riverjob.WhyRetryable, class: classify.Transient, calls: 4, state: rivertype.JobStateRetryable, attempts: 1},
		{name: "transient_on_last_attempt", pro: always(fakegemini.Internal, fakegemini.Params{}), flash: always(fakegemini.BadGatewayHTML, fakegemini.Params{}), maxAttempts: 1,
			outcome: riverjob.Discarded, why: riverjob.WhyExhausted, class: classify.Transient, calls: 4, state: rivertype.JobStateDiscarded, attempts: 1},
		{name: "rate_limited_everywhere", pro: always(fakegemini.RateLimited, fakegemini.Params{RetryDelay: 30 * time.Second}), flash: always(fakegemini.RateLimited, fakegemini.Params{RetryDelay: 20 * time.Second}),
			outcome: riverjob.Retried, why: riverjob.WhyRetryable, class: classify.RateLimited, calls: 2, state: rivertype.JobStateRetryable, attempts: 1},
		{name: "deadline_everywhere", pro: always(fakegemini.Stall, fakegemini.Params{}), flash: always(fakegemini.Stall, fakegemini.Params{}),
			outcome: riverjob.Retried, why: riverjob.WhyRetryable, class: classify.DeadlineExhausted, state: rivertype.JobStateRetryable, attempts: 1},
		{name: "quota_everywhere", pro: always(fakegemini.QuotaExhausted, fakegemini.Params{RetryDelay: 100 * time.Millisecond}), flash: always(fakegemini.QuotaExhausted, fakegemini.Params{RetryDelay: 100 * time.Millisecond}),
			outcome: riverjob.Snoozed, why: riverjob.WhyQuota, class: classify.QuotaExhausted, calls: 2, state: rivertype.JobStateAvailable, attempts: 0},
		{name: "invalid_request", pro: always(fakegemini.BadRequest, fakegemini.Params{}),
			outcome: riverjob.Discarded, why: riverjob.WhyFailedClosed, class: classify.InvalidRequest, calls: 1, state: rivertype.JobStateCancelled, attempts: 1},
		{name: "auth", pro: always(fakegemini.InvalidAPIKey, fakegemini.Params{}),
			outcome: riverjob.Discarded, why: riverjob.WhyFailedClosed, class: classify.Auth, calls: 1, state: rivertype.JobStateCancelled, attempts: 1},
		{name: "permission_denied", pro: always(fakegemini.PermissionDenied, fakegemini.Params{}),
			outcome: riverjob.Discarded, why: riverjob.WhyFailedClosed, class: classify.Auth, calls: 1, state: rivertype.JobStateCancelled, attempts: 1},
		{name: "safety", pro: always(fakegemini.SafetyFinish, fakegemini.Params{}),
			outcome: riverjob.Discarded, why: riverjob.WhyFailedClosed, class: classify.Safety, calls: 1, state: rivertype.JobStateCancelled, attempts: 1},
		{name: "prompt_blocked", pro: always(fakegemini.PromptBlocked, fakegemini.Params{}),
			outcome: riverjob.Discarded, why: riverjob.WhyFailedClosed, class: classify.Safety, calls: 1, state: rivertype.JobStateCancelled, attempts: 1},
		{name: "invalid_output_everywhere", pro: always(fakegemini.MalformedJSON, fakegemini.Params{}), flash: always(fakegemini.MalformedJSON, fakegemini.Params{}),
			outcome: riverjob.Discarded, why: riverjob.WhyInvalidOutput, class: classify.InvalidOutput, calls: 2, state: rivertype.JobStateCancelled, attempts: 1},
		{name: "retired_everywhere", pro: always(fakegemini.Retired, fakegemini.Params{}), flash: always(fakegemini.Retired, fakegemini.Params{}),
			outcome: riverjob.Discarded, why: riverjob.WhyNoTierCan, class: classify.Retired, calls: 2, state: rivertype.JobStateCancelled, attempts: 1},
		{name: "too_long_everywhere", pro: always(fakegemini.TokenLimit, fakegemini.Params{}), flash: always(fakegemini.TokenLimit, fakegemini.Params{}),
			outcome: riverjob.Discarded, why: riverjob.WhyNoTierCan, class: classify.ContextTooLong, calls: 2, state: rivertype.JobStateCancelled, attempts: 1},
		{name: "invalid_output_then_quota", pro: always(fakegemini.MalformedJSON, fakegemini.Params{}), flash: always(fakegemini.QuotaExhausted, fakegemini.Params{RetryDelay: 100 * time.Millisecond}),
			outcome: riverjob.Snoozed, why: riverjob.WhyQuota, class: classify.QuotaExhausted, calls: 2, state: rivertype.JobStateAvailable, attempts: 0},
		{name: "quota_then_transient", pro: always(fakegemini.QuotaExhausted, fakegemini.Params{RetryDelay: 100 * time.Millisecond}), flash: always(fakegemini.Unavailable, fakegemini.Params{}),
			outcome: riverjob.Retried, why: riverjob.WhyRetryable, class: classify.Transient, calls: 3, state: rivertype.JobStateRetryable, attempts: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := fakegemini.New()
			defer srv.Close()
			srv.SetScript(pro, tc.pro)
			srv.SetScript(flash, tc.flash)
			o := chainOpts{}
			if tc.class == classify.DeadlineExhausted {
				o.total, o.tryTimeout = 400*time.Millisecond, 5*time.Second
			}
			e := newEnv(t, envOpts{cfg: riverjob.Config[string, gemrest.Response]{Chain: newChain(t, srv, o)}, maxAttempts: cmp.Or(tc.maxAttempts, 3), retryAfter: time.Minute})
			ins := e.insert(riverjob.Args[string]{Tenant: "acme", Scenario: "extract", Key: "k-" + tc.name, Input: "invoice 42"}, nil)

			ev := e.waitEvents(ins.Job.ID, 1)[0]
			rep := ev.Report
			assert.Equal(t, tc.outcome, rep.Outcome, "%s", rep)
			assert.Equal(t, tc.why, rep.Why)
			if tc.class == classify.DeadlineExhausted {
				// Which tier the deadline caught depends on the scheduler:
				// the budget may skip flash, or cut its attempt.
				assert.Contains(t, []classify.Class{classify.DeadlineExhausted, classify.Rejected}, rep.Cause.Class, "%s", rep)
			} else {
				assert.Equal(t, tc.class, rep.Cause.Class, "%s", rep)
			}
			if tc.class != classify.DeadlineExhausted {
				assert.Equal(t, tc.calls, rep.UpstreamCalls, "calls in this attempt")
				assert.Equal(t, tc.calls, int(srv.Requests(pro)+srv.Requests(flash)), "the server saw each call once")
			}
			assert.Equal(t, 1, rep.Attempt)

			job := e.settled(ins.Job.ID)
			assert.Equal(t, tc.state, job.State)
			assert.Equal(t, tc.attempts, job.Attempt)
			assert.Equal(t, tc.outcome, report(t, job).Outcome, "the report is the job's output")
			_, stored := e.store.get("k-" + tc.name)
			assert.Equal(t, tc.stored, stored)
			switch tc.outcome {
			case riverjob.Completed:
				assert.Empty(t, job.Errors)
			case riverjob.Snoozed:
				assert.Empty(t, job.Errors, "a snooze is not an error")
				assert.Positive(t, rep.Wait)
				assert.LessOrEqual(t, rep.Wait, 2200*time.Millisecond, "until the parked tier's quota is back (the 2s cooldown, plus jitter)")
				assert.WithinDuration(t, time.Now().Add(rep.Wait), job.ScheduledAt, rep.Wait)
			default:
				require.Len(t, job.Errors, 1)
				assert.Contains(t, job.Errors[0].Error, rep.Cause.Class.String(), "River records the verdict")
				assert.NotContains(t, job.Errors[0].Error, "invoice 42", "never the input")
			}
		})
	}
}

// TestRetryHonoursRetryAfter: a retry waits for the later of the server's
// retry-after and River's backoff.
func TestRetryHonoursRetryAfter(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript(pro, always(fakegemini.RateLimited, fakegemini.Params{RetryDelay: 30 * time.Second}))
	srv.SetScript(flash, always(fakegemini.RateLimited, fakegemini.Params{RetryDelay: 20 * time.Second}))
	e := newEnv(t, envOpts{cfg: riverjob.Config[string, gemrest.Response]{Chain: newChain(t, srv, chainOpts{})}, retryAfter: time.Second})
	before := time.Now()
	ins := e.insert(riverjob.Args[string]{Input: "q"}, nil)
	rep := e.waitEvents(ins.Job.ID, 1)[0].Report
	assert.Equal(t, riverjob.Retried, rep.Outcome)
	assert.Equal(t, 20*time.Second, rep.Wait, "the shortest retry-after among the tiers")
	job := e.settled(ins.Job.ID)
	assert.Equal(t, rivertype.JobStateRetryable, job.State)
	assert.WithinDuration(t, before.Add(20*time.Second), job.ScheduledAt, 2*time.Second, "20s retry-after beats the 1s backoff")
	assert.Equal(t, 2, int(srv.Requests(pro)+srv.Requests(flash)), "a retry-after beyond the deadline is not waited inside the attempt")
}

// TestBackoffBeatsShortRetryAfter: a retry-after shorter than River's
// backoff leaves the backoff in charge.
func TestBackoffBeatsShortRetryAfter(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript(pro, always(fakegemini.RateLimited, fakegemini.Params{RetryDelay: 3 * time.Second}))
	srv.SetScript(flash, always(fakegemini.RateLimited, fakegemini.Params{RetryDelay: 3 * time.Second}))
	e := newEnv(t, envOpts{cfg: riverjob.Config[string, gemrest.Response]{Chain: newChain(t, srv, chainOpts{})}, retryAfter: time.Minute})
	before := time.Now()
	ins := e.insert(riverjob.Args[string]{Input: "q"}, nil)
	e.waitEvents(ins.Job.ID, 1)
	job := e.settled(ins.Job.ID)
	assert.WithinDuration(t, before.Add(time.Minute), job.ScheduledAt, 3*time.Second)
}

// TestRetryThenComplete: a job whose first attempt meets an outage on every
// tier is retried by River and completes; each attempt makes at most the
// chain's own calls.
func TestRetryThenComplete(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript(pro, firstN(2, fakegemini.Unavailable, fakegemini.Params{}))
	srv.SetScript(flash, firstN(2, fakegemini.Unavailable, fakegemini.Params{}))
	e := newEnv(t, envOpts{cfg: riverjob.Config[string, gemrest.Response]{Chain: newChain(t, srv, chainOpts{})}})
	ins := e.insert(riverjob.Args[string]{Key: "k", Input: "q"}, nil)
	evs := e.waitEvents(ins.Job.ID, 2)
	assert.Equal(t, riverjob.Retried, evs[0].Report.Outcome)
	assert.Equal(t, 4, evs[0].Report.UpstreamCalls, "two attempts per tier, inside one job attempt")
	assert.Equal(t, riverjob.Completed, evs[1].Report.Outcome)
	assert.Equal(t, 2, evs[1].Report.Attempt)
	assert.Equal(t, 1, evs[1].Report.UpstreamCalls)
	job := e.final(ins.Job.ID, rivertype.JobStateCompleted)
	assert.Equal(t, 2, job.Attempt)
	assert.Len(t, job.Errors, 1)
	v, ok := e.store.get("k")
	assert.True(t, ok)
	assert.JSONEq(t, `{"model":"gemini-2.5-pro","answer":"q"}`, v)
}

// TestQuotaSnoozeThenComplete: a job snoozed for an exhausted quota runs
// again when the parking ends, without an attempt counted, and its second
// run skips nothing.
func TestQuotaSnoozeThenComplete(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript(pro, firstN(1, fakegemini.QuotaExhausted, fakegemini.Params{RetryDelay: 100 * time.Millisecond}))
	srv.SetScript(flash, firstN(1, fakegemini.QuotaExhausted, fakegemini.Params{RetryDelay: 100 * time.Millisecond}))
	chain := newChain(t, srv, chainOpts{quotaCooldown: 300 * time.Millisecond})
	e := newEnv(t, envOpts{cfg: riverjob.Config[string, gemrest.Response]{Chain: chain}})
	first := e.insert(riverjob.Args[string]{Key: "a", Input: "q"}, nil)
	rep := e.waitEvents(first.Job.ID, 1)[0].Report
	require.Equal(t, riverjob.Snoozed, rep.Outcome)
	// A job arriving while both tiers are parked snoozes without a call.
	second := e.insert(riverjob.Args[string]{Key: "b", Input: "q"}, nil)
	rep2 := e.waitEvents(second.Job.ID, 1)[0].Report
	if rep2.Outcome == riverjob.Snoozed {
		assert.Zero(t, rep2.UpstreamCalls, "parked tiers are skipped without a call")
		assert.Equal(t, []string{"quota", "quota"}, []string{rep2.Tiers[0].Skip, rep2.Tiers[1].Skip})
		assert.LessOrEqual(t, rep2.Wait, 340*time.Millisecond, "until the parking ends, plus jitter")
	}
	for _, id := range []int64{first.Job.ID, second.Job.ID} {
		job := e.final(id, rivertype.JobStateCompleted)
		assert.Equal(t, 1, job.Attempt, "snoozes do not count as attempts")
		assert.Empty(t, job.Errors)
	}
	assert.Equal(t, 2, e.store.len())
}

// TestParkingEndsDuringAttempt: a job that skipped a parked tier, and
// whose other tier then took longer than the parking had left, is snoozed
// to run again at once — not for QuotaSnooze, which is for a quota nothing
// says the end of.
func TestParkingEndsDuringAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var proCalls atomic.Int32
		proTier := fallback.Tier("pro", func(context.Context, string) (string, error) {
			proCalls.Add(1)
			return "", classify.Wrap(errors.New("daily quota"), classify.Verdict{Class: classify.QuotaExhausted, HTTPStatus: 429})
		})
		flashTier := fallback.Tier("flash", func(ctx context.Context, _ string) (string, error) {
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
				return "", ctx.Err()
			}
			return "", classify.Wrap(errors.New("unreadable"), classify.Verdict{Class: classify.InvalidOutput})
		})
		chain, err := fallback.New(fallback.Config[string, string]{
			Stages:        []fallback.Stage[string, string]{{Tier: proTier}, {Tier: flashTier}},
			Total:         time.Second,
			QuotaCooldown: 200 * time.Millisecond,
		})
		require.NoError(t, err)
		w, err := riverjob.NewWorker[extractArgs](riverjob.Config[string, string]{
			Chain: chain, Store: &mapStore{m: map[string]string{}}, QuotaSnooze: time.Hour,
		})
		require.NoError(t, err)
		var reports []riverjob.Report
		w.Observe(func(ev riverjob.Event) { reports = append(reports, ev.Report) })
		work := func(id int64) time.Duration {
			job := &river.Job[extractArgs]{
				JobRow: &rivertype.JobRow{ID: id, Kind: extractArgs{}.Kind(), Attempt: 1, MaxAttempts: 5},
				Args:   extractArgs{riverjob.Args[string]{Key: strconv.FormatInt(id, 10), Input: "q"}},
			}
			var snooze *rivertype.JobSnoozeError
			require.ErrorAs(t, w.Work(t.Context(), job), &snooze)
			return snooze.Duration
		}

		// Pro's 429 parks it for 200ms; flash fails 100ms later: the job
		// sleeps until pro's parking ends (plus up to a tenth of jitter).
		wait := work(1)
		assert.GreaterOrEqual(t, wait, 100*time.Millisecond)
		assert.LessOrEqual(t, wait, 110*time.Millisecond)

		// 150ms in, pro is parked and skipped; flash fails at 250ms, after
		// pro's parking ended: pro may serve now.
		time.Sleep(50 * time.Millisecond)
		assert.Zero(t, work(2), "runs again at once, not after QuotaSnooze")
		require.Len(t, reports, 2)
		assert.Equal(t, riverjob.Snoozed, reports[1].Outcome)
		assert.Equal(t, riverjob.WhyQuota, reports[1].Why)
		assert.Equal(t, "quota", reports[1].Tiers[0].Skip)
		assert.Equal(t, int32(1), proCalls.Load(), "the second job skipped pro")
	})
}

// TestFailClosedNeverRetries: a fail-closed class cancels the job on its
// first attempt, whatever attempts it has left, and nothing is stored.
func TestFailClosedNeverRetries(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript(pro, always(fakegemini.Unauthenticated, fakegemini.Params{}))
	e := newEnv(t, envOpts{cfg: riverjob.Config[string, gemrest.Response]{Chain: newChain(t, srv, chainOpts{})}, maxAttempts: 25})
	ins := e.insert(riverjob.Args[string]{Key: "k", Input: "q"}, nil)
	e.waitEvents(ins.Job.ID, 1)
	job := e.final(ins.Job.ID, rivertype.JobStateCancelled)
	assert.Equal(t, 1, job.Attempt)
	assert.Equal(t, 1, int(srv.Requests(pro)))
	assert.Zero(t, srv.Requests(flash), "a configuration error is not routed around")
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, 1, int(srv.Requests(pro)), "never run again")
	assert.Zero(t, e.store.len())
}

// TestWorkerValidateRejects: an answer the worker's own validation rejects
// is discarded as invalid output and never stored.
func TestWorkerValidateRejects(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript(pro, fakegemini.Script{Reply: fakegemini.Text(`{"total":"12.50"}`)})
	cfg := riverjob.Config[string, gemrest.Response]{
		Chain: newChain(t, srv, chainOpts{}),
		Validate: validate.Field(func(r gemrest.Response) string { return r.Text }, validate.Decode(func(v struct {
			Total float64 `json:"total"`
		}) error {
			return nil
		})),
	}
	e := newEnv(t, envOpts{cfg: cfg})
	ins := e.insert(riverjob.Args[string]{Key: "k", Input: "q"}, nil)
	rep := e.waitEvents(ins.Job.ID, 1)[0].Report
	assert.Equal(t, riverjob.Discarded, rep.Outcome)
	assert.Equal(t, riverjob.WhyRejectedOutput, rep.Why)
	assert.Equal(t, classify.InvalidOutput, rep.Cause.Class)
	e.final(ins.Job.ID, rivertype.JobStateCancelled)
	assert.Zero(t, e.store.len(), "an amount as a string is not a result")
}

// TestDuplicateKeyRunsOnce: a second submission with the same idempotency
// key is skipped by River, while the first waits, runs or has completed; a
// result already stored completes a job without a call.
func TestDuplicateKeyRunsOnce(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	e := newEnv(t, envOpts{cfg: riverjob.Config[string, gemrest.Response]{Chain: newChain(t, srv, chainOpts{})}})
	first := e.insert(riverjob.Args[string]{Tenant: "acme", Key: "invoice-42", Input: "q"}, nil)
	assert.False(t, first.UniqueSkippedAsDuplicate)
	dup := e.insert(riverjob.Args[string]{Tenant: "acme", Key: "invoice-42", Input: "q"}, nil)
	assert.True(t, dup.UniqueSkippedAsDuplicate)
	assert.Equal(t, first.Job.ID, dup.Job.ID)
	e.final(first.Job.ID, rivertype.JobStateCompleted)
	again := e.insert(riverjob.Args[string]{Tenant: "other", Key: "invoice-42", Input: "different"}, nil)
	assert.True(t, again.UniqueSkippedAsDuplicate, "a completed job keeps its key: the key alone decides")

	// Without a key, every insert is a job of its own.
	a := e.insert(riverjob.Args[string]{Input: "q"}, nil)
	b := e.insert(riverjob.Args[string]{Input: "q"}, nil)
	assert.NotEqual(t, a.Job.ID, b.Job.ID)
	e.final(a.Job.ID, rivertype.JobStateCompleted)
	e.final(b.Job.ID, rivertype.JobStateCompleted)
	// Each job ran the chain once (the server's own count can miss a call
	// a loaded machine timed out before the server read it).
	for _, id := range []int64{first.Job.ID, a.Job.ID, b.Job.ID} {
		evs := e.waitEvents(id, 1)
		require.Len(t, evs, 1)
		assert.Equal(t, riverjob.WhyAnswered, evs[0].Report.Why)
		assert.Positive(t, evs[0].Report.UpstreamCalls)
	}

	// Once River has cleaned the completed job away, a new submission with
	// the key is a new job: it finds the stored result and makes no call.
	_, err := e.client.JobDelete(context.Background(), first.Job.ID)
	require.NoError(t, err)
	c := e.insert(riverjob.Args[string]{Key: "invoice-42", Input: "q"}, nil)
	require.False(t, c.UniqueSkippedAsDuplicate)
	rep := e.waitEvents(c.Job.ID, 1)[0].Report
	assert.Equal(t, riverjob.Completed, rep.Outcome)
	assert.Equal(t, riverjob.WhyAlreadyStored, rep.Why)
	assert.Zero(t, rep.UpstreamCalls)
	e.final(c.Job.ID, rivertype.JobStateCompleted)
	assert.Equal(t, 3, e.store.puts, "one write per job that called the chain")
}

// TestSourceRecorded: the report of a completed job says who answered.
func TestSourceRecorded(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript(pro, always(fakegemini.Unavailable, fakegemini.Params{}))
	e := newEnv(t, envOpts{cfg: riverjob.Config[string, gemrest.Response]{Chain: newChain(t, srv, chainOpts{})}})
	ins := e.insert(riverjob.Args[string]{Key: "k", Input: "q"}, nil)
	rep := e.waitEvents(ins.Job.ID, 1)[0].Report
	assert.Equal(t, riverjob.Completed, rep.Outcome)
	assert.Equal(t, fallback.SourceTier, rep.Source)
	assert.Equal(t, "flash", rep.Tier)
	assert.True(t, rep.Degraded)
	job := e.final(ins.Job.ID, rivertype.JobStateCompleted)
	stored := report(t, job)
	assert.Equal(t, "flash", stored.Tier)
	assert.True(t, stored.Degraded)
}
