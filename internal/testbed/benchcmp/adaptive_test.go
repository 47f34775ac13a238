package benchcmp

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/internal/testbed/adaptsim"
)

// BenchmarkAdaptive is taking and returning a free slot around Work, on
// a fixed bulkhead, an adaptive one (alone, and reporting each call as a
// chain's throttle.Feed does), and failsafe-go's adaptive limiter (whose
// Permit.Record reports the call and frees the slot in one).
func BenchmarkAdaptive(b *testing.B) {
	bench(b, func() []contender {
		ctx := context.Background()
		static := TierguardBulkhead()
		adaptive := TierguardAdaptive()
		recorded := TierguardAdaptive()
		fs := FailsafeAdaptive()
		return []contender{
			{"tierguard-static", func() bool {
				if static.Acquire(ctx) != nil {
					return false
				}
				v, err := Work()
				static.Release()
				return ok(v, err)
			}},
			{"tierguard-adaptive", func() bool {
				if adaptive.Acquire(ctx) != nil {
					return false
				}
				v, err := Work()
				adaptive.Release()
				return ok(v, err)
			}},
			{"tierguard-adaptive-record", func() bool {
				if recorded.Acquire(ctx) != nil {
					return false
				}
				v, err := Work()
				recorded.Record(time.Millisecond, bulkhead.Latency)
				recorded.Release()
				return ok(v, err)
			}},
			{"failsafe-adaptive", func() bool {
				p, acquired := fs.TryAcquirePermit()
				if !acquired {
					return false
				}
				v, err := Work()
				p.Record()
				return ok(v, err)
			}},
		}
	})
}

// TestAdaptiveContenders: each contender of BenchmarkAdaptive admits, and
// the adaptive bulkhead's limit stays far from binding.
func TestAdaptiveContenders(t *testing.T) {
	a := TierguardAdaptive()
	for range 1000 {
		assert.True(t, a.TryAcquire())
		a.Record(time.Millisecond, bulkhead.Latency)
		a.Release()
	}
	assert.GreaterOrEqual(t, a.Limit(), 1<<20)
	p, ok := FailsafeAdaptive().TryAcquirePermit()
	assert.True(t, ok)
	p.Record()
}

// TestAdaptiveScenario runs issue 48's scenario side by side in one
// process: fixed bulkheads (the hand formula's size and others),
// tierguard's adaptive bulkhead with and without a wait, and failsafe-go's
// adaptive limiter, against the same provider and load (adaptsim). It
// takes about 40 s of real time; set TIERGUARD_ADAPTIVE_SCENARIO=1 to run
// it:
//
//	cd internal/testbed/benchcmp && TIERGUARD_ADAPTIVE_SCENARIO=1 go test -run TestAdaptiveScenario -v
func TestAdaptiveScenario(t *testing.T) {
	if os.Getenv("TIERGUARD_ADAPTIVE_SCENARIO") == "" {
		t.Skip("set TIERGUARD_ADAPTIVE_SCENARIO=1 to run the 40 s scenario")
	}
	c := adaptsim.Default()
	hand := c.HandSize()
	var rs []adaptsim.Report
	for _, v := range adaptsim.Contenders(c) {
		rs = append(rs, adaptsim.Run(c, v.Name, v.New(), 1))
	}
	fs := adaptsim.Run(c, "failsafe-go adaptive", FailsafeScenarioLimiter(c, 4, 128, hand), 1)
	rs = append(rs, fs)
	adaptsim.Write(os.Stdout, c, rs, adaptsim.TierguardAdaptive)
}
