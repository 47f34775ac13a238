package fallback_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"runtime"
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
	"github.com/tierguard/tierguard/internal/testbed/reported"
	"github.com/tierguard/tierguard/retry"
)

// TestHungLastTierTripsItsBreaker: with the primary failing fast and the
// last tier hanging until the request's deadline, the last tier's
// deadline-cut attempts count as timeouts, so its breaker opens and later
// requests stop waiting the whole deadline for it.
func TestHungLastTierTripsItsBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pro := newFake("pro", fails(classify.Transient))
		flash := newFake("flash", step{block: true})
		flashBreaker := newBreaker(t, breaker.Config{Name: "flash", ConsecutiveFailures: 5, Cooldown: time.Hour})
		c := newChain(t, fallback.Config[string, string]{
			Stages: []fallback.Stage[string, string]{
				{Tier: pro, Retry: retry.Policy{MaxAttempts: 1}},
				{Tier: flash, Breaker: flashBreaker, Retry: retry.Policy{MaxAttempts: 1}},
			},
			Total:   time.Second,
			Default: func(context.Context, string) (string, bool) { return "busy", true },
		})
		var waited time.Duration
		for range 50 {
			start := time.Now()
			res, err := c.Do(context.Background(), "q")
			require.NoError(t, err)
			assert.Equal(t, fallback.SourceDefault, res.Source)
			waited += time.Since(start)
		}
		assert.Equal(t, breaker.Open, flashBreaker.State(), "five hung calls opened it")
		assert.Equal(t, int64(5), flash.calls.Load(), "then flash is skipped without a call")
		assert.Equal(t, 5*time.Second, waited, "only the five requests that found it closed waited the deadline")
	})
}

// TestReserveFollowsWhatTheFallbackNeeds: a stalled primary with no
// TryTimeout and a healthy fallback that needs 40% of the budget. The
// default reserve starts at the fallback's MinAttempt and learns from the
// attempts the deadline cut short: after a couple of requests the
// fallback gets the time it needs, and keeps getting it.
func TestReserveFollowsWhatTheFallbackNeeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pro := newFake("pro", step{block: true})
		flash := newFake("flash", step{fn: func(ctx context.Context) (string, error) {
			select {
			case <-time.After(400 * time.Millisecond):
				return "flash", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}})
		c := newChain(t, fallback.Config[string, string]{Stages: stages(pro, flash), Total: time.Second})
		fromFlash := 0
		for range 200 {
			res, err := c.Do(context.Background(), "q")
			if err == nil && res.Tier == "flash" {
				fromFlash++
			}
		}
		assert.GreaterOrEqual(t, fromFlash, 198, "at most the first two requests teach the reserve")
	})
}

// TestGoexitInATierIsNotAnAnswer: runtime.Goexit in a tier called on its
// own goroutine (AbandonAfter, or a shared execution of Config.Key) ends the
// caller's goroutine too, as it would have without them — never a
// successful empty answer.
func TestGoexitInATierIsNotAnAnswer(t *testing.T) {
	for name, cfg := range map[string]fallback.Config[string, string]{
		"AbandonAfter": {AbandonAfter: time.Second},
		"Key":          {Key: func(in string) string { return in }},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg.Stages = stages(fallback.Tier("pro", func(context.Context, string) (string, error) {
					runtime.Goexit()
					return "never", nil
				}))
				c := newChain(t, cfg)
				returned, ended := false, make(chan struct{})
				go func() {
					defer close(ended)
					_, _ = c.Do(context.Background(), "q")
					returned = true
				}()
				<-ended
				assert.False(t, returned, "Do did not return: its goroutine ended as the tier's did")
			})
		})
	}
}

// TestGoexitEndsTheObservedRequest: a request that runtime.Goexit
// unwinds still ends for its observers (a span closed, an in-flight gauge
// back down), with the Goexit as its error — on a tier called on the
// caller's goroutine, or on one of the chain's.
func TestGoexitEndsTheObservedRequest(t *testing.T) {
	for name, cfg := range map[string]fallback.Config[string, string]{
		"direct":       {},
		"AbandonAfter": {AbandonAfter: time.Second},
		"Key":          {Key: func(in string) string { return in }},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var obs reported.Recorder
				cfg.Observer = &obs
				cfg.Stages = stages(fallback.Tier("pro", func(context.Context, string) (string, error) {
					runtime.Goexit()
					return "never", nil
				}))
				c := newChain(t, cfg)
				ended := make(chan struct{})
				go func() {
					defer close(ended)
					_, _ = c.Do(context.Background(), "q")
				}()
				<-ended
				synctest.Wait()
				assertEndedByPanic(t, &obs, "runtime.Goexit called")
			})
		})
	}
}

