// Package sqlite opens the embedded default queue of riverjob: River on
// SQLite, one file, no server — a single machine, a demo, a newcomer's
// first batch.
//
// Open does the four things a River SQLite database needs, which are easy
// to get wrong by hand:
//
//   - the driver: modernc.org/sqlite (pure Go, no cgo), registered by this
//     package as "sqlite";
//   - sql.Open with write-ahead logging and a busy timeout, so that River's
//     goroutines wait for each other instead of failing with SQLITE_BUSY;
//   - db.SetMaxOpenConns(1): SQLite has one writer;
//   - River's migrations, up to the latest schema (idempotent).
//
// The fifth is the client's: River's rescuer must not hand a running job to
// another worker, so RescueStuckJobsAfter must exceed the worker's
// timeout. RescueAfter gives it:
//
//	db, err := sqlite.Open(ctx, "river.db")
//	w, err := riverjob.NewWorker[ExtractArgs](riverjob.Config[Contract, Invoice]{Chain: chain, Store: results, Ledger: ledger})
//	workers := river.NewWorkers()
//	river.AddWorker(workers, w)
//	client, err := river.NewClient(riversqlite.New(db), &river.Config{
//		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
//		Workers:              workers,
//		JobTimeout:           w.Timeout(nil),
//		RescueStuckJobsAfter: sqlite.RescueAfter(w.Timeout(nil)),
//	})
//
// The same worker runs on PostgreSQL (riverpgxv5) for a fleet of worker
// processes; only the driver and the database change.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// BusyTimeout is how long a statement waits for SQLite's write lock before
// it fails.
const BusyTimeout = 10 * time.Second

// Open opens the SQLite database file at path (creating it) for River:
// the pure-Go driver, write-ahead logging, a busy timeout of BusyTimeout,
// one open connection, and River's migrations applied. Close the returned
// database after stopping the River client.
func Open(ctx context.Context, path string) (*sql.DB, error) {
	if path == "" {
		return nil, errors.New("sqlite: a path is required")
	}
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	// River runs queries from several goroutines; SQLite allows one
	// writer, and one connection keeps them from failing each other.
	db.SetMaxOpenConns(1)
	migrator, err := rivermigrate.New(riversqlite.New(db), nil)
	if err == nil {
		_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	}
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlite: migrating River's schema: %w", err)
	}
	return db, nil
}

// RescueAfter is a River client's RescueStuckJobsAfter for workers whose
// job timeout is at most timeout: twice the timeout, and never less than
// River's default of an hour. A job is rescued (handed to another worker)
// only once it cannot still be running.
func RescueAfter(timeout time.Duration) time.Duration {
	return max(2*timeout, time.Hour)
}
