package riverjob_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/riverjob"
	"github.com/tierguard/tierguard/fallback/riverjob/sqlite"
	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/retry"
)

type batchArgs struct {
	riverjob.Args[string]
}

func (batchArgs) Kind() string { return "batch_seo" }

// fakeProvider counts the calls it gets per tenant (as each call's
// fallback.Request names it) and bills each answer 100 input and 50 output
// tokens. The pro model fails with a 503, unbilled, for inputs that say
// "hard".
type fakeProvider struct {
	mu     sync.Mutex
	calls  map[string]int64 // per tenant, every call
	billed map[string]int64 // per tenant, answers that reported usage
	seen   []fallback.Request
}

func (p *fakeProvider) tier(name string) fallback.ModelTier[string, string] {
	return fallback.Tier(name, func(ctx context.Context, in string) (string, error) {
		req := fallback.RequestFrom(ctx)
		p.mu.Lock()
		p.calls[req.Tenant]++
		p.seen = append(p.seen, req)
		p.mu.Unlock()
		if name == "pro" && strings.Contains(in, "hard") {
			return "", classify.Wrap(fmt.Errorf("overloaded"), classify.Verdict{Class: classify.Transient, HTTPStatus: 503})
		}
		fallback.Report(ctx, fallback.Reply{Usage: fallback.Usage{InputTokens: 100, OutputTokens: 50}, HasUsage: true})
		p.mu.Lock()
		p.billed[req.Tenant]++
		p.mu.Unlock()
		return name + ": " + in, nil
	})
}

// batchEnv is a River client on SQLite (sqlite.Open) working batch jobs
// through a pro → flash chain whose ledger prices both models.
type batchEnv struct {
	provider *fakeProvider
	ledger   *spend.Ledger
	client   *river.Client[*sql.Tx]
	done     chan riverjob.Event
}

// A per-call fee plus token rates: one billed call costs 0.003.
var batchPrices = spend.PriceTable{Currency: "USD", Prices: []spend.Price{
	{Model: "fake-pro", Rates: spend.Rates{Input: spend.MustParseAmount("10"), Output: spend.MustParseAmount("20")}, PerRequest: spend.MustParseAmount("0.001")},
	{Model: "fake-flash", Rates: spend.Rates{Input: spend.MustParseAmount("10"), Output: spend.MustParseAmount("20")}, PerRequest: spend.MustParseAmount("0.001")},
}}

func newBatchEnv(t *testing.T, withLedger bool) *batchEnv {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "river.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })

	prices, err := spend.NewPrices(batchPrices)
	require.NoError(t, err)
	ledger, err := spend.New(spend.Config{Prices: prices})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ledger.Close() })

	p := &fakeProvider{calls: map[string]int64{}, billed: map[string]int64{}}
	chain, err := fallback.New(fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{
			{Tier: p.tier("pro"), Model: "fake-pro", Retry: retry.Policy{MaxAttempts: 1}},
			{Tier: p.tier("flash"), Model: "fake-flash", Retry: retry.Policy{MaxAttempts: 1}},
		},
		Total:    5 * time.Second,
		Observer: ledger.Observer(),
	})
	require.NoError(t, err)

	cfg := riverjob.Config[string, string]{Chain: chain, Store: &mapStore{m: map[string]string{}}}
	if withLedger {
		cfg.Ledger = ledger
	}
	w, err := riverjob.NewWorker[batchArgs](cfg)
	require.NoError(t, err)
	e := &batchEnv{provider: p, ledger: ledger, done: make(chan riverjob.Event, 100)}
	w.Observe(func(ev riverjob.Event) { e.done <- ev })

	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	e.client, err = river.NewClient(riversqlite.New(db), &river.Config{
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
		Workers:              workers,
		JobTimeout:           w.Timeout(nil),
		RescueStuckJobsAfter: sqlite.RescueAfter(w.Timeout(nil)),
		FetchCooldown:        5 * time.Millisecond,
		FetchPollInterval:    20 * time.Millisecond,
		Logger:               slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	require.NoError(t, e.client.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.client.Stop(ctx)
	})
	return e
}

