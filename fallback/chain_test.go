package fallback_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/deadline"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/catalog"
	"github.com/tierguard/tierguard/internal/testbed/reported"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

func TestFirstTierAnswers(t *testing.T) {
	pro, flash := newFake("pro", ok("deep")), newFake("flash", ok("quick"))
	c := newChain(t, fallback.Config[string, string]{Stages: stages(pro, flash)})
	res, err := c.Do(context.Background(), "q")
	require.NoError(t, err)
	assert.Equal(t, "deep", res.Value)
	assert.Equal(t, fallback.SourceTier, res.Source)
	assert.Equal(t, "pro", res.Tier)
	assert.Equal(t, 0, res.TierIndex)
	assert.False(t, res.Degraded)
	assert.Equal(t, 1, res.UpstreamCalls)
	require.Len(t, res.Attempts(), 1)
	assert.Equal(t, classify.OK, res.Attempts()[0].Verdict.Class)
	assert.Zero(t, flash.calls.Load())
}

// TestRetriesCountOnceTowardTheBreaker: retries live inside the breaker, so a
// request whose three attempts all fail counts one failure.
func TestRetriesCountOnceTowardTheBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pro := newFake("pro", fails(classify.Transient))
		br := newBreaker(t, breaker.Config{Name: "pro", ConsecutiveFailures: 2})
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: pro, Breaker: br, Retry: retry.Policy{MaxAttempts: 3}},
			{Tier: newFake("flash", ok("quick"))},
		}})
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "flash", res.Tier)
		assert.Equal(t, int64(3), pro.calls.Load(), "three attempts")
		assert.Equal(t, breaker.Closed, br.State(), "one request, one failure")

		_, err = c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, breaker.Open, br.State(), "the second request's failure trips it")

		res, err = c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, int64(6), pro.calls.Load(), "an open breaker makes no upstream call")
		assert.Equal(t, fallback.SkipOpen, res.Attempts()[0].Skip)
		assert.ErrorIs(t, res.Attempts()[0].Err, breaker.ErrOpen)
	})
}

// TestOpenBreakerFreesTheSlot: the breaker sits inside the bulkhead, so a
// rejected call releases its slot at once; an open breaker is seen before
// any slot is taken.
func TestOpenBreakerFreesTheSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bh := newBulkhead(t, "pro", 1)
		br := newBreaker(t, breaker.Config{Name: "pro", ConsecutiveFailures: 1, Cooldown: time.Second})
		slotsDuringFlash := -1
		flash := fallback.Tier("flash", func(context.Context, string) (string, error) {
			slotsDuringFlash = bh.Stats().InFlight
			return "quick", nil
		})
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: newFake("pro", ok("deep")), Bulkhead: bh, Breaker: br},
			{Tier: flash},
		}})

		br.ForceOpen()
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "quick", res.Value)
		assert.Zero(t, slotsDuringFlash)
		assert.Zero(t, bh.Stats().Accepted, "an open breaker is seen before the slot is taken")

		// Half-open with its only probe in flight: the slot is taken, the
		// breaker refuses, and the slot is free again before flash runs.
		br.Reset()
		tok, _ := br.Allow()
		tok.Done(breaker.Failure)
		time.Sleep(time.Second)
		synctest.Wait()
		probe, err := br.Allow()
		require.NoError(t, err)
		defer probe.Done(breaker.Ignored)
		slotsDuringFlash = -1
		res, err = c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "quick", res.Value)
		assert.Zero(t, slotsDuringFlash, "the refused call released pro's slot before flash ran")
		assert.Equal(t, uint64(1), bh.Stats().Accepted)
	})
}

func TestFullBulkheadSkipsTheTier(t *testing.T) {
	bh := newBulkhead(t, "pro", 1)
	require.True(t, bh.TryAcquire())
	pro := newFake("pro", ok("deep"))
	c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
		{Tier: pro, Bulkhead: bh},
		{Tier: newFake("flash", ok("quick"))},
	}})
	res, err := c.Do(context.Background(), "q")
	require.NoError(t, err)
	assert.Equal(t, "flash", res.Tier)
	assert.True(t, res.Degraded)
	assert.Equal(t, fallback.SkipFull, res.Attempts()[0].Skip)
	assert.ErrorIs(t, res.Attempts()[0].Err, bulkhead.ErrFull)
	assert.Zero(t, pro.calls.Load())
}

