package main

import (
	"context"
	"fmt"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	"github.com/tierguard/tierguard/internal/testbed/gemrest"
	"github.com/tierguard/tierguard/retry"
)

// ---------------------------------------------------------------------------
// Scenario 14: a slow-tail primary, streamed, its first chunk hedged.
//
// Scenario 10's workload over streamGenerateContent: the slow tail is in
// the time to the first chunk, and the hedge is a second stream on the same
// tier (a stream hedge never goes to the next tier: its chunks would be
// another model's), raced to the first chunk with content.

type streamTailConfig struct {
	loadConfig
	// SlowShare of pro's streams send their first chunk after SlowFactor
	// times its median time to first chunk.
	SlowShare  float64
	SlowFactor float64
	// Chunks is how many chunks every answer comes in, ChunkDelay the gap
	// between two: the part of a stream after its commit point, which the
	// hedge cannot shorten.
	Chunks     int
	ChunkDelay time.Duration
}

func defaultStreamTail() streamTailConfig {
	c := streamTailConfig{loadConfig: defaultLoad(), SlowShare: 0.1, SlowFactor: 5, Chunks: 4, ChunkDelay: 5 * time.Millisecond}
	c.Duration = 3 * time.Second
	return c
}

type streamTailVariant struct {
	name  string
	hedge fallback.Hedge
}

// streamRig is a streaming chain pro → flash against a fake server.
type streamRig struct {
	srv      *fakegemini.Server
	chain    *fallback.StreamChain[string, gemrest.Chunk]
	trs      *transitions
	breakers []*breaker.Breaker
	clock    clock
}

// stage is a streaming stage with capStage's guards: a bulkhead twice the
// client count (room for a hedge per request), the same breaker, three
// attempts with a shared retry budget, the assembled text validated as
// JSON. No first-chunk or idle timeout: as in scenario 10, only the
// deadline bounds a slow call, so that the tail is there to cut.
func (r *streamRig) stage(c loadConfig, name, model string) fallback.StreamStage[string, gemrest.Chunk] {
	return r.stageOver(c, name, model, gemrest.NewTier(client(r.srv, model, name), func(q string) gemrest.Request { return gemrest.Request{Prompt: q, JSON: true} }))
}

// stageOver is stage over a tier of the caller's: a pool's stream side,
// say.
func (r *streamRig) stageOver(c loadConfig, name, model string, tier fallback.StreamTier[string, gemrest.Chunk]) fallback.StreamStage[string, gemrest.Chunk] {
	bh, err := bulkhead.New(bulkhead.Config{Name: name, Max: c.Clients * 2})
	must(err)
	br, err := breaker.New(breaker.Config{Name: name, ConsecutiveFailures: 5, FailureRatio: 0.5, MinCalls: 20, Window: 2 * time.Second, Cooldown: c.Cooldown})
	must(err)
	br.Observe(r.trs.record)
	r.breakers = append(r.breakers, br)
	b, err := retry.NewBudget(10, 0.1)
	must(err)
	return fallback.StreamStage[string, gemrest.Chunk]{
		Tier: tier, Model: model, Provider: "gcp.gemini", Bulkhead: bh, Breaker: br,
		Retry: retry.Policy{MaxAttempts: 3, BaseDelay: 50 * time.Millisecond, MaxDelay: 250 * time.Millisecond, Budget: b}, Validate: validText,
	}
}

// close stops the breakers' cooldown timers.
func (r *streamRig) close() {
	for _, br := range r.breakers {
		br.Reset()
	}
}

// streamOutcome is one streaming request of a closed-loop run.
type streamOutcome struct {
	outcome
	// toFirst is when the consumer got its first chunk, from the start of
	// the request; for a request that got none, its whole latency (it
	// waited at least that long for a chunk that never came).
	toFirst time.Duration
	// hedged is set when the hedge's stream was the one read.
	hedged bool
	// mixed is set when the chunks of one answer did not all come from
	// the one upstream stream that committed.
	mixed bool
}

// doStream sends one streaming request through the rig's chain and reads
// it to its end, as a consumer that shows each chunk would.
func (r *streamRig) doStream(n int, deadline time.Duration) streamOutcome {
	q := fmt.Sprintf("Question %d: what is the answer?", n)
	o := streamOutcome{outcome: outcome{start: r.clock.now(), deadline: deadline}}
	res := readStream(r.clock, r.chain.Stream(context.Background(), q), &o)
	if o.err == nil {
		for _, a := range res.Attempts() {
			o.hedged = o.hedged || (a.Hedge && a.Err == nil && a.Skip == fallback.NotSkipped)
		}
	}
	return o
}