// wait collects n attempt reports.
func (e *batchEnv) wait(t *testing.T, n int) []riverjob.Event {
	t.Helper()
	var evs []riverjob.Event
	timeout := time.After(30 * time.Second)
	for len(evs) < n {
		select {
		case ev := <-e.done:
			evs = append(evs, ev)
		case <-timeout:
			t.Fatalf("%d of %d job attempts reported", len(evs), n)
		}
	}
	return evs
}

// TestBatchIsBilledToItsTenants runs a batch of two tenants' jobs through a
// chain whose spend ledger observes it: every job's attempt is recorded
// (Untracked stays 0), under the job's tenant, and each tenant's calls and
// cost are what the provider counted for it.
func TestBatchIsBilledToItsTenants(t *testing.T) {
	e := newBatchEnv(t, true)
	ctx := context.Background()
	const jobs = 24
	want := map[string]int64{}
	ids := map[string]bool{}
	for i := range jobs {
		tenant := []string{"acme", "initech"}[i%2]
		input := "page " + strconv.Itoa(i)
		if i%3 == 0 {
			input += " (hard)" // pro fails, flash answers: two calls, one billed
		}
		res, err := e.client.Insert(ctx, batchArgs{riverjob.Args[string]{Tenant: tenant, Scenario: "batch_seo", Key: "page-" + strconv.Itoa(i), Input: input}}, nil)
		require.NoError(t, err)
		ids[strconv.FormatInt(res.Job.ID, 10)] = true
		want[tenant]++
	}
	for _, ev := range e.wait(t, jobs) {
		require.Equal(t, riverjob.Completed, ev.Report.Outcome, ev.Report.String())
	}

	assert.Zero(t, e.ledger.Untracked(), "every job attempt was recorded")
	perCall := spend.MustParseAmount("0.003") // fee 0.001 + 100 input at 10/M + 50 output at 20/M
	e.provider.mu.Lock()
	defer e.provider.mu.Unlock()
	for tenant, n := range want {
		tot := e.ledger.Totals(tenant)
		assert.Equal(t, n, tot.Requests, tenant)
		assert.Equal(t, n, tot.Valid, tenant)
		assert.Equal(t, e.provider.calls[tenant], tot.Calls, "%s: the ledger's calls are the provider's", tenant)
		assert.Equal(t, spend.Amount(e.provider.billed[tenant])*perCall, tot.Cost, "%s: the ledger's cost is the provider's billed calls", tenant)
		assert.Equal(t, n, e.provider.billed[tenant], tenant)
	}
	assert.Equal(t, int64(jobs+jobs/3), e.provider.calls["acme"]+e.provider.calls["initech"])
	assert.Equal(t, []string{"acme", "initech"}, e.ledger.Tenants())
	for _, req := range e.provider.seen {
		assert.Equal(t, "batch_seo", req.Scenario)
		assert.True(t, ids[req.ID], "the request id %q is a job id", req.ID)
	}
}

// TestWithoutLedgerTheBatchIsUntracked is the same chain without
// Config.Ledger: its ledger sees the jobs' requests but no ticket, and
// counts them untracked, billing no tenant.
func TestWithoutLedgerTheBatchIsUntracked(t *testing.T) {
	e := newBatchEnv(t, false)
	ctx := context.Background()
	for i := range 3 {
		_, err := e.client.Insert(ctx, batchArgs{riverjob.Args[string]{Tenant: "acme", Scenario: "batch_seo", Input: "page " + strconv.Itoa(i)}}, nil)
		require.NoError(t, err)
	}
	for _, ev := range e.wait(t, 3) {
		require.Equal(t, riverjob.Completed, ev.Report.Outcome)
	}
	assert.Equal(t, int64(3), e.ledger.Untracked())
	assert.Zero(t, e.ledger.Totals("acme").Requests)
	e.provider.mu.Lock()
	defer e.provider.mu.Unlock()
	assert.Equal(t, int64(3), e.provider.calls["acme"], "the tier still saw the job's tenant")
}
