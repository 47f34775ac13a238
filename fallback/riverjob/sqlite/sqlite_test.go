package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tierguard/tierguard/fallback/riverjob/sqlite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestOpen: the file is created in write-ahead-log mode with a busy
// timeout, one connection, and River's tables; opening it again migrates
// nothing and keeps its jobs.
func TestOpen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "river.db")
	db, err := sqlite.Open(ctx, path)
	require.NoError(t, err)
	assert.Equal(t, 1, db.Stats().MaxOpenConnections)

	var mode string
	require.NoError(t, db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode))
	assert.Equal(t, "wal", mode)
	var busy int64
	require.NoError(t, db.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy))
	assert.Equal(t, sqlite.BusyTimeout.Milliseconds(), busy)

	var tables int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('river_job', 'river_migration')").Scan(&tables))
	assert.Equal(t, 2, tables)
	_, err = db.ExecContext(ctx, "INSERT INTO river_job (args, kind, max_attempts, queue, state, metadata, priority) VALUES ('{}', 'k', 1, 'default', 'available', '{}', 1)")
	require.NoError(t, err)
	require.NoError(t, db.Close())

	db, err = sqlite.Open(ctx, path)
	require.NoError(t, err)
	defer db.Close()
	var jobs int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT count(*) FROM river_job").Scan(&jobs))
	assert.Equal(t, 1, jobs)
}

func TestOpenRefusesNoPath(t *testing.T) {
	_, err := sqlite.Open(context.Background(), "")
	assert.ErrorContains(t, err, "a path is required")
}

func TestOpenReportsAnUnwritableDirectory(t *testing.T) {
	_, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "missing", "river.db"))
	assert.ErrorContains(t, err, "sqlite: migrating River's schema")
}

func TestRescueAfter(t *testing.T) {
	assert.Equal(t, time.Hour, sqlite.RescueAfter(11*time.Second), "River's default when the job is short")
	assert.Equal(t, 3*time.Hour, sqlite.RescueAfter(90*time.Minute), "twice a long job's timeout")
}
