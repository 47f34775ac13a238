package main

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/fallback/chaos"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	"github.com/tierguard/tierguard/internal/testbed/gemrest"
)

// loadConfig is the closed-loop load of scenarios 2–6: Clients send one
// request after another for Duration, each with a Deadline, through a chain
// pro → flash.
type loadConfig struct {
	Clients  int
	Duration time.Duration
	Deadline time.Duration
	Cooldown time.Duration
	// ProLatency and FlashLatency are the fake's time to a 200 (plus up
	// to a quarter more, uniformly).
	ProLatency, FlashLatency time.Duration
	// Slack is how far past its deadline a request may end and still count
	// as in time (the clock reads around Do, scheduling).
	Slack time.Duration
}

func defaultLoad() loadConfig {
	return loadConfig{
		Clients: 16, Duration: 2 * time.Second, Deadline: time.Second, Cooldown: 250 * time.Millisecond,
		ProLatency: 40 * time.Millisecond, FlashLatency: 20 * time.Millisecond, Slack: 5 * time.Millisecond,
	}
}

func latency(d time.Duration) fakegemini.Latency {
	return fakegemini.Latency{Fixed: d, Jitter: d / 4}
}

// defaultChain is the chain of scenarios 2–6: three attempts per tier with
// a shared retry budget, no per-try timeout (each attempt may use what the
// deadline leaves after the reserve for the next tier).
func (c loadConfig) defaultChain() chainOpts {
	return chainOpts{
		deadline: c.Deadline, clients: c.Clients, cooldown: c.Cooldown,
		pro:   tierOpts{attempts: 3, budget: true},
		flash: tierOpts{attempts: 3, budget: true},
	}
}

// newLoadServer starts a fake with flash healthy and pro on script.
func newLoadServer(c loadConfig, seed uint64) *fakegemini.Server {
	srv := fakegemini.New(fakegemini.WithSeed(seed))
	srv.SetScript(flashModel, fakegemini.Script{Latency: latency(c.FlashLatency), FaultLatency: fakegemini.Latency{Fixed: 2 * time.Millisecond}})
	return srv
}

// inTime checks the hard invariant of every closed-loop scenario: no
// request ends later than its deadline plus the slack, in any run — beyond
// the time the machine kept the process from running while that request
// was in flight (a process kept off the CPU for 300 ms returns 300 ms late,
// whatever the library does).
func inTime(res *result, c loadConfig) {
	for _, r := range res.rows {
		res.expect(r.name+": no request ends later than its deadline + "+c.Slack.String()+", stalls of the machine discounted, every run",
			r.maxOf("excess") <= millis(c.Slack),
			fmt.Sprintf("worst overrun %.1f ms, %.1f ms beyond the stalls it overlapped (max over runs)", r.maxOf("overrun"), max(r.maxOf("excess"), 0)))
	}
}

var loadColumns = []column{
	countCol("requests", "requests"), pctCol("success", "success"),
	msCol("p50", "p50"), msCol("p99", "p99"), msCol("overrun", "worst overrun"), msCol("stall", "max stall"),
}

// ---------------------------------------------------------------------------
// Scenario 2: outage.

type outageConfig struct {
	loadConfig
	Start, Len time.Duration
}

func defaultOutage() outageConfig {
	c := outageConfig{loadConfig: defaultLoad(), Start: 500 * time.Millisecond, Len: 2 * time.Second}
	c.Duration = 3500 * time.Millisecond
	return c
}