// TestClassActions drives every class through a two-tier chain and checks
// the default table's action: retried in place, moved on, or failed closed.
func TestClassActions(t *testing.T) {
	tests := []struct {
		class      classify.Class
		proCalls   int64
		fellBack   bool
		failClosed bool
		counts     bool
	}{
		{classify.Transient, 2, true, false, true},
		{classify.RateLimited, 2, true, false, true},
		{classify.QuotaExhausted, 1, true, false, false},
		{classify.Retired, 1, true, false, false},
		{classify.ContextTooLong, 1, true, false, false},
		{classify.InvalidRequest, 1, false, true, false},
		{classify.Auth, 1, false, true, false},
		{classify.Safety, 1, false, true, false},
		{classify.InvalidOutput, 1, true, false, false},
		// A cancel the caller did not ask for is not the caller's cancel:
		// it counts as Unknown (see TestCallerCancelFailsClosed).
		{classify.Canceled, 1, true, false, true},
		{classify.Rejected, 1, true, false, false},
		{classify.Unknown, 1, true, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.class.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cause := classErr(tt.class)
				pro := newFake("pro", step{err: cause})
				flash := newFake("flash", ok("quick"))
				br := newBreaker(t, breaker.Config{Name: "pro", ConsecutiveFailures: 1})
				c := newChain(t, fallback.Config[string, string]{
					Stages: []fallback.Stage[string, string]{
						{Tier: pro, Breaker: br, Retry: retry.Policy{MaxAttempts: 2}},
						{Tier: flash},
					},
					Default: func(context.Context, string) (string, bool) { return "default", true },
				})
				res, err := c.Do(context.Background(), "q")
				assert.Equal(t, tt.proCalls, pro.calls.Load(), "calls to pro")
				if tt.fellBack {
					require.NoError(t, err)
					assert.Equal(t, "quick", res.Value)
					assert.True(t, res.Degraded)
				}
				if tt.failClosed {
					require.Error(t, err)
					var fe *fallback.Error
					require.ErrorAs(t, err, &fe)
					assert.True(t, fe.FailedClosed)
					assert.ErrorIs(t, err, cause, "the original cause comes back")
					assert.Equal(t, tt.class, classify.Classify(err).Class)
					assert.Zero(t, flash.calls.Load(), "no other tier was tried")
					assert.Empty(t, res.Value, "not even the default answers")
				}
				wantState := breaker.Closed
				if tt.counts {
					wantState = breaker.Open
				}
				assert.Equal(t, wantState, br.State(), "breaker counting")
			})
		})
	}
}

func TestCallerCancelFailsClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		pro := newFake("pro", step{block: true})
		flash := newFake("flash", ok("quick"))
		c := newChain(t, fallback.Config[string, string]{
			Stages:  stages(pro, flash),
			Default: func(context.Context, string) (string, bool) { return "default", true },
		})
		go func() {
			time.Sleep(time.Second)
			cancel()
		}()
		_, err := c.Do(ctx, "q")
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, classify.Canceled, classify.Classify(err).Class)
		assert.Zero(t, flash.calls.Load())
	})
}

// TestReserveKeepsTimeForTheFallback: a stalled primary cannot eat the
// fallback's chance to answer.
func TestReserveKeepsTimeForTheFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pro := newFake("pro", step{block: true})
		var flashBudget time.Duration
		flash := fallback.Tier("flash", func(ctx context.Context, _ string) (string, error) {
			d, _ := ctx.Deadline()
			flashBudget = time.Until(d)
			return "quick", nil
		})
		c := newChain(t, fallback.Config[string, string]{
			Stages: []fallback.Stage[string, string]{
				{Tier: pro, Retry: retry.Policy{MaxAttempts: 1}},
				{Tier: flash, MinAttempt: 2 * time.Second},
			},
			Total: 10 * time.Second,
		})
		start := time.Now()
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "quick", res.Value)
		assert.Equal(t, 5*time.Second, time.Since(start), "flash never seen: half the budget is kept for it")
		assert.Equal(t, 5*time.Second, flashBudget)

		start = time.Now()
		res, err = c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "quick", res.Value)
		assert.Equal(t, 7800*time.Millisecond, time.Since(start), "flash seen: pro's attempt ends at flash's need, its 2s floor plus a tenth")
		assert.Equal(t, 2200*time.Millisecond, flashBudget, "flash gets the reserve")
		assert.Equal(t, classify.Transient, res.Attempts()[0].Verdict.Class, "a per-try timeout is transient")
	})
}

func TestTryTimeoutThenRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pro := newFake("pro", ok("deep"), step{block: true})
		c := newChain(t, fallback.Config[string, string]{
			Stages: []fallback.Stage[string, string]{{Tier: pro, TryTimeout: time.Second, Retry: retry.Policy{BaseDelay: time.Millisecond, Jitter: retry.NoJitter}}},
		})
		start := time.Now()
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "deep", res.Value)
		assert.Equal(t, time.Second+time.Millisecond, time.Since(start))
		assert.Equal(t, 2, res.UpstreamCalls)
	})
}

