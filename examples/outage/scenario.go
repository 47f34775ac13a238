package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/catalog"
	"github.com/tierguard/tierguard/fallback/chaos"
	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	"github.com/tierguard/tierguard/internal/testbed/gemrest"
	"github.com/tierguard/tierguard/otelx"
)

// numQuestions is the size of the question pool: small enough that the
// cache holds an answer to most questions after the healthy start.
const numQuestions = 400

// script installs the story's faults on the fake server. Rule windows are
// on the server's clock, t0 being the start of the run.
func script(srv *fakegemini.Server, cfg config, t0 time.Time) {
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	// Connections drop and answers lose their finish reason in the first
	// healthy phase only (the whole run when there is no outage or storm).
	// The fake's rules cannot tell a stream from a unary call, and the
	// failures they cause count against pro's breaker: later, they would
	// fail its half-open probes at random and blur the recovery story.
	var flakyUntil time.Time
	for _, w := range [][2]time.Duration{{cfg.OutageStart, cfg.OutageLen}, {cfg.StormStart, cfg.StormLen}} {
		if w[1] > 0 && (flakyUntil.IsZero() || at(w[0]).Before(flakyUntil)) {
			flakyUntil = at(w[0])
		}
	}
	srv.SetScript(proModel, fakegemini.Script{
		Latency:      fakegemini.Latency{Fixed: 40 * time.Millisecond, Jitter: 40 * time.Millisecond},
		FaultLatency: fakegemini.Latency{Fixed: 5 * time.Millisecond, Jitter: 10 * time.Millisecond},
		// Streams: six chunks, 25ms apart.
		Chunks:     6,
		ChunkDelay: 25 * time.Millisecond,
		Rules: []fakegemini.Rule{
			{Kind: fakegemini.Unavailable, P: fakegemini.Always, From: at(cfg.OutageStart), Until: at(cfg.OutageStart + cfg.OutageLen)},
			{Kind: fakegemini.RateLimited, P: fakegemini.Always, From: at(cfg.StormStart), Until: at(cfg.StormStart + cfg.StormLen),
				Params: fakegemini.Params{RetryDelay: cfg.StormRetry}},
			// Held until the client's per-try (or first-chunk) timeout
			// gives up.
			{Kind: fakegemini.Stall, P: cfg.Stall},
			// A 200 whose text is not JSON: `{"answer": "this JSON is cut off`.
			{Kind: fakegemini.MalformedJSON, P: cfg.Malformed},
			// The connection drops mid-body: a stream after two chunks (too
			// late to fall back: it ends incomplete), a unary answer halfway
			// (retried).
			{Kind: fakegemini.StreamCut, P: cfg.StreamCuts, Until: flakyUntil, Params: fakegemini.Params{CutAfter: 2}},
			// The answer ends without a finish reason: a stream is
			// incomplete, a unary answer is invalid output.
			{Kind: fakegemini.NoFinishReason, P: cfg.NoFinish, Until: flakyUntil},
		},
	})
	srv.SetScript(flashModel, fakegemini.Script{
		Latency:      fakegemini.Latency{Fixed: 15 * time.Millisecond, Jitter: 20 * time.Millisecond},
		FaultLatency: fakegemini.Latency{Fixed: 5 * time.Millisecond},
		Chunks:       3,
		ChunkDelay:   15 * time.Millisecond,
		Rules:        []fakegemini.Rule{{Kind: fakegemini.Unavailable, P: cfg.FlashErrors}},
	})
}