func runOutage(c outageConfig, seed uint64) sample {
	srv := newLoadServer(c.loadConfig, seed)
	defer srv.Close()
	r := newRig(srv, c.defaultChain())
	defer r.close()
	end := c.Start + c.Len
	srv.SetScript(proModel, fakegemini.Script{
		Latency: latency(c.ProLatency), FaultLatency: fakegemini.Latency{Fixed: 2 * time.Millisecond},
		Rules: []fakegemini.Rule{{Kind: fakegemini.Unavailable, P: fakegemini.Always, From: r.clock.t0.Add(c.Start), Until: r.clock.t0.Add(end)}},
	})
	st := watchStalls(r.clock)
	os := closedLoop(r.clock, c.Clients, c.Duration, func(n int) outcome { return r.doChain(n, c.Deadline) })
	stall := st.end()

	s := sample{"stall": millis(stall), "excess": millis(st.excess(os))}
	summarize(os).fill(s)
	during := within(os, c.Start, end)
	proCalls := r.log.count("pro", c.Start, end)
	s["outReq"] = float64(len(during))
	s["outPro"] = float64(proCalls)
	s["amp"] = ratio(proCalls, len(during))
	s["outSuccess"] = summarize(during).successRatio()
	if opened, ok := r.trs.first("pro", breaker.Open, c.Start); ok && opened < end {
		s["openAfter"] = millis(opened - c.Start)
		s["afterOpen"] = float64(r.log.count("pro", opened, end))
		s["halfOpens"] = float64(r.trs.countTo("pro", breaker.HalfOpen, opened, end))
		if closed, ok := r.trs.first("pro", breaker.Closed, end); ok {
			s["recovery"] = millis(closed - end)
		} else {
			s["recovery"] = math.NaN()
		}
	}
	return s
}

// successRatio returns the share of requests answered.
func (s summary) successRatio() float64 { return ratio(s.answered, s.requests) }

func scenarioOutage(c outageConfig, runs int, seed uint64) *result {
	res := &result{id: 2, title: fmt.Sprintf("outage: pro answers 503 from %v for %v, flash healthy; %d clients, %v deadline, breaker cooldown %v",
		c.Start, c.Len, c.Clients, c.Deadline, c.Cooldown)}
	res.columns = append(append([]column{}, loadColumns...),
		pctCol("outSuccess", "success in outage"), countCol("outReq", "requests in outage"), countCol("outPro", "pro calls in outage"),
		ratioCol("amp", "pro calls/request"), msCol("openAfter", "opened after"), countCol("afterOpen", "pro calls after open"),
		countCol("halfOpens", "half-open windows"), msCol("recovery", "recovery → closed"))
	name := "tierguard pro → flash"
	for run := range runs {
		res.row(name).runs = append(res.row(name).runs, runOutage(c, seed+uint64(run)))
	}
	r := res.find(name)
	res.expect("end-to-end success ≥ 99%", r.median("success") >= 0.99, fmtPct(r.median("success")))
	res.expect("pro calls per request during the outage ≤ 1.05", r.median("amp") <= 1.05, fmtRatio(r.median("amp")))
	var worst float64
	for _, s := range r.runs {
		worst = max(worst, s["afterOpen"]-s["halfOpens"])
	}
	res.expect("after the breaker opened, pro calls ≤ probes (one per half-open window), every run", worst <= 0,
		fmt.Sprintf("worst excess %.0f", worst))
	res.expect("breaker closes within cooldown + 200 ms of recovery", r.maxOf("recovery") <= millis(c.Cooldown+200*time.Millisecond),
		fmt.Sprintf("median %.0f ms, max %.0f ms", r.median("recovery"), r.maxOf("recovery")))
	inTime(res, c.loadConfig)
	res.notes = append(res.notes, "pro calls are counted client-side by when they started; \"half-open windows\" counts the breaker's transitions to half-open between its first opening and the end of the outage (one probe each).")
	return res
}

// ---------------------------------------------------------------------------
// Scenario 3: 20% injected 503.

type flakyConfig struct {
	loadConfig
	Unavailable float64
}

func defaultFlaky() flakyConfig { return flakyConfig{loadConfig: defaultLoad(), Unavailable: 0.2} }