// readStream reads s to its end, as a consumer that shows each chunk
// would, fills in o (started by the caller) — when it ended, its first
// chunk, its error, the tier that answered, whether its chunks mixed
// upstream streams — and returns the stream's result.
func readStream(c clock, s *fallback.Stream[string, gemrest.Chunk], o *streamOutcome) fallback.StreamResult {
	var first gemrest.Chunk
	chunks := 0
	var err error
	for ch, cerr := range s.Chunks() {
		if cerr != nil {
			err = cerr
			break
		}
		if chunks == 0 {
			o.toFirst, first = c.now()-o.start, ch
		} else if ch.ResponseID != first.ResponseID || ch.ModelVersion != first.ModelVersion {
			// The fake gives every upstream request its own responseId: two
			// ids in one answer are two streams spliced, even of one model
			// (which a same-tier hedge's loser, or another key's stream,
			// would be).
			o.mixed = true
		}
		chunks++
	}
	o.end = c.now()
	res := s.Result()
	o.calls, o.err = res.UpstreamCalls, err
	if chunks == 0 {
		o.toFirst = o.latency()
	}
	if err == nil {
		o.tier = res.Tier
		if want := map[string]string{"pro": proModel, "flash": flashModel}[res.Tier]; chunks > 0 && first.ModelVersion != want {
			// Chunks of another model than the tier that answered.
			o.mixed = true
		}
	}
	return res
}

func runStreamTail(c streamTailConfig, v streamTailVariant, seed uint64) sample {
	srv := newLoadServer(c.loadConfig, seed)
	defer srv.Close()
	// The fake holds a Stall before it writes the response's headers, in
	// place of Latency: the stream's first chunk comes StallFor after the
	// request, the rest ChunkDelay apart as for any other.
	slow := time.Duration(c.SlowFactor * float64(c.ProLatency))
	script := slowTail(c.ProLatency, c.SlowFactor, c.SlowShare)
	script.Chunks, script.ChunkDelay = c.Chunks, c.ChunkDelay
	srv.SetScript(proModel, script)
	srv.SetScript(flashModel, fakegemini.Script{Latency: latency(c.FlashLatency), FaultLatency: fakegemini.Latency{Fixed: 2 * time.Millisecond},
		Chunks: c.Chunks, ChunkDelay: c.ChunkDelay})
	r := &streamRig{srv: srv, clock: clock{t0: time.Now()}}
	r.trs = &transitions{clock: r.clock}
	pro := r.stage(c.loadConfig, "pro", proModel)
	pro.Hedge = v.hedge
	chain, err := fallback.NewStream(fallback.StreamConfig[string, gemrest.Chunk]{
		Stages: []fallback.StreamStage[string, gemrest.Chunk]{pro, r.stage(c.loadConfig, "flash", flashModel)}, Total: c.Deadline,
	})
	must(err)
	r.chain = chain
	defer r.close()
	st := watchStalls(r.clock)
	souts := closedLoop(r.clock, c.Clients, c.Duration, func(n int) streamOutcome { return r.doStream(n, c.Deadline) })
	outs := make([]outcome, len(souts))
	toFirst := make([]time.Duration, len(souts))
	hedged, mixed, waited := 0, 0, 0
	for i, o := range souts {
		outs[i], toFirst[i] = o.outcome, o.toFirst
		if o.toFirst >= slow {
			// The stall is exact and the consumer's clock runs around the
			// server's: only a request that got its first chunk from a
			// slow stream gets here.
			waited++
		}
		if o.hedged {
			hedged++
		}
		if o.mixed {
			mixed++
		}
	}
	s := sample{"stall": millis(st.end()), "excess": millis(st.excess(outs))}
	sum := summarize(outs)
	sum.fill(s)
	s["first50"], s["first98"], s["first99"] = millis(percentile(toFirst, 0.50)), millis(percentile(toFirst, 0.98)), millis(percentile(toFirst, 0.99))
	s["waited"] = ratio(waited, sum.requests)
	streams := srv.Requests(proModel) + srv.Requests(flashModel)
	s["streamsPerReq"] = ratio(int(streams), sum.requests)
	s["fromHedge"] = ratio(hedged, sum.requests)
	s["fromPro"] = ratio(sum.byTier["pro"], sum.requests)
	s["cancelled"] = float64(srv.Count(proModel, fakegemini.Canceled))
	s["mixed"] = float64(mixed)
	return s
}

