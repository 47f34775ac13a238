package route_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/route"
	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/retry"
)

type chunk struct{ text, finish string }

// streamer streams its name and a finish, or fails before its first
// chunk with its class; it counts its streams, records whether each was
// allowed to write, and reports usage (when set) from inside the stream,
// as an adapter does when the provider's last event carries it.
type streamer struct {
	name   string
	fail   classify.Class
	usage  fallback.Usage
	calls  atomic.Int64
	writes atomic.Int64
}

func (s *streamer) Name() string { return s.name }

func (s *streamer) Stream(ctx context.Context, _ string) iter.Seq2[chunk, error] {
	return func(yield func(chunk, error) bool) {
		s.calls.Add(1)
		if route.WritesAllowed(ctx) {
			s.writes.Add(1)
		}
		if s.fail != classify.OK {
			yield(chunk{}, classify.Wrap(errors.New(s.name+" failed"), classify.Verdict{Class: s.fail, Reason: "scripted"}))
			return
		}
		if !yield(chunk{text: s.name}, nil) {
			return
		}
		if s.usage != (fallback.Usage{}) {
			fallback.Report(ctx, fallback.Reply{Usage: s.usage, HasUsage: true})
		}
		yield(chunk{text: ".", finish: "STOP"}, nil)
	}
}

func (s *streamer) Inspect(c chunk) fallback.ChunkInfo {
	return fallback.ChunkInfo{Text: c.text, FinishReason: c.finish}
}

func scand(s *streamer, model, group string) route.StreamCandidate[string, chunk] {
	return route.StreamCandidate[string, chunk]{Stage: fallback.StreamStage[string, chunk]{Tier: s, Model: model, Retry: retry.Policy{BaseDelay: 1, MaxDelay: 1}}, CostGroup: group}
}

func newStreamRouter(t *testing.T, cfg route.StreamConfig[string, chunk]) *route.StreamRouter[string, chunk] {
	t.Helper()
	r, err := route.NewStream(cfg)
	require.NoError(t, err)
	return r
}

func request(ctx context.Context, tenant, scenario string) context.Context {
	return fallback.WithRequest(ctx, fallback.Request{Tenant: tenant, Scenario: scenario})
}

// drain streams in through r for the tenant's scenario and returns the
// text shown, its result and the stream's error.
func drain(t *testing.T, ctx context.Context, r *route.StreamRouter[string, chunk]) (string, route.StreamResult, error) {
	t.Helper()
	s, err := r.Stream(ctx, "q")
	require.NoError(t, err)
	text := ""
	for c, err := range s.Chunks() {
		if err != nil {
			return text, s.Result(), err
		}
		text += c.text
	}
	return text, s.Result(), nil
}