// TestQuickStartSuccessAllocatesOnce: the README's configuration — Total
// and a TryTimeout per stage — costs one allocation on the success path:
// the attempt's context, whose timer is armed only if the tier waits on it
// — and once observed as well.
func TestQuickStartSuccessAllocatesOnce(t *testing.T) {
	pro := fallback.Stage[string, string]{Tier: newFake("pro", ok("x")), TryTimeout: 8 * time.Second,
		Breaker: newBreaker(t, breaker.Config{Name: "pro"}), Bulkhead: newBulkhead(t, "pro", 8)}
	flash := fallback.Stage[string, string]{Tier: newFake("flash", ok("y")), TryTimeout: 3 * time.Second}
	c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{pro, flash}, Total: 10 * time.Second})
	allocs := testing.AllocsPerRun(200, func() { _, _ = c.Do(context.Background(), "q") })
	assert.LessOrEqual(t, allocs, 1.0)
	bare := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: newFake("pro", ok("x")),
		Breaker: newBreaker(t, breaker.Config{Name: "bare"}), Bulkhead: newBulkhead(t, "bare", 8)}}})
	assert.Zero(t, testing.AllocsPerRun(200, func() { _, _ = bare.Do(context.Background(), "q") }))
	// Observed, the attempt's call record is its context too: still one.
	c.Observe(fallback.NopObserver{})
	assert.Equal(t, 1.0, testing.AllocsPerRun(200, func() { _, _ = c.Do(context.Background(), "q") }))
}

// modelTier serves the model each input names, as a batch job does.
type modelTier struct {
	mu      sync.Mutex
	calls   map[string]int
	retired map[string]bool
}

func (m *modelTier) Name() string { return "batch" }

func (m *modelTier) ModelFor(in string) string { return strings.SplitN(in, "/", 2)[0] }

func (m *modelTier) Call(_ context.Context, in string) (string, error) {
	model := m.ModelFor(in)
	m.mu.Lock()
	m.calls[model]++
	m.mu.Unlock()
	if m.retired[model] {
		return "", classify.Wrap(errors.New("404"), classify.FromFacts(classify.Facts{HTTPStatus: 404,
			Message: "models/" + model + " is not found for API version v1beta, or is not supported for generateContent."}))
	}
	return "answer from " + model, nil
}

// batchTier is modelTier without ModelFor: it serves the model each input
// names, but the chain cannot ask it which.
type batchTier struct{ m *modelTier }

func (b batchTier) Name() string                                        { return "batch" }
func (b batchTier) Call(ctx context.Context, in string) (string, error) { return b.m.Call(ctx, in) }

// TestNotFoundWithoutAModelParksNothing: a 404 that names no model, on a
// stage with neither Model nor ModelFor, fails that request over and keeps
// the tier: in a batch where one job asked for a dead model id, every later
// job on a live model is answered (issue 46: 0 of 19 were, before).
func TestNotFoundWithoutAModelParksNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &modelTier{calls: map[string]int{}, retired: map[string]bool{"gpt-dead": true}}
		dead := classify.FromFacts(classify.Facts{HTTPStatus: 404, Code: "model_not_found",
			Message: "The model does not exist or you do not have access to it."})
		require.Equal(t, classify.Retired, dead.Class)
		require.Empty(t, dead.Model, "the message names no model")
		tier := &scriptedBatch{batchTier: batchTier{m: m}, dead: dead}
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: tier}, {Tier: newFake("next", ok("from next"))}}})
		res, err := c.Do(context.Background(), "gpt-dead/job-0")
		require.NoError(t, err)
		assert.Equal(t, "from next", res.Value, "the dead model's job fails over")
		answered := 0
		for i := 1; i <= 19; i++ {
			res, err := c.Do(context.Background(), fmt.Sprintf("gpt-live-%d/job-%d", i%3, i))
			require.NoError(t, err)
			if res.Value == fmt.Sprintf("answer from gpt-live-%d", i%3) {
				answered++
			}
		}
		assert.Equal(t, 19, answered, "every later job on a live model is answered by the tier")
		res, err = c.Do(context.Background(), "gpt-dead/job-20")
		require.NoError(t, err)
		assert.Equal(t, fallback.NotSkipped, res.Attempts()[0].Skip, "nothing parked: the dead model costs a call each time")
		assert.Equal(t, 2, m.calls["gpt-dead"])
	})
}

