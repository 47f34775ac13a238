package fallback_test

import (
	"context"
	"errors"
	"iter"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/pool"
	"github.com/tierguard/tierguard/internal/testbed/reported"
	"github.com/tierguard/tierguard/retry"
)

// A hedge that finds no member to go to — the pool's other key cooling
// down after a 429 naming its per-minute quota — makes no upstream call: it is a skip on the trail,
// marked Hedge, told to observers as a TierSkip, never an AttemptEnd (an
// AttemptEnd is a call to a cost ledger), and the hedge budget it took
// goes back.
func TestHedgeWithNoMemberIsASkipNotACall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var aCalls, bCalls atomic.Int64
		slowA := slowTier("a", &aCalls, func() time.Duration { return 200 * time.Millisecond })
		limitedB := fallback.Tier("b", func(context.Context, string) (string, error) {
			bCalls.Add(1)
			return "", perMinute429(time.Minute)
		})
		thePool, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
			{Key: "key-a", Tier: slowA}, {Key: "key-b", Tier: limitedB},
		}})
		require.NoError(t, err)
		var obs events
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: thePool, Retry: retry.Policy{MaxAttempts: 1}, Hedge: fallback.Hedge{Delay: 50 * time.Millisecond, MaxExtra: 1}},
		}, Observer: &obs})

		upstream := 0
		for range 3 {
			res, err := c.Do(context.Background(), "q")
			require.NoError(t, err)
			upstream += res.UpstreamCalls
		}
		synctest.Wait()
		calls := aCalls.Load() + bCalls.Load()
		assert.Equal(t, int64(1), bCalls.Load(), "b cools down after its one 429")
		assert.Equal(t, calls, int64(upstream), "Result.UpstreamCalls counts the tiers' own calls")
		assert.Len(t, reported.Of[fallback.AttemptEnd](&obs), int(calls), "one AttemptEnd per upstream call, and only then")

		// The last request: a's call answered, its hedge found b cooling.
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		a := res.Attempts()
		require.Len(t, a, 2, "the call and the hedge's skip")
		call, skip := a[0], a[1]
		if call.Hedge {
			call, skip = skip, call
		}
		assert.Equal(t, fallback.NotSkipped, call.Skip)
		assert.Equal(t, classify.OK, call.Verdict.Class)
		assert.True(t, skip.Hedge)
		assert.Equal(t, fallback.SkipRateLimited, skip.Skip, "the hedge's member was cooling")
		assert.Zero(t, skip.N, "a skip has no attempt number")
		assert.Equal(t, 1, res.UpstreamCalls)
		var hedgeSkips, hedgeCalls int
		for _, s := range reported.Of[fallback.TierSkip](&obs) {
			if s.Hedge {
				hedgeSkips++
				assert.Equal(t, fallback.SkipRateLimited, s.Skip)
			}
		}
		for _, e := range reported.Of[fallback.AttemptEnd](&obs) {
			if e.Hedge {
				hedgeCalls++
			}
		}
		assert.Equal(t, 4, hedgeSkips+hedgeCalls, "each of the four requests hedged once: on b while it was in rotation, a skip after")
		assert.Positive(t, hedgeSkips)
	})
}