func TestStreamLookup(t *testing.T) {
	pro, flash, cheap := &streamer{name: "pro"}, &streamer{name: "flash"}, &streamer{name: "cheap"}
	r := newStreamRouter(t, route.StreamConfig[string, chunk]{Routes: []route.StreamRoute[string, chunk]{
		{Scenario: "support", Candidates: []route.StreamCandidate[string, chunk]{scand(pro, "pro", ""), scand(flash, "flash", "")}},
		{Scenario: "support", Tenant: "acme", Candidates: []route.StreamCandidate[string, chunk]{scand(flash, "flash", "")}},
		{Scenario: "batch_seo", Tenant: "acme", Candidates: []route.StreamCandidate[string, chunk]{scand(cheap, "cheap", "batch")}},
	}})
	require.Len(t, r.Chains(), 3)

	// A tenant without a route of its own takes the scenario's.
	c, err := r.Lookup("globex", "support")
	require.NoError(t, err)
	assert.Equal(t, "pro", c.Chain.Stages()[0].Tier)
	assert.Empty(t, c.Route().Tenant)
	c, err = r.Lookup("acme", "support")
	require.NoError(t, err)
	assert.Equal(t, "flash", c.Chain.Stages()[0].Tier)
	text, res, err := drain(t, request(context.Background(), "acme", "support"), r)
	require.NoError(t, err)
	assert.Equal(t, "flash.", text)
	assert.True(t, res.Complete)
	assert.Zero(t, pro.calls.Load(), "acme's own route")

	_, err = r.Lookup("acme", "medical")
	require.ErrorIs(t, err, route.ErrUnknownScenario)
	assert.Equal(t, `route: unknown scenario "medical"`, err.Error())
	_, err = r.Lookup("globex", "batch_seo")
	require.ErrorIs(t, err, route.ErrNoRoute)
	assert.NotContains(t, err.Error(), "globex")

	// Stream says so before anything is sent.
	s, err := r.Stream(request(context.Background(), "acme", "medicl"), "q")
	require.ErrorIs(t, err, route.ErrUnknownScenario)
	assert.Nil(t, s)
	_, err = r.Stream(context.Background(), "q")
	assert.ErrorContains(t, err, `unknown scenario ""`)

	assert.Zero(t, testing.AllocsPerRun(100, func() {
		if _, err := r.Lookup("globex", "support"); err != nil {
			t.Fatal(err)
		}
	}))
}

// A FailClosed stream route answers from its first candidate or not at
// all: when it fails before its first chunk, no other model, no cache and
// no default answers, where the same tiers on an open route do.
func TestStreamFailClosed(t *testing.T) {
	model, flash := &streamer{name: "risk-model", fail: classify.Transient}, &streamer{name: "flash"}
	var defaults atomic.Int64
	def := func(context.Context, string) (chunk, bool) {
		defaults.Add(1)
		return chunk{text: "default"}, true
	}
	r := newStreamRouter(t, route.StreamConfig[string, chunk]{Routes: []route.StreamRoute[string, chunk]{
		{Scenario: "risk", Fallback: route.FailClosed, MaxAttempts: 2, Candidates: []route.StreamCandidate[string, chunk]{scand(model, "risk-model", "")}},
		{Scenario: "chat", MaxAttempts: 2, Candidates: []route.StreamCandidate[string, chunk]{scand(model, "risk-model", ""), scand(flash, "flash", "")}},
		{Scenario: "faq", MarkDegraded: true, MaxAttempts: 2, Default: def, Candidates: []route.StreamCandidate[string, chunk]{scand(model, "risk-model", "")}},
	}})
	text, res, err := drain(t, request(context.Background(), "acme", "risk"), r)
	var fe *fallback.Error
	require.ErrorAs(t, err, &fe)
	assert.Empty(t, text)
	assert.Zero(t, res.Chunks)
	assert.False(t, res.Degraded || res.ShowDegraded)
	assert.Equal(t, int64(2), model.calls.Load(), "its own attempts, then nothing")
	assert.Zero(t, flash.calls.Load())
	assert.Zero(t, defaults.Load())
	assert.Equal(t, -1, res.TierIndex)

	text, _, err = drain(t, request(context.Background(), "acme", "chat"), r)
	require.NoError(t, err)
	assert.Equal(t, "flash.", text, "the open route falls back")
	text, res, err = drain(t, request(context.Background(), "acme", "faq"), r)
	require.NoError(t, err)
	assert.Equal(t, "default", text, "the open route's default answers")
	assert.Equal(t, fallback.SourceDefault, res.Source)
	assert.True(t, res.ShowDegraded)
	assert.False(t, res.ReadOnly)
	assert.Equal(t, int64(1), defaults.Load())

	// A FailClosed stream route cannot list a fallback, a cache or a
	// default: refused with the unary route's words.
	_, err = route.NewStream(route.StreamConfig[string, chunk]{Routes: []route.StreamRoute[string, chunk]{
		{Scenario: "risk", Fallback: route.FailClosed, Candidates: []route.StreamCandidate[string, chunk]{scand(model, "risk-model", ""), scand(flash, "flash", "")}},
		{Scenario: "medical", Fallback: route.FailClosed, Default: def, Candidates: []route.StreamCandidate[string, chunk]{scand(model, "risk-model", "")}},
	}, Base: fallback.StreamConfig[string, chunk]{Default: def}})
	require.Error(t, err)
	for _, want := range []string{
		"Base: Stages, Total, Cache and Default belong to each route",
		`Routes[0] (scenario "risk"): a FailClosed route lets only its first candidate answer; it lists 2`,
		`Routes[1] (scenario "medical"): a FailClosed route answers from no cache and no default`,
	} {
		assert.ErrorContains(t, err, want)
	}
}

