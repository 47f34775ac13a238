package main

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/pool"
	"github.com/tierguard/tierguard/fallback/ratelimit"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	"github.com/tierguard/tierguard/internal/testbed/gemrest"
	"github.com/tierguard/tierguard/retry"
)

// The capacity scenarios (8–10) build their chains here: the stages of
// newRig (a bulkhead as large as the client count, the same breaker, three
// attempts with a shared retry budget, JSON validation), plus what each
// scenario is about — a rate limiter, a hedge, a pool.

// capStage is a stage of the capacity scenarios over tier.
func capStage(c loadConfig, r *rig, name, model string, tier fallback.ModelTier[string, gemrest.Response]) fallback.Stage[string, gemrest.Response] {
	bh, err := bulkhead.New(bulkhead.Config{Name: name, Max: c.Clients * 2})
	must(err)
	br, err := breaker.New(breaker.Config{Name: name, ConsecutiveFailures: 5, FailureRatio: 0.5, MinCalls: 20, Window: 2 * time.Second, Cooldown: c.Cooldown})
	must(err)
	br.Observe(r.trs.record)
	b, err := retry.NewBudget(10, 0.1)
	must(err)
	return fallback.Stage[string, gemrest.Response]{
		Tier: tier, Model: model, Provider: "gcp.gemini", Bulkhead: bh, Breaker: br,
		Retry: retry.Policy{MaxAttempts: 3, BaseDelay: 50 * time.Millisecond, MaxDelay: 250 * time.Millisecond, Budget: b}, Validate: validAnswer,
	}
}

// capTier is a logged gemrest tier for model with its own API key.
func capTier(srv *fakegemini.Server, r *rig, model, name, key string) fallback.ModelTier[string, gemrest.Response] {
	c, err := gemrest.New(gemrest.Config{BaseURL: srv.URL(), APIKey: key, Model: model, Name: name, HTTPClient: srv.Client()})
	must(err)
	return loggedTier[string]{inner: gemrest.NewTier(c, func(q string) gemrest.Request { return gemrest.Request{Prompt: q, JSON: true} }), log: r.log}
}

// capRig is a rig around a chain of the capacity scenarios.
func capRig(srv *fakegemini.Server) *rig {
	r := &rig{srv: srv, clock: clock{t0: time.Now()}}
	r.log = newCallLog(r.clock)
	r.trs = &transitions{clock: r.clock}
	return r
}

func (r *rig) build(deadline time.Duration, stages ...fallback.Stage[string, gemrest.Response]) {
	chain, err := fallback.New(fallback.Config[string, gemrest.Response]{Stages: stages, Total: deadline})
	must(err)
	r.chain, r.pro = chain, stages[0].Breaker
}

// ---------------------------------------------------------------------------
// Scenario 9: a 429 storm against a known quota.

type quotaConfig struct {
	loadConfig
	// Quota is pro's quota: Quota requests per Window (a per-minute quota,
	// its window shortened so that a run sees several).
	Quota  int
	Window time.Duration
	// Over is how far above the real quota the misconfigured limiter is
	// set (0.3: 30% above), to show the adaptive lowering.
	Over float64
}

func defaultQuota() quotaConfig {
	c := quotaConfig{loadConfig: defaultLoad(), Quota: 60, Window: time.Second, Over: 0.3}
	c.Duration = 3 * time.Second
	return c
}

type quotaVariant struct {
	name  string
	limit int // the local limit; 0 for none
}

func runQuota(c quotaConfig, v quotaVariant, seed uint64) sample {
	srv := newLoadServer(c.loadConfig, seed)
	defer srv.Close()
	srv.SetScript(proModel, fakegemini.Script{Latency: latency(c.ProLatency), FaultLatency: fakegemini.Latency{Fixed: 2 * time.Millisecond}})
	srv.SetQuota(fakegemini.Quota{Model: proModel, Requests: c.Quota, Per: c.Window})
	r := capRig(srv)
	pro := capStage(c.loadConfig, r, "pro", proModel, capTier(srv, r, proModel, "pro", apiKey))
	if v.limit > 0 {
		lim, err := ratelimit.New(ratelimit.Config{Name: "pro", Requests: v.limit, Per: c.Window})
		must(err)
		pro.Tier = ratelimit.Tier(pro.Tier, ratelimit.TierConfig[string]{Limiter: lim})
	}
	r.build(c.Deadline, pro, capStage(c.loadConfig, r, "flash", flashModel, capTier(srv, r, flashModel, "flash", apiKey)))
	defer r.close()
	st := watchStalls(r.clock)
	outs := closedLoop(r.clock, c.Clients, c.Duration, func(n int) outcome { return r.doChain(n, c.Deadline) })
	s := sample{"stall": millis(st.end()), "excess": millis(st.excess(outs))}
	sum := summarize(outs)
	sum.fill(s)
	s["429s"] = float64(srv.Count(proModel, fakegemini.RateLimited))
	s["proOK"] = float64(sum.byTier["pro"])
	s["fromPro"] = ratio(sum.byTier["pro"], sum.requests)
	s["proCalls"] = float64(srv.Requests(proModel))
	s["quotaUse"] = float64(srv.Count(proModel, fakegemini.Success)) / (float64(c.Quota) * (c.Duration.Seconds() / c.Window.Seconds()))
	return s
}

