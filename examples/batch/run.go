package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	_ "modernc.org/sqlite"

	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/fallback/riverjob"
	"github.com/tierguard/tierguard/internal/testbed/gemrest"
)

// backoff is River's retry schedule in the demo: base·2ⁿ (n the errors so
// far) up to a cap, with ±10% jitter — River's own default (attempt⁴
// seconds) would stretch a twenty-second story to minutes.
type backoff struct{ base, max time.Duration }

func (b backoff) NextRetry(job *rivertype.JobRow) time.Time {
	d := b.max
	if n := len(job.Errors); n < 20 {
		d = min(b.base<<n, b.max)
	}
	d += time.Duration((rand.Float64()*0.2 - 0.1) * float64(d))
	return time.Now().Add(d)
}

// run plays the story on SQLite, or on PostgreSQL with -postgres.
func run(ctx context.Context, cfg config, progress io.Writer) (*summary, error) {
	start := time.Now()
	st := newStory(cfg, start.Add(500*time.Millisecond))
	defer st.srv.Close()
	if cfg.Postgres != "" {
		pool, err := pgxpool.New(ctx, cfg.Postgres)
		if err != nil {
			return nil, err
		}
		defer pool.Close()
		if err := pool.Ping(ctx); err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
		// Earlier runs' jobs of the demo's kind would collide with this
		// run's idempotency keys.
		clean := func(ctx context.Context) error {
			_, err := pool.Exec(ctx, `DELETE FROM river_job WHERE kind = $1`, jobKind)
			return err
		}
		return runOn(ctx, cfg, st, riverpgxv5.New(pool), pgStore{pool}, "PostgreSQL", clean, progress)
	}
	path := cfg.DB
	if path == "" {
		dir, err := os.MkdirTemp("", "tierguard-batch-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "river.db")
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	// River's SQLite driver wants one connection: SQLite has one writer.
	db.SetMaxOpenConns(1)
	clean := func(ctx context.Context) error {
		_, err := db.ExecContext(ctx, `DELETE FROM river_job WHERE kind = ?`, jobKind)
		return err
	}
	return runOn(ctx, cfg, st, riversqlite.New(db), sqliteStore{db}, "SQLite ("+path+")", clean, progress)
}

// runOn is the story on one River driver: the same code for SQLite and
// PostgreSQL.
func runOn[TTx any](ctx context.Context, cfg config, st *story, driver riverdriver.Driver[TTx], store resultStore, where string,
	clean func(context.Context) error, progress io.Writer) (*summary, error) {
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return nil, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	if err := clean(ctx); err != nil {
		return nil, err
	}
	if err := store.reset(ctx); err != nil {
		return nil, err
	}

	chain, breakers, err := st.buildChain()
	if err != nil {
		return nil, err
	}
	tenants, err := bulkhead.NewGroup(bulkhead.Config{Name: "tenants", Max: cfg.PerTen}, 1000)
	if err != nil {
		return nil, err
	}
	bo := backoff{base: cfg.Backoff, max: cfg.MaxBackoff}
	w, err := riverjob.NewWorker[extractArgs](riverjob.Config[contract, gemrest.Response]{
		Chain:            chain,
		Store:            store,
		Tenants:          tenants,
		TenantBusySnooze: 200 * time.Millisecond,
		RetryPolicy:      bo,
		// A quota with no known reset would sleep the worker's default of
		// a minute, longer than the whole story: the story's quotas come
		// back on the scale of its quota cooldown.
		QuotaSnooze: cfg.QuotaCooldown,
	})
	if err != nil {
		return nil, err
	}
	rec := newRecorder(st.start)
	rec.attempted = st.attempted
	w.Observe(rec.observe)
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(driver, &river.Config{
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.Workers}},
		Workers:              workers,
		MaxAttempts:          cfg.MaxAttempts,
		RetryPolicy:          bo,
		JobTimeout:           w.Timeout(nil),
		RescueStuckJobsAfter: w.Timeout(nil) + 30*time.Second,
		FetchCooldown:        10 * time.Millisecond,
		FetchPollInterval:    50 * time.Millisecond,
		Logger:               slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, err
	}
	if err := client.Start(ctx); err != nil {
		return nil, err
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = client.Stop(sctx)
		}
	}
	defer stop()

	sum := &summary{cfg: cfg, where: where, keyOf: map[int64]string{}}
	done := make(chan struct{})
	var progressWG sync.WaitGroup
	if progress != nil {
		progressWG.Add(1)
		go func() {
			defer progressWG.Done()
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-done:
					return
				case <-tick.C:
					fmt.Fprintln(progress, rec.progress(breakers))
				}
			}
		}()
	}
	err = submit(ctx, cfg, st, client, sum)
	if err == nil {
		err = rec.waitFinal(ctx, sum, time.Minute+3*cfg.MaxBackoff*time.Duration(cfg.MaxAttempts))
	}
	close(done)
	progressWG.Wait()
	if err != nil {
		return nil, err
	}
	sum.wall = time.Since(st.start)

	// The worker reports an attempt before River records its end: wait
	// for River's rows to show every dead letter.
	want := rec.discardedJobs(sum.jobs)
	for wait := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		sum.deadLetters = sum.deadLetters[:0]
		for dl, err := range riverjob.DeadLetters(ctx, client, jobKind) {
			if err != nil {
				return nil, err
			}
			sum.deadLetters = append(sum.deadLetters, dl)
		}
		if len(sum.deadLetters) >= want {
			break
		}
		if time.Now().After(wait) {
			return nil, fmt.Errorf("the queue lists %d dead letters, the worker discarded %d jobs", len(sum.deadLetters), want)
		}
	}
	if cfg.Replay {
		if err := replay(ctx, st, client, rec, sum); err != nil {
			return nil, err
		}
	}
	stop()
	if sum.stored, err = store.keys(ctx); err != nil {
		return nil, err
	}
	rec.fill(sum, st)
	return sum, nil
}

