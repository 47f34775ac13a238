package riverjob_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/riverjob"
)

// summaryArgs are the example's jobs: a document to summarise.
type summaryArgs struct {
	riverjob.Args[string]
}

func (summaryArgs) Kind() string { return "summarise" }

// mapStore keeps results in memory.
type mapStore struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *mapStore) Has(_ context.Context, key string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[key]
	return ok, nil
}

func (s *mapStore) Put(_ context.Context, key, out string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[key]; !ok {
		s.m[key] = out
	}
	return nil
}

// A worker on River's SQLite driver: one job answers, one fails closed and
// becomes a dead letter.
func ExampleNewWorker() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "riverjob-example-")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "river.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)")
	defer db.Close()
	db.SetMaxOpenConns(1) // SQLite has one writer
	migrator, _ := rivermigrate.New(riversqlite.New(db), nil)
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		fmt.Println(err)
		return
	}

	model := fallback.Tier("flash", func(_ context.Context, doc string) (string, error) {
		if doc == "" {
			return "", classify.Wrap(fmt.Errorf("empty document"), classify.Verdict{Class: classify.InvalidRequest, HTTPStatus: 400})
		}
		return "summary of " + doc, nil
	})
	chain, _ := fallback.New(fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{{Tier: model}},
		Total:  10 * time.Second,
	})
	store := &mapStore{m: map[string]string{}}
	w, err := riverjob.NewWorker[summaryArgs](riverjob.Config[string, string]{Chain: chain, Store: store})
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan riverjob.Report, 2)
	w.Observe(func(ev riverjob.Event) { done <- ev.Report })

	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, _ := river.NewClient(riversqlite.New(db), &river.Config{
		Queues:     map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 1}},
		Workers:    workers,
		JobTimeout: w.Timeout(nil),
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	_ = client.Start(ctx)
	defer client.Stop(ctx)

	_, _ = client.Insert(ctx, summaryArgs{riverjob.Args[string]{Tenant: "acme", Key: "doc-1", Input: "the annual report"}}, nil)
	fmt.Println((<-done).Outcome)
	_, _ = client.Insert(ctx, summaryArgs{riverjob.Args[string]{Tenant: "acme", Key: "doc-2", Input: ""}}, nil)
	fmt.Println(<-done)

	for {
		n := 0
		for dl, err := range riverjob.DeadLetters(ctx, client, summaryArgs{}.Kind()) {
			if err != nil {
				fmt.Println(err)
				return
			}
			fmt.Println("dead letter:", dl.Job.State, dl.Report.Cause.Class)
			n++
		}
		if n > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond) // River records the end of the attempt just after it
	}
	fmt.Println(store.m["doc-1"])
	// Output:
	// completed
	// discarded: failed closed: invalid_request (400); flash failed invalid_request 400
	// dead letter: cancelled invalid_request
	// summary of the annual report
}

// Job args embed Args; a key makes the job unique by kind and key.
func ExampleArgs() {
	args := summaryArgs{riverjob.Args[string]{Tenant: "acme", Scenario: "summary", Key: "doc-1", Input: "the annual report"}}
	b, _ := json.Marshal(args)
	fmt.Println(string(b))
	fmt.Println(args.InsertOpts().UniqueOpts.ByArgs)
	// Output:
	// {"tenant":"acme","scenario":"summary","idempotency_key":"doc-1","input":"the annual report"}
	// true
}

// A report renders in one line, safe to log.
func ExampleReport_String() {
	r := riverjob.Report{
		Outcome: riverjob.Snoozed, Why: riverjob.WhyQuota,
		Cause: classify.Verdict{Class: classify.QuotaExhausted, HTTPStatus: 429, Status: "RESOURCE_EXHAUSTED"},
		Tiers: []riverjob.TierReport{
			{Tier: "pro", Outcome: "skipped", Skip: "quota"},
			{Tier: "flash", Outcome: "failed", Class: classify.QuotaExhausted, HTTPStatus: 429, Attempts: 1},
		},
		UpstreamCalls: 1, Attempt: 2, Wait: 42 * time.Minute,
	}
	fmt.Println(r)
	// Output:
	// snoozed: every tier that can answer is out of quota: quota_exhausted (429 RESOURCE_EXHAUSTED), wait 42m0s; pro skipped (quota), flash failed quota_exhausted 429
}