func scenarioQuota(c quotaConfig, runs int, seed uint64) *result {
	res := &result{id: 9, title: fmt.Sprintf("429 storm: pro's quota is %d requests per %v (a per-minute quota, shortened), offered ~%d/s by %d clients; flash healthy; %v deadline",
		c.Quota, c.Window, int(float64(c.Clients)/c.ProLatency.Seconds()), c.Clients, c.Deadline)}
	res.columns = append(append([]column{}, loadColumns...),
		countCol("429s", "pro 429s"), countCol("proCalls", "pro calls"), pctCol("fromPro", "answered by pro"), pctCol("quotaUse", "quota used"))
	over := int(math.Round(float64(c.Quota) * (1 + c.Over)))
	variants := []quotaVariant{
		{name: "no local limit"},
		{name: fmt.Sprintf("local limit = quota (%d per %v)", c.Quota, c.Window), limit: c.Quota},
		{name: fmt.Sprintf("local limit %.0f%% above quota (%d), adaptive", 100*c.Over, over), limit: over},
	}
	for run := range runs {
		for _, v := range variants {
			res.row(v.name).runs = append(res.row(v.name).runs, runQuota(c, v, seed+uint64(run)))
		}
	}
	none, limited, adaptive := res.find(variants[0].name), res.find(variants[1].name), res.find(variants[2].name)
	cut := 1 - paired(limited, none, "429s")
	res.expect("local limit = quota: upstream 429s fall by ≥ 90%", cut >= 0.9, fmtPct(cut))
	res.expect("local limit = quota: answered requests do not drop", limited.median("success") >= none.median("success")-0.001,
		fmtPct(limited.median("success"))+" vs "+fmtPct(none.median("success")))
	acut := 1 - paired(adaptive, none, "429s")
	res.notes = append(res.notes, fmt.Sprintf("A limiter set %.0f%% above the real quota still cuts 429s by %s: each 429 holds it for the server's RetryInfo delay and halves its rate until calls pass again.",
		100*c.Over, fmtPct(acut)))
	res.notes = append(res.notes, "429s are counted by the fake server; \"quota used\" is pro's successful calls over the quota the run's duration allowed.")
	inTime(res, c.loadConfig)
	return res
}

// ---------------------------------------------------------------------------
// Scenario 10: a slow-tail primary, hedged.

type tailConfig struct {
	loadConfig
	// SlowShare of pro's calls take SlowFactor times its median.
	SlowShare  float64
	SlowFactor float64
}

func defaultTail() tailConfig {
	c := tailConfig{loadConfig: defaultLoad(), SlowShare: 0.1, SlowFactor: 5}
	c.Duration = 3 * time.Second
	return c
}

type tailVariant struct {
	name  string
	hedge fallback.Hedge
	pool  bool // hedge on a second key of pro rather than on flash
}

func runTail(c tailConfig, v tailVariant, seed uint64) sample {
	srv := newLoadServer(c.loadConfig, seed)
	defer srv.Close()
	srv.SetScript(proModel, slowTail(c.ProLatency, c.SlowFactor, c.SlowShare))
	r := capRig(srv)
	var proTier fallback.ModelTier[string, gemrest.Response] = capTier(srv, r, proModel, "pro", apiKey)
	if v.pool {
		p, err := pool.New(pool.Config[string, gemrest.Response]{Name: "pro", Members: []pool.Member[string, gemrest.Response]{
			{Key: "key-1", Tier: capTier(srv, r, proModel, "pro", "key-1")},
			{Key: "key-2", Tier: capTier(srv, r, proModel, "pro", "key-2")},
		}})
		must(err)
		proTier = p
	}
	pro := capStage(c.loadConfig, r, "pro", proModel, proTier)
	pro.Hedge = v.hedge
	r.build(c.Deadline, pro, capStage(c.loadConfig, r, "flash", flashModel, capTier(srv, r, flashModel, "flash", apiKey)))
	defer r.close()
	st := watchStalls(r.clock)
	outs := closedLoop(r.clock, c.Clients, c.Duration, func(n int) outcome { return r.doChain(n, c.Deadline) })
	s := sample{"stall": millis(st.end()), "excess": millis(st.excess(outs))}
	sum := summarize(outs)
	sum.fill(s)
	calls := srv.Requests(proModel) + srv.Requests(flashModel)
	s["callsPerReq"] = ratio(int(calls), sum.requests)
	s["fromPro"] = ratio(sum.byTier["pro"], sum.requests)
	s["slow"] = float64(srv.Count(proModel, fakegemini.Stall))
	return s
}

