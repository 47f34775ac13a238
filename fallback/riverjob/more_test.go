package riverjob_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback/riverjob"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	"github.com/tierguard/tierguard/internal/testbed/gemrest"
	"github.com/tierguard/tierguard/otelx"
)

// TestTenantConcurrency: a tenant at its limit has its next job snoozed
// (no attempt counted) while another tenant's job runs.
func TestTenantConcurrency(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript(pro, fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.Stall, P: fakegemini.Always, FirstN: 1, Params: fakegemini.Params{StallFor: 700 * time.Millisecond}}}})
	tenants, err := bulkhead.NewGroup(bulkhead.Config{Name: "tenants", Max: 1}, 100)
	require.NoError(t, err)
	e := newEnv(t, envOpts{cfg: riverjob.Config[string, gemrest.Response]{
		Chain: newChain(t, srv, chainOpts{}), Tenants: tenants, TenantBusySnooze: 100 * time.Millisecond,
	}})
	slow := e.insert(riverjob.Args[string]{Tenant: "acme", Key: "slow", Input: "q"}, nil)
	require.Eventually(t, func() bool { return srv.InFlight() == 1 }, 10*time.Second, 5*time.Millisecond)
	busy := e.insert(riverjob.Args[string]{Tenant: "acme", Key: "busy", Input: "q"}, nil)
	other := e.insert(riverjob.Args[string]{Tenant: "globex", Key: "other", Input: "q"}, nil)

	rep := e.waitEvents(busy.Job.ID, 1)[0].Report
	assert.Equal(t, riverjob.Snoozed, rep.Outcome)
	assert.Equal(t, riverjob.WhyTenantBusy, rep.Why)
	assert.Zero(t, rep.UpstreamCalls)
	assert.GreaterOrEqual(t, rep.Wait, 100*time.Millisecond)
	assert.Equal(t, riverjob.Completed, e.waitEvents(other.Job.ID, 1)[0].Report.Outcome, "another tenant is not held up")
	assert.Equal(t, 1, int(srv.InFlight()), "while acme's slow job still runs")

	for _, id := range []int64{slow.Job.ID, busy.Job.ID, other.Job.ID} {
		job := e.final(id, rivertype.JobStateCompleted)
		assert.Equal(t, 1, job.Attempt, "tenant snoozes do not count")
	}
}

// TestDeadLettersAndReplay: fail-closed and exhausted jobs are listed with
// their verdicts, and replaying them after the cause is fixed completes
// them.
func TestDeadLettersAndReplay(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	e := newEnv(t, envOpts{cfg: riverjob.Config[string, gemrest.Response]{Chain: newChain(t, srv, chainOpts{})}, maxAttempts: 1})
	ctx := context.Background()

	srv.SetScript(pro, always(fakegemini.PermissionDenied, fakegemini.Params{}))
	denied := e.insert(riverjob.Args[string]{Key: "denied", Input: "q"}, nil)
	e.final(denied.Job.ID, rivertype.JobStateCancelled)

	srv.SetScript(pro, always(fakegemini.Unavailable, fakegemini.Params{}))
	srv.SetScript(flash, always(fakegemini.Unavailable, fakegemini.Params{}))
	outage := e.insert(riverjob.Args[string]{Key: "outage", Input: "q"}, nil)
	e.final(outage.Job.ID, rivertype.JobStateDiscarded)

	srv.ClearScript(pro)
	srv.ClearScript(flash)
	fine := e.insert(riverjob.Args[string]{Key: "fine", Input: "q"}, nil)
	e.final(fine.Job.ID, rivertype.JobStateCompleted)
	later := e.insert(riverjob.Args[string]{Key: "later", Input: "q"}, &river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
	_, err := e.client.JobCancel(ctx, later.Job.ID)
	require.NoError(t, err)

	var got []riverjob.DeadLetter
	for dl, err := range riverjob.DeadLetters(ctx, e.client, extractArgs{}.Kind()) {
		require.NoError(t, err)
		got = append(got, dl)
	}
	require.Len(t, got, 3)
	assert.Equal(t, denied.Job.ID, got[0].Job.ID)
	assert.Equal(t, rivertype.JobStateCancelled, got[0].Job.State)
	require.True(t, got[0].HasReport)
	assert.Equal(t, riverjob.WhyFailedClosed, got[0].Report.Why)
	assert.Equal(t, classify.Auth, got[0].Report.Cause.Class)
	assert.Equal(t, 403, got[0].Report.Cause.HTTPStatus)

	assert.Equal(t, outage.Job.ID, got[1].Job.ID)
	assert.Equal(t, rivertype.JobStateDiscarded, got[1].Job.State)
	require.True(t, got[1].HasReport)
	assert.Equal(t, riverjob.WhyExhausted, got[1].Report.Why)
	assert.Equal(t, classify.Transient, got[1].Report.Cause.Class)
	require.Len(t, got[1].Report.Tiers, 2)
	assert.Equal(t, riverjob.TierReport{Tier: "pro", Outcome: "failed", Class: classify.Transient, HTTPStatus: 503, Attempts: 2}, got[1].Report.Tiers[0])

	assert.Equal(t, later.Job.ID, got[2].Job.ID)
	assert.False(t, got[2].HasReport, "cancelled from outside: no verdict")

	for _, dl := range got[:2] {
		_, err := e.client.JobRetry(ctx, dl.Job.ID)
		require.NoError(t, err)
	}
	for _, dl := range got[:2] {
		job := e.final(dl.Job.ID, rivertype.JobStateCompleted)
		assert.Equal(t, riverjob.Completed, report(t, job).Outcome)
	}
	_, ok := e.store.get("outage")
	assert.True(t, ok)
	n := 0
	for _, err := range riverjob.DeadLetters(ctx, e.client) {
		require.NoError(t, err)
		n++
	}
	assert.Equal(t, 1, n, "only the job cancelled from outside is left")
}

// TestDeadLettersPages: the listing reads every page.
func TestDeadLettersPages(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript(pro, always(fakegemini.BadRequest, fakegemini.Params{}))
	e := newEnv(t, envOpts{cfg: riverjob.Config[string, gemrest.Response]{Chain: newChain(t, srv, chainOpts{})}, maxWorkers: 8})
	const n = 230
	params := make([]river.InsertManyParams, n)
	for i := range params {
		params[i] = river.InsertManyParams{Args: extractArgs{riverjob.Args[string]{Input: "q"}}}
	}
	_, err := e.client.InsertMany(context.Background(), params)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return srv.Requests(pro) == n }, 20*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		count := 0
		for _, err := range riverjob.DeadLetters(context.Background(), e.client, "extract") {
			require.NoError(t, err)
			count++
		}
		return count == n
	}, 20*time.Second, 50*time.Millisecond)
	count := 0
	for range riverjob.DeadLetters(context.Background(), e.client, "extract") {
		count++
		if count == 150 {
			break
		}
	}
	assert.Equal(t, 150, count, "breaking out stops the listing")
}

