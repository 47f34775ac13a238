package riverjob_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

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

func TestConfigErrors(t *testing.T) {
	_, err := riverjob.NewWorker[extractArgs](riverjob.Config[string, gemrest.Response]{TenantBusySnooze: -1, QuotaSnooze: -time.Second})
	require.Error(t, err)
	for _, want := range []string{"a Chain is required", "a Store is required", "negative TenantBusySnooze", "negative QuotaSnooze"} {
		assert.ErrorContains(t, err, want)
	}

	srv := fakegemini.New()
	defer srv.Close()
	chain := newChain(t, srv, chainOpts{total: 2 * time.Second})
	_, err = riverjob.NewWorker[extractArgs](riverjob.Config[string, gemrest.Response]{Chain: chain, Store: newMemStore(), Timeout: 2 * time.Second})
	assert.ErrorContains(t, err, "Timeout 2s must exceed the chain's Total 2s")

	w, err := riverjob.NewWorker[extractArgs](riverjob.Config[string, gemrest.Response]{Chain: chain, Store: newMemStore()})
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second, w.Timeout(nil), "the chain's Total plus a second to store the result")

	long := newChain(t, srv, chainOpts{total: 35 * time.Second})
	w, err = riverjob.NewWorker[extractArgs](riverjob.Config[string, gemrest.Response]{Chain: long, Store: newMemStore()})
	require.NoError(t, err)
	assert.Equal(t, 38500*time.Millisecond, w.Timeout(nil), "plus a tenth")
}

func TestArgsInsertOpts(t *testing.T) {
	assert.Equal(t, true, extractArgs{riverjob.Args[string]{Key: "k"}}.InsertOpts().UniqueOpts.ByArgs)
	assert.Equal(t, false, extractArgs{riverjob.Args[string]{}}.InsertOpts().UniqueOpts.ByArgs, "no key, no uniqueness")
	b, err := json.Marshal(extractArgs{riverjob.Args[string]{Tenant: "t", Scenario: "s", Key: "k", Input: "in"}})
	require.NoError(t, err)
	assert.JSONEq(t, `{"tenant":"t","scenario":"s","idempotency_key":"k","input":"in"}`, string(b))
}

func TestReportJSON(t *testing.T) {
	r := riverjob.Report{
		Outcome: riverjob.Retried, Why: riverjob.WhyRetryable,
		Cause: classify.Verdict{Class: classify.RateLimited, HTTPStatus: 429, Status: "RESOURCE_EXHAUSTED", RetryAfter: 1500 * time.Millisecond, Reason: "per-minute rate limit"},
		Tiers: []riverjob.TierReport{
			{Tier: "pro", Outcome: "failed", Class: classify.RateLimited, HTTPStatus: 429, Attempts: 1},
			{Tier: "flash", Outcome: "skipped", Skip: "open", Class: classify.Rejected},
		},
		UpstreamCalls: 1, Attempt: 3, Wait: 1500 * time.Millisecond,
	}
	b, err := json.Marshal(r)
	require.NoError(t, err)
	assert.JSONEq(t, `{"outcome":"retried","why":"no tier answered; the failure may pass","class":"rate_limited","http_status":429,
		"status":"RESOURCE_EXHAUSTED","retry_after_ms":1500,"reason":"per-minute rate limit",
		"tiers":[{"tier":"pro","outcome":"failed","class":"rate_limited","http_status":429,"attempts":1},{"tier":"flash","outcome":"skipped","skip":"open","class":"rejected"}],
		"upstream_calls":1,"attempt":3,"wait_ms":1500}`, string(b))
	var back riverjob.Report
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, r, back)
	assert.Equal(t, "retried: no tier answered; the failure may pass: rate_limited (429 RESOURCE_EXHAUSTED, retry after 1.5s): per-minute rate limit, wait 1.5s; pro failed rate_limited 429, flash skipped (open)", r.String())

	done := riverjob.Report{Outcome: riverjob.Completed, Why: riverjob.WhyAnswered, Source: fallback.SourceDefault, UpstreamCalls: 4, Attempt: 1}
	b, err = json.Marshal(done)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, done, back)
	assert.Equal(t, "completed: answered and validated (from the default)", done.String())

	_, err = json.Marshal(riverjob.Report{})
	assert.Error(t, err, "a report without an outcome is a bug")
	assert.Error(t, json.Unmarshal([]byte(`{"outcome":"exploded"}`), &back))
	require.NoError(t, json.Unmarshal([]byte(`{"outcome":"discarded","class":"from_the_future"}`), &back))
	assert.Equal(t, classify.Unknown, back.Cause.Class)
}