// A chain stopped by its caller's cancel returns an error that matches
// context.Canceled, whatever the tier returned on its way out — its own
// error, a wrapped one, nothing — and wherever the cancel found the
// request: in a call, in a backoff, in a bulkhead's queue, in a shared
// execution, on a stream.
func TestCallerCancelMatchesContextCanceled(t *testing.T) {
	ownErr := errors.New("connection reset by peer")
	cases := map[string]func(ctx context.Context) error{
		"the tier's own error": func(ctx context.Context) error { <-ctx.Done(); return ownErr },
		"a wrapped transient": func(ctx context.Context) error {
			<-ctx.Done()
			return classify.Wrap(ownErr, classify.Verdict{Class: classify.Transient, HTTPStatus: 503, Reason: "scripted"})
		},
		"ctx.Err":  func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() },
		"deadline": func(ctx context.Context) error { <-ctx.Done(); return context.DeadlineExceeded },
	}
	for name, call := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
					{Tier: fallback.Tier("pro", func(ctx context.Context, _ string) (string, error) { return "", call(ctx) })},
					{Tier: newFake("flash", ok("flash"))},
				}, Default: func(context.Context, string) (string, bool) { return "default", true }})
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(10*time.Millisecond, cancel)
				_, err := c.Do(ctx, "q")
				require.Error(t, err)
				assert.ErrorIs(t, err, context.Canceled)
				assert.Equal(t, classify.Canceled, classify.Classify(err).Class)
			})
		})
	}
	t.Run("in a backoff", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
				{Tier: newFake("pro", fails(classify.Transient)), Retry: retry.Policy{MaxAttempts: 3, BaseDelay: time.Second, MaxDelay: time.Second}},
			}})
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(10*time.Millisecond, cancel)
			_, err := c.Do(ctx, "q")
			assert.ErrorIs(t, err, context.Canceled)
		})
	})
	t.Run("in a bulkhead's queue", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			bh, err := bulkhead.New(bulkhead.Config{Name: "pro", Max: 1, Queue: 1, MaxWait: time.Minute})
			require.NoError(t, err)
			require.NoError(t, bh.Acquire(context.Background()))
			defer bh.Release()
			c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
				{Tier: newFake("pro", ok("pro")), Bulkhead: bh},
			}})
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(10*time.Millisecond, cancel)
			_, err = c.Do(ctx, "q")
			assert.ErrorIs(t, err, context.Canceled)
		})
	})
	t.Run("shared execution", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
				{Tier: fallback.Tier("pro", func(ctx context.Context, _ string) (string, error) { <-ctx.Done(); return "", ownErr })},
			}, Key: func(in string) string { return in }})
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(10*time.Millisecond, cancel)
			_, err := c.Do(ctx, "q")
			assert.ErrorIs(t, err, context.Canceled)
		})
	})
	t.Run("stream", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			pro := fallback.StreamTierFunc("pro", func(ctx context.Context, _ string) iter.Seq2[chunk, error] {
				return func(yield func(chunk, error) bool) { <-ctx.Done(); yield(chunk{}, ownErr) }
			}, inspect)
			c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: pro}}})
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(10*time.Millisecond, cancel)
			_, err := collect(c.Stream(ctx, "q"))
			assert.ErrorIs(t, err, context.Canceled)
		})
	})
	t.Run("not when the caller did not cancel", func(t *testing.T) {
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: newFake("pro", step{err: context.Canceled}), Retry: retry.Policy{MaxAttempts: 1}},
		}})
		_, err := c.Do(context.Background(), "q")
		require.Error(t, err)
		var fe *fallback.Error
		require.ErrorAs(t, err, &fe)
		assert.NotEqual(t, classify.Canceled, fe.Cause.Class, "a cancel below the caller is not the caller's")
	})
}

// usageTierOld is a tier written for the release before fallback.Report:
// it still says its usage and its model through methods the chain no
// longer calls.
type usageTierOld struct {
	fallback.ModelTier[string, string]
}

func (usageTierOld) Usage(string) (fallback.Usage, bool) { return fallback.Usage{InputTokens: 1}, true }
func (usageTierOld) Response(string) (fallback.ResponseInfo, bool) {
	return fallback.ResponseInfo{}, false
}

type modelForTierOld struct {
	fallback.ModelTier[string, string]
}

func (modelForTierOld) ModelFor(string) string { return "gemini-2.5-pro" }

type chunkUsageTierOld struct {
	fallback.StreamTier[string, chunk]
}

func (chunkUsageTierOld) ChunkUsage(chunk) (fallback.Usage, bool) { return fallback.Usage{}, false }

// wrapper is a decorator that says what it wraps.
type wrapper struct {
	fallback.ModelTier[string, string]
}

func (w wrapper) Unwrap() any { return w.ModelTier }

