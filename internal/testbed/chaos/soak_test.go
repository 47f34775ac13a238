package chaos_test

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/internal/testbed/chaos"
)

// The long run: go test ./internal/chaos -run 'TestSoak$' -soak.calls=1000000 -timeout 60m
// (or TIERGUARD_SOAK_CALLS=1000000). -soak.clock=real runs it on the real
// clock instead of synctest's.
var (
	soakCalls   = flag.Int("soak.calls", envInt("TIERGUARD_SOAK_CALLS", 0), "requests in TestSoak (default: CI size, 20,000)")
	soakWorkers = flag.Int("soak.workers", envInt("TIERGUARD_SOAK_WORKERS", 0), "goroutines issuing requests (default 2,000)")
	soakRate    = flag.Float64("soak.rate", 0, "requests started per second (default 4,000)")
	soakSeed    = flag.Uint64("soak.seed", uint64(envInt("TIERGUARD_SOAK_SEED", 1)), "seed of the calls' fates")
	soakClock   = flag.String("soak.clock", envString("TIERGUARD_SOAK_CLOCK", "fake"), "fake (testing/synctest) or real")
	soakSlack   = flag.Duration("soak.slack", 0, "scheduling slack allowed on the real clock (default 250ms)")
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func logReport(t *testing.T, rep *chaos.Report, wall time.Duration) {
	t.Helper()
	t.Logf("%s  wall %v on %d CPUs (GOMAXPROCS %d), %s/%s, %s", rep, wall.Round(time.Millisecond), runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// requireHealthy fails the test on any broken invariant, and checks that the
// run was hostile enough to mean something: breakers opened, probed and
// recovered (every one of them when everyBreaker is set, else at least
// one), calls were abandoned and stuck, panics reached callers, executions
// were shared, and every required fault was drawn.
//
// On the real clock a short run cannot promise every breaker trips: the
// quota and budget skips in front of a later tier depend on how the
// scheduler interleaves the outage with the calls, and some runs never send
// flash enough failures in a row. The fake-clock soak is exact and checks
// every breaker.
func requireHealthy(t *testing.T, rep *chaos.Report, everyBreaker bool, required ...chaos.Fault) {
	t.Helper()
	assert.Zero(t, rep.ViolationCount, "invariants broken")
	var faults [chaos.NumFaults]int64
	tripped := 0
	for _, s := range rep.Stages {
		for f, n := range s.Faults {
			faults[f] += n
		}
		assert.Positive(t, s.Retries, "%s never retried", s.Name)
		if s.HalfOpenProbes == 0 {
			continue
		}
		assert.NotEmpty(t, s.Liveness, "%s: no complete cycle to check the breaker's recovery on", s.Name)
		if s.Opens > 0 && s.ProbeCalls > 0 {
			tripped++
		} else if everyBreaker {
			assert.Positive(t, s.Opens, "%s's breaker never opened", s.Name)
			assert.Positive(t, s.ProbeCalls, "%s's breaker never probed", s.Name)
		}
	}
	assert.Positive(t, tripped, "no breaker opened and probed")
	for _, f := range required {
		assert.Positive(t, faults[f], "no tier ever drew %v", f)
	}
	assert.Positive(t, rep.Abandoned, "no call was abandoned")
	assert.Positive(t, rep.StuckBeforeRelease, "no call was stuck at the end")
	assert.Positive(t, rep.Panics+rep.SharedPanics, "no panic reached a caller")
	if rep.Config.FakeClock {
		// Joining takes two requests of one key in flight at once: on the
		// real clock the scheduler decides whether that ever happens (a
		// loaded run saw none in 755 keyed requests), so only the fake
		// clock's soak, where it is the schedule's, requires it.
		assert.Positive(t, rep.SharedJoins, "no request joined a shared execution")
	}
}

// TestSoak runs the soak on synctest's fake clock: every time bound is
// exact (zero slack), and seconds of fault schedule cost only CPU. At the
// default CI size it is one full cycle of 5s of fake time. It runs twice:
// with the profile's cooldowns, and with cooldowns shorter than a probe's
// longest call (TryTimeout + AbandonAfter), where the probes of successive
// half-open periods overlap.
func TestSoak(t *testing.T) {
	for _, short := range []bool{false, true} {
		t.Run("short_cooldowns="+strconv.FormatBool(short), func(t *testing.T) { soak(t, short) })
	}
}

func soak(t *testing.T, short bool) {
	cfg := chaos.Config{Calls: *soakCalls, Workers: *soakWorkers, Rate: *soakRate, Seed: *soakSeed, ShortCooldowns: short}
	if *soakClock == "real" {
		cfg.Slack = *soakSlack
		if cfg.Slack == 0 {
			cfg.Slack = 250 * time.Millisecond
		}
		start := time.Now()
		rep, err := chaos.Run(cfg)
		require.NoError(t, err)
		logReport(t, rep, time.Since(start))
		requireHealthy(t, rep, false, allFaults()...)
		return
	}
	require.Equal(t, "fake", *soakClock, "-soak.clock must be fake or real")
	cfg.FakeClock = true
	start := time.Now()
	var rep *chaos.Report
	synctest.Test(t, func(t *testing.T) {
		var err error
		rep, err = chaos.Run(cfg)
		require.NoError(t, err)
	})
	logReport(t, rep, time.Since(start))
	requireHealthy(t, rep, true, allFaults()...)
}

func allFaults() []chaos.Fault {
	fs := make([]chaos.Fault, chaos.NumFaults)
	for i := range fs {
		fs[i] = chaos.Fault(i)
	}
	return fs
}

// TestSoakRealClock runs a short soak on the real clock: what a loaded
// machine's scheduling adds to the deadlines and to the breakers' recovery.
func TestSoakRealClock(t *testing.T) {
	if testing.Short() {
		t.Skip("real-clock soak skipped in -short mode")
	}
	cfg := chaos.Config{Calls: 5000, Workers: 1000, Rate: 1000, Seed: *soakSeed, Slack: 250 * time.Millisecond}
	start := time.Now()
	rep, err := chaos.Run(cfg)
	require.NoError(t, err)
	logReport(t, rep, time.Since(start))
	requireHealthy(t, rep, false, chaos.OK, chaos.Transient, chaos.RateLimited, chaos.Stall, chaos.Stuck, chaos.Panic, chaos.InvalidOutput, chaos.ZeroValue)
}