// run plays the story and returns its summary. Live progress goes to
// progress unless it is nil. ctx ending stops new requests early.
func run(ctx context.Context, cfg config, progress io.Writer) (*summary, error) {
	srv := fakegemini.New(fakegemini.WithSeed(cfg.Seed), fakegemini.WithRetired(legacyModel))
	defer srv.Close()

	var models *catalog.Catalog
	if cfg.Catalog {
		lister, err := gemrest.New(gemrest.Config{BaseURL: srv.URL(), APIKey: "demo-key", Model: proModel, HTTPClient: srv.Client()})
		if err != nil {
			return nil, err
		}
		if models, err = catalog.New(lister.ListModels, catalog.Options{}); err != nil {
			return nil, err
		}
		if err := models.Refresh(ctx); err != nil {
			return nil, err
		}
	}

	con := newConsole(progress)
	rec := newRecorder(cfg)
	chain, g, err := buildChain(cfg, srv, models, func(tr breaker.Transition) {
		if t, ok := rec.transition(tr); ok {
			con.event(fmt.Sprintf("%5.1fs  breaker %s: %s → %s (%s)", t.at.Seconds(), t.name, t.from, t.to, t.reason))
		}
	})
	if err != nil {
		return nil, err
	}
	var streams *fallback.StreamChain[question, gemrest.Chunk]
	if cfg.StreamClients > 0 {
		if streams, err = buildStreamChain(cfg, srv, models, g); err != nil {
			return nil, err
		}
	}
	ledger, err := newLedger()
	if err != nil {
		return nil, err
	}
	defer ledger.Close()
	if _, err := ledger.Attach(chain); err != nil {
		return nil, err
	}
	var m *meters
	if cfg.Metrics || cfg.reader != nil {
		chains := []otelx.Chain{chain}
		if streams != nil {
			chains = append(chains, streams)
		}
		known := slices.DeleteFunc(slices.Clone(tenants), func(t string) bool { return slices.Contains(cfg.undeclared, t) })
		if m, err = newMeters(cfg.Metrics, cfg.reader, ledger, known, chains...); err != nil {
			return nil, err
		}
	}

	if cfg.beforeTraffic != nil {
		cfg.beforeTraffic()
	}
	// The clock starts now: the scripts' windows and every record are
	// relative to it.
	rec.start(time.Now())
	script(srv, cfg, rec.t0)
	// The drill, if any: pro's breaker forced open for its window, given
	// back when it ends (or when the run does).
	var drills chaos.Switch
	if cfg.DrillLen > 0 {
		if err := drills.Start(chaos.Drill{Name: "pro forced open", Start: rec.t0.Add(cfg.DrillStart), For: cfg.DrillLen,
			Open: []chaos.Open{{Breaker: g.breaker("pro")}}}); err != nil {
			return nil, err
		}
	}

	stopProgress := con.run(rec, g)
	var wg sync.WaitGroup
	for i := range cfg.Clients {
		wg.Go(func() { client(ctx, cfg, chain, ledger, rec, i) })
	}
	for i := range cfg.StreamClients {
		wg.Go(func() { streamClient(ctx, cfg, streams, rec, i) })
	}
	wg.Wait()
	stopProgress()

	drills.Stop()
	// Read the metrics while the breakers still hold their last state.
	var report *metricsReport
	if cfg.Metrics {
		if report, err = m.collect(context.Background()); err != nil {
			m.stop(context.Background())
			return nil, err
		}
	}
	// A Prometheus exporter keeps serving the last figures until the
	// caller is done with it; otherwise the instrumentation stops here.
	var stopMetrics func()
	switch {
	case m != nil && cfg.reader != nil:
		stopMetrics = func() { m.stop(context.Background()) }
	case m != nil:
		m.stop(context.Background())
	}
	// Silence the breakers before the report: stop recording, then reset
	// them, which also stops their cooldown timers.
	rec.freeze()
	for _, b := range g.breakers {
		b.Reset()
	}
	// A breaker's hook may still be on its way from a timer that fired
	// before the reset: nothing reaches the console after the run.
	con.mute()
	sum := rec.summarize(srv.Stats(), chain.Stages())
	sum.metrics = report
	sum.stopMetrics = stopMetrics
	sum.bulkheads = bulkheadStats(chain.Stages())
	sum.spend = spendSummary(ledger)
	return sum, nil
}

// bulkheadStats reads the chain's bulkheads' figures at the end of the run.
func bulkheadStats(stages []fallback.StageInfo) map[string]bulkhead.Stats {
	out := map[string]bulkhead.Stats{}
	for _, st := range stages {
		if st.Bulkhead != nil {
			out[st.Bulkhead.Name()] = st.Bulkhead.Stats()
		}
	}
	return out
}

// client sends one request after another until the run's duration ends.
func client(ctx context.Context, cfg config, chain *fallback.Chain[question, gemrest.Response], ledger *spend.Ledger, rec *recorder, id int) {
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(id)+1))
	var t tally
	defer rec.merge(&t)
	for ctx.Err() == nil && time.Since(rec.t0) < cfg.Duration {
		q := rng.IntN(numQuestions)
		in := question{ID: q, Text: fmt.Sprintf("Question %d: what should I know about topic %d?", q, q)}
		start := time.Now()
		// The request's own context carries no deadline: the chain's Total
		// is the deadline. ctx only stops the loop, so the last requests
		// finish rather than fail. The ledger's ticket is the context.
		res, err := chain.Do(ticket(ledger, id), in)
		rec.record(&t, start, time.Now(), &res, err)
		if cfg.Think > 0 {
			pause := time.Duration(rng.Int64N(int64(2 * cfg.Think)))
			select {
			case <-time.After(pause):
			case <-ctx.Done():
			}
		}
	}
}
