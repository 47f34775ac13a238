package sqlite_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/riverjob"
	"github.com/tierguard/tierguard/fallback/riverjob/sqlite"
	"github.com/tierguard/tierguard/fallback/spend"
)

// SummaryArgs is a job: a document to summarise, for a tenant.
type SummaryArgs struct {
	riverjob.Args[string]
}

// Kind names the job kind.
func (SummaryArgs) Kind() string { return "summarise" }

// results keeps the summaries in memory (a table of yours in practice).
type results struct {
	mu sync.Mutex
	m  map[string]string
}

func (r *results) Has(_ context.Context, key string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.m[key]
	return ok, nil
}

func (r *results) Put(_ context.Context, key, out string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.m[key]; !ok {
		r.m[key] = out
	}
	return nil
}

// A batch on SQLite, end to end: the database, a chain billed by a spend
// ledger, the worker, River's client, one job and its bill.
func ExampleOpen() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "riverjob-sqlite-")
	defer os.RemoveAll(dir)

	// The driver, WAL, one connection and River's migrations.
	db, err := sqlite.Open(ctx, filepath.Join(dir, "river.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()

	// The chain, with the ledger observing it.
	prices, _ := spend.NewPrices(spend.PriceTable{Currency: "USD", Prices: []spend.Price{
		{Model: "gemini-2.5-flash-lite", Rates: spend.Rates{Input: spend.MustParseAmount("0.1"), Output: spend.MustParseAmount("0.4")}},
	}})
	ledger, _ := spend.New(spend.Config{Prices: prices})
	defer ledger.Close()
	lite := fallback.Tier("lite", func(ctx context.Context, doc string) (string, error) {
		// A real tier calls the model; the SDK adapters report the usage.
		fallback.Report(ctx, fallback.Reply{Usage: fallback.Usage{InputTokens: 2000, OutputTokens: 500}, HasUsage: true})
		return "summary of " + doc, nil
	})
	chain, _ := fallback.New(fallback.Config[string, string]{
		Stages:   []fallback.Stage[string, string]{{Tier: lite, Model: "gemini-2.5-flash-lite"}},
		Total:    30 * time.Second,
		Observer: ledger.Observer(),
	})

	// The worker bills each job to its tenant through the ledger.
	store := &results{m: map[string]string{}}
	w, err := riverjob.NewWorker[SummaryArgs](riverjob.Config[string, string]{Chain: chain, Store: store, Ledger: ledger})
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan riverjob.Report, 1)
	w.Observe(func(ev riverjob.Event) { done <- ev.Report })
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(riversqlite.New(db), &river.Config{
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
		Workers:              workers,
		JobTimeout:           w.Timeout(nil),
		RescueStuckJobsAfter: sqlite.RescueAfter(w.Timeout(nil)),
		Logger:               slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = client.Start(ctx)
	defer client.Stop(ctx)

	_, _ = client.Insert(ctx, SummaryArgs{riverjob.Args[string]{Tenant: "acme", Scenario: "batch_summary", Key: "doc-1", Input: "the annual report"}}, nil)
	fmt.Println((<-done).Outcome)
	fmt.Println(store.m["doc-1"])
	acme := ledger.Totals("acme")
	fmt.Println("acme:", acme.Requests, "request,", acme.Calls, "call, cost", acme.Cost, "; untracked:", ledger.Untracked())
	// Output:
	// completed
	// summary of the annual report
	// acme: 1 request, 1 call, cost 0.0004 ; untracked: 0
}
