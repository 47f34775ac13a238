package chaos_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/chaos"
	"github.com/tierguard/tierguard/internal/testbed/reported"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// Each fault does to a unary call what its documentation says, in fake
// time to the nanosecond.
func TestTierFaults(t *testing.T) {
	for _, c := range []struct {
		name    string
		fault   chaos.Fault
		timeout time.Duration
		// took is the call's duration; calls whether the upstream was
		// called; out the answer; class the error's class (OK: none).
		took  time.Duration
		calls int64
		out   string
		class classify.Class
		is    error
	}{
		{name: "latency", fault: chaos.Latency(40 * time.Millisecond), took: 50 * time.Millisecond, calls: 1, out: "ok:q"},
		{name: "latency past the context", fault: chaos.Latency(time.Second), timeout: 300 * time.Millisecond,
			took: 300 * time.Millisecond, class: classify.DeadlineExhausted, is: context.DeadlineExceeded},
		{name: "stall", fault: chaos.Stall(), timeout: 700 * time.Millisecond, took: 700 * time.Millisecond,
			class: classify.DeadlineExhausted, is: context.DeadlineExceeded},
		{name: "fail", fault: chaos.Fail(chaos.GeminiOverloaded), class: classify.Transient},
		{name: "fail after a delay", fault: chaos.Fail(chaos.OpenAIInvalidKey).Delayed(2*time.Second, 2*time.Second),
			took: 2 * time.Second, class: classify.Auth},
		{name: "malformed json", fault: chaos.MalformedJSON(), out: `{"answer": "this JSON is cut off`},
		{name: "empty text", fault: chaos.EmptyText(), out: ""},
		{name: "answer", fault: chaos.Answer("canned", "hello"), out: "hello"},
		{name: "recitation", fault: chaos.FinishReason("RECITATION"), class: classify.InvalidOutput},
		{name: "safety", fault: chaos.FinishReason("SAFETY"), class: classify.Safety},
		{name: "no finish reason", fault: chaos.NoFinishReason(), class: classify.InvalidOutput},
		{name: "cut", fault: chaos.CutAfter(3), class: classify.Transient, is: io.ErrUnexpectedEOF},
		{name: "idle gap", fault: chaos.IdleGap(0, time.Second), took: time.Second + 10*time.Millisecond, calls: 1, out: "ok:q"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var sw chaos.Switch
				up := &upstream{name: "pro", take: 10 * time.Millisecond}
				tier := chaos.Tier(up, &sw)
				require.NoError(t, sw.Start(always(c.fault)))
				defer sw.Stop()
				ctx := context.Background()
				if c.timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, c.timeout)
					defer cancel()
				}
				t0 := time.Now()
				out, err := tier.Call(ctx, "q")
				assert.Equal(t, c.took, time.Since(t0))
				assert.Equal(t, c.calls, up.calls.Load())
				assert.Equal(t, c.out, out)
				if c.class == classify.OK {
					assert.NoError(t, err)
					return
				}
				require.ErrorIs(t, err, chaos.ErrInjected)
				assert.Equal(t, c.class, classify.Classify(err).Class, "%v", err)
				if c.is != nil {
					assert.ErrorIs(t, err, c.is)
				}
			})
		})
	}
}

// RandomLatency draws each call's latency from its bounds, the same draws
// for the same seed.
func TestRandomLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		draws := func(seed uint64) []time.Duration {
			var sw chaos.Switch
			tier := chaos.Tier(&upstream{name: "pro"}, &sw)
			require.NoError(t, sw.Start(chaos.Drill{For: time.Hour, Seed: seed, Rules: []chaos.Rule{{Fault: chaos.RandomLatency(100*time.Millisecond, 200*time.Millisecond), Rate: 1}}}))
			defer sw.Stop()
			var out []time.Duration
			for range 200 {
				t0 := time.Now()
				_, err := tier.Call(context.Background(), "q")
				require.NoError(t, err)
				out = append(out, time.Since(t0))
			}
			return out
		}
		a := draws(1)
		assert.Equal(t, a, draws(1))
		assert.NotEqual(t, a, draws(2))
		lo, hi, sum := a[0], a[0], time.Duration(0)
		for _, d := range a {
			lo, hi, sum = min(lo, d), max(hi, d), sum+d
		}
		assert.GreaterOrEqual(t, lo, 100*time.Millisecond)
		assert.LessOrEqual(t, hi, 200*time.Millisecond)
		assert.InDelta(t, float64(150*time.Millisecond), float64(sum/200), float64(10*time.Millisecond), "uniform: mean near the middle")
	})
}