// TestDeadlineIsNeverOverrun runs chains of stalling, slow and failing tiers
// under many budgets and checks every answer comes by the deadline.
func TestDeadlineIsNeverOverrun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := func(d time.Duration) step {
			return step{fn: func(ctx context.Context) (string, error) {
				select {
				case <-time.After(d):
					return "late", nil
				case <-ctx.Done():
					return "", ctx.Err()
				}
			}}
		}
		c := newChain(t, fallback.Config[string, string]{
			Stages: []fallback.Stage[string, string]{
				{Tier: newFake("pro", step{err: classify.Wrap(errors.New("429"), classify.Verdict{Class: classify.RateLimited, RetryAfter: 3 * time.Second})}), Retry: retry.Policy{MaxAttempts: 5}},
				{Tier: newFake("flash", slow(1500*time.Millisecond)), TryTimeout: time.Second, Retry: retry.Policy{MaxAttempts: 3}},
				{Tier: newFake("lite", step{block: true})},
			},
			Default: func(context.Context, string) (string, bool) { return "default", true },
		})
		for _, budget := range []time.Duration{50 * time.Millisecond, 300 * time.Millisecond, time.Second, 2 * time.Second, 3500 * time.Millisecond, 7 * time.Second} {
			ctx, cancel := context.WithTimeout(context.Background(), budget)
			start := time.Now()
			res, err := c.Do(ctx, "q")
			cancel()
			assert.LessOrEqual(t, time.Since(start), budget, "budget %v", budget)
			require.NoError(t, err, "budget %v", budget)
			assert.Equal(t, "default", res.Value)
		}
	})
}

func TestRateLimitBeyondBudgetMovesOnAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rateLimited := classify.Wrap(errors.New("429"), classify.Verdict{Class: classify.RateLimited, RetryAfter: 37 * time.Second})
		pro := newFake("pro", step{err: rateLimited})
		c := newChain(t, fallback.Config[string, string]{Stages: stages(pro, newFake("flash", ok("quick"))), Total: 10 * time.Second})
		start := time.Now()
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "quick", res.Value)
		assert.Zero(t, time.Since(start), "no sleep: a 37s wait cannot fit a 10s budget")
		assert.Equal(t, int64(1), pro.calls.Load())
	})
}

func TestValidationFallsThroughWithoutTrippingTheBreaker(t *testing.T) {
	br := newBreaker(t, breaker.Config{Name: "pro", ConsecutiveFailures: 1})
	cache := &mapCache{}
	c := newChain(t, fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{
			{Tier: newFake("pro", ok(`{"amount": oops`)), Breaker: br, Validate: validate.JSON()},
			{Tier: newFake("flash", ok(`{"amount": 1}`)), Validate: validate.JSON()},
		},
		Cache: cache,
	})
	for range 3 {
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "flash", res.Tier)
		var ve *validate.Error
		require.ErrorAs(t, res.Attempts()[0].Err, &ve)
		assert.Equal(t, classify.InvalidOutput, res.Attempts()[0].Verdict.Class)
	}
	assert.Equal(t, breaker.Closed, br.State())
	assert.Equal(t, 3, cache.puts)
	assert.Equal(t, `{"amount": 1}`, cache.m["q"], "only the validated answer is written back")
}

func TestCacheThenDefault(t *testing.T) {
	cache := &mapCache{m: map[string]string{"known": "cached answer"}}
	pro := newFake("pro", fails(classify.Transient))
	c := newChain(t, fallback.Config[string, string]{
		Stages:  []fallback.Stage[string, string]{{Tier: pro, Retry: retry.Policy{MaxAttempts: 1}}},
		Cache:   cache,
		Default: fallback.PickByHash([]string{"a", "b", "c"}, func(in string) string { return in }),
	})
	res, err := c.Do(context.Background(), "known")
	require.NoError(t, err)
	assert.Equal(t, "cached answer", res.Value)
	assert.Equal(t, fallback.SourceCache, res.Source)
	assert.True(t, res.Degraded)
	assert.Equal(t, -1, res.TierIndex)

	first, err := c.Do(context.Background(), "unknown")
	require.NoError(t, err)
	assert.Equal(t, fallback.SourceDefault, first.Source)
	again, _ := c.Do(context.Background(), "unknown")
	assert.Equal(t, first.Value, again.Value, "the default pick is stable per input")
	assert.Equal(t, 0, cache.puts, "failures and local answers are never written back")
}

func TestErrorWrapsEveryTier(t *testing.T) {
	proErr, flashErr := classErr(classify.Transient), classErr(classify.Retired)
	br := newBreaker(t, breaker.Config{Name: "lite"})
	br.ForceOpen()
	c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
		{Tier: newFake("pro", step{err: proErr}), Retry: retry.Policy{MaxAttempts: 1}},
		{Tier: newFake("flash", step{err: flashErr})},
		{Tier: newFake("lite", ok("x")), Breaker: br},
	}})
	res, err := c.Do(context.Background(), "q")
	require.Error(t, err)
	assert.Empty(t, res.Value)
	assert.ErrorIs(t, err, proErr)
	assert.ErrorIs(t, err, flashErr)
	assert.ErrorIs(t, err, breaker.ErrOpen)
	var fe *fallback.Error
	require.ErrorAs(t, err, &fe)
	assert.False(t, fe.FailedClosed)
	require.Len(t, fe.Tiers, 3)
	assert.Equal(t, fallback.TierFailed, fe.Tiers[0].Outcome)
	assert.Equal(t, fallback.TierFailed, fe.Tiers[1].Outcome)
	assert.Equal(t, fallback.TierSkipped, fe.Tiers[2].Outcome)
	assert.Equal(t, fallback.SkipOpen, fe.Tiers[2].Skip)
	assert.Equal(t, "tierguard: no tier answered: pro failed: transient; flash failed: retired; lite skipped (open)", err.Error())
	assert.NotContains(t, err.Error(), "upstream says", "upstream text stays in the wrapped errors")
}