func scenarioStreamTail(c streamTailConfig, runs int, seed uint64) *result {
	slow := time.Duration(c.SlowFactor * float64(c.ProLatency))
	res := &result{id: 14, title: fmt.Sprintf("slow tail, streamed: %.0f%% of pro's streams send their first chunk after %v (%.0f× its %v median), %d chunks %v apart; %d clients, %v deadline",
		100*c.SlowShare, slow, c.SlowFactor, c.ProLatency, c.Chunks, c.ChunkDelay, c.Clients, c.Deadline)}
	res.columns = []column{
		countCol("requests", "requests"), pctCol("success", "answered"),
		msCol("first50", "first chunk p50"), msCol("first98", "first chunk p98"), msCol("first99", "first chunk p99"),
		pctCol("waited", "first chunk from a slow stream"), msCol("p99", "whole stream p99"),
		msCol("overrun", "worst overrun"), msCol("stall", "max stall"),
		ratioCol("streamsPerReq", "upstream streams/request"), pctCol("fromPro", "answered by pro"), pctCol("fromHedge", "read from the hedge"),
		countCol("cancelled", "pro streams cancelled"), countCol("mixed", "answers mixing streams"),
	}
	// The judged delay is 1.5× the median: past every fast first chunk
	// (at most 1.1× the median), and early enough that a fast hedge lands
	// well before a slow first stream. At 2× (scenario 10's delay) a hedge
	// of the same model can cut p99 by 40% at the very most: shown, not
	// judged.
	early, fixed := 3*c.ProLatency/2, 2*c.ProLatency
	variants := []streamTailVariant{
		{name: "no hedging"},
		{name: fmt.Sprintf("hedge the first chunk on pro after %v (1.5× median), ≤ 10%% extra", early), hedge: fallback.Hedge{Delay: early, MaxExtra: 0.1}},
		{name: fmt.Sprintf("hedge the first chunk on pro after %v (2× median), ≤ 10%% extra, not judged", fixed), hedge: fallback.Hedge{Delay: fixed, MaxExtra: 0.1}},
	}
	for run := range runs {
		for _, v := range variants {
			res.row(v.name).runs = append(res.row(v.name).runs, runStreamTail(c, v, seed+uint64(run)))
		}
	}
	base, hedged := res.find(variants[0].name), res.find(variants[1].name)
	cut := 1 - paired(hedged, base, "first99")
	extra := paired(hedged, base, "streamsPerReq") - 1
	res.expect("hedged first chunk cuts time-to-first-chunk p99 by ≥ 40%", cut >= 0.4, fmtPct(cut))
	res.expect("with ≤ 10% extra upstream calls", extra <= 0.10, fmtPct(extra))
	res.expect("hedging loses no answer", hedged.median("success") >= base.median("success")-0.001,
		fmtPct(hedged.median("success"))+" vs "+fmtPct(base.median("success")))
	for _, r := range res.rows {
		res.expect(r.name+": no answer mixes two upstream streams (one responseId, the answering tier's model), every run",
			r.maxOf("mixed") == 0, fmtCount(r.maxOf("mixed"))+" (max over runs)")
	}
	// A hedge that is fast sends its first chunk at the delay plus pro's
	// own time to it, at most 1.1× the median (the script's jitter).
	ceiling := func(delay time.Duration) string {
		return fmtPct(1 - float64(delay+c.ProLatency+c.ProLatency/10)/float64(slow))
	}
	res.notes = append(res.notes, fmt.Sprintf("The most a hedge of the same model can cut: a fast hedge sends its first chunk at the delay plus pro's own %v–%v, so p99 can fall by at most %s after %v and %s after %v, before any overhead. A stream hedge never goes to the next tier, whose chunks would be another model's; the delay is what sets the ceiling. After %v the hedge cuts p99 by %s (paired median) with %s extra streams.",
		c.ProLatency-c.ProLatency/10, c.ProLatency+c.ProLatency/10, ceiling(early), early, ceiling(fixed), fixed,
		fixed, fmtPct(1-paired(res.find(variants[2].name), base, "first99")), fmtPct(paired(res.find(variants[2].name), base, "streamsPerReq")-1)))
	res.notes = append(res.notes, fmt.Sprintf("The hedge is as slow one time in ten as the first stream: a request waits for a slow first chunk when both are slow (%.0f%% × %.0f%% = %.0f%% of requests) or when the hedge budget had nothing left for it — %s of requests with the hedge, against %s without. That share sits on p99's own boundary, so a run with more double-slow draws keeps its p99 at the slow first chunk; one rank below, p98 is cut by %s.",
		100*c.SlowShare, 100*c.SlowShare, 100*c.SlowShare*c.SlowShare, fmtPct(hedged.median("waited")), fmtPct(base.median("waited")), fmtPct(1-paired(hedged, base, "first98"))))
	res.notes = append(res.notes, "Time to first chunk is measured by the consumer, from before it starts the stream to its first chunk; a request that got none counts its whole latency. Upstream streams are counted by the fake server, both models together; a cancelled loser counts.")
	inTime(res, c.loadConfig)
	return res
}