// Through a chain, each fault meets the decision the real failure meets:
// answers the validator rejects and invalid finishes move to the next
// tier without counting against the breaker, a 503 retries, an auth
// failure fails closed.
func TestFaultsThroughAChain(t *testing.T) {
	for _, c := range []struct {
		name     string
		fault    chaos.Fault
		tier     string
		attempts int
		closed   bool
	}{
		{"malformed json", chaos.MalformedJSON(), "flash", 1, false},
		{"empty text", chaos.EmptyText(), "flash", 1, false},
		{"recitation", chaos.FinishReason("RECITATION"), "flash", 1, false},
		{"503", chaos.Fail(chaos.GeminiOverloaded), "flash", 2, false},
		{"499", chaos.Fail(chaos.GeminiCancelled), "flash", 2, false},
		{"daily quota", chaos.Fail(chaos.GeminiDailyQuota), "flash", 1, false},
		{"retired", chaos.Fail(chaos.GeminiModelNotFound.WithModel("gemini-2.5-pro")), "flash", 1, false},
		{"auth", chaos.Fail(chaos.GeminiInvalidKey), "", 1, true},
		{"cut", chaos.CutAfter(1), "flash", 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var sw chaos.Switch
				pro := chaos.Tier(&upstream{name: "pro"}, &sw)
				chain, err := fallback.New(fallback.Config[string, string]{
					Stages: []fallback.Stage[string, string]{
						{Tier: pro, Model: "gemini-2.5-pro", Retry: retry.Policy{MaxAttempts: 2}, Validate: validate.All(validate.NonEmpty(), validate.JSON())},
						{Tier: &upstream{name: "flash"}, Model: "gemini-2.5-flash"},
					},
					Total: 10 * time.Second,
				})
				require.NoError(t, err)
				require.NoError(t, sw.Start(chaos.Drill{For: time.Hour, Rules: []chaos.Rule{{Fault: c.fault, Rate: 1, Tier: "pro"}}}))
				defer sw.Stop()
				res, err := chain.Do(context.Background(), `"q"`)
				var fe *fallback.Error
				if c.closed {
					require.True(t, errors.As(err, &fe))
					assert.True(t, fe.FailedClosed)
					return
				}
				require.NoError(t, err)
				assert.Equal(t, c.tier, res.Tier)
				proAttempts := 0
				for _, a := range res.Attempts() {
					if a.Tier == "pro" {
						proAttempts++
						if c.name == "malformed json" || c.name == "empty text" {
							// A 200: the validator, not the fault, makes it a failure.
							assert.Equal(t, classify.InvalidOutput, a.Verdict.Class)
						} else {
							assert.ErrorIs(t, a.Err, chaos.ErrInjected)
						}
					}
				}
				assert.Equal(t, c.attempts, proAttempts)
			})
		})
	}
}

// Each stream fault does to a stream what a tier would surface.
func TestStreamFaults(t *testing.T) {
	for _, c := range []struct {
		name    string
		fault   chaos.Fault
		timeout time.Duration
		chunks  string
		class   classify.Class
		is      error
		took    time.Duration
	}{
		{name: "latency", fault: chaos.Latency(time.Second), chunks: "abcde", took: time.Second + 5*100*time.Millisecond},
		{name: "stall", fault: chaos.Stall(), timeout: 3 * time.Second, class: classify.DeadlineExhausted, is: context.DeadlineExceeded, took: 3 * time.Second},
		{name: "fail", fault: chaos.Fail(chaos.GeminiRateLimited), class: classify.RateLimited},
		{name: "cut after 2", fault: chaos.CutAfter(2), chunks: "ab", class: classify.Transient, is: io.ErrUnexpectedEOF, took: 200 * time.Millisecond},
		{name: "cut before the first", fault: chaos.CutAfter(0), class: classify.Transient, is: io.ErrUnexpectedEOF},
		{name: "idle gap", fault: chaos.IdleGap(2, 3*time.Second), chunks: "abcde", took: 3*time.Second + 500*time.Millisecond},
		{name: "idle gap past the context", fault: chaos.IdleGap(2, 3*time.Second), timeout: time.Second, chunks: "ab",
			class: classify.DeadlineExhausted, is: context.DeadlineExceeded, took: time.Second},
		{name: "idle gap first", fault: chaos.IdleGap(0, time.Second), chunks: "abcde", took: time.Second + 500*time.Millisecond},
		{name: "no finish reason", fault: chaos.NoFinishReason(), chunks: "abcd", took: 500 * time.Millisecond},
		{name: "recitation", fault: chaos.FinishReason("RECITATION"), chunks: "abcd", class: classify.InvalidOutput, took: 500 * time.Millisecond},
		{name: "empty", fault: chaos.EmptyText()},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var sw chaos.Switch
				up := &streamer{name: "pro", n: 5, gap: 100 * time.Millisecond}
				st := chaos.StreamTier(up, &sw)
				require.NoError(t, sw.Start(always(c.fault)))
				defer sw.Stop()
				ctx := context.Background()
				if c.timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, c.timeout)
					defer cancel()
				}
				t0 := time.Now()
				chunks, err := collect(st.Stream(ctx, "q"))
				assert.Equal(t, c.took, time.Since(t0))
				got := ""
				for _, ch := range chunks {
					got += ch.text
				}
				assert.Equal(t, c.chunks, got)
				if c.class == classify.OK {
					assert.NoError(t, err)
					if c.fault.String() == "no_finish_reason" {
						for _, ch := range chunks {
							assert.Empty(t, st.Inspect(ch).FinishReason)
						}
					}
					return
				}
				require.ErrorIs(t, err, chaos.ErrInjected)
				assert.Equal(t, c.class, classify.Classify(err).Class, "%v", err)
				if c.is != nil {
					assert.ErrorIs(t, err, c.is)
				}
			})
		})
	}
}

