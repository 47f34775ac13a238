package fallback_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/internal/testbed/reported"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// billed is an answer that carries the tokens it cost.
type billed struct {
	text  string
	usage fallback.Usage
}

// billedTier answers with a billed answer, or with a partial one and an
// error.
type billedTier struct {
	name string
	out  billed
	err  error
}

func (t billedTier) Name() string { return t.name }

func (t billedTier) Call(ctx context.Context, _ string) (billed, error) {
	if t.out.usage != (fallback.Usage{}) {
		fallback.Report(ctx, fallback.Reply{Usage: t.out.usage, HasUsage: true})
	}
	return t.out, t.err
}

// A failed attempt that consumed tokens reports them: an answer the
// validator rejected, and a partial answer a tier returns with its error.
// Observers that count cost see every billed token; an attempt without an
// answer reports none.
func TestFailedAttemptsReportUsage(t *testing.T) {
	rejected := billed{text: "not json", usage: fallback.Usage{InputTokens: 100, OutputTokens: 40, CacheReadInputTokens: 30, ReasoningOutputTokens: 10}}
	partial := billed{usage: fallback.Usage{InputTokens: 70, OutputTokens: 5}}
	answer := billed{text: `{"ok":true}`, usage: fallback.Usage{InputTokens: 50, OutputTokens: 20}}
	isJSON := validate.Field(func(b billed) string { return b.text }, validate.JSON())
	chain, err := fallback.New(fallback.Config[string, billed]{Stages: []fallback.Stage[string, billed]{
		{Tier: billedTier{name: "pro", out: rejected}, Validate: isJSON},
		{Tier: billedTier{name: "flash", out: partial, err: classErr(classify.InvalidOutput)}},
		{Tier: billedTier{name: "down", err: classErr(classify.Unknown)}},
		{Tier: billedTier{name: "lite", out: answer}},
	}})
	require.NoError(t, err)
	type seen struct {
		tier     string
		class    classify.Class
		usage    fallback.Usage
		hasUsage bool
	}
	var obs reported.Recorder
	chain.Observe(&obs)
	res, err := chain.Do(context.Background(), "q")
	require.NoError(t, err)
	var got []seen
	for _, e := range reported.Of[fallback.AttemptEnd](&obs) {
		got = append(got, seen{e.Stage.Tier, e.Verdict.Class, e.Reply.Usage, e.Reply.HasUsage})
	}
	assert.Equal(t, "lite", res.Tier)
	assert.Equal(t, []seen{
		{"pro", classify.InvalidOutput, rejected.usage, true},
		{"flash", classify.InvalidOutput, partial.usage, true},
		{"down", classify.Unknown, fallback.Usage{}, false},
		{"lite", classify.OK, answer.usage, true},
	}, got)
}

// Without an observer or a limiter nothing listens: the tier's context
// carries no record, and Report costs a context lookup.
func TestReportWithoutListenersDoesNothing(t *testing.T) {
	chain, err := fallback.New(fallback.Config[string, billed]{Stages: []fallback.Stage[string, billed]{
		{Tier: billedTier{name: "pro", out: billed{usage: fallback.Usage{InputTokens: 1}}, err: errors.New("boom")}},
		{Tier: billedTier{name: "flash", out: billed{text: "a", usage: fallback.Usage{InputTokens: 2}}}},
	}})
	require.NoError(t, err)
	res, err := chain.Do(context.Background(), "q")
	require.NoError(t, err)
	assert.Equal(t, "flash", res.Tier)
	fallback.Report(context.Background(), fallback.Reply{HasUsage: true}) // outside a chain
}

// What a tier reports in several replies — its request's sampling before
// the call, then usage by modality — reaches the attempt's event whole.
func TestReplyByModalityAndSamplingReachTheEvent(t *testing.T) {
	rec := &reported.Recorder{}
	tier := fallback.Tier("pro", func(ctx context.Context, _ string) (string, error) {
		fallback.Report(ctx, fallback.Reply{RequestMaxTokens: 256, RequestTemperature: 0, HasTemperature: true, RequestTopP: 0.9, HasTopP: true})
		fallback.Report(ctx, fallback.Reply{HasUsage: true, Usage: fallback.Usage{InputTokens: 30, TextInputTokens: 10, ImageInputTokens: 20,
			OutputTokens: 5, TextOutputTokens: 5}})
		return "ok", nil
	})
	c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: tier}}, Observer: rec})
	_, err := c.Do(context.Background(), "q")
	require.NoError(t, err)
	ends := reported.Of[fallback.AttemptEnd](rec)
	require.Len(t, ends, 1)
	d := ends[0].Reply
	assert.Equal(t, fallback.Usage{InputTokens: 30, TextInputTokens: 10, ImageInputTokens: 20, OutputTokens: 5, TextOutputTokens: 5}, d.Usage)
	assert.Equal(t, int64(256), d.RequestMaxTokens)
	assert.True(t, d.HasTemperature)
	assert.Zero(t, d.RequestTemperature)
	assert.True(t, d.HasTopP)
	assert.InDelta(t, 0.9, d.RequestTopP, 1e-9)
}

