package main

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/pool"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	"github.com/tierguard/tierguard/internal/testbed/gemrest"
)

// ---------------------------------------------------------------------------
// Scenario 15: streams and calls on one two-key pool through a 429 storm.
//
// One pool of two pro keys serves a unary chain and, through its stream
// side (pool.Streams), a stream chain, each with flash behind it. Key A
// starts answering every call with a 429 whose RetryInfo names a
// per-minute quota and a delay; key B stays healthy. What is judged is
// that the two sides are one state: once A cools, neither side calls it
// but for the one probe at the end of each delay, and the streams that met
// A's 429 moved to B before showing anything.

type streamPoolConfig struct {
	loadConfig
	// StreamShare of the Clients stream (at least one does, and at least
	// one calls unary); the others call unary.
	StreamShare float64
	// StormAt is when key A's storm starts (both keys answer before it,
	// so that both sides have used A); from then on every call on A gets
	// a 429 with RetryInfo RetryDelay.
	StormAt    time.Duration
	RetryDelay time.Duration
	// Chunks is how many chunks every streamed answer comes in,
	// ChunkDelay the gap between two.
	Chunks     int
	ChunkDelay time.Duration
}

// defaultStreamPool scales Gemini's 30 s per-minute RetryInfo down ten
// times: the claim is about RetryInfo windows, not seconds, and a run of
// 7 s sees two of them after A cools at 0.5 s, where the real delay would
// take a minute a run.
func defaultStreamPool() streamPoolConfig {
	c := streamPoolConfig{loadConfig: defaultLoad(), StreamShare: 0.75, StormAt: 500 * time.Millisecond, RetryDelay: 3 * time.Second,
		Chunks: 4, ChunkDelay: 5 * time.Millisecond}
	c.Duration = 7 * time.Second
	return c
}

// The pool's keys; flash is called with apiKey, so that the fake's
// per-key counts of A and B are the pool's calls alone.
const (
	keyA = "key-a"
	keyB = "key-b"
)

// split returns how many clients stream and how many call unary.
func (c streamPoolConfig) split() (streaming, unary int) {
	streaming = min(max(int(math.Round(c.StreamShare*float64(c.Clients))), 1), c.Clients-1)
	return streaming, c.Clients - streaming
}

type streamPoolVariant struct {
	name string
	// off turns the cool-down off on both keys: every 429 is its own
	// request's, which moves to B, and the next request tries A again.
	off bool
}

// poolOutcome is one request of the mixed loop, unary or streamed.
type poolOutcome struct {
	outcome
	stream bool
	// mixed: the chunks of a stream did not all come from one upstream
	// stream of the answering tier's model.
	mixed bool
	// hitA: the request's first pool call was on A and got a 429;
	// rotated: its trail is then exactly that 429 as an upstream call of
	// its own, then B's answer.
	hitA, rotated bool
}

// trailRotation reads a request's trail: whether its first call was on
// member a and was refused with a 429, and whether the trail is then that
// call followed by one answer on member b, both on pro, and nothing else.
func trailRotation(atts []fallback.Attempt, a, b string) (hitA, rotated bool) {
	if len(atts) == 0 || atts[0].Member != a || atts[0].Verdict.Class != classify.RateLimited {
		return false, false
	}
	rotated = len(atts) == 2 &&
		atts[0].Tier == "pro" && atts[0].Skip == fallback.NotSkipped && atts[0].Err != nil &&
		atts[1].Tier == "pro" && atts[1].Member == b && atts[1].Skip == fallback.NotSkipped &&
		atts[1].Err == nil && atts[1].Verdict.Class == classify.OK
	return true, rotated
}

// coolWatch counts, from one side's Observe, the MemberCooling events of
// member A, and keeps when the first came.
type coolWatch struct {
	mu     sync.Mutex
	events int
	first  bool
	at     time.Duration
}

// drainWatch waits, once A has cooled, for the calls the pool had already
// sent A to come back, and takes the fake's count of A's calls then:
// from that moment while A is cooling, the pool can only call A for the
// probe at the end of each delay, so every later call of A the fake counts
// is a probe (or a call after A came back, which the storm makes another
// probe: it refuses every call).
type drainWatch struct {
	stop  chan struct{}
	done  chan struct{}
	ok    bool
	at    time.Duration
	calls int64
}

func watchDrain(c clock, srv *fakegemini.Server, cooled *coolWatch, member func() pool.MemberInfo) *drainWatch {
	w := &drainWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
			cooled.mu.Lock()
			first := cooled.first
			cooled.mu.Unlock()
			if !first {
				continue
			}
			// Out is read before the count: a cool-down that ends between
			// the two could let a probe in first and count it as before,
			// never the other way round.
			if m := member(); m.InFlight == 0 && m.Out == pool.MemberCooling {
				w.ok, w.at, w.calls = true, c.now(), srv.KeyRequests(keyA)
				return
			}
		}
	}()
	return w
}

