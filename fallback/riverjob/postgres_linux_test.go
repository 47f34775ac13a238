package riverjob_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/riverjob"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	"github.com/tierguard/tierguard/internal/testbed/gemrest"
	"github.com/tierguard/tierguard/internal/testbed/pgserver"
	"github.com/tierguard/tierguard/retry"
)

// The child worker process reads these.
const (
	childDSNEnv = "TIERGUARD_RIVERJOB_CHILD_DSN"
	childURLEnv = "TIERGUARD_RIVERJOB_CHILD_URL"
)

// pgStore keeps results in a table of the queue's own database. puts
// counts the writes per key, so a test can tell a key completed twice.
type pgStore struct{ pool *pgxpool.Pool }

const resultsDDL = `CREATE TABLE IF NOT EXISTS riverjob_results (key text PRIMARY KEY, answer text NOT NULL, puts int NOT NULL DEFAULT 1)`

func (s pgStore) Has(ctx context.Context, key string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM riverjob_results WHERE key = $1)`, key).Scan(&ok)
	return ok, err
}

func (s pgStore) Put(ctx context.Context, key string, out gemrest.Response) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO riverjob_results (key, answer) VALUES ($1, $2)
		ON CONFLICT (key) DO UPDATE SET puts = riverjob_results.puts + 1`, key, out.Text)
	return err
}

// pgWorker is one worker process's River client on PostgreSQL.
type pgWorker struct {
	client *river.Client[pgx.Tx]
	pool   *pgxpool.Pool
}

// hangOn is the input whose job hangs in the child process, so that the
// child can be killed in the middle of it.
const hangOn = "victim"

func newPGWorker(t testing.TB, dsn, upstream, id string, child bool) *pgWorker {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	c, err := gemrest.New(gemrest.Config{BaseURL: upstream, Model: pro, Name: "pro"})
	require.NoError(t, err)
	tier := gemrest.NewTier(c, func(q string) gemrest.Request { return gemrest.Request{Prompt: q, JSON: true} })
	call := func(ctx context.Context, q string) (gemrest.Response, error) {
		if child && q == hangOn {
			fmt.Println("child: working " + hangOn)
			<-ctx.Done()
			return gemrest.Response{}, ctx.Err()
		}
		return tier.Call(ctx, q)
	}
	chain, err := fallback.New(fallback.Config[string, gemrest.Response]{
		Stages: []fallback.Stage[string, gemrest.Response]{{Tier: fallback.Tier("pro", call), Model: pro, Retry: retry.Policy{MaxAttempts: 2}}},
		Total:  time.Second,
	})
	require.NoError(t, err)
	w, err := riverjob.NewWorker[extractArgs](riverjob.Config[string, gemrest.Response]{Chain: chain, Store: pgStore{pool}, RetryPolicy: fixedRetry(50 * time.Millisecond)})
	require.NoError(t, err)
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		ID:                   id,
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 8}},
		Workers:              workers,
		JobTimeout:           w.Timeout(nil),
		RescueStuckJobsAfter: 3 * time.Second,
		RetryPolicy:          fixedRetry(50 * time.Millisecond),
		FetchCooldown:        5 * time.Millisecond,
		FetchPollInterval:    50 * time.Millisecond,
		Logger:               slog.New(slog.NewTextHandler(io.Discard, nil)),
		TestOnly:             true,
	})
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	return &pgWorker{client: client, pool: pool}
}

func (w *pgWorker) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = w.client.Stop(ctx)
	w.pool.Close()
}

// insertKeys submits one job per key.
func insertKeys(t testing.TB, client *river.Client[pgx.Tx], keys []string) {
	t.Helper()
	params := make([]river.InsertManyParams, len(keys))
	for i, k := range keys {
		params[i] = river.InsertManyParams{Args: extractArgs{riverjob.Args[string]{Tenant: "acme", Scenario: "extract", Key: k, Input: k}}}
	}
	_, err := client.InsertMany(context.Background(), params)
	require.NoError(t, err)
}