func TestNotReachedTiers(t *testing.T) {
	c := newChain(t, fallback.Config[string, string]{Stages: stages(newFake("pro", fails(classify.Auth)), newFake("flash", ok("x")))})
	_, err := c.Do(context.Background(), "q")
	var fe *fallback.Error
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, fallback.TierNotReached, fe.Tiers[1].Outcome)
	assert.Contains(t, err.Error(), "failed closed (auth: scripted)")
	assert.Contains(t, err.Error(), "flash not reached")
}

func TestRetiredModelIsSkippedWithoutCatalog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		legacy := newFake("legacy", fails(classify.Retired))
		c := newChain(t, fallback.Config[string, string]{
			Stages:         []fallback.Stage[string, string]{{Tier: legacy, Model: "legacy-1"}, {Tier: newFake("flash", ok("quick"))}},
			RetiredRecheck: time.Minute,
		})
		for range 5 {
			res, err := c.Do(context.Background(), "q")
			require.NoError(t, err)
			assert.Equal(t, "quick", res.Value)
		}
		assert.Equal(t, int64(1), legacy.calls.Load(), "no request reaches a retired model after its first 404")
		res, _ := c.Do(context.Background(), "q")
		assert.Equal(t, fallback.SkipRetired, res.Attempts()[0].Skip)
		var se *fallback.SkipError
		require.ErrorAs(t, res.Attempts()[0].Err, &se)

		time.Sleep(time.Minute)
		_, _ = c.Do(context.Background(), "q")
		assert.Equal(t, int64(2), legacy.calls.Load(), "rechecked after RetiredRecheck")
	})
}

func TestQuotaExhaustedParksTheTier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		perDay := classify.Wrap(errors.New("429 per day"), classify.Verdict{Class: classify.QuotaExhausted, RetryAfter: 6 * time.Second})
		pro := newFake("pro", ok("deep"), step{err: perDay})
		c := newChain(t, fallback.Config[string, string]{Stages: stages(pro, newFake("flash", ok("quick"))), QuotaCooldown: 30 * time.Second})
		res, _ := c.Do(context.Background(), "q")
		assert.Equal(t, "quick", res.Value)
		time.Sleep(29 * time.Second)
		res, _ = c.Do(context.Background(), "q")
		assert.Equal(t, fallback.SkipQuota, res.Attempts()[0].Skip, "parked for the cooldown, not the 6s RetryInfo")
		time.Sleep(time.Second)
		res, _ = c.Do(context.Background(), "q")
		assert.Equal(t, "deep", res.Value)
		assert.Equal(t, int64(2), pro.calls.Load())
	})
}

func TestCatalogPreflight(t *testing.T) {
	live := []string{"models/gemini-2.5-flash"}
	var fetchErr error
	cat, err := catalog.New(func(context.Context) ([]string, error) { return live, fetchErr }, catalog.Options{})
	require.NoError(t, err)
	legacy := newFake("legacy", fails(classify.Retired))
	pro := newFake("pro", fails(classify.Retired))
	c := newChain(t, fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{
			{Tier: legacy, Model: "gemini-1.0-pro"},
			{Tier: pro, Model: "gemini-2.5-pro"},
			{Tier: newFake("flash", ok("quick")), Model: "gemini-2.5-flash"},
		},
		Catalog: cat,
	})
	// Before the first refresh every model is presumed live; the 404 marks
	// it in the catalog.
	_, err = c.Do(context.Background(), "q")
	require.NoError(t, err)
	assert.Equal(t, int64(1), legacy.calls.Load())
	assert.False(t, cat.Available("gemini-1.0-pro"))

	require.NoError(t, cat.Refresh(context.Background()))
	res, err := c.Do(context.Background(), "q")
	require.NoError(t, err)
	assert.Equal(t, int64(1), legacy.calls.Load())
	assert.Equal(t, int64(1), pro.calls.Load(), "pro is not in the list: skipped without a call")
	assert.Equal(t, fallback.SkipRetired, res.Attempts()[0].Skip)
	assert.Equal(t, fallback.SkipRetired, res.Attempts()[1].Skip)

	fetchErr = errors.New("list failed")
	assert.Error(t, cat.Refresh(context.Background()))
	assert.Error(t, cat.Err())
	assert.True(t, cat.Available("gemini-2.5-flash"), "a failed refresh keeps the last good list")
	assert.False(t, cat.Available("gemini-2.5-pro"))

	fetchErr = nil
	live = append(live, "gemini-2.5-pro")
	require.NoError(t, cat.Refresh(context.Background()))
	assert.True(t, cat.Available("gemini-2.5-pro"))
	assert.NoError(t, cat.Err())
	assert.False(t, cat.Refreshed().IsZero())
}

func TestCatalogStartStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fetches atomic.Int64
		cat, err := catalog.New(func(context.Context) ([]string, error) {
			fetches.Add(1)
			return []string{"a"}, nil
		}, catalog.Options{TTL: time.Minute})
		require.NoError(t, err)
		cat.Start()
		synctest.Wait()
		assert.Equal(t, int64(1), fetches.Load())
		assert.False(t, cat.Available("b"))
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Equal(t, int64(2), fetches.Load())
		cat.Stop()
		time.Sleep(time.Hour)
		assert.Equal(t, int64(2), fetches.Load())
	})
}

// TestCatalogComparesModelIDsInOneForm: the catalog reads model ids in
// the normal form prices and limits use — another case, white space, a
// models/ or Vertex resource path name the same model.
func TestCatalogComparesModelIDsInOneForm(t *testing.T) {
	cat, err := catalog.New(func(context.Context) ([]string, error) {
		return []string{"models/gemini-2.5-pro", "projects/p/locations/l/publishers/google/models/gemini-2.5-flash"}, nil
	}, catalog.Options{})
	require.NoError(t, err)
	require.NoError(t, cat.Refresh(context.Background()))
	for _, id := range []string{"gemini-2.5-pro", "Gemini-2.5-Pro", " gemini-2.5-pro ", "models/gemini-2.5-pro", "gemini-2.5-flash"} {
		assert.True(t, cat.Available(id), "%q", id)
	}
	assert.False(t, cat.Available("gemini-2.5-pro-001"), "a version is a model of its own")
}

// TestCatalogBackgroundRefreshSurvivesAPanic: a background refresh whose
// fetch panics (or calls runtime.Goexit) runs on the timer's goroutine,
// where no caller could recover it: Err reports it as a *PanicError with
// the stack, the last good list stays, and refreshes go on.
func TestCatalogBackgroundRefreshSurvivesAPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fetches atomic.Int64
		cat, err := catalog.New(func(context.Context) ([]string, error) {
			switch fetches.Add(1) {
			case 2:
				panic("fetch exploded")
			case 3:
				runtime.Goexit()
			}
			return []string{"a"}, nil
		}, catalog.Options{TTL: time.Minute})
		require.NoError(t, err)
		cat.Start()
		defer cat.Stop()
		synctest.Wait()
		require.NoError(t, cat.Err())

		time.Sleep(time.Minute)
		synctest.Wait()
		var pe *fallback.PanicError
		require.ErrorAs(t, cat.Err(), &pe)
		assert.Equal(t, "fetch exploded", pe.Value)
		assert.Contains(t, string(pe.Stack), "chain_test.go", "the stack where fetch panicked")
		assert.True(t, cat.Available("a"), "the last good list stays")
		assert.False(t, cat.Available("b"))

		time.Sleep(time.Minute)
		synctest.Wait()
		require.ErrorAs(t, cat.Err(), &pe)
		assert.Equal(t, "runtime.Goexit called", pe.Value)

		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Equal(t, int64(4), fetches.Load(), "refreshes went on")
		assert.NoError(t, cat.Err())
	})
}

// TestJoinedRequestsAreObserved: a request that joins a shared execution
// is a request of its own for observers — started when it joins, ended
// with what it got, marked Shared, with no upstream call of its own — and
// so is one that gives up waiting and is answered by the default.
func TestJoinedRequestsAreObserved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		pro := fallback.Tier("pro", func(context.Context, string) (string, error) {
			<-release
			return "answer", nil
		})
		var obs reported.Recorder
		c := newChain(t, fallback.Config[string, string]{
			Stages:   stages(pro),
			Key:      func(in string) string { return in },
			Observer: &obs,
			Default:  func(context.Context, string) (string, bool) { return "default", true },
		})
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = c.Do(context.Background(), "q") })
		synctest.Wait()
		wg.Go(func() {
			res, err := c.Do(context.Background(), "q")
			assert.NoError(t, err)
			assert.True(t, res.Shared)
		})
		impatient, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		wg.Go(func() {
			res, err := c.Do(impatient, "q")
			assert.NoError(t, err)
			assert.Equal(t, "default", res.Value, "out of time while waiting")
		})
		synctest.Wait()
		time.Sleep(2 * time.Second)
		close(release)
		wg.Wait()

		started, ended := reported.Of[fallback.RequestStart](&obs), reported.Of[fallback.RequestEnd](&obs)
		require.Len(t, started, 3)
		require.Len(t, ended, 3)
		var shared int
		for _, e := range ended {
			if !e.Shared {
				assert.Equal(t, 1, e.UpstreamCalls, "the execution")
				continue
			}
			shared++
			assert.Zero(t, e.UpstreamCalls, "no call of its own")
			assert.True(t, e.Answered)
		}
		assert.Equal(t, 2, shared)
		assert.Equal(t, fallback.SourceDefault, ended[0].Source, "the impatient caller ended first, with the default")
		assert.True(t, ended[0].Shared)
	})
}

