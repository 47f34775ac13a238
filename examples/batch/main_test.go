package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tierguard/tierguard/fallback/riverjob"
	"github.com/tierguard/tierguard/internal/testbed/pgserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// shortConfig is the story with fewer jobs, compressed into about three
// seconds.
func shortConfig() config {
	cfg := defaultConfig()
	cfg.Jobs, cfg.Rate = 120, 50
	cfg.Workers, cfg.PerTen = 8, 4
	cfg.OutageStart, cfg.OutageLen = 500*time.Millisecond, 600*time.Millisecond
	cfg.QuotaStart, cfg.QuotaLen = 1500*time.Millisecond, 800*time.Millisecond
	cfg.FlashQuotaDelay, cfg.FlashQuotaLen = 200*time.Millisecond, 400*time.Millisecond
	cfg.QuotaCooldown = 200 * time.Millisecond
	cfg.Latency = 20 * time.Millisecond
	cfg.Deadline = time.Second
	cfg.Backoff, cfg.MaxBackoff = 50*time.Millisecond, 300*time.Millisecond
	cfg.Cooldown = 200 * time.Millisecond
	cfg.Unreadable, cfg.TooLong = 0.05, 0.03
	cfg.Progress = false
	return cfg
}

func checkRun(t *testing.T, cfg config) *summary {
	t.Helper()
	require.NoError(t, cfg.validate())
	var progress bytes.Buffer
	sum, err := run(context.Background(), cfg, &progress)
	require.NoError(t, err)
	var out bytes.Buffer
	sum.print(&out)
	t.Log(out.String())

	assert.Empty(t, sum.violations())
	assert.Zero(t, sum.open, "nothing lost")
	assert.Len(t, sum.jobs, cfg.Jobs+sum.dupSubmitted-sum.dupSkipped)
	assert.Positive(t, sum.dupSkipped, "duplicate submissions are skipped")
	assert.Positive(t, sum.byTier["pro"])
	assert.Positive(t, sum.byTier["flash"], "flash answers while pro is out of quota")
	assert.Positive(t, sum.attempts[riverjob.Retried], "the outage makes River retry")
	assert.Positive(t, sum.snoozeWhy[riverjob.WhyQuota], "both quotas out: jobs snooze")
	assert.Positive(t, sum.discarded[riverjob.WhyInvalidOutput])
	assert.Positive(t, sum.discarded[riverjob.WhyNoTierCan])
	assert.Equal(t, sum.completed+sum.discarded[riverjob.WhyInvalidOutput]+sum.discarded[riverjob.WhyNoTierCan]+sum.discarded[riverjob.WhyExhausted], len(sum.final))
	assert.LessOrEqual(t, sum.maxPerAttempt, attemptLimit)
	require.NotEmpty(t, sum.outageJobs)
	assert.LessOrEqual(t, mean(sum.outageJobs), float64(attemptLimit))
	assert.Positive(t, sum.replayed)
	assert.Equal(t, sum.replayed, sum.replayedDone, "replayed dead letters complete")
	assert.Len(t, sum.deadLetters, sum.discarded[riverjob.WhyInvalidOutput]+sum.discarded[riverjob.WhyNoTierCan]+sum.discarded[riverjob.WhyExhausted])
	for _, dl := range sum.deadLetters {
		assert.True(t, dl.HasReport)
	}
	stored := 0
	for _, n := range sum.stored {
		assert.Equal(t, 1, n)
		stored++
	}
	assert.Equal(t, sum.completed+sum.replayedDone, stored, "a result per completed job, none for a discarded one")
	assert.True(t, strings.Contains(out.String(), "dead letters"))
	return sum
}

func TestRunSQLite(t *testing.T) {
	checkRun(t, shortConfig())
}

func TestRunPostgres(t *testing.T) {
	pg := pgserver.Start(t)
	cfg := shortConfig()
	cfg.Postgres = pg.DSN
	sum := checkRun(t, cfg)
	assert.Equal(t, "PostgreSQL", sum.where)
	// A second run on the same database starts afresh.
	cfg.Jobs = 30
	sum, err := run(context.Background(), cfg, nil)
	require.NoError(t, err)
	assert.Zero(t, sum.open)
	assert.Len(t, sum.jobs, 30+sum.dupSubmitted-sum.dupSkipped)
	assert.Len(t, sum.stored, sum.completed+sum.replayedDone)
}

// TestNoBreakersMultiplies shows what the breakers and retry budgets
// prevent: without them each retried job calls both models again.
func TestNoBreakersMultiplies(t *testing.T) {
	cfg := shortConfig()
	cfg.Breakers = false
	cfg.Replay = false
	sum, err := run(context.Background(), cfg, nil)
	require.NoError(t, err)
	require.NotEmpty(t, sum.outageJobs)
	assert.Greater(t, slices.Max(sum.outageJobs), attemptLimit, "River's retries multiply the chain's calls")
	assert.LessOrEqual(t, sum.maxPerAttempt, attemptLimit, "still, one attempt never exceeds the chain's limit")
}