// scriptedBatch answers the dead model's jobs with a verdict that names no
// model, as OpenAI's model_not_found does.
type scriptedBatch struct {
	batchTier
	dead classify.Verdict
}

func (s *scriptedBatch) Call(ctx context.Context, in string) (string, error) {
	if s.m.retired[s.m.ModelFor(in)] {
		s.m.mu.Lock()
		s.m.calls[s.m.ModelFor(in)]++
		s.m.mu.Unlock()
		return "", classify.Wrap(errors.New("404"), s.dead)
	}
	return s.batchTier.Call(ctx, in)
}

// TestRetirementIsPerModel: a tier that takes its model from the input
// loses only the retired model to a 404: jobs naming live models keep
// being answered by it, and each retired model costs one upstream call.
func TestRetirementIsPerModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tier := &modelTier{calls: map[string]int{}, retired: map[string]bool{"gemini-1.0-pro": true, "gemini-1.5-pro-001": true}}
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: tier, Model: "gemini-2.5-flash", ModelFor: tier.ModelFor}}})
		models := []string{"gemini-2.5-flash", "gemini-2.5-pro", "gemini-1.0-pro", "gemini-2.5-flash-lite", "gemini-1.5-pro-001"}
		answered, skipped := 0, 0
		for i := range 200 {
			model := models[i%len(models)]
			res, err := c.Do(context.Background(), fmt.Sprintf("%s/job-%d", model, i))
			if err == nil {
				answered++
				assert.Equal(t, "answer from "+model, res.Value)
				continue
			}
			assert.True(t, tier.retired[model], "only jobs on a retired model fail: %v", err)
			if a := res.Attempts(); len(a) == 1 && a[0].Skip == fallback.SkipRetired {
				skipped++
				assert.Equal(t, model, a[0].Model)
			}
		}
		assert.Equal(t, 120, answered, "every job on a live model")
		assert.Equal(t, 78, skipped, "the retired models' later jobs, without a call")
		assert.Equal(t, 1, tier.calls["gemini-1.0-pro"])
		assert.Equal(t, 1, tier.calls["gemini-1.5-pro-001"])
	})
}

// TestNotFoundForAnotherEntityParksNothing: a 404 about something other
// than a model fails that request closed (InvalidRequest) and leaves the
// tier in rotation.
func TestNotFoundForAnotherEntityParksNothing(t *testing.T) {
	notFound := classify.Wrap(errors.New("404"), classify.FromFacts(classify.Facts{HTTPStatus: 404, Message: "CachedContent not found (or permission denied)"}))
	pro := newFake("pro", ok("pro"), step{err: notFound})
	flash := newFake("flash", ok("flash"))
	c := newChain(t, fallback.Config[string, string]{Stages: stages(pro, flash)})
	_, err := c.Do(context.Background(), "q")
	var fe *fallback.Error
	require.ErrorAs(t, err, &fe)
	assert.True(t, fe.FailedClosed)
	assert.Equal(t, classify.InvalidRequest, fe.Cause.Class)
	res, err := c.Do(context.Background(), "q")
	require.NoError(t, err)
	assert.Equal(t, "pro", res.Tier, "pro was not parked")
	assert.Zero(t, flash.calls.Load())
}