// runFlaky runs scenario 3. With viaChaos the 503s are not the fake
// server's but Gemini's real 503 body injected by chaos.Tier in front of
// pro's client, 2ms after the call as the fake's are: the same scenario
// through the users' fault-injection API.
func runFlaky(c flakyConfig, proOnly, viaChaos bool, seed uint64) sample {
	srv := newLoadServer(c.loadConfig, seed)
	defer srv.Close()
	o := c.defaultChain()
	if proOnly {
		o.proOnly, o.pro.budget = true, false
	}
	var rules []fakegemini.Rule
	if viaChaos {
		o.proFaults = &chaos.Switch{}
		must(o.proFaults.Start(chaos.Drill{Name: "scenario 3", Seed: seed, For: c.Duration + c.Deadline + time.Second, Rules: []chaos.Rule{{
			Tier: "pro", Rate: c.Unavailable, Fault: chaos.Fail(chaos.GeminiOverloaded).Delayed(2*time.Millisecond, 2*time.Millisecond),
		}}}))
		defer o.proFaults.Stop()
	} else {
		rules = []fakegemini.Rule{{Kind: fakegemini.Unavailable, P: c.Unavailable}}
	}
	r := newRig(srv, o)
	defer r.close()
	srv.SetScript(proModel, fakegemini.Script{
		Latency: latency(c.ProLatency), FaultLatency: fakegemini.Latency{Fixed: 2 * time.Millisecond}, Rules: rules,
	})
	st := watchStalls(r.clock)
	os := closedLoop(r.clock, c.Clients, c.Duration, func(n int) outcome { return r.doChain(n, c.Deadline) })
	stall := st.end()
	s := sample{"stall": millis(stall), "excess": millis(st.excess(os))}
	sum := summarize(os)
	sum.fill(s)
	s["fromPro"] = ratio(sum.byTier["pro"], sum.requests)
	s["fromFlash"] = ratio(sum.byTier["flash"], sum.requests)
	s["proPerReq"] = ratio(r.log.count("pro", 0, math.MaxInt64), sum.requests)
	s["opens"] = float64(r.trs.countTo("pro", breaker.Open, 0, math.MaxInt64))
	return s
}

func scenarioFlaky(c flakyConfig, runs int, seed uint64) *result {
	res := &result{id: 3, title: fmt.Sprintf("%.0f%% injected 503 on pro; %d clients, %v deadline", 100*c.Unavailable, c.Clients, c.Deadline)}
	res.columns = append(append([]column{}, loadColumns...),
		pctCol("fromPro", "answered by pro"), pctCol("fromFlash", "answered by flash"),
		ratioCol("proPerReq", "pro calls/request"), countCol("opens", "pro breaker opened"))
	for run := range runs {
		for _, v := range []struct {
			name              string
			proOnly, viaChaos bool
		}{
			{"tierguard pro → flash (retry budget)", false, false},
			{"tierguard pro only (3 attempts, no budget)", true, false},
			{"tierguard pro → flash, 503s from chaos.Tier", false, true},
		} {
			res.row(v.name).runs = append(res.row(v.name).runs, runFlaky(c, v.proOnly, v.viaChaos, seed+uint64(run)))
		}
	}
	r := res.find("tierguard pro → flash (retry budget)")
	res.expect("pro → flash: end-to-end success ≥ 99.9%", r.median("success") >= 0.999, fmtPct(r.median("success")))
	rc := res.find("tierguard pro → flash, 503s from chaos.Tier")
	res.expect("the same with chaos.Tier's 503s: end-to-end success ≥ 99.9%", rc.median("success") >= 0.999, fmtPct(rc.median("success")))
	inTime(res, c.loadConfig)
	return res
}

// ---------------------------------------------------------------------------
// Scenario 4: 429 storm with RetryInfo.

type stormConfig struct {
	loadConfig
	Start, Len time.Duration
	RetryDelay time.Duration
}