func TestIdempotentRequestsShareOneExecution(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var calls atomic.Int64
		pro := fallback.Tier("pro", func(ctx context.Context, in string) (string, error) {
			calls.Add(1)
			<-release
			return "answer to " + in, nil
		})
		c := newChain(t, fallback.Config[string, string]{Stages: stages(pro), Key: func(in string) string { return in }})
		var wg sync.WaitGroup
		results := make([]fallback.Result[string], 8)
		for i := range results {
			wg.Go(func() {
				var err error
				results[i], err = c.Do(context.Background(), "q")
				assert.NoError(t, err)
			})
		}
		synctest.Wait()
		close(release)
		wg.Wait()
		assert.Equal(t, int64(1), calls.Load())
		shared := 0
		for _, r := range results {
			assert.Equal(t, "answer to q", r.Value)
			if r.Shared {
				shared++
			}
		}
		assert.Equal(t, 7, shared, "every waiter but the first joined")
	})
}

func TestIdempotentWaiterCanLeave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var canceled atomic.Bool
		pro := fallback.Tier("pro", func(ctx context.Context, in string) (string, error) {
			<-ctx.Done()
			canceled.Store(true)
			return "", ctx.Err()
		})
		c := newChain(t, fallback.Config[string, string]{Stages: stages(pro), Key: func(in string) string { return in }})
		ctx1, cancel1 := context.WithCancel(context.Background())
		ctx2, cancel2 := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for _, ctx := range []context.Context{ctx1, ctx2} {
			wg.Go(func() {
				_, err := c.Do(ctx, "q")
				assert.ErrorIs(t, err, context.Canceled)
			})
		}
		synctest.Wait()
		cancel1()
		synctest.Wait()
		assert.False(t, canceled.Load(), "one waiter leaving does not cancel the shared work")
		cancel2()
		wg.Wait()
		synctest.Wait()
		assert.True(t, canceled.Load(), "the last waiter leaving cancels it")
	})
}

func TestPanicReleasesGuards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bh := newBulkhead(t, "pro", 1)
		br := newBreaker(t, breaker.Config{Name: "pro", ConsecutiveFailures: 1, Cooldown: time.Second})
		tok, err := br.Allow()
		require.NoError(t, err)
		tok.Done(breaker.Failure)
		time.Sleep(time.Second)
		synctest.Wait()
		require.Equal(t, breaker.HalfOpen, br.State())

		boom := fallback.Tier("pro", func(context.Context, string) (string, error) { panic("tier exploded") })
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: boom, Bulkhead: bh, Breaker: br}}})
		assert.PanicsWithValue(t, "tier exploded", func() { _, _ = c.Do(context.Background(), "q") })
		assert.Zero(t, bh.Stats().InFlight, "no slot leaked")
		probe, err := br.Allow()
		require.NoError(t, err, "no probe leaked")
		probe.Done(breaker.Ignored)
	})
}

func TestSharedPanicReachesEveryWaiter(t *testing.T) {
	c := newChain(t, fallback.Config[string, string]{
		Stages: stages(fallback.Tier("pro", func(context.Context, string) (string, error) { panic("tier exploded") })),
		Key:    func(in string) string { return in },
	})
	assert.Panics(t, func() { _, _ = c.Do(context.Background(), "q") })
	// The entry is gone: the next request runs (and panics) again.
	assert.Panics(t, func() { _, _ = c.Do(context.Background(), "q") })
}

func TestInvalidConfig(t *testing.T) {
	_, err := fallback.New(fallback.Config[string, string]{})
	assert.ErrorContains(t, err, "at least one stage")
	_, err = fallback.New(fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{
			{Tier: newFake("pro", ok("x")), TryTimeout: -1},
			{Tier: newFake("pro", ok("x"))},
			{},
			{Tier: newFake("x", ok("x")), Retry: retry.Policy{BaseDelay: -1}},
		},
		Total: -time.Second,
	})
	require.Error(t, err)
	for _, want := range []string{"Total", "TryTimeout", `"pro" is used twice`, "stage 2: Tier is required", "BaseDelay"} {
		assert.ErrorContains(t, err, want)
	}
	_, err = catalog.New(nil, catalog.Options{})
	assert.Error(t, err)
}

// TestChaos20PercentOutage: 20% 503 on the primary with a healthy second
// tier answers at least 99.9% of 10,000 requests.
func TestChaos20PercentOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		pro := fallback.Tier("pro", func(context.Context, string) (string, error) {
			if n.Add(1)%5 == 0 {
				return "", classErr(classify.Transient)
			}
			return "deep", nil
		})
		budget, err := retry.NewBudget(10, 0.1)
		require.NoError(t, err)
		c := newChain(t, fallback.Config[string, string]{
			Stages: []fallback.Stage[string, string]{
				{Tier: pro, Breaker: newBreaker(t, breaker.Config{Name: "pro"}), Retry: retry.Policy{Budget: budget, BaseDelay: time.Millisecond}},
				{Tier: newFake("flash", ok("quick"))},
			},
			Total: 2 * time.Second,
		})
		const requests = 10000
		answered := 0
		for range requests {
			if _, err := c.Do(context.Background(), "q"); err == nil {
				answered++
			}
		}
		assert.GreaterOrEqual(t, float64(answered)/requests, 0.999)
		t.Logf("answered %d of %d", answered, requests)
	})
}

