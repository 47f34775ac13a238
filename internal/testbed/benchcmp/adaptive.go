package benchcmp

import (
	"context"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"

	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/internal/testbed/adaptsim"
)

// TierguardAdaptive is the adaptive bulkhead of the Adaptive benchmark:
// a limit far from binding, as BenchmarkBulkhead's static one.
func TierguardAdaptive() *bulkhead.Bulkhead {
	b, err := bulkhead.New(bulkhead.Config{Name: "adaptive", Max: 1 << 20,
		Adaptive: &bulkhead.Adaptive{Floor: 1 << 20, Ceiling: 1 << 21}})
	if err != nil {
		panic(err)
	}
	return b
}

// FailsafeAdaptive is failsafe-go's adaptive limiter with its defaults
// but the limits, as in the Adaptive benchmark.
func FailsafeAdaptive() adaptivelimiter.AdaptiveLimiter[any] {
	return adaptivelimiter.NewBuilder[any]().WithLimits(1, 1<<21, 1<<20).Build()
}

// FailsafeScenarioLimiter is failsafe-go's adaptive limiter as a contender
// of the adaptive scenario (adaptsim): the same limits as tierguard's
// (floor, ceiling, initial), its recent window's durations (1 s and 30 s
// by default) scaled as the scenario scales time, everything else its
// defaults. A 503 is a Drop, as its doc says of an execution that failed
// for want of capacity; an answer is Recorded. It has no priorities: its
// PriorityLimiter queues by priority, a different contract from a
// fail-fast bulkhead's.
func FailsafeScenarioLimiter(c adaptsim.Config, floor, ceiling, initial int) adaptsim.Limiter {
	scale := func(d time.Duration) time.Duration { return time.Duration(float64(d) / c.Scale) }
	l := adaptivelimiter.NewBuilder[any]().
		WithLimits(uint(floor), uint(ceiling), uint(initial)).
		WithRecentWindow(scale(time.Second), scale(30*time.Second), 50).
		Build()
	return failsafeLimiter{l}
}

type failsafeLimiter struct {
	l adaptivelimiter.AdaptiveLimiter[any]
}

func (f failsafeLimiter) Limit() int { return f.l.Limit() }

func (f failsafeLimiter) Acquire(context.Context, bulkhead.Priority) (func(time.Duration, bool), bool) {
	p, ok := f.l.TryAcquirePermit()
	if !ok {
		return nil, false
	}
	return func(_ time.Duration, overloaded bool) {
		if overloaded {
			p.Drop()
		} else {
			p.Record()
		}
	}, true
}
