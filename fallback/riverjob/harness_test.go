package riverjob_test

import (
	"cmp"
	"context"
	"database/sql"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/riverjob"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	"github.com/tierguard/tierguard/internal/testbed/gemrest"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// extractArgs is the test's job kind: a prompt to answer as JSON.
type extractArgs struct {
	riverjob.Args[string]
}

func (extractArgs) Kind() string { return "extract" }

type worker = riverjob.Worker[extractArgs, string, gemrest.Response]

// memStore is a Store in memory that counts its writes.
type memStore struct {
	mu   sync.Mutex
	m    map[string]string
	puts int
}

func newMemStore() *memStore { return &memStore{m: map[string]string{}} }

func (s *memStore) Has(_ context.Context, key string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[key]
	return ok, nil
}

func (s *memStore) Put(_ context.Context, key string, out gemrest.Response) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.puts++
	if _, ok := s.m[key]; !ok {
		s.m[key] = out.Text
	}
	return nil
}

func (s *memStore) get(key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	return v, ok
}

func (s *memStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// fixedRetry is a short, fixed backoff, so that tests do not wait River's
// attempt⁴ seconds.
type fixedRetry time.Duration

func (d fixedRetry) NextRetry(*rivertype.JobRow) time.Time { return time.Now().Add(time.Duration(d)) }

// chainOpts shapes the test chain: pro (gemini-2.5-pro) → flash
// (gemini-2.5-flash), each with two attempts, a breaker and a JSON
// validator.
type chainOpts struct {
	total         time.Duration
	tryTimeout    time.Duration
	quotaCooldown time.Duration
	breakers      bool
}

func newChain(t testing.TB, srv *fakegemini.Server, o chainOpts) *fallback.Chain[string, gemrest.Response] {
	t.Helper()
	o.total = cmp.Or(o.total, 2*time.Second)
	o.tryTimeout = cmp.Or(o.tryTimeout, time.Second)
	o.quotaCooldown = cmp.Or(o.quotaCooldown, 2*time.Second)
	var stages []fallback.Stage[string, gemrest.Response]
	for _, m := range []struct{ name, model string }{{"pro", "gemini-2.5-pro"}, {"flash", "gemini-2.5-flash"}} {
		c, err := gemrest.New(gemrest.Config{BaseURL: srv.URL(), Model: m.model, Name: m.name, HTTPClient: srv.Client()})
		require.NoError(t, err)
		st := fallback.Stage[string, gemrest.Response]{
			Tier:       gemrest.NewTier(c, func(q string) gemrest.Request { return gemrest.Request{Prompt: q, JSON: true} }),
			Model:      m.model,
			Retry:      retry.Policy{MaxAttempts: 2, BaseDelay: 5 * time.Millisecond, MaxDelay: 20 * time.Millisecond},
			TryTimeout: o.tryTimeout,
			Validate:   validate.Field(func(r gemrest.Response) string { return r.Text }, validate.JSON()),
		}
		if o.breakers {
			b, err := breaker.New(breaker.Config{Name: m.name, Cooldown: 300 * time.Millisecond})
			require.NoError(t, err)
			st.Breaker = b
		}
		stages = append(stages, st)
	}
	chain, err := fallback.New(fallback.Config[string, gemrest.Response]{Stages: stages, Total: o.total, QuotaCooldown: o.quotaCooldown})
	require.NoError(t, err)
	return chain
}

// openSQLite opens a fresh River database in a file of its own, migrated
// to River's latest schema.
func openSQLite(t testing.TB) *sql.DB {
	t.Helper()
	dsn := "file:" + filepath.Join(t.TempDir(), "river.db") + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)"
	db, err := sql.Open("sqlite", dsn)
	require.NoError(t, err)
	// River runs queries from several goroutines; SQLite allows one writer.
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	migrator, err := rivermigrate.New(riversqlite.New(db), nil)
	require.NoError(t, err)
	_, err = migrator.Migrate(context.Background(), rivermigrate.DirectionUp, nil)
	require.NoError(t, err)
	return db
}

// env is one River client on SQLite working extract jobs with one worker.
type env struct {
	t      testing.TB
	db     *sql.DB
	client *river.Client[*sql.Tx]
	worker *worker
	store  *memStore

	mu     sync.Mutex
	events map[int64][]riverjob.Event
	cond   *sync.Cond
}

type envOpts struct {
	cfg         riverjob.Config[string, gemrest.Response]
	maxAttempts int
	maxWorkers  int
	retryAfter  time.Duration
}

func newEnv(t testing.TB, o envOpts) *env {
	t.Helper()
	e := &env{t: t, db: openSQLite(t), events: map[int64][]riverjob.Event{}}
	e.cond = sync.NewCond(&e.mu)
	if o.cfg.Store == nil {
		e.store = newMemStore()
		o.cfg.Store = e.store
	}
	o.cfg.RetryPolicy = fixedRetry(cmp.Or(o.retryAfter, 20*time.Millisecond))
	w, err := riverjob.NewWorker[extractArgs](o.cfg)
	require.NoError(t, err)
	e.worker = w
	w.Observe(func(ev riverjob.Event) {
		e.mu.Lock()
		e.events[ev.JobID] = append(e.events[ev.JobID], ev)
		e.mu.Unlock()
		e.cond.Broadcast()
	})
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	e.client, err = river.NewClient(riversqlite.New(e.db), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cmp.Or(o.maxWorkers, 4)}},
		Workers:           workers,
		MaxAttempts:       cmp.Or(o.maxAttempts, 3),
		RetryPolicy:       fixedRetry(cmp.Or(o.retryAfter, 20*time.Millisecond)),
		FetchCooldown:     5 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		TestOnly:          true,
	})
	require.NoError(t, err)
	require.NoError(t, e.client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.client.Stop(ctx)
	})
	return e
}

// insert submits a job.
func (e *env) insert(args riverjob.Args[string], opts *river.InsertOpts) *rivertype.JobInsertResult {
	e.t.Helper()
	res, err := e.client.Insert(context.Background(), extractArgs{args}, opts)
	require.NoError(e.t, err)
	return res
}

// waitEvents waits until job id has had n attempts reported.
func (e *env) waitEvents(id int64, n int) []riverjob.Event {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	stop := time.AfterFunc(20*time.Second, e.cond.Broadcast)
	defer stop.Stop()
	e.mu.Lock()
	defer e.mu.Unlock()
	for len(e.events[id]) < n {
		if time.Now().After(deadline) {
			e.t.Fatalf("job %d: %d attempts reported, want %d", id, len(e.events[id]), n)
		}
		e.cond.Wait()
	}
	return append([]riverjob.Event(nil), e.events[id]...)
}

// settled waits until River has recorded the end of job id's attempt (its
// state is no longer running) and returns the row.
func (e *env) settled(id int64) *rivertype.JobRow {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		job, err := e.client.JobGet(context.Background(), id)
		require.NoError(e.t, err)
		if job.State != rivertype.JobStateRunning {
			return job
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("job %d still running", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// final waits until job id reaches one of states.
func (e *env) final(id int64, states ...rivertype.JobState) *rivertype.JobRow {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		job, err := e.client.JobGet(context.Background(), id)
		require.NoError(e.t, err)
		for _, s := range states {
			if job.State == s {
				return job
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("job %d is %s, want one of %v", id, job.State, states)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
