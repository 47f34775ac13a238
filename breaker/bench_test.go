package breaker_test

import (
	"testing"

	"github.com/tierguard/tierguard/breaker"
)

func BenchmarkBreaker(b *testing.B) {
	run := func(b *testing.B, cfg breaker.Config) {
		br, _ := breaker.New(cfg)
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
	b.Run("closed", func(b *testing.B) { run(b, breaker.Config{}) })
	b.Run("closed-window", func(b *testing.B) { run(b, breaker.Config{FailureRatio: 0.5}) })
	b.Run("closed-window-slow", func(b *testing.B) { run(b, breaker.Config{FailureRatio: 0.5, SlowCallDuration: 1 << 40}) })
	open, _ := breaker.New(breaker.Config{})
	open.ForceOpen()
	b.Run("open-reject/serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = open.Allow()
		}
	})
	b.Run("open-reject/parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_, _ = open.Allow()
			}
		})
	})
}
