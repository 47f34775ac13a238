package main

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tierguard/tierguard/fallback/riverjob"
	"github.com/tierguard/tierguard/internal/testbed/gemrest"
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
// figures are counted per job, over the attempts the outage failed (told
// by their 503s and open breakers, not by when they ended), in an outage
// that lasts until fifteen jobs have each had two attempts failed by it
// (Steps): none depends on how many retries, probes or cooldowns a loaded
// machine fits into a stretch of time.
func TestNoBreakersMultiplies(t *testing.T) {
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
		}
		assert.GreaterOrEqual(t, twice, cfg.Steps, "the outage lasted until that many jobs had two attempts failed by it")
		assert.LessOrEqual(t, sum.maxPerAttempt, attemptLimit, "still, one attempt never exceeds the chain's limit")
		jobs := len(sum.outageJobs)
		t.Logf("breakers %v: %s; %d jobs in the outage, %d with two attempts failed by it, %d calls over %d retried attempts, at most %d per job; 503s: %d with the breaker closed, %d to probes; %d attempts passed a tier over for its open breaker",
			breakers, sum.timeline, jobs, twice, calls, retries, slices.Max(sum.outageJobs), sum.client.Closed503, sum.client.Probe503, sum.outageOpen)
		if !breakers {
			assert.Zero(t, sum.outageOpen, "without breakers no tier is passed over")
			assert.Greater(t, mean(sum.outageJobs), float64(attemptLimit), "River's retries multiply the chain's calls")
			assert.Greater(t, sum.client.Closed503, attemptLimit*jobs, "without breakers, the bound that holds with them breaks")
			continue
		}
		assert.Positive(t, sum.outageOpen, "the breakers opened, and attempts passed their tiers over without a call")
		assert.LessOrEqual(t, sum.client.Closed503, attemptLimit*jobs, "with breakers, no more than the chain's limit per job before they open")
	}
}

// stallFirst holds the first request it is given until the request's
// context ends, as a machine too loaded to send it in time would, and
// passes the others on.
type stallFirst struct {
	next    http.RoundTripper
	stalled atomic.Bool
}

func (s *stallFirst) RoundTrip(req *http.Request) (*http.Response, error) {
	if s.stalled.CompareAndSwap(false, true) {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return s.next.RoundTrip(req)
}

// TestCutCallIsCountedByTheWorkersAlone is the flake of the loaded CI run
// made deterministic: a request whose try ends before it reaches the
// server is an upstream call for the chain and the workers, and none for
// the server. The counts check accepts it as a cut call, and the equality
// it replaced would not.
func TestCutCallIsCountedByTheWorkersAlone(t *testing.T) {
	cfg := shortConfig()
	st := newStory(cfg, time.Now())
	defer st.srv.Close()
	st.calls.next = &stallFirst{next: st.calls.next}
	chain, _, err := st.buildChain()
	require.NoError(t, err)

	res, _ := chain.Do(context.Background(), st.contract(0))
	sum := &summary{cfg: cfg, reported: res.UpstreamCalls, client: st.calls.snapshot(), serverCalls: map[string]int64{}}
	server := int64(0)
	for m, ms := range st.srv.Stats() {
		sum.serverCalls[m] = ms.Requests
		server += ms.Requests
	}

	assert.Equal(t, 1, sum.client.Cut, "the stalled request was cut")
	assert.Equal(t, sum.client.Sent, sum.reported, "the chain counts every request the tiers send")
	assert.EqualValues(t, sum.reported-1, server, "the server never saw the cut one")
	assert.Empty(t, sum.countViolations())
	assert.NotEqualValues(t, server, sum.reported, "the workers' and the server's counts differ, as on the loaded CI run")
}

func TestCountViolations(t *testing.T) {
	for _, tc := range []struct {
		name                string
		reported, sent, cut int
		pro, flash          int64
		broken              string
	}{
		{name: "nothing cut, equal", reported: 172, sent: 172, pro: 120, flash: 52},
		{name: "two cut, neither reached the server", reported: 172, sent: 172, cut: 2, pro: 120, flash: 50},
		{name: "two cut, one reached the server", reported: 172, sent: 172, cut: 2, pro: 120, flash: 51},
		{name: "two cut, both reached the server", reported: 172, sent: 172, cut: 2, pro: 120, flash: 52},
		{name: "the CI run's figures, nothing cut", reported: 172, sent: 172, pro: 120, flash: 50, broken: "the server counted 170, and only 0 were cut"},
		{name: "more missing than cut", reported: 172, sent: 172, cut: 1, pro: 120, flash: 50, broken: "the server counted 170, and only 1 were cut"},
		{name: "the server counted more", reported: 172, sent: 172, pro: 120, flash: 53, broken: "the server counted 173 upstream calls, more than the 172"},
		{name: "a call the workers missed", reported: 171, sent: 172, cut: 1, pro: 120, flash: 51, broken: "the workers reported 171 upstream calls, the tiers sent 172"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &summary{reported: tc.reported, client: clientCalls{Sent: tc.sent, Cut: tc.cut},
				serverCalls: map[string]int64{proModel: tc.pro, flashModel: tc.flash}}
			v := s.countViolations()
			if tc.broken == "" {
				assert.Empty(t, v)
				return
			}
			require.Len(t, v, 1)
			assert.Contains(t, v[0], tc.broken)
		})
	}
}