// TestLongRetryAfterParksTheTier: a 429 asking for hours parks the tier for
// that long (capped by MaxQuotaCooldown) instead of costing every later
// request one more call and one more breaker count.
func TestLongRetryAfterParksTheTier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		long := classify.Wrap(errors.New("429"), classify.FromFacts(classify.Facts{HTTPStatus: 429, Message: "Please try again in 114h18m0s."}))
		pro := newFake("pro", ok("pro"), step{err: long})
		flash := newFake("flash", ok("flash"))
		proBreaker := newBreaker(t, breaker.Config{Name: "pro", ConsecutiveFailures: 1})
		c := newChain(t, fallback.Config[string, string]{
			Stages:           []fallback.Stage[string, string]{{Tier: pro, Breaker: proBreaker}, {Tier: flash}},
			MaxQuotaCooldown: 2 * time.Hour,
		})
		for range 10 {
			res, err := c.Do(context.Background(), "q")
			require.NoError(t, err)
			assert.Equal(t, "flash", res.Tier)
		}
		assert.Equal(t, int64(1), pro.calls.Load(), "parked after the first 429")
		assert.Equal(t, breaker.Closed, proBreaker.State(), "a quota does not count against the breaker")
		time.Sleep(2*time.Hour + time.Second)
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "pro", res.Tier, "back after MaxQuotaCooldown")
	})
}

// TestTableRowDecidesParking: Table.With changes a class's whole row, park
// included.
func TestTableRowDecidesParking(t *testing.T) {
	tab := classify.DefaultTable().With(classify.QuotaExhausted, classify.Action{Route: classify.RouteNextTier})
	pro := newFake("pro", ok("pro"), fails(classify.QuotaExhausted))
	c := newChain(t, fallback.Config[string, string]{Stages: stages(pro, newFake("flash", ok("flash"))), Table: &tab})
	_, _ = c.Do(context.Background(), "q")
	res, err := c.Do(context.Background(), "q")
	require.NoError(t, err)
	assert.Equal(t, "pro", res.Tier, "not parked: the row says so")
}

// TestOnAttemptSeesTheChainsAttempts: a stage's Retry.OnAttempt is honoured.
func TestOnAttemptSeesTheChainsAttempts(t *testing.T) {
	var seen []retry.Attempt
	pro := newFake("pro", ok("pro"), fails(classify.Transient))
	c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
		{Tier: pro, Retry: retry.Policy{BaseDelay: time.Nanosecond, OnAttempt: func(a retry.Attempt) { seen = append(seen, a) }}},
	}})
	_, err := c.Do(context.Background(), "q")
	require.NoError(t, err)
	require.Len(t, seen, 2)
	assert.True(t, seen[0].Retry)
	assert.Equal(t, classify.Transient, seen[0].Verdict.Class)
	assert.Equal(t, 2, seen[1].N)
	assert.Equal(t, classify.OK, seen[1].Verdict.Class)
}

// TestBreakerOutcomeIsRefused: a breaker with its own Outcome function
// cannot be honoured inside a chain, so New says so.
func TestBreakerOutcomeIsRefused(t *testing.T) {
	br := newBreaker(t, breaker.Config{Name: "pro", Outcome: func(error) breaker.Outcome { return breaker.Failure }})
	_, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: newFake("pro", ok("x")), Breaker: br}}})
	assert.ErrorContains(t, err, "Config.Outcome")
}

// TestStreamCommitsAtTheFirstContent: chunks that carry nothing (empty or
// blank text) are not the commit point: a stream that fails after them
// falls back exactly like a unary call, and once content arrives the
// chunks before it are shown in order.
func TestStreamCommitsAtTheFirstContent(t *testing.T) {
	pro := &streamFake{name: "pro", def: streamScript{chunks: []chunk{{text: ""}, {text: "  \n"}}, after: classErr(classify.Transient)}}
	flash := &streamFake{name: "flash", def: streamScript{chunks: []chunk{{text: ""}, {text: " "}, {text: "hi"}, {text: "!"}}, finishing: true}}
	c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{
		{Tier: pro.tier(), Retry: retry.Policy{MaxAttempts: 1}}, {Tier: flash.tier()},
	}})
	s := c.Stream(context.Background(), "q")
	text, err := collect(s)
	require.NoError(t, err)
	assert.Equal(t, " hi!", text)
	res := s.Result()
	assert.Equal(t, "flash", res.Tier)
	assert.True(t, res.Complete)
	assert.Equal(t, 4, res.Chunks)
}

// TestStreamFinishThenErrorIsIncomplete: a finish reason followed by an
// error is not a complete answer: the stream ends with an *IncompleteError
// that keeps the text received so far.
func TestStreamFinishThenErrorIsIncomplete(t *testing.T) {
	pro := &streamFake{name: "pro", def: streamScript{chunks: []chunk{{text: "Okay"}, {text: "", finish: "STOP"}}, after: classErr(classify.Transient)}}
	c := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: pro.tier()}}})
	s := c.Stream(context.Background(), "q")
	text, err := collect(s)
	require.ErrorIs(t, err, fallback.ErrIncomplete)
	assert.Equal(t, "Okay", text)
	assert.False(t, s.Result().Complete)
}

