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

// shortConfig is the story with fewer jobs, paced by the workers: each
// phase lasts until five jobs did what it is about, so that how much
// work a loaded machine fits into a stretch of time decides nothing.
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
	cfg.Steps = 5
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

// TestTimedStory runs the story as the demo tells it, by the clock, and
// checks only what holds however much work fits into its phases: nothing
// lost, nothing stored twice, no attempt past the chain's limit.
func TestTimedStory(t *testing.T) {
	cfg := shortConfig()
	cfg.Steps, cfg.Jobs = 0, 60
	require.NoError(t, cfg.validate())
	sum, err := run(context.Background(), cfg, nil)
	require.NoError(t, err)
	var out bytes.Buffer
	sum.print(&out)
	assert.Contains(t, out.String(), "story: outage (both models 503) 500ms–1.1s")
	assert.Empty(t, sum.violations())
	assert.Zero(t, sum.open, "nothing lost")
	assert.Len(t, sum.jobs, cfg.Jobs+sum.dupSubmitted-sum.dupSkipped)
	assert.LessOrEqual(t, sum.maxPerAttempt, attemptLimit)
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
// prevent: without them each retried job calls both models again. The
// figures are counted per job and per River retry, in an outage that lasts
// until fifteen jobs have each been retried in it (Steps), so that they
// do not depend on how many retries a loaded machine fits into a stretch
// of time.
func TestNoBreakersMultiplies(t *testing.T) {
	perRetry := map[bool]float64{}
	for _, breakers := range []bool{false, true} {
		cfg := shortConfig()
		cfg.Breakers, cfg.Replay = breakers, false
		cfg.Steps = 15
		// Time for an attempt's four calls on a loaded machine: what fails
		// an attempt in the outage is the outage, not the deadline.
		cfg.Deadline = 3 * time.Second
		require.NoError(t, cfg.validate())
		sum, err := run(context.Background(), cfg, nil)
		require.NoError(t, err)
		assert.Empty(t, sum.violations(), "breakers %v", breakers)
		require.NotEmpty(t, sum.outageJobs)
		calls, retries, twice := 0, 0, 0
		for i, n := range sum.outageJobs {
			r := sum.outageRetried[i]
			calls, retries = calls+n, retries+r
			if r >= 2 {
				twice++
			}
			if !breakers {
				assert.GreaterOrEqual(t, n, attemptLimit*r, "without breakers, each River retry calls both models again (job %d)", i)
			}
		}
		assert.GreaterOrEqual(t, twice, cfg.Steps, "the outage lasted until that many jobs failed twice in it")
		assert.LessOrEqual(t, sum.maxPerAttempt, attemptLimit, "still, one attempt never exceeds the chain's limit")
		perRetry[breakers] = float64(calls) / float64(retries)
		t.Logf("breakers %v: %s; %d jobs in the outage, %d retried twice or more, %d calls over %d retried attempts (%.2f per attempt), at most %d per job",
			breakers, sum.timeline, len(sum.outageJobs), twice, calls, retries, perRetry[breakers], slices.Max(sum.outageJobs))
		if !breakers {
			assert.Greater(t, slices.Max(sum.outageJobs), attemptLimit, "River's retries multiply the chain's calls")
		}
	}
	assert.GreaterOrEqual(t, perRetry[false], float64(attemptLimit), "without breakers, every retried attempt makes the chain's full calls")
	assert.Less(t, perRetry[true], perRetry[false]/2, "with breakers, a retried attempt mostly skips both tiers without a call")
}