// MarkDegraded flags a stream the second candidate answered, from its
// first chunk on, and not one the first answered; without it a degraded
// stream is not flagged.
func TestStreamMarkDegraded(t *testing.T) {
	down, up, flash := &streamer{name: "pro", fail: classify.RateLimited}, &streamer{name: "pro"}, &streamer{name: "flash"}
	routes := func(first *streamer) []route.StreamRoute[string, chunk] {
		return []route.StreamRoute[string, chunk]{
			{Scenario: "support", MarkDegraded: true, MaxAttempts: 2, Candidates: []route.StreamCandidate[string, chunk]{scand(first, "pro", ""), scand(flash, "flash", "")}},
			{Scenario: "draft", MaxAttempts: 2, Candidates: []route.StreamCandidate[string, chunk]{scand(first, "pro", ""), scand(flash, "flash", "")}},
		}
	}
	r := newStreamRouter(t, route.StreamConfig[string, chunk]{Routes: routes(down)})
	s, err := r.Stream(request(context.Background(), "acme", "support"), "q")
	require.NoError(t, err)
	var atFirst []bool
	for _, err := range s.Chunks() {
		require.NoError(t, err)
		atFirst = append(atFirst, s.Result().ShowDegraded)
	}
	assert.Equal(t, []bool{true, true}, atFirst, "known while the chunks are shown")
	res := s.Result()
	assert.True(t, res.Degraded && res.ShowDegraded)
	assert.Equal(t, "flash", res.Tier)

	_, res, err = drain(t, request(context.Background(), "acme", "draft"), r)
	require.NoError(t, err)
	assert.True(t, res.Degraded)
	assert.False(t, res.ShowDegraded, "the route does not ask")

	r = newStreamRouter(t, route.StreamConfig[string, chunk]{Routes: routes(up)})
	_, res, err = drain(t, request(context.Background(), "acme", "support"), r)
	require.NoError(t, err)
	assert.Equal(t, "pro", res.Tier)
	assert.False(t, res.Degraded || res.ShowDegraded)
}

// A read-only fallback's stream sees WritesAllowed false, the first
// candidate's true, and the result says which answered.
func TestStreamReadOnlyFallback(t *testing.T) {
	pro, flash := &streamer{name: "pro", fail: classify.RateLimited}, &streamer{name: "flash"}
	r := newStreamRouter(t, route.StreamConfig[string, chunk]{Routes: []route.StreamRoute[string, chunk]{
		{Scenario: "support", ReadOnlyFallback: true, MaxAttempts: 2, Candidates: []route.StreamCandidate[string, chunk]{scand(pro, "pro", ""), scand(flash, "flash", "")}},
	}})
	text, res, err := drain(t, request(context.Background(), "acme", "support"), r)
	require.NoError(t, err)
	assert.Equal(t, "flash.", text)
	assert.True(t, res.ReadOnly)
	assert.Equal(t, int64(1), pro.writes.Load(), "the first candidate may write")
	assert.Equal(t, int64(1), flash.calls.Load())
	assert.Zero(t, flash.writes.Load(), "the fallback may not")
	assert.Equal(t, "flash", r.Chains()[0].Stages()[1].Tier, "the wrapper keeps the tier's name")

	pro.fail = classify.OK
	_, res, err = drain(t, request(context.Background(), "acme", "support"), r)
	require.NoError(t, err)
	assert.Equal(t, "pro", res.Tier)
	assert.False(t, res.ReadOnly)
	assert.Equal(t, int64(2), pro.writes.Load())
}