// slowTail is pro's script for a slow tail: calls take the median (±10%),
// and the share of them that stall take factor times it instead.
func slowTail(median time.Duration, factor, share float64) fakegemini.Script {
	return fakegemini.Script{
		Latency: fakegemini.Latency{Fixed: median - median/10, Jitter: median / 5},
		Rules:   []fakegemini.Rule{{Kind: fakegemini.Stall, P: share, Params: fakegemini.Params{StallFor: time.Duration(factor * float64(median))}}},
	}
}

func scenarioTail(c tailConfig, runs int, seed uint64) *result {
	slow := time.Duration(c.SlowFactor * float64(c.ProLatency))
	res := &result{id: 10, title: fmt.Sprintf("slow tail: %.0f%% of pro's calls take %v (%.0f× its %v median); %d clients, %v deadline",
		100*c.SlowShare, slow, c.SlowFactor, c.ProLatency, c.Clients, c.Deadline)}
	res.columns = append(append([]column{}, loadColumns...),
		ratioCol("callsPerReq", "upstream calls/request"), pctCol("fromPro", "answered by pro"), countCol("slow", "slow pro calls"))
	fixed := 2 * c.ProLatency
	variants := []tailVariant{
		{name: "no hedging"},
		{name: fmt.Sprintf("hedge on flash after %v (2× median), ≤ 10%% extra", fixed), hedge: fallback.Hedge{Delay: fixed, MaxExtra: 0.1}},
		{name: fmt.Sprintf("hedge on a second pro key after %v, ≤ 10%% extra", fixed), hedge: fallback.Hedge{Delay: fixed, MaxExtra: 0.1}, pool: true},
		{name: "hedge on flash at pro's observed p90 (≥ median), ≤ 10% extra", hedge: fallback.Hedge{Quantile: 0.9, Delay: c.ProLatency, MaxExtra: 0.1}},
	}
	for run := range runs {
		for _, v := range variants {
			res.row(v.name).runs = append(res.row(v.name).runs, runTail(c, v, seed+uint64(run)))
		}
	}
	base, hedged := res.find(variants[0].name), res.find(variants[1].name)
	cut := 1 - paired(hedged, base, "p99")
	extra := paired(hedged, base, "callsPerReq") - 1
	res.expect("hedging cuts p99 by ≥ 40%", cut >= 0.4, fmtPct(cut))
	res.expect("with ≤ 10% extra upstream calls", extra <= 0.10, fmtPct(extra))
	thePool := res.find(variants[2].name)
	res.notes = append(res.notes, fmt.Sprintf("On a second key of the same model the hedge cuts p99 by %s: the hedge itself is slow one time in ten, so about 1%% of requests still wait for a slow call — p99's own boundary.",
		fmtPct(1-paired(thePool, base, "p99"))))
	q := res.find(variants[3].name)
	res.notes = append(res.notes, fmt.Sprintf("At the observed p90 the hedge cuts p99 by %s: with exactly 10%% of calls slow, pro's 90th percentile is any value between its fast and its slow calls, and the tracker wanders in that gap; for a tail this heavy use a fixed delay (or a lower quantile with a larger MaxExtra).",
		fmtPct(1-paired(q, base, "p99"))))
	res.notes = append(res.notes, "Upstream calls are counted by the fake server, both models together; a lost call counts.")
	inTime(res, c.loadConfig)
	return res
}

// ---------------------------------------------------------------------------
// Scenario 11: a pool of three keys, one revoked and one rate-limited.

type poolConfig struct {
	loadConfig
	// LimitedQuota is the rate-limited key's quota per second.
	LimitedQuota int
}