// streamCache answers streams from text and takes the validated text of
// complete streams.
type streamCache struct {
	mu sync.Mutex
	m  map[string]string
}

func (c *streamCache) Get(_ context.Context, in string) (chunk, string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.m[in]
	return chunk{text: t, finish: "STOP"}, "", ok
}

func (c *streamCache) Put(_ context.Context, in, text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[in] = text
}

// TestStreamCacheWriteBackAndAnswer: a complete stream's assembled text is
// written back; when every tier fails, the cache answers with one chunk.
func TestStreamCacheWriteBackAndAnswer(t *testing.T) {
	cache := &streamCache{m: map[string]string{}}
	pro := &streamFake{name: "pro", scripts: []streamScript{{chunks: words("sky ", "is ", "blue"), finishing: true}}, def: streamScript{before: classErr(classify.Transient)}}
	c := newStreamChain(t, fallback.StreamConfig[string, chunk]{
		Stages: []fallback.StreamStage[string, chunk]{{Tier: pro.tier(), Retry: retry.Policy{MaxAttempts: 1}}},
		Cache:  cache,
	})
	text, err := collect(c.Stream(context.Background(), "q"))
	require.NoError(t, err)
	assert.Equal(t, "sky is blue", text)
	assert.Equal(t, "sky is blue", cache.m["q"])

	s := c.Stream(context.Background(), "q")
	text, err = collect(s)
	require.NoError(t, err)
	assert.Equal(t, "sky is blue", text)
	res := s.Result()
	assert.Equal(t, fallback.SourceCache, res.Source)
	assert.True(t, res.Degraded)
	assert.True(t, res.Complete)
}

// TestStreamAbandonsATierThatIgnoresItsContext: with AbandonAfter, a stream
// tier that ignores its context cannot hold the consumer: the wait for its
// first chunk is abandoned, the next tier answers, and the stuck reader
// keeps its slot until the tier returns.
func TestStreamAbandonsATierThatIgnoresItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		stuck := fallback.StreamTierFunc("pro", func(context.Context, string) iter.Seq2[chunk, error] {
			return func(yield func(chunk, error) bool) {
				<-release
				yield(chunk{text: "late", finish: "STOP"}, nil)
			}
		}, inspect)
		bh := newBulkhead(t, "pro", 1)
		flash := &streamFake{name: "flash", def: streamScript{chunks: words("ok"), finishing: true}}
		c := newStreamChain(t, fallback.StreamConfig[string, chunk]{
			Stages: []fallback.StreamStage[string, chunk]{
				{Tier: stuck, Bulkhead: bh, FirstChunkTimeout: time.Second, Retry: retry.Policy{MaxAttempts: 1}},
				{Tier: flash.tier()},
			},
			AbandonAfter: 100 * time.Millisecond,
		})
		start := time.Now()
		text, err := collect(c.Stream(context.Background(), "q"))
		require.NoError(t, err)
		assert.Equal(t, "ok", text)
		assert.Equal(t, 1100*time.Millisecond, time.Since(start))
		assert.Equal(t, fallback.Stats{Abandoned: 1, Stuck: 1}, c.Stats())
		assert.Equal(t, 1, bh.Stats().InFlight, "the stuck reader keeps its slot")
		close(release)
		synctest.Wait()
		assert.Equal(t, fallback.Stats{Abandoned: 1}, c.Stats())
		assert.Zero(t, bh.Stats().InFlight)
	})
}

// TestUnlimitedAttemptsWithinTheDeadline: a negative MaxAttempts retries as
// long as a retry fits the budget.
func TestUnlimitedAttemptsWithinTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pro := newFake("pro", fails(classify.Transient))
		c := newChain(t, fallback.Config[string, string]{
			Stages: []fallback.Stage[string, string]{{Tier: pro, Retry: retry.Policy{MaxAttempts: -1, BaseDelay: 100 * time.Millisecond, MaxDelay: 100 * time.Millisecond, Jitter: retry.NoJitter}}},
			Total:  time.Second,
		})
		_, err := c.Do(context.Background(), "q")
		require.Error(t, err)
		assert.Equal(t, int64(10), pro.calls.Load(), "at 0, 100, ..., 900 ms: each while a wait and a 100 ms attempt still fit")
	})
}