// Through a stream chain: a stream cut or left without a finish reason
// after its first chunk is incomplete, an idle gap longer than IdleTimeout
// ends it, a failure before the first chunk falls back.
func TestStreamFaultsThroughAChain(t *testing.T) {
	for _, c := range []struct {
		name       string
		fault      chaos.Fault
		tier       string
		incomplete error
	}{
		{"fail falls back", chaos.Fail(chaos.GeminiOverloaded), "flash", nil},
		{"cut is incomplete", chaos.CutAfter(2), "pro", io.ErrUnexpectedEOF},
		{"no finish is incomplete", chaos.NoFinishReason(), "pro", fallback.ErrNoFinishReason},
		{"idle gap past IdleTimeout", chaos.IdleGap(2, time.Second), "pro", fallback.ErrIdleTimeout},
		{"empty falls back", chaos.EmptyText(), "flash", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var sw chaos.Switch
				pro := chaos.StreamTier(&streamer{name: "pro", n: 5, gap: 10 * time.Millisecond}, &sw)
				chain, err := fallback.NewStream(fallback.StreamConfig[string, chunk]{
					Stages: []fallback.StreamStage[string, chunk]{
						{Tier: pro, Retry: retry.Policy{MaxAttempts: 1}, IdleTimeout: 500 * time.Millisecond},
						{Tier: &streamer{name: "flash", n: 2}},
					},
					Total: 10 * time.Second,
				})
				require.NoError(t, err)
				require.NoError(t, sw.Start(chaos.Drill{For: time.Hour, Rules: []chaos.Rule{{Fault: c.fault, Rate: 1, Tier: "pro"}}}))
				defer sw.Stop()
				s := chain.Stream(context.Background(), "q")
				_, err = collect(s.Chunks())
				res := s.Result()
				assert.Equal(t, c.tier, res.Tier)
				if c.incomplete == nil {
					require.NoError(t, err)
					assert.True(t, res.Complete)
					return
				}
				require.ErrorIs(t, err, fallback.ErrIncomplete)
				assert.ErrorIs(t, err, c.incomplete)
				assert.False(t, res.Complete)
			})
		})
	}
}

// The wrappers keep the wrapped tier's name, and what its responses
// report (fallback.Report) reaches the chain through them, on and off.
func TestWrappersPassReportsOn(t *testing.T) {
	var sw chaos.Switch
	base := fallback.Tier("pro", func(ctx context.Context, _ string) (string, error) {
		fallback.Report(ctx, fallback.Reply{Usage: fallback.Usage{OutputTokens: 7}, HasUsage: true})
		return "x", nil
	})
	w := chaos.Tier(base, &sw)
	assert.Equal(t, "pro", w.Name())
	var rec reported.Recorder
	c, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: w}}, Observer: &rec})
	require.NoError(t, err)
	_, err = c.Do(context.Background(), "q")
	require.NoError(t, err)
	var got []fallback.Usage
	for _, e := range reported.Of[fallback.AttemptEnd](&rec) {
		if e.Reply.HasUsage {
			got = append(got, e.Reply.Usage)
		}
	}
	assert.Equal(t, []fallback.Usage{{OutputTokens: 7}}, got)

	st := chaos.StreamTier[string, chunk](&streamer{name: "s"}, &sw)
	assert.Equal(t, "s", st.Name())
	assert.Panics(t, func() { chaos.Tier[string, string](base, nil) })
	assert.Panics(t, func() { chaos.StreamTier[string, chunk](&streamer{}, nil) })
}