func defaultPoolScenario() poolConfig {
	c := poolConfig{loadConfig: defaultLoad(), LimitedQuota: 20}
	c.Duration = 2 * time.Second
	return c
}

func runPool(c poolConfig, seed uint64) sample {
	srv := fakegemini.New(fakegemini.WithSeed(seed), fakegemini.WithAPIKeys("key-limited", "key-good", apiKey))
	defer srv.Close()
	srv.SetScript(flashModel, fakegemini.Script{Latency: latency(c.FlashLatency)})
	srv.SetScript(proModel, fakegemini.Script{Latency: latency(c.ProLatency)})
	srv.SetQuota(fakegemini.Quota{Key: "key-limited", Requests: c.LimitedQuota, Per: time.Second})
	r := capRig(srv)
	member := func(key string) pool.Member[string, gemrest.Response] {
		lim, err := ratelimit.New(ratelimit.Config{Name: "pro/" + key, Requests: 1000, Per: time.Second})
		must(err)
		return pool.Member[string, gemrest.Response]{Key: key, Tier: capTier(srv, r, proModel, "pro", key), Limiter: lim}
	}
	thePool, err := pool.New(pool.Config[string, gemrest.Response]{Name: "pro", Members: []pool.Member[string, gemrest.Response]{
		member("key-revoked"), member("key-limited"), member("key-good"),
	}})
	must(err)
	var authOut, reported atomic.Int64
	revokedID := ""
	for _, m := range thePool.Members() {
		revokedID = m.ID
		break
	}
	thePool.Observe(func(e pool.MemberEvent) {
		if e.Out == pool.MemberAuth {
			authOut.Add(1)
			if e.Member == revokedID {
				reported.Add(1)
			}
		}
	})
	r.build(c.Deadline, capStage(c.loadConfig, r, "pro", proModel, thePool), capStage(c.loadConfig, r, "flash", flashModel, capTier(srv, r, flashModel, "flash", apiKey)))
	defer r.close()
	st := watchStalls(r.clock)
	outs := closedLoop(r.clock, c.Clients, c.Duration, func(n int) outcome { return r.doChain(n, c.Deadline) })
	s := sample{"stall": millis(st.end()), "excess": millis(st.excess(outs))}
	sum := summarize(outs)
	sum.fill(s)
	s["fromPool"] = ratio(sum.byTier["pro"], sum.requests)
	s["flashCalls"] = float64(srv.Requests(flashModel))
	s["revokedCalls"] = float64(srv.Count(proModel, fakegemini.InvalidAPIKey))
	s["limited429"] = float64(srv.Count(proModel, fakegemini.RateLimited))
	s["authEvents"] = float64(authOut.Load())
	s["reported"] = float64(reported.Load())
	s["callsPerReq"] = ratio(int(srv.Requests(proModel)), sum.requests)
	return s
}

func scenarioPool(c poolConfig, runs int, seed uint64) *result {
	res := &result{id: 11, title: fmt.Sprintf("pool of three pro keys: one revoked (API_KEY_INVALID), one with a quota of %d/s (429 with RetryInfo beyond it), one healthy; %d clients, %v deadline",
		c.LimitedQuota, c.Clients, c.Deadline)}
	res.columns = append(append([]column{}, loadColumns...),
		pctCol("fromPool", "answered by the pool"), countCol("flashCalls", "flash calls"), countCol("revokedCalls", "revoked key's calls"),
		countCol("limited429", "limited key's 429s"), countCol("reported", "revoked key reported"), ratioCol("callsPerReq", "pro calls/request"))
	const name = "tierguard pool (least in flight, per-key limiter) → flash"
	for run := range runs {
		res.row(name).runs = append(res.row(name).runs, runPool(c, seed+uint64(run)))
	}
	r := res.find(name)
	res.expect("100% answered from the pool (every run)", r.minOf("fromPool") >= 1, fmtPct(r.minOf("fromPool")))
	res.expect("the next tier is never touched (every run)", r.maxOf("flashCalls") == 0, fmtCount(r.maxOf("flashCalls")))
	res.expect("the revoked key is reported, once (every run)", r.minOf("reported") == 1 && r.maxOf("authEvents") == 1,
		fmt.Sprintf("%v report(s)", r.median("reported")))
	res.notes = append(res.notes, "A member refused for its credentials leaves rotation for PoolConfig.AuthCooldown (10 min) and is reported once to Pool.Observe (and logged at Error by otelx); the rate-limited key's 429s hold its limiter for the RetryInfo delay, so the pool stops calling it until then.")
	inTime(res, c.loadConfig)
	return res
}