func defaultStorm() stormConfig {
	c := stormConfig{loadConfig: defaultLoad(), Start: 250 * time.Millisecond, Len: 2 * time.Second, RetryDelay: 200 * time.Millisecond}
	c.Duration = 2500 * time.Millisecond
	return c
}

// stormRun runs the closed loop through a 429 storm on pro from c.Start
// for c.Len, with the server's RetryInfo of c.RetryDelay: through the
// chain, or through a plain loop that tries pro plainAttempts times. It
// returns the rig (its call log), every request's outcome and the sample's
// load columns.
func stormRun(c stormConfig, plain bool, plainAttempts int, seed uint64) (*rig, []outcome, sample, func()) {
	srv := newLoadServer(c.loadConfig, seed)
	r := newRig(srv, c.defaultChain())
	end := c.Start + c.Len
	srv.SetScript(proModel, fakegemini.Script{
		Latency: latency(c.ProLatency), FaultLatency: fakegemini.Latency{Fixed: 2 * time.Millisecond},
		Rules: []fakegemini.Rule{{Kind: fakegemini.RateLimited, P: fakegemini.Always, From: r.clock.t0.Add(c.Start), Until: r.clock.t0.Add(end),
			Params: fakegemini.Params{RetryDelay: c.RetryDelay}}},
	})
	do := func(n int) outcome { return r.doChain(n, c.Deadline) }
	if plain {
		tiers := []*gemrest.Client{client(srv, proModel, "pro"), client(srv, flashModel, "flash")}
		do = func(n int) outcome {
			ctx, cancel := context.WithTimeout(context.Background(), c.Deadline)
			defer cancel()
			o := outcome{start: r.clock.now(), deadline: c.Deadline}
			o.tier, o.calls, o.err = plainTwoTier(ctx, r.log, tiers, plainAttempts, 50*time.Millisecond, fmt.Sprintf("Question %d", n))
			o.end = r.clock.now()
			return o
		}
	}
	st := watchStalls(r.clock)
	os := closedLoop(r.clock, c.Clients, c.Duration, do)
	stall := st.end()
	s := sample{"stall": millis(stall), "excess": millis(st.excess(os))}
	summarize(os).fill(s)
	return r, os, s, func() { r.close(); srv.Close() }
}

func runStorm(c stormConfig, plain bool, seed uint64) sample {
	r, os, s, done := stormRun(c, plain, 3, seed)
	defer done()
	end := c.Start + c.Len
	during := within(os, c.Start, end)
	pro, flash := r.log.count("pro", c.Start, end), r.log.count("flash", c.Start, end)
	s["stormReq"] = float64(len(during))
	s["amp"] = ratio(pro, len(during))
	s["upPerReq"] = ratio(pro+flash, len(during))
	s["stormSuccess"] = summarize(during).successRatio()
	return s
}

func scenarioStorm(c stormConfig, runs int, seed uint64) *result {
	res := &result{id: 4, title: fmt.Sprintf("429 storm on pro for %v, RetryInfo %v; flash healthy; %d clients, %v deadline", c.Len, c.RetryDelay, c.Clients, c.Deadline)}
	res.columns = append(append([]column{}, loadColumns...),
		countCol("stormReq", "requests in storm"), pctCol("stormSuccess", "success in storm"),
		ratioCol("amp", "pro calls/request"), ratioCol("upPerReq", "upstream calls/request"))
	for run := range runs {
		for _, v := range []struct {
			name  string
			plain bool
		}{{"tierguard pro → flash", false}, {"plain loop: 3 attempts honouring RetryInfo, then flash", true}} {
			res.row(v.name).runs = append(res.row(v.name).runs, runStorm(c, v.plain, seed+uint64(run)))
		}
	}
	r := res.find("tierguard pro → flash")
	res.expect("tierguard: pro calls per request in the storm ≤ 1.05", r.median("amp") <= 1.05, fmtRatio(r.median("amp")))
	res.expect("tierguard: success in the storm ≥ 99%", r.median("stormSuccess") >= 0.99, fmtPct(r.median("stormSuccess")))
	inTime(res, c.loadConfig)
	return res
}