// TestAbandonedProbeKeepsItsProbeSlot: a half-open probe that ignores its
// context is abandoned, but it still counts against HalfOpenProbes until
// it really returns: the breaker admits no second probe meanwhile.
func TestAbandonedProbeKeepsItsProbeSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var calls atomic.Int64
		pro := fallback.Tier("pro", func(context.Context, string) (string, error) {
			calls.Add(1)
			<-release
			return "late", nil
		})
		br := newBreaker(t, breaker.Config{Name: "pro", ConsecutiveFailures: 1, Cooldown: time.Second, HalfOpenProbes: 1})
		c := newChain(t, fallback.Config[string, string]{
			Stages:       []fallback.Stage[string, string]{{Tier: pro, Breaker: br, TryTimeout: 100 * time.Millisecond, Retry: retry.Policy{MaxAttempts: 1}}, {Tier: newFake("flash", ok("flash"))}},
			AbandonAfter: 50 * time.Millisecond,
		})
		// Trip it, wait out the cooldown: the next request is a probe.
		tripper := classErr(classify.Transient)
		tok, err := br.Allow()
		require.NoError(t, err)
		tok.Done(breaker.OutcomeOf(tripper))
		require.Equal(t, breaker.Open, br.State())
		time.Sleep(2 * time.Second) // the cooldown, jittered
		require.Equal(t, breaker.HalfOpen, br.State())
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "flash", res.Tier, "the probe was abandoned")
		res, err = c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "flash", res.Tier)
		assert.Equal(t, int64(1), calls.Load(), "no second probe while the first still runs")
		close(release)
		synctest.Wait()
	})
}

// TestTimedRecordIsTheAttemptsContext: an observed attempt with a
// TryTimeout gets one context that is both its record and its deadline:
// the deadline is the try's, the record is found, a context derived from
// it ends with it, and it ends when the attempt does.
func TestTimedRecordIsTheAttemptsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen context.Context
		var derived context.Context
		tier := fallback.Tier("pro", func(ctx context.Context, _ string) (string, error) {
			seen = ctx
			d, ok := ctx.Deadline()
			assert.True(t, ok)
			assert.Equal(t, 2*time.Second, time.Until(d))
			assert.NotNil(t, fallback.RecordOf(ctx))
			var cancel context.CancelFunc
			derived, cancel = context.WithCancel(ctx)
			_ = cancel // ends with the attempt's context
			assert.NoError(t, ctx.Err())
			return "x", nil
		})
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: tier, TryTimeout: 2 * time.Second}},
			Total: 10 * time.Second, Observer: fallback.NopObserver{}})
		_, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.ErrorIs(t, seen.Err(), context.Canceled)
		synctest.Wait()
		assert.ErrorIs(t, derived.Err(), context.Canceled)
	})
}

// TestEventsTellTheTimeLeft: the time left that events carry follows the
// budget — at an attempt's start, at its end (from the reading that timed
// the call), at the request's end — and on a retry after a failure.
func TestEventsTellTheTimeLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := func(out string, err error) step {
			return step{fn: func(context.Context) (string, error) { time.Sleep(time.Second); return out, err }}
		}
		tier := newFake("pro", slow("x", nil), slow("", classErr(classify.Transient)))
		var obs reported.Recorder
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: tier,
			Retry: retry.Policy{MaxAttempts: 2, BaseDelay: time.Second, MaxDelay: time.Second, Jitter: retry.NoJitter}}},
			Total: 10 * time.Second, Observer: &obs})
		_, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		starts, ends := reported.Of[fallback.AttemptStart](&obs), reported.Of[fallback.AttemptEnd](&obs)
		require.Len(t, starts, 2)
		require.Len(t, ends, 2)
		assert.Equal(t, 10*time.Second, starts[0].Remaining)
		assert.Equal(t, 9*time.Second, ends[0].Remaining)
		assert.Equal(t, 8*time.Second, starts[1].Remaining, "after the retry's wait")
		assert.Equal(t, 7*time.Second, ends[1].Remaining)
		assert.Equal(t, 7*time.Second, reported.Of[fallback.RequestEnd](&obs)[0].Remaining)
	})
}
