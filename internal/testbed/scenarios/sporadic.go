package main

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
)

// ---------------------------------------------------------------------------
// Scenario 13: sporadic 429s with a long server delay, no outage.

// sporadicConfig is a closed loop through pro → flash where each tier
// answers a few per cent of its calls with a 429 that names no quota
// (Gemini's "Resource has been exhausted (e.g. check quota).") and asks,
// by Retry-After, for RetryAfter seconds — a shared backend shedding load
// now and then, not a quota spent.
type sporadicConfig struct {
	loadConfig
	// Share is each tier's share of 429s; RetryAfter the Retry-After
	// header's value in seconds.
	Share      float64
	RetryAfter string
}

func defaultSporadic() sporadicConfig {
	c := sporadicConfig{loadConfig: defaultLoad(), Share: 0.03, RetryAfter: "20"}
	c.Duration = 3 * time.Second
	return c
}

// runSporadic runs the loop with the Retry-After header sent, or hidden.
func runSporadic(c sporadicConfig, header bool, seed uint64) sample {
	srv := newLoadServer(c.loadConfig, seed)
	defer srv.Close()
	r := newRig(srv, c.defaultChain())
	defer r.close()
	p := fakegemini.Params{NoQuota: true}
	if header {
		p.RetryAfter = c.RetryAfter
	}
	for _, m := range []struct {
		model string
		lat   time.Duration
	}{{proModel, c.ProLatency}, {flashModel, c.FlashLatency}} {
		srv.SetScript(m.model, fakegemini.Script{
			Latency: latency(m.lat), FaultLatency: fakegemini.Latency{Fixed: 2 * time.Millisecond},
			Rules: []fakegemini.Rule{{Kind: fakegemini.RateLimited, P: c.Share, Params: p}},
		})
	}
	st := watchStalls(r.clock)
	var os []outcome
	allCooling := 0
	var mu sync.Mutex
	os = closedLoop(r.clock, c.Clients, c.Duration, func(n int) outcome {
		o := r.doChain(n, c.Deadline)
		if cooledOut(o.err) {
			mu.Lock()
			allCooling++
			mu.Unlock()
		}
		return o
	})
	stall := st.end()
	s := sample{"stall": millis(stall), "excess": millis(st.excess(os))}
	sum := summarize(os)
	sum.fill(s)
	s["fromPro"] = ratio(sum.byTier["pro"], sum.requests)
	s["allCooling"] = float64(allCooling)
	s["429s"] = float64(srv.Count(proModel, fakegemini.RateLimited) + srv.Count(flashModel, fakegemini.RateLimited))
	return s
}

// cooledOut reports whether a request failed with every tier skipped as
// cooling down after a server's 429s, without an upstream call.
func cooledOut(err error) bool {
	var fe *fallback.Error
	if !errors.As(err, &fe) || len(fe.Tiers) == 0 {
		return false
	}
	for _, a := range fe.Tiers {
		if a.Skip != fallback.SkipRateLimited {
			return false
		}
	}
	return true
}

func scenarioSporadic(c sporadicConfig, runs int, seed uint64) *result {
	res := &result{id: 13, title: fmt.Sprintf("sporadic 429s (%.0f%% of each tier's calls, Retry-After %ss, no quota named), no outage; %d clients, %v deadline",
		c.Share*100, c.RetryAfter, c.Clients, c.Deadline)}
	res.columns = append(append([]column{}, loadColumns...),
		countCol("429s", "429s"), pctCol("fromPro", "answered by pro"), countCol("allCooling", "failed with every tier cooling"))
	with, without := "tierguard, Retry-After sent", "tierguard, Retry-After hidden"
	for run := range runs {
		res.row(with).runs = append(res.row(with).runs, runSporadic(c, true, seed+uint64(run)))
		res.row(without).runs = append(res.row(without).runs, runSporadic(c, false, seed+uint64(run)))
	}
	w, wo := res.find(with), res.find(without)
	gap := (wo.median("success") - w.median("success")) * 100
	res.expect("success with the header within 0.5 points of success without it", gap <= 0.5,
		fmt.Sprintf("%s vs %s (%.2f points)", fmtPct(w.median("success")), fmtPct(wo.median("success")), gap))
	res.expect("no request fails because every tier was cooling after a sporadic 429, every run", w.maxOf("allCooling") == 0,
		fmt.Sprintf("%.0f at most", w.maxOf("allCooling")))
	res.notes = append(res.notes, "A 429 that names no quota is its request's own: a delay longer than Stage.MaxRetryWait (1 s) sends that request "+
		"to the next tier, and other requests keep calling the tier; only a per-minute quota named, a storm (3 429s within 10 s that are "+
		"half of the tier's calls) or a failed probe takes a tier out for everyone (fallback.CoolDown).")
	inTime(res, c.loadConfig)
	return res
}