// end stops the watch.
func (w *drainWatch) end() {
	close(w.stop)
	<-w.done
}

func runStreamPool(c streamPoolConfig, v streamPoolVariant, seed uint64) sample {
	srv := fakegemini.New(fakegemini.WithSeed(seed))
	defer srv.Close()
	r := capRig(srv)
	srv.SetScript(flashModel, fakegemini.Script{Latency: latency(c.FlashLatency), FaultLatency: fakegemini.Latency{Fixed: 2 * time.Millisecond},
		Chunks: c.Chunks, ChunkDelay: c.ChunkDelay})
	srv.SetScript(proModel, fakegemini.Script{
		Latency: latency(c.ProLatency), FaultLatency: fakegemini.Latency{Fixed: 2 * time.Millisecond},
		Chunks: c.Chunks, ChunkDelay: c.ChunkDelay,
		Rules: []fakegemini.Rule{{Kind: fakegemini.RateLimited, P: fakegemini.Always, Key: keyA, From: r.clock.t0.Add(c.StormAt),
			Params: fakegemini.Params{RetryDelay: c.RetryDelay}}},
	})
	tierOf := func(key string) *gemrest.Tier[string] {
		cl, err := gemrest.New(gemrest.Config{BaseURL: srv.URL(), APIKey: key, Model: proModel, Name: "pro", HTTPClient: srv.Client()})
		must(err)
		return gemrest.NewTier(cl, func(q string) gemrest.Request { return gemrest.Request{Prompt: q, JSON: true} })
	}
	ta, tb := tierOf(keyA), tierOf(keyB)
	var cd *fallback.CoolDown
	if v.off {
		cd = &fallback.CoolDown{Off: true}
	}
	// No member limiter and no member breaker: a limiter would also hold
	// A for the RetryInfo delay, and what is measured here is the shared
	// cool-down.
	unary, err := pool.New(pool.Config[string, gemrest.Response]{Name: "pro", Members: []pool.Member[string, gemrest.Response]{
		{Key: keyA, Tier: ta, CoolDown: cd}, {Key: keyB, Tier: tb, CoolDown: cd},
	}})
	must(err)
	streams, err := pool.Streams(unary, []pool.StreamMember[string, gemrest.Chunk]{{Key: keyA, Tier: ta}, {Key: keyB, Tier: tb}})
	must(err)
	ms := unary.Members()
	idA, idB := ms[0].ID, ms[1].ID

	var onUnary, onStreams coolWatch
	var inFlightAtCool int
	watch := func(w *coolWatch) func(pool.MemberEvent) {
		return func(e pool.MemberEvent) {
			if e.Out != pool.MemberCooling || e.Member != idA {
				return
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			w.events++
			if !w.first {
				w.first, w.at = true, r.clock.now()
				if w == &onUnary {
					inFlightAtCool = streams.Members()[0].InFlight
				}
			}
		}
	}
	defer unary.Observe(watch(&onUnary))()
	defer streams.Observe(watch(&onStreams))()

	r.build(c.Deadline, capStage(c.loadConfig, r, "pro", proModel, unary),
		capStage(c.loadConfig, r, "flash", flashModel, capTier(srv, r, flashModel, "flash", apiKey)))
	defer r.close()
	sr := &streamRig{srv: srv, trs: r.trs, clock: r.clock}
	schain, err := fallback.NewStream(fallback.StreamConfig[string, gemrest.Chunk]{
		Stages: []fallback.StreamStage[string, gemrest.Chunk]{sr.stageOver(c.loadConfig, "pro", proModel, streams), sr.stage(c.loadConfig, "flash", flashModel)},
		Total:  c.Deadline,
	})
	must(err)
	sr.chain = schain
	defer sr.close()

	var seq atomic.Int64
	doUnary := func(int) poolOutcome {
		q := fmt.Sprintf("Question %d: what is the answer?", seq.Add(1))
		o := poolOutcome{outcome: outcome{start: r.clock.now(), deadline: c.Deadline}}
		res, err := r.chain.Do(context.Background(), q)
		o.end, o.calls, o.err = r.clock.now(), res.UpstreamCalls, err
		if err == nil {
			o.tier = res.Tier
		}
		o.hitA, o.rotated = trailRotation(res.Attempts(), idA, idB)
		return o
	}
	doStream := func(int) poolOutcome {
		q := fmt.Sprintf("Question %d: what is the answer?", seq.Add(1))
		so := streamOutcome{outcome: outcome{start: r.clock.now(), deadline: c.Deadline}}
		res := readStream(r.clock, schain.Stream(context.Background(), q), &so)
		o := poolOutcome{outcome: so.outcome, stream: true, mixed: so.mixed}
		o.hitA, o.rotated = trailRotation(res.Attempts(), idA, idB)
		return o
	}

	st := watchStalls(r.clock)
	drain := watchDrain(r.clock, srv, &onUnary, func() pool.MemberInfo { return streams.Members()[0] })
	var souts, uouts []poolOutcome
	var wg sync.WaitGroup
	streaming, unaryClients := c.split()
	wg.Go(func() { souts = closedLoop(r.clock, streaming, c.Duration, doStream) })
	wg.Go(func() { uouts = closedLoop(r.clock, unaryClients, c.Duration, doUnary) })
	wg.Wait()
	drain.end()
	all := append(souts, uouts...)
	outs := make([]outcome, len(all))
	var last time.Duration
	hitA, notRotated, mixed := map[bool]int{}, 0, 0
	for i, o := range all {
		outs[i] = o.outcome
		last = max(last, o.end)
		if o.hitA {
			hitA[o.stream]++
			// A rotation that did not end on B, or that was answered by
			// anything but the pool, breaks the claim.
			if !o.rotated || o.err != nil || o.tier != "pro" {
				notRotated++
			}
		}
		if o.mixed {
			mixed++
		}
	}
	s := sample{"stall": millis(st.end()), "excess": millis(st.excess(outs))}
	sum := summarize(outs)
	sum.fill(s)
	s["streams"], s["unary"] = float64(len(souts)), float64(len(uouts))
	s["aCalls"], s["bCalls"] = float64(srv.KeyRequests(keyA)), float64(srv.KeyRequests(keyB))
	s["a429"] = float64(srv.KeyCount(keyA, fakegemini.RateLimited))
	s["aOK"] = float64(srv.KeyCount(keyA, fakegemini.Success))
	s["flashCalls"] = float64(srv.Requests(flashModel))
	s["rotStreams"], s["rotUnary"] = float64(hitA[true]), float64(hitA[false])
	s["rotations"] = float64(hitA[true] + hitA[false])
	s["notRotated"], s["mixed"] = float64(notRotated), float64(mixed)
	s["fromPool"] = ratio(sum.byTier["pro"], sum.requests)
	onUnary.mu.Lock()
	onStreams.mu.Lock()
	defer onUnary.mu.Unlock()
	defer onStreams.mu.Unlock()
	s["coolUnary"], s["coolStreams"] = float64(onUnary.events), float64(onStreams.events)
	s["sidesDiffer"] = 0
	if onUnary.events != onStreams.events || onUnary.first != onStreams.first {
		s["sidesDiffer"] = 1
	}
	if onUnary.first {
		s["coolAt"], s["inFlightAtCool"] = millis(onUnary.at), float64(inFlightAtCool)
		// Whole delays between A's first cooling and the last request's
		// end: each lets one probe through at its end.
		s["windows"] = math.Floor(float64(last-onUnary.at) / float64(c.RetryDelay))
	}
	if drain.ok {
		s["probes"] = float64(srv.KeyRequests(keyA) - drain.calls)
		s["drainAt"] = millis(drain.at)
	}
	return s
}

func scenarioStreamPool(c streamPoolConfig, runs int, seed uint64) *result {
	streaming, unaryClients := c.split()
	res := &result{id: 15, title: fmt.Sprintf("streams and calls on one pool of two pro keys: key A answers 429 with RetryInfo %v (a per-minute quota named) from %v on, key B healthy; "+
		"scaled 10× down from a 30 s RetryInfo, %v a run; %d streaming + %d unary clients, %v deadline",
		c.RetryDelay, c.StormAt, c.Duration, streaming, unaryClients, c.Deadline)}
	res.columns = []column{
		countCol("requests", "requests"), pctCol("success", "answered"), pctCol("fromPool", "answered by the pool"),
		countCol("streams", "streams"), countCol("unary", "unary"),
		countCol("aCalls", "key A calls"), countCol("bCalls", "key B calls"), countCol("a429", "A's 429s"), countCol("flashCalls", "flash calls"),
		countCol("rotStreams", "rotations on stream trails"), countCol("rotUnary", "rotations on unary trails"),
		countCol("coolUnary", "MemberCooling seen by Pool.Observe"), countCol("coolStreams", "MemberCooling seen by StreamPool.Observe"),
		countCol("inFlightAtCool", "A calls in flight when it cooled"), countCol("probes", "A calls once those came back"), countCol("windows", "RetryInfo windows after it cooled"),
		countCol("mixed", "answers mixing streams"), msCol("overrun", "worst overrun"), msCol("stall", "max stall"),
	}
	variants := []streamPoolVariant{
		{name: "shared cool-down (fallback.CoolDown defaults)"},
		{name: "CoolDown.Off on both keys: each 429 its request's own (baseline)", off: true},
	}
	for run := range runs {
		for _, v := range variants {
			res.row(v.name).runs = append(res.row(v.name).runs, runStreamPool(c, v, seed+uint64(run)))
		}
	}
	shared, off := res.find(variants[0].name), res.find(variants[1].name)
	for _, r := range res.rows {
		res.expect(r.name+": every request whose first call met A's 429 was answered by the pool, its trail that 429 on A then B's answer, every run",
			r.maxOf("notRotated") == 0 && r.minOf("rotStreams") > 0,
			fmt.Sprintf("%s not so (max over runs), of %s streams and %s calls that met it (median)", fmtCount(r.maxOf("notRotated")), fmtCount(r.median("rotStreams")), fmtCount(r.median("rotUnary"))))
		res.expect(r.name+": each of A's 429s is on one request's trail as an upstream call of its own, every run",
			everyRun(r, func(s sample) bool { return s["a429"] == s["rotations"] }),
			fmt.Sprintf("%s 429s, %s trails (median)", fmtCount(r.median("a429")), fmtCount(r.median("rotations"))))
		res.expect(r.name+": no answer mixes two upstream streams (one responseId, the answering tier's model), every run",
			r.maxOf("mixed") == 0, fmtCount(r.maxOf("mixed"))+" (max over runs)")
		res.expect(r.name+": every request answered, every run", r.minOf("success") >= 1, fmtPct(r.minOf("success"))+" (min over runs)")
	}
	res.expect("shared: once the calls already sent to A came back, A is called at most once per RetryInfo window (the probe), unary and streams together, every run",
		everyRun(shared, func(s sample) bool { return s["probes"] <= s["windows"] }),
		fmt.Sprintf("%s calls over %s windows (median; %d of %d runs exactly one per window)",
			fmtCount(shared.median("probes")), fmtCount(shared.median("windows")), countRuns(shared, func(s sample) bool { return s["probes"] == s["windows"] }), len(shared.runs)))
	res.expect("shared: Pool.Observe and StreamPool.Observe saw the same MemberCooling events, every run",
		shared.maxOf("sidesDiffer") == 0 && shared.minOf("coolUnary") > 0,
		fmt.Sprintf("%s and %s events (median); the 429s behind them were on %s stream and %s unary trails (median), both kinds in %d of %d runs",
			fmtCount(shared.median("coolUnary")), fmtCount(shared.median("coolStreams")), fmtCount(shared.median("rotStreams")), fmtCount(shared.median("rotUnary")),
			countRuns(shared, func(s sample) bool { return s["rotStreams"] > 0 && s["rotUnary"] > 0 }), len(shared.runs)))
	res.expect("the baseline shows what the shared cool-down saves: A's 429s with it at most a tenth of those without it",
		paired(shared, off, "a429") <= 0.1, fmtPct(paired(shared, off, "a429"))+" (paired median)")
	res.notes = append(res.notes, fmt.Sprintf("Key A cools at its first 429 (median %s into the run): that 429 names a per-minute quota. The calls the pool had sent A by then (%s, median) come back 429 too; from the moment they have (median %s), A is out for everyone but the probe at the end of each %v delay, which meets the storm and cools it again. Calls are counted by the fake server per API key; \"RetryInfo windows\" is how many whole delays fit between A's first cooling and the last request's end.",
		fmtMs(shared.median("coolAt")), fmtCount(shared.median("inFlightAtCool")), fmtMs(shared.median("drainAt")), c.RetryDelay))
	res.notes = append(res.notes, fmt.Sprintf("MemberCooling is told once per stay — when A first cools, and again at each probe that fails — not for the in-flight calls' 429s that lengthen a stay: %s events (median) for one cooling and %s probes. The members have no limiter: one would hold A for the delay as well, and the cool-down is what is measured.",
		fmtCount(shared.median("coolUnary")), fmtCount(shared.median("probes"))))
	inTime(res, c.loadConfig)
	return res
}

// countRuns counts the runs of r for which ok holds.
func countRuns(r *row, ok func(sample) bool) int {
	n := 0
	for _, s := range r.runs {
		if ok(s) {
			n++
		}
	}
	return n
}

// everyRun reports whether ok holds for every run of r.
func everyRun(r *row, ok func(sample) bool) bool {
	for _, s := range r.runs {
		if !ok(s) {
			return false
		}
	}
	return len(r.runs) > 0
}
