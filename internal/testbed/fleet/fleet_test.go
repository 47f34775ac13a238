package fleet

import (
	"context"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tierguard/tierguard/internal/testbed/redisserver"
)

var full = flag.Bool("fleet.full", false, "run the full measurement (make fleet): longer phases, 20 restart drills, the report printed")

func TestMain(m *testing.M) {
	flag.Parse()
	// go-redis logs every failed reconnection while Redis is out on
	// purpose.
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// TestFleet runs 50 pods through the storms and outages. The short run in
// the normal suite judges counts only, never elapsed times: every pod
// opens in the 503 storm, none in the 429 storm, no window of the quota's
// period holds more than the quota (plus the turns the pods may hold at
// hand: one each) with Redis up, nor more than 110 % of it (the quota and
// its burst, the bound redislimit gives for an outage's start) plus the
// same turns at hand across the outages, and no drill loses its trip. For the spend limits, against
// what the upstream billed: a strict tenant never passes its limit with
// Redis healthy and 64 requests in flight per pod, nor by more than its
// estimates' shortfall when they fall short; the tenants billed while
// Redis is killed or paused keep to the share bound computed from the
// pods' views (TenantReport.Bound); and each alert due fires once
// across the fleet.
func TestFleet(t *testing.T) {
	redisserver.Skip(t)
	// The strict callers' calls are held a second, as an LLM's are:
	// 3,200 callers then ask Redis for 3,200 reservations a second, which
	// this 2-core machine serves within the strict ledgers' timeout (a
	// tenth of that hold saturates it: see RELIABILITY.md).
	cfg := Config{Pods: 50, Quota: 250, Per: time.Second, Interval: 40 * time.Millisecond, Phase: 2 * time.Second,
		InFlight: 64, StrictRounds: 2, Hold: time.Second, StrictTimeout: 2 * time.Second,
		Restarts: 3, Settle: 30 * time.Second, Logf: t.Logf}
	if *full {
		cfg = Config{Pods: 50, Quota: 1000, Per: 2 * time.Second, Interval: 20 * time.Millisecond, Phase: 6 * time.Second,
			InFlight: 64, StrictRounds: 4, Hold: time.Second, StrictTimeout: 2 * time.Second,
			Restarts: 20, Storms: 5, Settle: time.Minute, Logf: t.Logf}
	}
	if raceDetector {
		// The same pods and phases at half the load, and a 64th of the
		// strict callers' (two a pod, each holding twice as long): the
		// race detector slows every request several times over, and
		// more strict callers make the storms' and the outages' timing
		// on a shared machine the test's subject (the 64 callers a pod
		// are measured without it).
		cfg.Interval *= 2
		cfg.InFlight /= 32
		cfg.Hold *= 2
		cfg.StrictTimeout *= 2
	}
	rep, err := Run(cfg)
	if rep != nil {
		var b strings.Builder
		rep.Print(&b)
		if *full {
			_, _ = os.Stdout.WriteString("\n" + b.String() + "\n")
		} else {
			t.Log("\n" + b.String())
		}
	}
	require.NoError(t, err)
	assert.Equal(t, cfg.Pods, rep.OpenPods, "every pod opened in the 503 storm")
	assert.Less(t, rep.OwnTrips, cfg.Pods, "the fleet's trip reached pods before their own counts")
	assert.Zero(t, rep.TripsIn429, "a 429 trips no breaker")
	assert.LessOrEqual(t, rep.WorstUp, cfg.Quota+cfg.Pods, "with Redis up, the fleet keeps to its quota (and the turns at hand)")
	// Turns taken from Redis before an outage are used in the window that
	// meets it, as with Redis up: 272–279 of 250 in seven runs on this
	// machine, before and after the sessions of 2026-12-06.
	assert.LessOrEqual(t, rep.WorstDown, cfg.Quota*110/100+cfg.Pods, "with Redis out, the shares keep the fleet within 110 % of its quota, plus the turns at hand")
	assert.Equal(t, cfg.Restarts, rep.DrillRuns)
	assert.Zero(t, rep.DrillLost, "no restart lost a trip")
	assert.Zero(t, rep.DrillUnsettled, "after every restart the fleet settled on the trip")
	require.Len(t, rep.Bursts, 2)
	for _, b := range rep.Bursts {
		assert.Equal(t, cfg.InFlight, b.PeakInFlight, "%s: every pod had its callers' requests in flight at once", b.Tenant)
	}
	for _, tn := range rep.Tenants {
		assert.Positive(t, tn.Requests, tn.Name)
		if !tn.FailClosed {
			// A FailClosed tenant may have been refused throughout: on a
			// loaded machine its ledger's figures may be stale when its
			// phase begins.
			assert.Positive(t, tn.Used, tn.Name)
		}
		switch {
		case tn.Phase == "steady":
			assert.Less(t, tn.Overshoot(), 1.0, "with Redis up, a tenant's limit holds to within what the pods spend before they hear of it")
		case tn.Phase == "strict" && tn.Shortfall == 0:
			if burst(rep, tn.Name).StoreFailures == 0 {
				assert.Equal(t, tn.Limit, tn.Used, "%s: with Redis healthy, the strict limit holds exactly", tn.Name)
			} else {
				// A reservation or exchange that failed (the machine too
				// loaded for the StrictTimeout) made its pod decide on its
				// share: the guarantee holds only while Redis answers.
				t.Logf("%s: the strict store failed %d times in the burst: %d of %d tokens", tn.Name, burst(rep, tn.Name).StoreFailures, tn.Used, tn.Limit)
			}
		case tn.Phase == "strict":
			if burst(rep, tn.Name).StoreFailures == 0 {
				// (Otherwise the pods that counted Redis away refused on
				// their shares, and their callers stopped, perhaps short
				// of the limit.)
				assert.Greater(t, tn.Used, tn.Limit, "%s: short estimates pass the limit", tn.Name)
			}
			assert.LessOrEqual(t, tn.Used-tn.Limit, tn.Shortfall, "%s: by no more than the estimates' shortfall", tn.Name)
		default: // billed in an outage
			assert.Positive(t, tn.Bound, tn.Name)
			assert.LessOrEqual(t, tn.Outage, tn.Bound, "%s: while Redis was away, the pods kept to their shares of what they last saw left", tn.Name)
			assert.LessOrEqual(t, tn.Used, tn.Final, tn.Name)
		}
		// Each alert due fires once across the fleet: the claims of the
		// alerts a pod finds while Redis is away wait for it.
		got := map[string]int{}
		for _, a := range tn.WantAlerts {
			got[a] = tn.Alerts[a]
		}
		for a, n := range tn.Alerts {
			if got[a] == 0 {
				assert.Failf(t, "an alert not due", "%s: %q ×%d (due: %v)", tn.Name, a, n, tn.WantAlerts)
			}
		}
		for a, n := range got {
			assert.Equal(t, 1, n, "%s: alert %q once across the fleet", tn.Name, a)
		}
	}
}

func burst(rep *Report, tenant string) BurstReport {
	for _, b := range rep.Bursts {
		if b.Tenant == tenant {
			return b
		}
	}
	return BurstReport{}
}