func TestOutageAmplificationBound(t *testing.T) {
	s := &summary{cfg: shortConfig(), outageJobs: []int{4, 0, 0}, serverCalls: map[string]int64{}}
	s.client.Closed503, s.client.Probe503 = 3*attemptLimit, 40
	assert.Empty(t, s.violations(), "probes are the clock's business: only the calls no breaker stood in front of are bounded")
	s.client.Closed503++
	assert.Len(t, s.violations(), 1)
	s.cfg.Breakers = false
	assert.Empty(t, s.violations(), "without breakers there is nothing to bound")
}

func TestFailedByOutage(t *testing.T) {
	tiers := func(ts ...riverjob.TierReport) []riverjob.TierReport { return ts }
	for _, tc := range []struct {
		name string
		rep  riverjob.Report
		want bool
	}{
		{"503 on both tiers", riverjob.Report{Outcome: riverjob.Retried, Tiers: tiers(
			riverjob.TierReport{Tier: "pro", Outcome: "failed", HTTPStatus: 503}, riverjob.TierReport{Tier: "flash", Outcome: "failed", HTTPStatus: 503})}, true},
		{"breakers open", riverjob.Report{Outcome: riverjob.Retried, Tiers: tiers(
			riverjob.TierReport{Tier: "pro", Outcome: "skipped", Skip: "open"}, riverjob.TierReport{Tier: "flash", Outcome: "skipped", Skip: "open"})}, true},
		{"exhausted in the outage", riverjob.Report{Outcome: riverjob.Discarded, Why: riverjob.WhyExhausted, Tiers: tiers(
			riverjob.TierReport{Tier: "pro", Outcome: "skipped", Skip: "open"}, riverjob.TierReport{Tier: "flash", Outcome: "failed", HTTPStatus: 503})}, true},
		{"invalid output", riverjob.Report{Outcome: riverjob.Discarded, Why: riverjob.WhyInvalidOutput, Tiers: tiers(
			riverjob.TierReport{Tier: "pro", Outcome: "failed"}, riverjob.TierReport{Tier: "flash", Outcome: "failed"})}, false},
		{"quota", riverjob.Report{Outcome: riverjob.Snoozed, Why: riverjob.WhyQuota, Tiers: tiers(
			riverjob.TierReport{Tier: "pro", Outcome: "skipped", Skip: "quota"}, riverjob.TierReport{Tier: "flash", Outcome: "failed", HTTPStatus: 429})}, false},
		{"completed", riverjob.Report{Outcome: riverjob.Completed, Tier: "flash", Degraded: true}, false},
	} {
		assert.Equal(t, tc.want, failedByOutage(tc.rep), tc.name)
	}
}

// TestCallCounterSplitsByBreakerState checks that a 503 is put down to a
// probe exactly when the tier's breaker was not closed as it was sent.
func TestCallCounterSplitsByBreakerState(t *testing.T) {
	cfg := shortConfig()
	st := newStory(cfg, time.Now())
	defer st.srv.Close()
	st.setPacedScripts(phOutage)
	_, breakers, err := st.buildChain()
	require.NoError(t, err)
	require.Len(t, breakers, 2)
	c, err := gemrest.New(gemrest.Config{BaseURL: st.srv.URL(), Model: proModel, HTTPClient: &http.Client{Transport: st.calls}})
	require.NoError(t, err)
	ask := func() {
		_, err := c.Call(context.Background(), gemrest.Request{Prompt: "contract #1"})
		require.Error(t, err)
	}
	ask()
	breakers[0].ForceOpen()
	ask()
	ask()
	breakers[0].Reset()
	ask()
	assert.Equal(t, clientCalls{Sent: 4, Closed503: 2, Probe503: 2}, st.calls.snapshot())
}