// New refuses a tier that still has a method of a removed contract —
// itself or under any depth of decorators — naming the method and what to
// write instead: such a tier would be billed $0 or park its whole tier on
// one model's 404, silently.
func TestNewRefusesTiersWrittenForRemovedContracts(t *testing.T) {
	plain := newFake("pro", ok("x"))
	for name, tc := range map[string]struct {
		tier fallback.ModelTier[string, string]
		want []string
	}{
		"Usage and Response": {usageTierOld{plain}, []string{"method Usage ", "method Response ", "fallback.Report"}},
		"ModelFor":           {modelForTierOld{plain}, []string{"method ModelFor ", "stage's ModelFor"}},
		"wrapped twice":      {wrapper{wrapper{usageTierOld{plain}}}, []string{"method Usage ", "usageTierOld"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: tc.tier}}})
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	t.Run("stream", func(t *testing.T) {
		pro := &streamFake{name: "pro", def: streamScript{chunks: words("a"), finishing: true}}
		_, err := fallback.NewStream(fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: chunkUsageTierOld{pro.tier()}}}})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "method ChunkUsage ")
	})
	t.Run("a method of another shape is the tier's own business", func(t *testing.T) {
		_, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: unrelatedUsage{plain}}}})
		assert.NoError(t, err)
	})
}

type unrelatedUsage struct {
	fallback.ModelTier[string, string]
}

func (unrelatedUsage) Usage() string { return "a report of its own" }

// A stage that sets its own ModelFor knows each call's model: a tier
// method of the old shape is then harmless (it is often what the stage
// was set to).
func TestModelForMethodIsFineWithTheStagesOwn(t *testing.T) {
	tier := modelForTierOld{newFake("pro", ok("x"))}
	_, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: tier, ModelFor: tier.ModelFor}}})
	assert.NoError(t, err)
}

// callCounter counts the upstream calls observers are told of: one per
// AttemptEnd, and a LateReply's Calls.
type callCounter struct {
	fallback.NopObserver
	ends, late atomic.Int64
}

func (c *callCounter) AttemptEnded(context.Context, fallback.AttemptEnd) { c.ends.Add(1) }
func (c *callCounter) LateReplyReceived(_ context.Context, e fallback.LateReply) {
	c.late.Add(int64(e.Calls))
}

// Under 64 concurrent callers, with hedges that start as the first call
// answers, hedges still calling when their race ends and hedges whose pool
// has no member left, observers are told of every upstream call exactly
// once: an AttemptEnd for each call settled with its attempt, a LateReply's
// Calls for each call of a hedge settled when it returned.
func TestEveryUpstreamCallIsToldOnce(t *testing.T) {
	for _, next := range []bool{false, true} {
		name := "hedge on another member"
		if next {
			name = "hedge on the next tier"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls, n atomic.Int64
				// Latencies land on the hedge delay, just after it and far
				// after it; one call in seven is a 429 that cools its key.
				member := func(name string) fallback.ModelTier[string, string] {
					return fallback.Tier(name, func(ctx context.Context, _ string) (string, error) {
						calls.Add(1)
						k := n.Add(1)
						if k%7 == 0 {
							return "", classify.Wrap(errors.New("429"), classify.Verdict{Class: classify.RateLimited, HTTPStatus: 429, RetryAfter: 30 * time.Millisecond, Reason: "scripted"})
						}
						select {
						case <-time.After([]time.Duration{50, 51, 200, 10}[k%4] * time.Millisecond):
							return name, nil
						case <-ctx.Done():
							return "", ctx.Err()
						}
					})
				}
				thePool, err := pool.New(pool.Config[string, string]{Name: "pool", Members: []pool.Member[string, string]{
					{Key: "key-a", Tier: member("a")}, {Key: "key-b", Tier: member("b")},
				}})
				require.NoError(t, err)
				first, second := fallback.ModelTier[string, string](thePool), member("flash")
				if next {
					first, second = member("pro"), thePool
				}
				var obs callCounter
				c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
					{Tier: first, Retry: retry.Policy{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}, Hedge: fallback.Hedge{Delay: 50 * time.Millisecond, MaxExtra: 1}},
					{Tier: second},
				}, Observer: &obs, Default: func(context.Context, string) (string, bool) { return "default", true }})
				var wg sync.WaitGroup
				var inBand atomic.Int64
				for range 64 {
					wg.Go(func() {
						for range 10 {
							res, _ := c.Do(context.Background(), "q")
							inBand.Add(int64(res.UpstreamCalls))
						}
					})
				}
				wg.Wait()
				synctest.Wait()
				assert.Equal(t, calls.Load(), obs.ends.Load()+obs.late.Load(), "AttemptEnds %d, late %d", obs.ends.Load(), obs.late.Load())
				assert.Equal(t, obs.ends.Load(), inBand.Load(), "Result.UpstreamCalls counts what was settled with the attempt")
			})
		})
	}
}