// An attempt with a TryTimeout of its own, observed, gets one context that
// is both its call record and its deadline: the tier's context ends at the
// TryTimeout, not at the request's Total, and what it reported before
// then reaches the attempt's event.
func TestTimedAttemptCarriesItsDeadlineAndItsReplies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &reported.Recorder{}
		var waited time.Duration
		var ctxErr error
		slow := fallback.Tier("pro", func(ctx context.Context, _ string) (string, error) {
			fallback.Report(ctx, fallback.Reply{Usage: fallback.Usage{InputTokens: 3}, HasUsage: true})
			fallback.Report(ctx, fallback.Reply{Usage: fallback.Usage{OutputTokens: 2}, HasUsage: true})
			start := time.Now()
			<-ctx.Done()
			waited, ctxErr = time.Since(start), ctx.Err()
			return "", ctx.Err()
		})
		c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: slow, TryTimeout: 2 * time.Second, Retry: retry.Policy{MaxAttempts: 1}},
			{Tier: newFake("flash", ok("y"))},
		}, Total: 10 * time.Second, Observer: obs})
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "flash", res.Tier)
		assert.Equal(t, 2*time.Second, waited, "the tier's context ends at its TryTimeout")
		assert.ErrorIs(t, ctxErr, context.DeadlineExceeded)
		ends := reported.Of[fallback.AttemptEnd](obs)
		require.Len(t, ends, 2)
		assert.Equal(t, fallback.Usage{InputTokens: 3, OutputTokens: 2}, ends[0].Reply.Usage)
		assert.True(t, ends[0].Reply.HasUsage)
		assert.False(t, ends[1].Reply.HasUsage, "a tier that reports nothing")
	})
}

// TestRecordIsSafeForConcurrentUse: a tier may report from several
// goroutines at once (a pool's member calls, a stream's reader) while
// another reads what its record holds; run with -race. What the members
// report lives out of line, made on first use, and must be reached under
// the record's lock like the rest.
func TestRecordIsSafeForConcurrentUse(t *testing.T) {
	c := newChain(t, fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{{Tier: fallback.Tier("pool", func(ctx context.Context, _ string) (string, error) {
			rec := fallback.RecordOf(ctx)
			require.NotNil(t, rec)
			done := make(chan struct{})
			go func() {
				defer close(done)
				rec.Member("#a")
				rec.Report(fallback.Reply{Usage: fallback.Usage{InputTokens: 1}, HasUsage: true})
				rec.Waited(1)
			}()
			// Reading while the other goroutine may make the members:
			// nothing but the record's lock orders the two.
			for range 2000 {
				_ = rec.Avoid()
				runtime.Gosched()
			}
			<-done
			_ = rec.CurrentMember()
			_, _ = rec.Tokens()
			rec.Member("#b")
			return "x", nil
		})}},
		Observer: fallback.NopObserver{},
	})
	res, err := c.Do(context.Background(), "q")
	require.NoError(t, err)
	a := res.Attempts()
	require.Len(t, a, 1)
	assert.Equal(t, "#b", a[0].Member, "the member of the last call")
	assert.Equal(t, 2, res.UpstreamCalls, "one call per member reported")
}

// tokenCount counts the input tokens observers are told of: those riding
// an attempt's end and those reported late.
type tokenCount struct {
	fallback.NopObserver
	inTime, late atomic.Int64
}

func (o *tokenCount) AttemptEnded(_ context.Context, e fallback.AttemptEnd) {
	o.inTime.Add(e.Reply.Usage.InputTokens)
}

func (o *tokenCount) LateReplyReceived(_ context.Context, e fallback.LateReply) {
	o.late.Add(e.Reply.Usage.InputTokens)
}

// Reports racing the chain's close of their call's record are each
// counted once: on the attempt's end when the chain still waited for the
// call, or as a late reply after it. The tier returns while the goroutines
// it started report, so that the close meets them at every point of
// their reports; 64 callers at once, run with -race.
func TestReportsRacingTheCloseCountOnce(t *testing.T) {
	const requests, reporters, concurrent = 320, 8, 64
	var obs tokenCount
	var wg sync.WaitGroup
	var calls atomic.Int64
	c := newChain(t, fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{{Tier: fallback.Tier("pro", func(ctx context.Context, _ string) (string, error) {
			for range reporters {
				wg.Go(func() { fallback.Report(ctx, fallback.Reply{Usage: fallback.Usage{InputTokens: 1}, HasUsage: true}) })
			}
			// Returning after a varying lead, so that some reports come
			// in time, some during the close and some after it.
			for range calls.Add(1) % (2 * reporters) {
				runtime.Gosched()
			}
			return "x", nil
		})}},
		Observer: &obs,
	})
	var callers sync.WaitGroup
	for range concurrent {
		callers.Go(func() {
			for range requests / concurrent {
				_, err := c.Do(context.Background(), "q")
				assert.NoError(t, err)
			}
		})
	}
	callers.Wait()
	wg.Wait()
	assert.Equal(t, int64(requests*reporters), obs.inTime.Load()+obs.late.Load(), "every report once")
	t.Logf("in time %d, late %d", obs.inTime.Load(), obs.late.Load())
}
