package fallback_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// TestRequestJoiningACancelledFlightStartsAFreshOne: once every waiter of a
// shared execution has left, the execution is cancelled; a request with the
// same key that arrives before it has wound down must not inherit its
// cancellation. Found by reading shared.go for the chaos soak: such a
// request used to get "failed closed (canceled: canceled by caller)"
// although its caller cancelled nothing.
func TestRequestJoiningACancelledFlightStartsAFreshOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		pro := fallback.Tier("pro", func(ctx context.Context, in string) (string, error) {
			if calls.Add(1) > 1 {
				return "answer to " + in, nil
			}
			<-ctx.Done()
			time.Sleep(10 * time.Millisecond) // winds down after its cancel
			return "", ctx.Err()
		})
		c := newChain(t, fallback.Config[string, string]{Stages: stages(pro), Key: func(in string) string { return in }})
		ctx1, cancel1 := context.WithCancel(context.Background())
		first := make(chan error)
		go func() {
			_, err := c.Do(ctx1, "q")
			first <- err
		}()
		synctest.Wait()
		cancel1()
		assert.ErrorIs(t, <-first, context.Canceled)

		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err, "the second caller cancelled nothing")
		assert.Equal(t, "answer to q", res.Value)
		assert.False(t, res.Shared, "it ran its own execution")
		assert.Equal(t, int64(2), calls.Load())
		time.Sleep(10 * time.Millisecond) // the first execution winds down
	})
}

// TestSharedWaiterOutOfTimeIsAnsweredLocally: a waiter whose own deadline
// passes before the shared execution ends gets the cache or the default,
// as a request of its own would (DeadlineExhausted routes to local
// answers), not a fail-closed error.
func TestSharedWaiterOutOfTimeIsAnsweredLocally(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := fallback.Tier("pro", func(ctx context.Context, in string) (string, error) {
			select {
			case <-time.After(time.Second):
				return "deep answer", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		})
		c := newChain(t, fallback.Config[string, string]{
			Stages:  stages(slow),
			Key:     func(in string) string { return in },
			Default: func(context.Context, string) (string, bool) { return "default", true },
		})
		var wg sync.WaitGroup
		wg.Go(func() {
			res, err := c.Do(context.Background(), "q")
			assert.NoError(t, err)
			assert.Equal(t, "deep answer", res.Value)
		})
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		res, err := c.Do(ctx, "q")
		require.NoError(t, err)
		assert.Equal(t, 100*time.Millisecond, time.Since(start))
		assert.Equal(t, "default", res.Value)
		assert.Equal(t, fallback.SourceDefault, res.Source)
		assert.True(t, res.Degraded)
		wg.Wait()

		// Without a local answer: a DeadlineExhausted error, not failed closed.
		c = newChain(t, fallback.Config[string, string]{Stages: stages(slow), Key: func(in string) string { return in }})
		wg.Go(func() { _, _ = c.Do(context.Background(), "q") })
		synctest.Wait()
		ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel2()
		_, err = c.Do(ctx2, "q")
		var fe *fallback.Error
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, classify.DeadlineExhausted, fe.Cause.Class)
		assert.False(t, fe.FailedClosed, "the local answers were tried")
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		wg.Wait()
	})
}

// TestSharedWaiterErrorDoesNotQuoteTheKey: the idempotency key is the
// caller's data, often the prompt itself or derived from it; the error of a
// waiter that gave up names no part of it. Found by the chaos soak.
func TestSharedWaiterErrorDoesNotQuoteTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pro := fallback.Tier("pro", func(ctx context.Context, in string) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		})
		c := newChain(t, fallback.Config[string, string]{Stages: stages(pro), Key: func(in string) string { return in }})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			_, err := c.Do(ctx, "PROMPT-SECRET-summarise my diagnosis")
			done <- err
		}()
		synctest.Wait()
		cancel()
		err := <-done
		require.ErrorIs(t, err, context.Canceled)
		assert.NotContains(t, err.Error(), "SECRET")
		var fe *fallback.Error
		require.ErrorAs(t, err, &fe)
		assert.True(t, fe.FailedClosed, "the caller cancelled: fail closed")
	})
}

// TestAFailureClassifiedOKIsNotASuccess: a classifier rule that returns a
// verdict without a class (the zero value, OK) for a tier's error must not
// make the breaker count the failure as a success, nor the error read
// "failed: ok". Found by fuzzing error chains for the chaos soak.
func TestAFailureClassifiedOKIsNotASuccess(t *testing.T) {
	br := newBreaker(t, breaker.Config{Name: "pro", ConsecutiveFailures: 2})
	sloppy := classify.New(func(error) (classify.Verdict, bool) { return classify.Verdict{HTTPStatus: 418}, true })
	pro := newFake("pro", step{err: errors.New("teapot")})
	c := newChain(t, fallback.Config[string, string]{
		Stages:     []fallback.Stage[string, string]{{Tier: pro, Breaker: br}, {Tier: newFake("flash", ok("quick"))}},
		Classifier: sloppy,
	})
	for range 2 {
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "quick", res.Value)
		assert.Equal(t, classify.Unknown, res.Attempts()[0].Verdict.Class)
	}
	assert.Equal(t, breaker.Open, br.State(), "two failures in a row trip the breaker")
}