// TestPostgresTwoWorkers runs two worker processes against a real
// PostgreSQL server: this test's process and a child (this test binary
// again). Both submit the same idempotency keys. The child is killed with
// SIGKILL in the middle of a job; River's rescuer hands that job to this
// process. In the end every key has run to completion exactly once,
// nothing is lost and nothing is discarded.
func TestPostgresTwoWorkers(t *testing.T) {
	if dsn := os.Getenv(childDSNEnv); dsn != "" {
		runChild(t, dsn, os.Getenv(childURLEnv))
		return
	}
	pg := pgserver.Start(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pg.DSN)
	require.NoError(t, err)
	defer pool.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	require.NoError(t, err)
	_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, resultsDDL)
	require.NoError(t, err)

	// The fake upstream, in this process, counts the calls per key (the
	// input is the key): calls from both processes reach it.
	var mu sync.Mutex
	calls := map[string]int{}
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript(pro, fakegemini.Script{
		Latency: fakegemini.Latency{Fixed: 2 * time.Millisecond},
		Reply: func(r fakegemini.Request) string {
			mu.Lock()
			calls[r.Prompt]++
			mu.Unlock()
			return `{"ok":true}`
		},
	})

	// The child starts first, so that it is the leader when it dies: the
	// rescue then waits only for its leadership to lapse.
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^TestPostgresTwoWorkers$", "-test.count=1")
	cmd.Env = append(os.Environ(), childDSNEnv+"="+pg.DSN, childURLEnv+"="+srv.URL())
	dieWithParent(cmd)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if l, ok := strings.CutPrefix(sc.Text(), "child: "); ok {
				lines <- l
			}
		}
		close(lines)
	}()
	expect := func(want string) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				require.True(t, ok, "the child ended before saying %q", want)
				if l == want {
					return
				}
			case <-timeout:
				t.Fatalf("the child did not say %q", want)
			}
		}
	}
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	go func() {
		err := cmd.Wait()
		exited <- err
	}()
	expect("ready")
	require.Eventually(t, func() bool {
		var leader string
		err := pool.QueryRow(ctx, `SELECT leader_id FROM river_leader`).Scan(&leader)
		return err == nil && leader == "child"
	}, 30*time.Second, 50*time.Millisecond, "the child leads")

	// The victim job goes to the child, the only worker yet, and hangs.
	parentClient, err := river.NewClient[pgx.Tx](riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	insertKeys(t, parentClient, []string{hangOn})
	expect("working " + hangOn)

	w := newPGWorker(t, pg.DSN, srv.URL(), "parent", false)
	defer w.stop()
	const n = 300
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "invoice-" + strconv.Itoa(i)
	}
	// Both processes submit every key, at the same time.
	_, err = io.WriteString(stdin, "insert\n")
	require.NoError(t, err)
	insertKeys(t, w.client, keys)
	expect("inserted")

	// Kill the child while it works (the victim at least is running).
	require.Eventually(t, func() bool {
		var done int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM riverjob_results`).Scan(&done))
		return done >= n/3
	}, 30*time.Second, 5*time.Millisecond)
	require.NoError(t, cmd.Process.Kill())
	err = <-exited
	exited <- err
	var running int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'running' AND attempted_by[array_length(attempted_by, 1)] = 'child'`).Scan(&running))
	t.Logf("child killed with %d of its jobs running", running)
	require.Positive(t, running, "the victim at least was running in the child")

	// Everything ends completed: the parent works the rest, and its rescuer
	// (once it leads) gives it the child's stuck jobs.
	require.Eventually(t, func() bool {
		var open int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state <> 'completed'`).Scan(&open))
		return open == 0
	}, 50*time.Second, 100*time.Millisecond, "every job completes")

	var jobs, distinct int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT args->>'idempotency_key') FROM river_job`).Scan(&jobs, &distinct))
	assert.Equal(t, n+1, jobs, "one job per key: the duplicate submissions were skipped")
	assert.Equal(t, n+1, distinct)

	rows, err := pool.Query(ctx, `SELECT key, puts FROM riverjob_results`)
	require.NoError(t, err)
	puts := map[string]int{}
	for rows.Next() {
		var k string
		var p int
		require.NoError(t, rows.Scan(&k, &p))
		puts[k] = p
	}
	require.NoError(t, rows.Err())
	assert.Len(t, puts, n+1, "every key has its result: nothing lost")
	for k, p := range puts {
		assert.Equal(t, 1, p, "key %s stored once", k)
	}

	var victimAttempt int
	var victimErrors []string
	require.NoError(t, pool.QueryRow(ctx, `SELECT attempt, ARRAY(SELECT e->>'error' FROM unnest(errors) e) FROM river_job WHERE args->>'idempotency_key' = $1`, hangOn).Scan(&victimAttempt, &victimErrors))
	assert.Equal(t, 2, victimAttempt, "rescued once, then completed")
	assert.Equal(t, []string{"Stuck job rescued by JobRescuer"}, victimErrors)

	// A job that was never rescued ran once: its key reached the upstream
	// once. A job killed mid-call may have reached it twice.
	rescued := map[string]bool{}
	rows, err = pool.Query(ctx, `SELECT args->>'idempotency_key' FROM river_job WHERE cardinality(errors) > 0`)
	require.NoError(t, err)
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		rescued[k] = true
	}
	require.NoError(t, rows.Err())
	assert.Len(t, rescued, running, "exactly the jobs running in the child were rescued")
	mu.Lock()
	defer mu.Unlock()
	for _, k := range keys {
		if rescued[k] {
			assert.LessOrEqual(t, calls[k], 2, "key %s", k)
		} else {
			assert.Equal(t, 1, calls[k], "key %s ran once", k)
		}
	}
	assert.Equal(t, 1, calls[hangOn], "the victim reached the upstream only from the parent")
}

// runChild is the child worker process: it works jobs until it is killed,
// and submits every key when the parent says "insert".
func runChild(t *testing.T, dsn, upstream string) {
	w := newPGWorker(t, dsn, upstream, "child", true)
	fmt.Println("child: ready")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if sc.Text() == "insert" {
			keys := make([]string, 300)
			for i := range keys {
				keys[i] = "invoice-" + strconv.Itoa(i)
			}
			insertKeys(t, w.client, keys)
			fmt.Println("child: inserted")
		}
	}
	// The parent closed stdin: it is done with us.
	w.stop()
	if err := sc.Err(); err != nil && !errors.Is(err, os.ErrClosed) {
		t.Log(err)
	}
}