func TestOutcomeNames(t *testing.T) {
	for o, want := range map[riverjob.Outcome]string{
		riverjob.Completed: "completed", riverjob.Retried: "retried", riverjob.Snoozed: "snoozed",
		riverjob.Discarded: "discarded", riverjob.Interrupted: "interrupted", 0: "invalid_outcome", 99: "invalid_outcome",
	} {
		assert.Equal(t, want, o.String())
	}
}

func TestErrorWraps(t *testing.T) {
	cause := errors.New("upstream text with secrets")
	e := &riverjob.Error{Report: riverjob.Report{Outcome: riverjob.Discarded, Why: riverjob.WhyFailedClosed, Cause: classify.Verdict{Class: classify.Auth, HTTPStatus: 401}}, Err: cause}
	assert.ErrorIs(t, e, cause)
	assert.Equal(t, "riverjob: discarded: failed closed: auth (401)", e.Error())
	assert.NotContains(t, e.Error(), "secrets")
	assert.Equal(t, classify.Auth, classify.Classify(e).Class)
}

// TestStopInterrupts: a client stopping while a job waits on the chain
// hands the job back to River, which makes it available again without
// counting the attempt.
func TestStopInterrupts(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript(pro, always(fakegemini.Stall, fakegemini.Params{}))
	e := newEnv(t, envOpts{cfg: riverjob.Config[string, gemrest.Response]{Chain: newChain(t, srv, chainOpts{total: 20 * time.Second, tryTimeout: 15 * time.Second})}})
	ins := e.insert(riverjob.Args[string]{Key: "k", Input: "q"}, nil)
	require.Eventually(t, func() bool { return srv.InFlight() == 1 }, 10*time.Second, 5*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, e.client.StopAndCancel(ctx))
	rep := e.waitEvents(ins.Job.ID, 1)[0].Report
	assert.Equal(t, riverjob.Interrupted, rep.Outcome)
	assert.Equal(t, classify.Canceled, rep.Cause.Class)
	job, err := e.client.JobGet(context.Background(), ins.Job.ID)
	require.NoError(t, err)
	assert.Equal(t, rivertype.JobStateAvailable, job.State)
	assert.Equal(t, 0, job.Attempt, "a stop does not use up an attempt")
	assert.Zero(t, e.store.len())
}

// TestCustomValidatorTextStaysOut: a custom validator's error may quote
// the answer; the report keeps the class and a fixed reason.
func TestCustomValidatorTextStaysOut(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	cfg := riverjob.Config[string, gemrest.Response]{
		Chain: newChain(t, srv, chainOpts{}),
		Validate: validate.Func[gemrest.Response](func(r gemrest.Response) error {
			return errors.New("bad answer: " + r.Text)
		}),
	}
	e := newEnv(t, envOpts{cfg: cfg})
	ins := e.insert(riverjob.Args[string]{Key: "k", Input: "secret-input"}, nil)
	rep := e.waitEvents(ins.Job.ID, 1)[0].Report
	assert.Equal(t, riverjob.Discarded, rep.Outcome)
	assert.Equal(t, classify.InvalidOutput, rep.Cause.Class)
	job := e.final(ins.Job.ID, rivertype.JobStateCancelled)
	require.Len(t, job.Errors, 1)
	assert.NotContains(t, job.Errors[0].Error, "secret-input")
	assert.NotContains(t, string(job.Output()), "secret-input")
	assert.Zero(t, e.store.len())
}