// TestAbsurdRetryAfterMovesOnAtOnce: an error whose own verdict asks for a
// wait of math.MaxInt64 (an SDK adapter's, a custom classifier's) sends the
// request to the next tier at once. It used to overflow the budget check
// and sleep until the deadline, skipping every later tier. Found by the
// chaos soak.
func TestAbsurdRetryAfterMovesOnAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		absurd := classify.Wrap(errors.New("429"), classify.Verdict{Class: classify.RateLimited, HTTPStatus: 429, RetryAfter: math.MaxInt64})
		pro := newFake("pro", step{err: absurd})
		c := newChain(t, fallback.Config[string, string]{Stages: stages(pro, newFake("flash", ok("quick"))), Total: 10 * time.Second})
		start := time.Now()
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "quick", res.Value)
		assert.Zero(t, time.Since(start))
		assert.Equal(t, int64(1), pro.calls.Load())
	})
}

// TestRetryAfterOfABillionSecondsMovesOnAtOnce: "Retry-After: 1000000000"
// on a real-shaped 429 is capped, cannot fit the budget, and the next tier
// answers at once.
func TestRetryAfterOfABillionSecondsMovesOnAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pro := newFake("pro", step{err: &classify.HTTPError{Facts: classify.Facts{HTTPStatus: 429, Status: "RESOURCE_EXHAUSTED", RetryAfterHeader: "1000000000"}}})
		c := newChain(t, fallback.Config[string, string]{Stages: stages(pro, newFake("flash", ok("quick"))), Total: time.Minute})
		start := time.Now()
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "quick", res.Value)
		assert.Zero(t, time.Since(start))
		assert.Equal(t, classify.MaxRetryAfter, res.Attempts()[0].Verdict.RetryAfter)
	})
}

// TestZeroValueWithNilErrorIsCaughtByTheValidator: a tier that returns ""
// and a nil error is not an answer when a validator says so: the next tier
// answers, the breaker does not count it, the cache does not keep it.
func TestZeroValueWithNilErrorIsCaughtByTheValidator(t *testing.T) {
	br := newBreaker(t, breaker.Config{Name: "pro", ConsecutiveFailures: 1})
	cache := &mapCache{}
	c := newChain(t, fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{
			{Tier: newFake("pro", ok("")), Breaker: br, Validate: validate.NonEmpty()},
			{Tier: newFake("flash", ok("quick")), Validate: validate.NonEmpty()},
		},
		Cache: cache,
	})
	res, err := c.Do(context.Background(), "q")
	require.NoError(t, err)
	assert.Equal(t, "quick", res.Value)
	assert.Equal(t, classify.InvalidOutput, res.Attempts()[0].Verdict.Class)
	assert.Equal(t, breaker.Closed, br.State())
	assert.Equal(t, map[string]string{"q": "quick"}, cache.m)

	// Without a validator, the chain cannot know: the zero value is the answer.
	c = newChain(t, fallback.Config[string, string]{Stages: stages(newFake("pro", ok("")))})
	res, err = c.Do(context.Background(), "q")
	require.NoError(t, err)
	assert.Empty(t, res.Value)
}

// TestPanicInDetachedCallReleasesGuards: with AbandonAfter set the call
// runs on its own goroutine; its panic still reaches the caller, and the
// bulkhead slot and the half-open probe are released.
func TestPanicInDetachedCallReleasesGuards(t *testing.T) {
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
		c := newChain(t, fallback.Config[string, string]{
			Stages:       []fallback.Stage[string, string]{{Tier: boom, Bulkhead: bh, Breaker: br, TryTimeout: time.Second}},
			AbandonAfter: 100 * time.Millisecond,
		})
		for range 3 {
			assertCarriedPanic(t, "tier exploded", func() { _, _ = c.Do(context.Background(), "q") })
			assert.Zero(t, bh.Stats().InFlight, "no slot leaked")
			assert.Equal(t, breaker.HalfOpen, br.State(), "a panic decides nothing")
		}
		assert.Equal(t, fallback.Stats{}, c.Stats(), "nothing abandoned, nothing stuck")
		probe, err := br.Allow()
		require.NoError(t, err, "no probe leaked")
		probe.Done(breaker.Ignored)
	})
}

