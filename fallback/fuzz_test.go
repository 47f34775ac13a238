package fallback_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/retry"
)

// FuzzChainConfig builds chains from arbitrary configurations — no tier,
// negative or huge durations, reserves and minimum attempt times — and runs
// one request through tiers that fail or answer at once: an invalid
// configuration is refused by New; a valid one answers (the default is
// always there), within its deadline, from the first tier that can, never
// calls a tier whose context has already ended, and never makes more calls
// than its retry policies allow (a negative MaxAttempts allows any number
// within the deadline).
func FuzzChainConfig(f *testing.F) {
	f.Add(uint8(2), int64(time.Second), int64(0), int64(0), int64(0), int64(0), int64(0), 3, uint8(1), int64(0))
	f.Add(uint8(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), 0, uint8(0), int64(0))
	f.Add(uint8(3), int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), -1, uint8(7), int64(-1))
	f.Add(uint8(3), int64(time.Second), int64(0), int64(0), int64(0), int64(0), int64(math.MaxInt64), 2, uint8(3), int64(0))
	f.Add(uint8(3), int64(math.MaxInt64), int64(math.MaxInt64/2), int64(1), int64(math.MaxInt64), int64(0), int64(0), 1<<20, uint8(6), int64(time.Millisecond))
	f.Add(uint8(1), int64(1), int64(1), int64(math.MaxInt64), int64(1), int64(1), int64(1), 1, uint8(1), int64(1))
	f.Fuzz(func(t *testing.T, n uint8, total, minAttempt, abandon, tryTimeout, stageMin, reserve int64, attempts int, fails uint8, timeout int64) {
		stages := make([]fallback.Stage[string, string], n%4)
		var late atomic.Int64
		maxCalls := 0
		for i := range stages {
			name := "t" + strconv.Itoa(i)
			fail := fails>>i&1 == 1
			stages[i] = fallback.Stage[string, string]{
				Tier: fallback.Tier(name, func(ctx context.Context, in string) (string, error) {
					if ctx.Err() != nil {
						late.Add(1)
					}
					if fail {
						return "", classify.Wrap(errors.New("503"), classify.Verdict{Class: classify.Transient, Reason: "fuzz"})
					}
					return "answer from " + name, nil
				}),
				TryTimeout: time.Duration(tryTimeout), MinAttempt: time.Duration(stageMin), Reserve: time.Duration(reserve),
				Retry: retry.Policy{MaxAttempts: attempts % 5, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond},
			}
			maxCalls += max(attempts%5, 0)
			if attempts%5 == 0 {
				maxCalls += retry.Policy{}.WithDefaults().MaxAttempts
			}
		}
		// A negative MaxAttempts sets no limit: the deadline ends the
		// retries, so the request gets one when it has none.
		unlimited := len(stages) > 0 && attempts%5 < 0
		if unlimited && total <= 0 && timeout == 0 {
			timeout = int64(time.Minute)
		}
		cfg := fallback.Config[string, string]{
			Stages: stages, Total: time.Duration(total), MinAttempt: time.Duration(minAttempt), AbandonAfter: time.Duration(abandon),
			Default: func(context.Context, string) (string, bool) { return "default", true },
		}
		c, err := fallback.New(cfg)
		invalid := len(stages) == 0 || total < 0 || minAttempt < 0 || abandon < 0 ||
			len(stages) > 0 && (tryTimeout < 0 || stageMin < 0)
		if invalid != (err != nil) {
			t.Fatalf("New: %v for an invalid (%v) config", err, invalid)
		}
		if err != nil {
			return
		}
		synctest.Test(t, func(t *testing.T) {
			ctx := context.Background()
			budget := time.Duration(math.MaxInt64)
			if timeout != 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Duration(timeout))
				defer cancel()
				budget = time.Duration(timeout)
			}
			if total > 0 {
				budget = min(budget, time.Duration(total))
			}
			start := time.Now()
			res, err := c.Do(ctx, "q")
			elapsed := time.Since(start)
			if err != nil {
				t.Fatalf("no answer although the default answers: %v", err)
			}
			if elapsed > max(budget, 0) {
				t.Fatalf("answered after %v, budget %v", elapsed, budget)
			}
			if n := late.Load(); n > 0 {
				t.Fatalf("%d tier calls with an expired context", n)
			}
			if !unlimited && res.UpstreamCalls > maxCalls {
				t.Fatalf("%d upstream calls, at most %d allowed", res.UpstreamCalls, maxCalls)
			}
			if res.Source == fallback.SourceTier && fails>>res.TierIndex&1 == 1 {
				t.Fatalf("answer %q from a failing tier", res.Value)
			}
			if res.Source == fallback.SourceTier && res.Value != "answer from "+res.Tier {
				t.Fatalf("answer %q from %s", res.Value, res.Tier)
			}
		})
	})
}
