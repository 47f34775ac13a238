package breaker_test

import (
	"math"
	"testing"
	"time"

	"github.com/tierguard/tierguard/breaker"
)

// FuzzConfig feeds arbitrary configurations to New: an invalid one is refused
// with an error, a valid one yields a breaker whose defaults are sane and
// which survives a burst of outcomes.
func FuzzConfig(f *testing.F) {
	f.Add(5, 0.5, int64(0), 0.0, int64(time.Minute), 20, int64(time.Second), int64(0), 0.0, 1, 1, uint8(7))
	f.Add(-1, 1.5, int64(-1), math.NaN(), int64(-5), -3, int64(-1), int64(-1), 1.0, -1, -1, uint8(0))
	f.Add(1, math.Inf(1), int64(1), 1.0, int64(1), 1, int64(1), int64(math.MaxInt64), 0.99, 1000, 1000, uint8(255))
	f.Fuzz(func(t *testing.T, consecutive int, ratio float64, slow int64, slowRatio float64, window int64, minCalls int,
		cooldown, maxCooldown int64, jitter float64, probes, successes int, outcomes uint8) {
		b, err := breaker.New(breaker.Config{
			ConsecutiveFailures: consecutive, FailureRatio: ratio, SlowCallDuration: time.Duration(slow),
			SlowCallRatio: slowRatio, Window: time.Duration(window), MinCalls: minCalls,
			Cooldown: time.Duration(cooldown), MaxCooldown: time.Duration(maxCooldown), CooldownJitter: jitter,
			HalfOpenProbes: probes, ProbeSuccesses: successes,
		})
		if err != nil {
			if b != nil {
				t.Fatal("a breaker returned with an error")
			}
			return
		}
		cfg := b.Config()
		if cfg.Cooldown <= 0 || cfg.MaxCooldown < cfg.Cooldown || cfg.HalfOpenProbes <= 0 || cfg.ProbeSuccesses <= 0 || cfg.Window <= 0 || cfg.MinCalls <= 0 {
			t.Fatalf("accepted config has unusable values: %+v", cfg)
		}
		for i := range 16 {
			tok, err := b.Allow()
			if err != nil {
				continue
			}
			tok.Done(breaker.Outcome((int(outcomes) >> (i % 8)) % 3))
		}
		b.ForceClosed()
	})
}