// ---------------------------------------------------------------------------
// Scenario 12: a 429 storm whose RetryInfo outlasts the request's deadline.

// longStormConfig is scenario 4's storm with a server delay longer than a
// request's whole deadline: the request told to wait cannot, and the
// chain must remember the delay for the requests after it.
func defaultLongStorm() stormConfig {
	c := stormConfig{loadConfig: defaultLoad(), Start: 250 * time.Millisecond, Len: 7 * time.Second, RetryDelay: 3 * time.Second}
	c.Duration = 11500 * time.Millisecond
	return c
}

func runLongStorm(c stormConfig, plain bool, seed uint64) sample {
	r, os, s, done := stormRun(c, plain, 1, seed)
	defer done()
	end := c.Start + c.Len
	during := within(os, c.Start, end)
	windows := float64((c.Len + c.RetryDelay - 1) / c.RetryDelay)
	s["stormReq"] = float64(len(during))
	s["proPerWindow"] = float64(r.log.count("pro", c.Start, end)) / windows
	s["stormSuccess"] = summarize(during).successRatio()
	// Once the server's delay after the storm has passed, pro answers.
	after := summarize(within(os, end+c.RetryDelay, c.Duration))
	s["proAfter"] = ratio(after.byTier["pro"], after.requests)
	return s
}

func scenarioLongStorm(c stormConfig, runs int, seed uint64) *result {
	res := &result{id: 12, title: fmt.Sprintf("429 storm on pro for %v, RetryInfo %v (longer than the %v deadline); flash healthy; %d clients", c.Len, c.RetryDelay, c.Deadline, c.Clients)}
	res.columns = append(append([]column{}, loadColumns...),
		countCol("stormReq", "requests in storm"), pctCol("stormSuccess", "success in storm"),
		ratioCol("proPerWindow", "pro calls per RetryInfo delay"), pctCol("proAfter", "answered by pro after the delay"))
	for run := range runs {
		for _, v := range []struct {
			name  string
			plain bool
		}{{"tierguard pro → flash", false}, {"plain loop: pro once, then flash", true}} {
			res.row(v.name).runs = append(res.row(v.name).runs, runLongStorm(c, v.plain, seed+uint64(run)))
		}
	}
	r := res.find("tierguard pro → flash")
	// One call per delay; the clients already in flight when the storm
	// begins get their 429s too.
	res.expect("tierguard: pro calls per delay ≤ 2", r.median("proPerWindow") <= 2, fmtRatio(r.median("proPerWindow")))
	res.expect("tierguard: success in the storm ≥ 99%", r.median("stormSuccess") >= 0.99, fmtPct(r.median("stormSuccess")))
	res.expect("tierguard: back on pro after the delay ≥ 90%", r.median("proAfter") >= 0.9, fmtPct(r.median("proAfter")))
	inTime(res, c.loadConfig)
	return res
}

// ---------------------------------------------------------------------------
// Scenario 5: slow primary.

type slowConfig struct {
	loadConfig
	ProSlow    time.Duration
	TryTimeout time.Duration
}

func defaultSlow() slowConfig {
	return slowConfig{loadConfig: defaultLoad(), ProSlow: 3 * time.Second, TryTimeout: 300 * time.Millisecond}
}