// slowCache is a cache whose write-back takes as long as its context
// lets it.
type slowCache struct {
	deadline time.Time
	has      bool
}

func (c *slowCache) Get(context.Context, string) (string, string, bool) { return "", "", false }
func (c *slowCache) Put(ctx context.Context, _, _ string) {
	c.deadline, c.has = ctx.Deadline()
	<-ctx.Done()
}

func (c *slowCache) streamCache() fallback.StreamCache[string, chunk] { return slowStreamCache{c} }

type slowStreamCache struct{ c *slowCache }

func (s slowStreamCache) Get(context.Context, string) (chunk, string, bool) {
	return chunk{}, "", false
}
func (s slowStreamCache) Put(ctx context.Context, in, text string) { s.c.Put(ctx, in, text) }

// The cache's write-back is the request's work: its context ends with the
// chain's own Total, not only with the caller's deadline, so a slow Put
// cannot hold the request past its budget.
func TestCacheWriteBackIsBoundByTheChainsTotal(t *testing.T) {
	t.Run("unary", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cache := &slowCache{}
			c := newChain(t, fallback.Config[string, string]{Total: 200 * time.Millisecond,
				Stages: []fallback.Stage[string, string]{{Tier: slowTier("pro", new(atomic.Int64), func() time.Duration { return 50 * time.Millisecond })}},
				Cache:  cache})
			start := time.Now()
			_, err := c.Do(context.Background(), "q")
			require.NoError(t, err)
			require.True(t, cache.has, "Put's context has the request's deadline")
			assert.Equal(t, start.Add(200*time.Millisecond), cache.deadline)
			assert.Equal(t, 200*time.Millisecond, time.Since(start), "the write-back ends with the budget")
		})
	})
	t.Run("stream", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cache := &slowCache{}
			pro := &streamFake{name: "pro", def: streamScript{chunks: words("a", "b"), finishing: true}}
			c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Total: 200 * time.Millisecond,
				Stages: []fallback.StreamStage[string, chunk]{{Tier: pro.tier()}}, Cache: cache.streamCache()})
			start := time.Now()
			_, err := collect(c.Stream(context.Background(), "q"))
			require.NoError(t, err)
			require.True(t, cache.has)
			assert.Equal(t, 200*time.Millisecond, time.Since(start))
		})
	})
}

// A hedge starts only with at least its tier's MinAttempt left: under a
// 100 ms Total a hedge due 10 ms in is not made with the default 100 ms
// MinAttempt, and is with a MinAttempt of 20 ms.
func TestHedgeNeedsTheStagesMinAttempt(t *testing.T) {
	for _, tc := range []struct {
		minAttempt time.Duration
		calls      int64
	}{{0, 1}, {20 * time.Millisecond, 2}} {
		t.Run("MinAttempt="+tc.minAttempt.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var aCalls, bCalls atomic.Int64
				slow := func() time.Duration { return 60 * time.Millisecond }
				thePool, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
					{Key: "key-a", Tier: slowTier("a", &aCalls, slow)}, {Key: "key-b", Tier: slowTier("b", &bCalls, slow)},
				}})
				require.NoError(t, err)
				c := newChain(t, fallback.Config[string, string]{Total: 100 * time.Millisecond, Stages: []fallback.Stage[string, string]{
					{Tier: thePool, MinAttempt: tc.minAttempt, Retry: retry.Policy{MaxAttempts: 1}, Hedge: fallback.Hedge{Delay: 10 * time.Millisecond, MaxExtra: 1}},
				}})
				_, err = c.Do(context.Background(), "q")
				require.NoError(t, err)
				synctest.Wait()
				assert.Equal(t, tc.calls, aCalls.Load()+bCalls.Load())
			})
		})
	}
}
