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
// hand: one each) with Redis up, nor more than 110 % of it across the
// outages, and no drill loses its trip.
func TestFleet(t *testing.T) {
	redisserver.Skip(t)
	cfg := Config{Pods: 50, Quota: 250, Per: time.Second, Interval: 40 * time.Millisecond, Phase: 2 * time.Second,
		Restarts: 3, Settle: 30 * time.Second, Logf: t.Logf}
	if raceDetector {
		// The same pods and phases at half the load: the race detector
		// slows every request several times over.
		cfg.Interval *= 2
	}
	if *full {
		cfg = Config{Pods: 50, Quota: 1000, Per: 2 * time.Second, Interval: 20 * time.Millisecond, Phase: 6 * time.Second,
			Restarts: 20, Storms: 5, Settle: time.Minute, Logf: t.Logf}
	}
	rep, err := Run(cfg)
	if rep != nil {
		var b strings.Builder
		rep.Print(&b)
		if raceDetector {
			// The same pods and phases at half the load: the race detector
			// slows every request several times over.
			cfg.Interval *= 2
		}
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
	assert.LessOrEqual(t, rep.WorstDown, cfg.Quota*110/100, "with Redis out, the shares keep the fleet within 110 % of its quota")
	assert.Equal(t, cfg.Restarts, rep.DrillRuns)
	assert.Zero(t, rep.DrillLost, "no restart lost a trip")
	assert.Zero(t, rep.DrillUnsettled, "after every restart the fleet settled on the trip")
	for _, tn := range rep.Tenants {
		assert.Positive(t, tn.Used, tn.Name)
		if tn.Phase == "steady" {
			assert.Less(t, tn.Overshoot(), 1.0, "with Redis up, a tenant's limit holds to within what the pods spend before they hear of it")
		}
	}
}