func runSlow(c slowConfig, try time.Duration, seed uint64) sample {
	srv := newLoadServer(c.loadConfig, seed)
	defer srv.Close()
	o := c.defaultChain()
	o.pro.tryTimeout = try
	r := newRig(srv, o)
	defer r.close()
	srv.SetScript(proModel, fakegemini.Script{Latency: fakegemini.Latency{Fixed: c.ProSlow}})
	st := watchStalls(r.clock)
	os := closedLoop(r.clock, c.Clients, c.Duration, func(n int) outcome { return r.doChain(n, c.Deadline) })
	stall := st.end()
	s := sample{"stall": millis(stall), "excess": millis(st.excess(os))}
	sum := summarize(os)
	sum.fill(s)
	s["fromFlash"] = ratio(sum.byTier["flash"], sum.requests)
	s["proCalls"] = float64(r.log.count("pro", 0, math.MaxInt64))
	inTime := 0
	for _, o := range os {
		if o.err == nil && o.overrun() <= 0 {
			inTime++
		}
	}
	s["inTime"] = ratio(inTime, sum.requests)
	return s
}

func scenarioSlow(c slowConfig, runs int, seed uint64) *result {
	res := &result{id: 5, title: fmt.Sprintf("slow pro (%v, beyond the %v deadline), flash healthy; %d clients", c.ProSlow, c.Deadline, c.Clients)}
	res.columns = append(append([]column{}, loadColumns...),
		pctCol("fromFlash", "answered by flash"), pctCol("inTime", "answered within deadline"), countCol("proCalls", "pro calls"))
	variants := []struct {
		name string
		try  time.Duration
	}{{"tierguard, no per-try timeout (deadline − reserve)", 0}, {fmt.Sprintf("tierguard, pro TryTimeout %v", c.TryTimeout), c.TryTimeout}}
	for run := range runs {
		for _, v := range variants {
			res.row(v.name).runs = append(res.row(v.name).runs, runSlow(c, v.try, seed+uint64(run)))
		}
	}
	res.notes = append(res.notes, "Without a per-try timeout pro's attempt may run to deadline − reserve, the reserve being flash's MinAttempt (100 ms) "+
		"plus a tenth, so that the time it takes to give up on pro still leaves flash a useful attempt; the requests that reach pro "+
		"(the first ones, and each half-open probe) are answered by flash near the deadline. A per-try timeout answers them sooner.")
	for _, v := range variants {
		r := res.find(v.name)
		res.expect(v.name+": every request answered by flash within the deadline", r.median("inTime") >= 1 && r.median("fromFlash") >= 1,
			fmt.Sprintf("%s in time, %s by flash", fmtPct(r.median("inTime")), fmtPct(r.median("fromFlash"))))
	}
	inTime(res, c.loadConfig)
	return res
}

// ---------------------------------------------------------------------------
// Scenario 6: invalid output.

type invalidConfig struct {
	loadConfig
	Shares []float64
}

func defaultInvalid() invalidConfig {
	return invalidConfig{loadConfig: defaultLoad(), Shares: []float64{1, 0.3}}
}

func runInvalid(c invalidConfig, share float64, seed uint64) sample {
	srv := newLoadServer(c.loadConfig, seed)
	defer srv.Close()
	r := newRig(srv, c.defaultChain())
	defer r.close()
	srv.SetScript(proModel, fakegemini.Script{
		Latency: latency(c.ProLatency), Rules: []fakegemini.Rule{{Kind: fakegemini.MalformedJSON, P: share}},
	})
	st := watchStalls(r.clock)
	os := closedLoop(r.clock, c.Clients, c.Duration, func(n int) outcome { return r.doChain(n, c.Deadline) })
	stall := st.end()
	s := sample{"stall": millis(stall), "excess": millis(st.excess(os))}
	sum := summarize(os)
	sum.fill(s)
	s["fromFlash"] = ratio(sum.byTier["flash"], sum.requests)
	s["invalid"] = float64(srv.Count(proModel, fakegemini.MalformedJSON))
	s["proPerReq"] = ratio(r.log.count("pro", 0, math.MaxInt64), sum.requests)
	s["transitions"] = float64(r.trs.total("pro"))
	return s
}