// TestSharedPanicReachesEveryConcurrentWaiter: a panic in a shared
// execution is re-raised in every waiter, the idempotency entry is
// removed, and the guards are released.
func TestSharedPanicReachesEveryConcurrentWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var calls atomic.Int64
		bh := newBulkhead(t, "pro", 1)
		boom := fallback.Tier("pro", func(context.Context, string) (string, error) {
			calls.Add(1)
			<-release
			panic("tier exploded")
		})
		c := newChain(t, fallback.Config[string, string]{
			Stages: []fallback.Stage[string, string]{{Tier: boom, Bulkhead: bh}},
			Key:    func(in string) string { return in },
		})
		const waiters = 8
		var panics atomic.Int64
		var wg sync.WaitGroup
		for range waiters {
			wg.Go(func() {
				defer func() {
					if p := recover(); p != nil {
						pe, ok := p.(*fallback.PanicError)
						if assert.True(t, ok, "carried across goroutines as a *PanicError: %v", p) {
							assert.Equal(t, "tier exploded", pe.Value, "the tier's own panic value")
							assert.Contains(t, string(pe.Stack), "hostile_test.go", "with the stack where it happened")
						}
						panics.Add(1)
					}
				}()
				_, _ = c.Do(context.Background(), "q")
			})
		}
		synctest.Wait()
		close(release)
		wg.Wait()
		assert.Equal(t, int64(waiters), panics.Load(), "every waiter")
		assert.Equal(t, int64(1), calls.Load(), "one execution")
		assert.Zero(t, bh.Stats().InFlight)
		// The entry is gone: the next request runs again.
		assert.Panics(t, func() { _, _ = c.Do(context.Background(), "q") })
		assert.Equal(t, int64(2), calls.Load())
	})
}

// TestStuckLastTierAnswersAtTheDeadline: the last tier ignores its context
// and never returns; with AbandonAfter the request still answers (from the
// default) AbandonAfter after its deadline, and the stuck call is counted
// and keeps its slot until it returns.
func TestStuckLastTierAnswersAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		never := make(chan struct{})
		bh := newBulkhead(t, "lite", 3)
		stuck := fallback.Tier("lite", func(context.Context, string) (string, error) {
			<-never
			return "too late", nil
		})
		c := newChain(t, fallback.Config[string, string]{
			Stages:       []fallback.Stage[string, string]{{Tier: newFake("pro", fails(classify.Transient)), Retry: retry.Policy{MaxAttempts: 1}}, {Tier: stuck, Bulkhead: bh}},
			Default:      func(context.Context, string) (string, bool) { return "default", true },
			AbandonAfter: 50 * time.Millisecond,
		})
		for i := 1; i <= 3; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			start := time.Now()
			res, err := c.Do(ctx, "q")
			cancel()
			require.NoError(t, err)
			assert.Equal(t, "default", res.Value)
			assert.Equal(t, time.Second+50*time.Millisecond, time.Since(start), "the deadline plus AbandonAfter")
			assert.Equal(t, fallback.Stats{Abandoned: uint64(i), Stuck: int64(i)}, c.Stats())
			assert.Equal(t, i, bh.Stats().InFlight)
		}
		// The bulkhead is full of stuck calls: the tier is skipped at once.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		start := time.Now()
		res, err := c.Do(ctx, "q")
		cancel()
		require.NoError(t, err)
		assert.Zero(t, time.Since(start))
		assert.Equal(t, fallback.SkipFull, res.Attempts()[1].Skip)

		close(never)
		synctest.Wait()
		assert.Equal(t, fallback.Stats{Abandoned: 3}, c.Stats())
		assert.Zero(t, bh.Stats().InFlight)
	})
}

// TestConfigErrorsNameTheirField: every invalid field is named in the
// error New returns.
func TestConfigErrorsNameTheirField(t *testing.T) {
	tier := newFake("pro", ok("x"))
	for field, cfg := range map[string]fallback.Config[string, string]{
		"at least one stage":                 {},
		"Total":                              {Stages: stages(tier), Total: -time.Second},
		"MinAttempt":                         {Stages: stages(tier), MinAttempt: -1},
		"QuotaCooldown":                      {Stages: stages(tier), QuotaCooldown: -1},
		"RetiredRecheck":                     {Stages: stages(tier), RetiredRecheck: -1},
		"AbandonAfter":                       {Stages: stages(tier), AbandonAfter: -1},
		"TryTimeout":                         {Stages: []fallback.Stage[string, string]{{Tier: tier, TryTimeout: -1}}},
		"stage 0 (pro): negative MinAttempt": {Stages: []fallback.Stage[string, string]{{Tier: tier, MinAttempt: -1}}},
		"MaxQuotaCooldown":                   {Stages: stages(tier), MaxQuotaCooldown: -1},
		"exceeds MaxQuotaCooldown":           {Stages: stages(tier), QuotaCooldown: time.Hour, MaxQuotaCooldown: time.Minute},
		"BaseDelay":                          {Stages: []fallback.Stage[string, string]{{Tier: tier, Retry: retry.Policy{BaseDelay: -1}}}},
		"tier name is empty":                 {Stages: stages(newFake("", ok("x")))},
	} {
		_, err := fallback.New(cfg)
		if assert.Error(t, err, field) {
			assert.True(t, strings.Contains(err.Error(), field), "%q does not name %s", err, field)
		}
	}
}
