package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/internal/fakegemini"
	"github.com/tierguard/tierguard/internal/gemrest"
)

// numQuestions is the size of the question pool: small enough that the
// cache holds an answer to most questions after the healthy start.
const numQuestions = 400

// script installs the story's faults on the fake server. Rule windows are
// on the server's clock, t0 being the start of the run.
func script(srv *fakegemini.Server, cfg config, t0 time.Time) {
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	srv.SetScript(proModel, fakegemini.Script{
		Latency:      fakegemini.Latency{Fixed: 40 * time.Millisecond, Jitter: 40 * time.Millisecond},
		FaultLatency: fakegemini.Latency{Fixed: 5 * time.Millisecond, Jitter: 10 * time.Millisecond},
		Rules: []fakegemini.Rule{
			{Kind: fakegemini.Unavailable, P: fakegemini.Always, From: at(cfg.OutageStart), Until: at(cfg.OutageStart + cfg.OutageLen)},
			{Kind: fakegemini.RateLimited, P: fakegemini.Always, From: at(cfg.StormStart), Until: at(cfg.StormStart + cfg.StormLen),
				Params: fakegemini.Params{RetryDelay: cfg.StormRetry}},
			// Held until the client's per-try timeout gives up.
			{Kind: fakegemini.Stall, P: cfg.Stall},
			// A 200 whose text is not JSON: `{"answer": "this JSON is cut off`.
			{Kind: fakegemini.MalformedJSON, P: cfg.Malformed},
		},
	})
	srv.SetScript(flashModel, fakegemini.Script{
		Latency:      fakegemini.Latency{Fixed: 15 * time.Millisecond, Jitter: 20 * time.Millisecond},
		FaultLatency: fakegemini.Latency{Fixed: 5 * time.Millisecond},
		Rules:        []fakegemini.Rule{{Kind: fakegemini.Unavailable, P: cfg.FlashErrors}},
	})
}

// run plays the story and returns its summary. Live progress goes to
// progress unless it is nil. ctx ending stops new requests early.
func run(ctx context.Context, cfg config, progress io.Writer) (*summary, error) {
	srv := fakegemini.New(fakegemini.WithSeed(cfg.Seed), fakegemini.WithRetired(legacyModel))
	defer srv.Close()

	var catalog *fallback.Catalog
	if cfg.Catalog {
		lister, err := gemrest.New(gemrest.Config{BaseURL: srv.URL(), APIKey: "demo-key", Model: proModel, HTTPClient: srv.Client()})
		if err != nil {
			return nil, err
		}
		if catalog, err = fallback.NewCatalog(lister.ListModels, fallback.CatalogOptions{}); err != nil {
			return nil, err
		}
		if err := catalog.Refresh(ctx); err != nil {
			return nil, err
		}
	}

	con := newConsole(progress)
	rec := newRecorder(cfg)
	chain, g, err := buildChain(cfg, srv, catalog, func(tr breaker.Transition) {
		if t, ok := rec.transition(tr); ok {
			con.event(fmt.Sprintf("%5.1fs  breaker %s: %s → %s (%s)", t.at.Seconds(), t.name, t.from, t.to, t.reason))
		}
	})
	if err != nil {
		return nil, err
	}

	// The clock starts now: the scripts' windows and every record are
	// relative to it.
	rec.start(time.Now())
	script(srv, cfg, rec.t0)

	stopProgress := con.run(rec, g)
	var wg sync.WaitGroup
	for i := range cfg.Clients {
		wg.Go(func() { client(ctx, cfg, chain, rec, i) })
	}
	wg.Wait()
	stopProgress()

	// Silence the breakers before the report: stop recording, then reset
	// them, which also stops their cooldown timers.
	rec.freeze()
	for _, b := range g.breakers {
		b.Reset()
	}
	return rec.summarize(srv.Stats(), chain.Stages()), nil
}

// client sends one request after another until the run's duration ends.
func client(ctx context.Context, cfg config, chain *fallback.Chain[question, gemrest.Response], rec *recorder, id int) {
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(id)+1))
	var t tally
	defer rec.merge(&t)
	for ctx.Err() == nil && time.Since(rec.t0) < cfg.Duration {
		q := rng.IntN(numQuestions)
		in := question{ID: q, Text: fmt.Sprintf("Question %d: what should I know about topic %d?", q, q)}
		start := time.Now()
		// The request's own context carries no deadline: the chain's Total
		// is the deadline. ctx only stops the loop, so the last requests
		// finish rather than fail.
		res, err := chain.Do(context.Background(), in)
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
