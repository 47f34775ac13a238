package redisstore_test

import (
	"os"
	"testing"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/breaker/redisstore"
	"github.com/tierguard/tierguard/internal/testbed/redisserver"
)

// BenchmarkAllowDone measures the success path (Allow, then Done(Success))
// of a breaker with no store ("local") and of one joined to a Redis store
// ("redis"); "-ratio" breakers use a failure-ratio window, which the store
// also counts for the fleet. The request path reads only local state, so
// the two should be close.
func BenchmarkAllowDone(b *testing.B) {
	run := func(b *testing.B, br *breaker.Breaker) {
		b.Run("serial", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tok, err := br.Allow()
				if err == nil {
					tok.Done(breaker.Success)
				}
			}
		})
		b.Run("parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					tok, err := br.Allow()
					if err == nil {
						tok.Done(breaker.Success)
					}
				}
			})
		})
	}
	for _, c := range []struct {
		name string
		cfg  breaker.Config
	}{
		{"", breaker.Config{Name: "bench", Cooldown: time.Minute}},
		{"-ratio", breaker.Config{Name: "bench-ratio", FailureRatio: 0.5, Cooldown: time.Minute}},
	} {
		b.Run("local"+c.name, func(b *testing.B) {
			br, err := breaker.New(c.cfg)
			if err != nil {
				b.Fatal(err)
			}
			run(b, br)
		})
		b.Run("redis"+c.name, func(b *testing.B) {
			if os.Getenv(redisserver.SkipEnv) != "" || sharedServer == nil {
				b.Skipf("no Redis (%s)", redisserver.SkipEnv)
			}
			s := newStore(b, sharedServer.Addr, redisstore.Options{})
			cfg := c.cfg
			cfg.Store = s
			br, err := breaker.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			run(b, br)
		})
	}
}