// The same table splits MaxAttempts, and is refused, alike for unary and
// stream routes: every candidate failing, each is called as often.
func TestMaxAttemptsAlikeForBothKinds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		max      int
		attempts []int // Candidate.Attempts
		retries  []int // Stage.Retry.MaxAttempts
		calls    []int64
		err      string
	}{
		{name: "split", max: 3, attempts: []int{0, 0}, calls: []int64{2, 1}},
		{name: "three candidates", max: 5, attempts: []int{0, 0, 0}, calls: []int64{3, 1, 1}},
		{name: "a candidate's own", max: 4, attempts: []int{0, 2}, calls: []int64{2, 2}},
		{name: "the stages' own", max: 5, attempts: []int{0, 0}, retries: []int{2, 2}, calls: []int64{2, 2}},
		{name: "no cap", attempts: []int{0, 0}, retries: []int{2, 1}, calls: []int64{2, 1}},
		{name: "too many", max: 2, attempts: []int{2, 0}, err: "its candidates need 3 attempts at least ([2 1]), more than MaxAttempts 2"},
		{name: "too few", max: 1, attempts: []int{0, 0}, err: "its candidates need 2 attempts at least ([0 1]), more than MaxAttempts 1"},
		{name: "negative", max: -1, attempts: []int{-1}, err: "MaxAttempts must not be negative, got -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var unary []route.Candidate[string, string]
			var stream []route.StreamCandidate[string, chunk]
			var tiers []*tier
			var streamers []*streamer
			for i, a := range tc.attempts {
				name := fmt.Sprint("m", i)
				tiers = append(tiers, &tier{name: name, fail: classify.Transient})
				streamers = append(streamers, &streamer{name: name, fail: classify.Transient})
				u, s := cand(tiers[i], name, ""), scand(streamers[i], name, "")
				u.Attempts, s.Attempts = a, a
				if tc.retries != nil {
					u.Stage.Retry.MaxAttempts, s.Stage.Retry.MaxAttempts = tc.retries[i], tc.retries[i]
				}
				unary, stream = append(unary, u), append(stream, s)
			}
			ur, uerr := route.New(route.Config[string, string]{Routes: []route.Route[string, string]{{Scenario: "s", MaxAttempts: tc.max, Candidates: unary}}})
			sr, serr := route.NewStream(route.StreamConfig[string, chunk]{Routes: []route.StreamRoute[string, chunk]{{Scenario: "s", MaxAttempts: tc.max, Candidates: stream}}})
			if tc.err != "" {
				require.Error(t, uerr)
				require.Error(t, serr)
				assert.Equal(t, uerr.Error(), serr.Error())
				assert.ErrorContains(t, serr, tc.err)
				return
			}
			require.NoError(t, uerr)
			require.NoError(t, serr)
			uc, err := ur.Lookup("acme", "s")
			require.NoError(t, err)
			sc, err := sr.Lookup("acme", "s")
			require.NoError(t, err)
			var want int64
			for _, n := range tc.calls {
				want += n
			}
			assert.Equal(t, int(want), uc.Calls())
			assert.Equal(t, int(want), sc.Calls())

			ctx := request(context.Background(), "acme", "s")
			res, err := ur.Do(ctx, "q")
			require.Error(t, err)
			assert.Equal(t, int(want), res.UpstreamCalls)
			_, sres, err := drain(t, ctx, sr)
			require.Error(t, err)
			assert.Equal(t, int(want), sres.UpstreamCalls)
			for i := range tc.calls {
				assert.Equal(t, tc.calls[i], tiers[i].calls.Load(), "unary candidate %d", i)
				assert.Equal(t, tc.calls[i], streamers[i].calls.Load(), "stream candidate %d", i)
			}
		})
	}
}