// syncBuffer is a bytes.Buffer for a logger used from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(s.b.Bytes()))
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m))
		out = append(out, m)
	}
	return out
}

// TestOtelxSeesAttempts: each job attempt is a request to otelx, its
// request id the job id; the tenant shows only when opted in.
func TestOtelxSeesAttempts(t *testing.T) {
	for _, optIn := range []bool{false, true} {
		t.Run("tenant_labels_"+strconv.FormatBool(optIn), func(t *testing.T) {
			srv := fakegemini.New()
			defer srv.Close()
			srv.SetScript(pro, firstN(2, fakegemini.Unavailable, fakegemini.Params{}))
			srv.SetScript(flash, firstN(2, fakegemini.Unavailable, fakegemini.Params{}))
			chain := newChain(t, srv, chainOpts{})
			var buf syncBuffer
			inst, err := otelx.Instrument(chain, otelx.Options{
				MeterProvider: metricnoop.NewMeterProvider(), TracerProvider: tracenoop.NewTracerProvider(),
				Logger:       slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
				TenantLabels: optIn,
			})
			require.NoError(t, err)
			defer inst.Close()
			e := newEnv(t, envOpts{cfg: riverjob.Config[string, gemrest.Response]{Chain: chain}})
			ins := e.insert(riverjob.Args[string]{Tenant: "tenant-secret-7", Scenario: "extract", Key: "k", Input: "prompt-secret"}, nil)
			e.final(ins.Job.ID, rivertype.JobStateCompleted)

			attempts := map[float64]bool{}
			lines := buf.lines(t)
			require.NotEmpty(t, lines)
			for _, l := range lines {
				assert.Equal(t, strconv.FormatInt(ins.Job.ID, 10), l["request_id"], "%v", l)
				assert.Equal(t, "extract", l["scenario"])
				assert.Equal(t, "extract", l["river.job.kind"])
				if optIn {
					assert.Equal(t, "tenant-secret-7", l["tenant"])
				} else {
					assert.NotContains(t, l, "tenant")
				}
				if a, ok := l["river.job.attempt"].(float64); ok {
					attempts[a] = true
				}
			}
			assert.Equal(t, map[float64]bool{1: true, 2: true}, attempts, "both job attempts were seen")
			buf.mu.Lock()
			all := buf.b.String()
			buf.mu.Unlock()
			assert.NotContains(t, all, "prompt-secret")
			if !optIn {
				assert.NotContains(t, all, "tenant-secret-7")
			}
		})
	}
}