func scenarioInvalid(c invalidConfig, runs int, seed uint64) *result {
	res := &result{id: 6, title: fmt.Sprintf("invalid output: pro answers malformed JSON; answers validated as JSON; %d clients", c.Clients)}
	res.columns = append(append([]column{}, loadColumns...),
		countCol("invalid", "malformed answers from pro"), pctCol("fromFlash", "answered by flash"),
		ratioCol("proPerReq", "pro calls/request"), countCol("transitions", "pro breaker transitions"))
	for run := range runs {
		for _, share := range c.Shares {
			name := fmt.Sprintf("tierguard, %.0f%% of pro's answers malformed", 100*share)
			res.row(name).runs = append(res.row(name).runs, runInvalid(c, share, seed+uint64(run)))
		}
	}
	for _, r := range res.rows {
		res.expect(r.name+": success ≥ 99.9%", r.median("success") >= 0.999, fmtPct(r.median("success")))
		res.expect(r.name+": pro's breaker never leaves closed (every run)", r.maxOf("transitions") == 0, fmt.Sprintf("max %.0f transitions", r.maxOf("transitions")))
		res.expect(r.name+": one pro call per request (no retry of a validation failure)", r.maxOf("proPerReq") <= 1, fmtRatio(r.maxOf("proPerReq")))
	}
	inTime(res, c.loadConfig)
	return res
}

// ---------------------------------------------------------------------------
// Scenario 7: stalled primary, fallback needing 40% of the budget.

type stalledConfig struct {
	loadConfig
	FlashShare float64 // of the deadline, plus up to a twentieth more
}

func defaultStalled() stalledConfig {
	c := stalledConfig{loadConfig: defaultLoad(), FlashShare: 0.4}
	c.Duration = 4 * time.Second
	return c
}

func runStalled(c stalledConfig, seed uint64) sample {
	srv := newLoadServer(c.loadConfig, seed)
	defer srv.Close()
	need := time.Duration(c.FlashShare * float64(c.Deadline))
	srv.SetScript(flashModel, fakegemini.Script{Latency: fakegemini.Latency{Fixed: need, Jitter: need / 20}})
	r := newRig(srv, c.defaultChain())
	defer r.close()
	srv.SetScript(proModel, fakegemini.Script{Latency: fakegemini.Latency{Fixed: time.Minute}})
	st := watchStalls(r.clock)
	outs := closedLoop(r.clock, c.Clients, c.Duration, func(n int) outcome { return r.doChain(n, c.Deadline) })
	stall := st.end()
	s := sample{"stall": millis(stall), "excess": millis(st.excess(outs))}
	sum := summarize(outs)
	sum.fill(s)
	s["fromFlash"] = ratio(sum.byTier["flash"], sum.requests)
	s["proCalls"] = float64(r.log.count("pro", 0, math.MaxInt64))
	return s
}

func scenarioStalled(c stalledConfig, runs int, seed uint64) *result {
	res := &result{id: 7, title: fmt.Sprintf("stalled pro, flash healthy but needing %.0f–%.0f%% of the %v budget; default settings; %d clients",
		100*c.FlashShare, 105*c.FlashShare, c.Deadline, c.Clients)}
	res.columns = append(append([]column{}, loadColumns...), pctCol("fromFlash", "answered by flash"), countCol("proCalls", "pro calls"))
	const name = "tierguard, defaults (no TryTimeout, adaptive reserve)"
	for run := range runs {
		res.row(name).runs = append(res.row(name).runs, runStalled(c, seed+uint64(run)))
	}
	res.notes = append(res.notes, "The reserve pro's attempts leave for flash follows what flash has been seen to need; before flash has "+
		"been seen at all, half the remaining budget is kept for it. With a reserve of flash's MinAttempt alone, every request that "+
		"reaches the stalled pro (the first wave, each half-open probe) leaves flash too little time.")
	r := res.find(name)
	res.expect("answered by flash ≥ 99% (every run)", r.minOf("fromFlash") >= 0.99, fmtPct(r.minOf("fromFlash")))
	inTime(res, c.loadConfig)
	return res
}