// A stream route with cost groups bills, in its group, exactly the usage
// the stream reported from inside itself.
func TestStreamLedger(t *testing.T) {
	l, recs := recordingLedger(t)
	reported := fallback.Usage{InputTokens: 1200, OutputTokens: 345}
	pro, flash := &streamer{name: "pro", fail: classify.RateLimited}, &streamer{name: "flash", usage: reported}
	r := newStreamRouter(t, route.StreamConfig[string, chunk]{Ledger: l, Routes: []route.StreamRoute[string, chunk]{
		{Scenario: "batch_seo", MaxAttempts: 2, Candidates: []route.StreamCandidate[string, chunk]{scand(pro, "pro", "batch"), scand(flash, "flash", "batch")}},
		{Scenario: "support", MaxAttempts: 2, Candidates: []route.StreamCandidate[string, chunk]{scand(pro, "pro", ""), scand(flash, "flash", "")}},
	}})
	tk, err := l.Admit(context.Background(), spend.Request{Tenant: "acme", Scenario: "batch_seo"}, spend.Estimate{})
	require.NoError(t, err)
	text, _, err := drain(t, tk, r)
	require.NoError(t, err)
	assert.Equal(t, "flash.", text)

	// 1200 in at 0.05 and 345 out at 0.5 a million: flash at half price.
	want := spend.MustParseAmount("0.0002325")
	require.Len(t, *recs, 1)
	a := (*recs)[0].Attempts()
	require.Len(t, a, 2)
	assert.Equal(t, "batch", a[1].CostGroup)
	assert.True(t, a[1].Billed && a[1].Priced)
	assert.Equal(t, reported, a[1].Usage)
	assert.Equal(t, want, a[1].Cost)
	assert.Equal(t, classify.RateLimited, (*recs)[0].Cause)
	totals := l.Totals("acme")
	assert.Equal(t, reported, totals.Usage, "every token the stream reported, no more")
	assert.Equal(t, want, totals.Cost)
	assert.Equal(t, int64(2), totals.Calls)

	// The same stream on the list price costs twice as much.
	tk, err = l.Admit(context.Background(), spend.Request{Tenant: "globex", Scenario: "support"}, spend.Estimate{})
	require.NoError(t, err)
	_, _, err = drain(t, tk, r)
	require.NoError(t, err)
	assert.Equal(t, 2*want, l.Totals("globex").Cost)

	c, err := r.Lookup("acme", "batch_seo")
	require.NoError(t, err)
	assert.Equal(t, 2, c.Calls())
	assert.Equal(t, spend.Estimate{Tokens: 2000, Cost: spend.MustParseAmount("0.0055")}, c.Estimate(fallback.Usage{InputTokens: 1000, OutputTokens: 1000}), "pro's batch price, the dearer")
}

// A candidate that hedges its first chunk may make two streams an
// attempt: Calls counts them, as it does for a unary hedge.
func TestStreamRouteCountsHedges(t *testing.T) {
	tier := fallback.StreamTierFunc("pro", func(context.Context, string) iter.Seq2[string, error] {
		return func(func(string, error) bool) {}
	}, func(s string) fallback.ChunkInfo { return fallback.ChunkInfo{Text: s} })
	r, err := route.NewStream(route.StreamConfig[string, string]{Routes: []route.StreamRoute[string, string]{{Scenario: "chat",
		Candidates: []route.StreamCandidate[string, string]{{Stage: fallback.StreamStage[string, string]{Tier: tier, Model: "pro",
			Retry: retry.Policy{MaxAttempts: 2}, Hedge: fallback.Hedge{Delay: time.Second}}}}}}})
	require.NoError(t, err)
	c, err := r.Lookup("", "chat")
	require.NoError(t, err)
	assert.Equal(t, 4, c.Calls())
}