// submit inserts the jobs at cfg.Rate, and resubmits a share of them with
// the same idempotency key, as a client that retried its upload would.
func submit[TTx any](ctx context.Context, cfg config, st *story, client *river.Client[TTx], sum *summary) error {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	args := func(i int) extractArgs {
		return extractArgs{riverjob.Args[contract]{
			Tenant:   fmt.Sprintf("tenant-%d", i%cfg.Tenants),
			Scenario: "contract_extraction",
			Key:      fmt.Sprintf("contract-%04d", i),
			Input:    st.contract(i),
		}}
	}
	// Jobs go in from the story's start.
	if d := time.Until(st.start); d > 0 {
		time.Sleep(d)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	next := 0
	var dups []int
	for next < cfg.Jobs || len(dups) > 0 {
		var batch []river.InsertManyParams
		// Last tick's resubmissions go first.
		for _, i := range dups {
			batch = append(batch, river.InsertManyParams{Args: args(i)})
			sum.dupSubmitted++
		}
		dups = dups[:0]
		for due := min(cfg.Jobs, int(time.Since(st.start).Seconds()*cfg.Rate)+1); next < due; next++ {
			batch = append(batch, river.InsertManyParams{Args: args(next)})
			if rng.Float64() < cfg.Duplicates {
				dups = append(dups, next)
			}
		}
		if len(batch) > 0 {
			res, err := client.InsertMany(ctx, batch)
			if err != nil {
				return fmt.Errorf("insert: %w", err)
			}
			for i, r := range res {
				switch {
				case r.UniqueSkippedAsDuplicate:
					sum.dupSkipped++
				default:
					sum.jobs = append(sum.jobs, r.Job.ID)
					sum.keyOf[r.Job.ID] = batch[i].Args.(extractArgs).Key
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// replay fixes the misread contracts (a better reading of the scans) and
// replays their dead letters: River makes them available again, and they
// complete.
func replay[TTx any](ctx context.Context, st *story, client *river.Client[TTx], rec *recorder, sum *summary) error {
	st.fixed.Store(true)
	var ids []int64
	rec.markReplay()
	for _, dl := range sum.deadLetters {
		if dl.HasReport && dl.Report.Why == riverjob.WhyInvalidOutput {
			if _, err := client.JobRetry(ctx, dl.Job.ID); err != nil {
				return fmt.Errorf("replay job %d: %w", dl.Job.ID, err)
			}
			ids = append(ids, dl.Job.ID)
		}
	}
	sum.replayed = len(ids)
	return rec.waitReplayed(ctx, ids, 30*time.Second, sum)
}