func TestObserverSeesEveryDecision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &decisions{}
		open := newBreaker(t, breaker.Config{Name: "lite"})
		open.ForceOpen()
		pro := newFake("pro", ok("deep"), fails(classify.Transient))
		c := newChain(t, fallback.Config[string, string]{
			Stages: []fallback.Stage[string, string]{
				{Tier: newFake("lite", ok("x")), Breaker: open},
				{Tier: pro, Retry: retry.Policy{BaseDelay: time.Millisecond}},
			},
			Observer: obs,
		})
		_, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, []string{
			"request_started",
			"tier_skipped lite open",
			"attempt_started pro#1 ctx=span",
			"attempt_ended pro#1 transient retry=true",
			"attempt_started pro#2 ctx=span",
			"attempt_ended pro#2 ok retry=false",
			"request_ended answered=true tier=pro degraded=true calls=2",
		}, obs.list)
	})
}

// decisions writes down each decision of a chain, with the context the
// chain passes: RequestStarted adds a value that the attempts must see.
type decisions struct {
	fallback.NopObserver
	mu   sync.Mutex
	list []string
}

type spanKey struct{}

func (d *decisions) add(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.list = append(d.list, fmt.Sprintf(format, args...))
}

func (d *decisions) RequestStarted(ctx context.Context, _ fallback.RequestStart) context.Context {
	d.add("request_started")
	return context.WithValue(ctx, spanKey{}, "span")
}

func (d *decisions) AttemptStarted(ctx context.Context, e fallback.AttemptStart) context.Context {
	d.add("attempt_started %s#%d ctx=%v", e.Stage.Tier, e.Attempt, ctx.Value(spanKey{}))
	return ctx
}

func (d *decisions) AttemptEnded(_ context.Context, e fallback.AttemptEnd) {
	d.add("attempt_ended %s#%d %v retry=%v", e.Stage.Tier, e.Attempt, e.Verdict.Class, e.Retry)
}

func (d *decisions) TierSkipped(_ context.Context, e fallback.TierSkip) {
	d.add("tier_skipped %s %v", e.Stage.Tier, e.Skip)
}

func (d *decisions) RequestEnded(_ context.Context, e fallback.RequestEnd) {
	tier := ""
	if e.Stage != nil {
		tier = e.Stage.Tier
	}
	d.add("request_ended answered=%v tier=%s degraded=%v calls=%d", e.Answered, tier, e.Degraded, e.UpstreamCalls)
}

func TestLatencyMeasuredOnRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := newFake("pro", step{fn: func(context.Context) (string, error) {
			time.Sleep(40 * time.Millisecond)
			return "deep", nil
		}})
		c := newChain(t, fallback.Config[string, string]{Stages: stages(slow), MeasureLatency: true})
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, 40*time.Millisecond, res.Attempts()[0].Latency)
	})
}

func TestResultDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newChain(t, fallback.Config[string, string]{Stages: stages(newFake("pro", ok("x"))), Total: 3 * time.Second})
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		d, has := res.Deadline()
		require.True(t, has)
		assert.Equal(t, 3*time.Second, time.Until(d))

		c = newChain(t, fallback.Config[string, string]{Stages: stages(newFake("pro", ok("x")))})
		res, _ = c.Do(context.Background(), "q")
		_, has = res.Deadline()
		assert.False(t, has)
	})
}

func TestBudgetSkipGoesToLocalAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pro := newFake("pro", ok("deep"))
		c := newChain(t, fallback.Config[string, string]{
			Stages:  []fallback.Stage[string, string]{{Tier: pro, MinAttempt: time.Second}},
			Default: func(context.Context, string) (string, bool) { return "default", true },
		})
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		res, err := c.Do(ctx, "q")
		require.NoError(t, err)
		assert.Equal(t, "default", res.Value)
		assert.Zero(t, pro.calls.Load(), "no attempt starts without a useful amount of time")
		assert.Equal(t, fallback.SkipBudget, res.Attempts()[0].Skip)

		c = newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: pro, MinAttempt: time.Second}}})
		_, err = c.Do(ctx, "q")
		assert.ErrorIs(t, err, deadline.ErrExhausted)
	})
}

func TestTrailSpillsPastInlineCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: newFake("pro", fails(classify.Transient)), Retry: retry.Policy{MaxAttempts: 4, BaseDelay: time.Millisecond}},
			{Tier: newFake("flash", ok("quick"))},
		}})
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		got := res.Attempts()
		require.Len(t, got, 5)
		for i := range 4 {
			assert.Equal(t, "pro", got[i].Tier)
			assert.Equal(t, i+1, got[i].N)
		}
		assert.Equal(t, "flash", got[4].Tier)
	})
}

// TestRetriesStopWhenTheBreakerOpens: a request admitted while the breaker
// was closed stops retrying once the breaker has opened — here while it
// slept before its retry.
func TestRetriesStopWhenTheBreakerOpens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		br := newBreaker(t, breaker.Config{Name: "pro", Cooldown: time.Hour})
		rateLimited := classify.Wrap(errors.New("429"), classify.Verdict{Class: classify.RateLimited, RetryAfter: time.Second})
		pro := newFake("pro", step{err: rateLimited})
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: pro, Breaker: br, Retry: retry.Policy{MaxAttempts: 3}},
			{Tier: newFake("flash", ok("quick"))},
		}})
		go func() {
			time.Sleep(500 * time.Millisecond) // other requests trip it meanwhile
			br.ForceOpen()
		}()
		start := time.Now()
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "quick", res.Value)
		assert.Equal(t, int64(1), pro.calls.Load(), "no retry into the open circuit")
		assert.Equal(t, time.Second, time.Since(start), "it noticed after its sleep")

		// Opened before the decision: no sleep at all.
		br.Reset()
		slow := newFake("pro", step{fn: func(context.Context) (string, error) {
			br.ForceOpen()
			return "", rateLimited
		}})
		c = newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: slow, Breaker: br, Retry: retry.Policy{MaxAttempts: 3}},
			{Tier: newFake("flash", ok("quick"))},
		}})
		start = time.Now()
		_, err = c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, int64(1), slow.calls.Load())
		assert.Zero(t, time.Since(start))
	})
}

// TestBudgetSkipTakesNoGuard: a request that cannot make a useful attempt
// does not take a bulkhead slot or a half-open probe.
func TestBudgetSkipTakesNoGuard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bh := newBulkhead(t, "pro", 1)
		br := newBreaker(t, breaker.Config{Name: "pro", ConsecutiveFailures: 1, Cooldown: time.Second})
		tok, _ := br.Allow()
		tok.Done(breaker.Failure)
		time.Sleep(time.Second)
		synctest.Wait()
		require.Equal(t, breaker.HalfOpen, br.State())

		c := newChain(t, fallback.Config[string, string]{
			Stages:  []fallback.Stage[string, string]{{Tier: newFake("pro", ok("x")), Bulkhead: bh, Breaker: br, MinAttempt: time.Second}},
			Default: func(context.Context, string) (string, bool) { return "default", true },
		})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		res, err := c.Do(ctx, "q")
		require.NoError(t, err)
		assert.Equal(t, fallback.SkipBudget, res.Attempts()[0].Skip)
		assert.Equal(t, uint64(0), bh.Stats().Accepted, "no slot taken")
		probe, err := br.Allow()
		require.NoError(t, err, "no probe taken")
		probe.Done(breaker.Ignored)
	})
}

func TestWaitIsRecordedOnlyWhenARetryFollows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rateLimited := classify.Wrap(errors.New("429"), classify.Verdict{Class: classify.RateLimited, RetryAfter: 5 * time.Second})
		c := newChain(t, fallback.Config[string, string]{Stages: stages(newFake("pro", step{err: rateLimited}), newFake("flash", ok("quick"))), Total: time.Second})
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Zero(t, res.Attempts()[0].Wait, "no retry followed: no wait")
	})
}

// TestFallbackIsNotSkippedAfterAStalledPrimary: the primary's attempt uses
// its whole share; the time it takes to give up must not leave the fallback
// a hair short of its minimum.
func TestFallbackIsNotSkippedAfterAStalledPrimary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stalled := newFake("pro", step{fn: func(ctx context.Context) (string, error) {
			<-ctx.Done()
			time.Sleep(5 * time.Millisecond) // slow to notice the cancel
			return "", ctx.Err()
		}})
		c := newChain(t, fallback.Config[string, string]{
			Stages: []fallback.Stage[string, string]{{Tier: stalled, Retry: retry.Policy{MaxAttempts: 1}}, {Tier: newFake("flash", ok("quick"))}},
			Total:  time.Second,
		})
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "flash", res.Tier)
	})
}

// TestLateTimeoutStillCountsAgainstTheBreaker: a tier that returns after the
// request's deadline, having blown its own per-try deadline, is a per-try
// timeout (Transient, counted), not the end of the budget (ignored).
func TestLateTimeoutStillCountsAgainstTheBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		br := newBreaker(t, breaker.Config{Name: "pro", ConsecutiveFailures: 1})
		slow := newFake("pro", step{fn: func(ctx context.Context) (string, error) {
			<-ctx.Done()
			time.Sleep(2 * time.Second) // returns long after the request's deadline
			return "", ctx.Err()
		}})
		c := newChain(t, fallback.Config[string, string]{
			Stages: []fallback.Stage[string, string]{{Tier: slow, Breaker: br, TryTimeout: 300 * time.Millisecond, Retry: retry.Policy{MaxAttempts: 1}}},
			Total:  time.Second,
		})
		_, err := c.Do(context.Background(), "q")
		require.Error(t, err)
		assert.Equal(t, breaker.Open, br.State(), "the slow tier counts against its breaker")
	})
}
