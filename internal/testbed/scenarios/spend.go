package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/route"
	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	"github.com/tierguard/tierguard/internal/testbed/gemrest"
	"github.com/tierguard/tierguard/retry"
)

// ---------------------------------------------------------------------------
// Scenario 8: spend — three tenants, a 429 storm on the primary, one tenant
// reaching its daily budget during it.
//
// The primary is Gemini Flash; a 429 storm on it sends requests to the
// dearer Gemini Pro. acme (customer support) has no limit and pays the
// storm's extra cost; initech (support too) has a daily cost limit that
// the storm makes it reach; globex runs low-priority batch work, shed once
// its limit is 90% used. The run is paced by requests, not by time, so
// that every figure is the same on a fast machine and a loaded one: every
// client sends Pre requests, the storm starts, every client sends Storm
// requests, it ends, every client sends Post requests.

type spendConfig struct {
	Pre, Storm, Post int // requests per client in each phase
	Deadline         time.Duration
	Latency          time.Duration
}

func defaultSpend() spendConfig {
	return spendConfig{Pre: 40, Storm: 60, Post: 40, Deadline: time.Second, Latency: 5 * time.Millisecond}
}

// spendTenant is one tenant of the scenario.
type spendTenant struct {
	name     string
	scenario string
	priority spend.Priority
	clients  int
}

var spendTenants = []spendTenant{
	{name: "acme", scenario: "support", clients: 4},
	{name: "initech", scenario: "support", clients: 2},
	{name: "globex", scenario: "batch_seo", priority: spend.Low, clients: 2},
}

// spendPrices are the package's example prices for the two models, as of
// the example table's date (list prices, USD per million tokens).
const spendPrices = `{"currency": "USD", "note": "EXAMPLE prices, see fallback/spend/testdata/example-prices.json", "prices": [
	{"model": "gemini-2.5-flash", "input": 0.30, "cached_input": 0.03, "output": 2.50},
	{"model": "gemini-2.5-pro", "input": 1.25, "cached_input": 0.125, "output": 10.00}]}`

// spendPrompt is a request's prompt: long enough that its tokens dominate
// the cost, the same length for every request.
func spendPrompt(n int) string {
	return fmt.Sprintf("Question %06d: ", n) + strings.Repeat("context ", 500)
}

type phase int32

const (
	phasePre phase = iota
	phaseStorm
	phasePost
)

var phaseNames = [...]string{"before", "during", "after"}

// spendTally is one tenant's client-side count.
type spendTally struct {
	sent, answered, refused, shed, failed atomic.Int64
	// limitAt is the phase in which the tenant's daily limit was reached
	// (-1: never); shedFrom the phase of its first shed request.
	limitAt, shedFrom atomic.Int32
}

func runSpend(c spendConfig, seed uint64) (sample, map[string]sample) {
	srv := fakegemini.New(fakegemini.WithSeed(seed))
	defer srv.Close()
	healthy := fakegemini.Script{Latency: latency(c.Latency)}
	srv.SetScript(flashModel, healthy)
	srv.SetScript(proModel, healthy)

	prices, err := spend.ParsePrices([]byte(spendPrices))
	must(err)
	// The cost of one request on each model, read from one call each.
	unit := func(model string) (fallback.Usage, spend.Amount) {
		resp, err := client(srv, model, "calibrate").Call(context.Background(), gemrest.Request{Prompt: spendPrompt(0), JSON: true})
		must(err)
		cost, _ := prices.Cost(model, "", resp.Usage)
		return resp.Usage, cost
	}
	usage, flashCost := unit(flashModel)
	_, proCost := unit(proModel)
	clients := func(name string) int64 {
		for _, t := range spendTenants {
			if t.name == name {
				return int64(t.clients)
			}
		}
		return 0
	}
	// initech's limit lies half-way through the storm's spending; globex's
	// 90% half-way through the last phase.
	initech := clients("initech")
	initechLimit := spend.Amount(initech*int64(c.Pre))*flashCost + spend.Amount(initech*int64(c.Storm)/2)*proCost
	globex := clients("globex")
	globexSpend := spend.Amount(globex*int64(c.Pre+c.Post/2))*flashCost + spend.Amount(globex*int64(c.Storm))*proCost
	globexLimit := spend.Amount(float64(globexSpend) / 0.9)

	ledger, err := spend.New(spend.Config{Prices: prices, Tenants: map[string]spend.Allowance{
		"acme": {}, "initech": {DailyCost: initechLimit}, "globex": {DailyCost: globexLimit},
	}})
	must(err)
	defer ledger.Close()

	var cur atomic.Int32
	tallies := map[string]*spendTally{}
	for _, t := range spendTenants {
		tl := &spendTally{}
		tl.limitAt.Store(-1)
		tl.shedFrom.Store(-1)
		tallies[t.name] = tl
	}
	ledger.Observe(func(e spend.Event) {
		// The limit binds at its first refusal, or when use reaches it
		// if that comes first.
		if e.Kind == spend.FirstRefusal || e.Kind == spend.ThresholdReached && e.Threshold == 1 {
			tallies[e.Tenant].limitAt.CompareAndSwap(-1, cur.Load())
		}
	})

	// Flash then Pro, each behind a breaker shared by every route.
	stage := func(name, model string) fallback.Stage[string, gemrest.Response] {
		br, err := breaker.New(breaker.Config{Name: name, ConsecutiveFailures: 5, Cooldown: time.Hour})
		must(err)
		tier := gemrest.NewTier(client(srv, model, name), func(q string) gemrest.Request { return gemrest.Request{Prompt: q, JSON: true} })
		return fallback.Stage[string, gemrest.Response]{Tier: tier, Model: model, Provider: "gcp.gemini", Breaker: br,
			Retry: retry.Policy{BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}, Validate: validAnswer}
	}
	flash, pro := stage("flash", flashModel), stage("pro", proModel)
	routes := []route.Route[string, gemrest.Response]{
		{Scenario: "support", Total: c.Deadline, MaxAttempts: 3, MarkDegraded: true,
			Candidates: []route.Candidate[string, gemrest.Response]{{Stage: flash}, {Stage: pro}}},
		{Scenario: "batch_seo", Total: c.Deadline, MaxAttempts: 2,
			Candidates: []route.Candidate[string, gemrest.Response]{{Stage: flash, Attempts: 1}, {Stage: pro}}},
	}
	router, err := route.New(route.Config[string, gemrest.Response]{Routes: routes, Ledger: ledger})
	must(err)
	defer func() {
		flash.Breaker.Reset()
		pro.Breaker.Reset()
	}()

	var seq atomic.Int64
	request := func(t spendTenant, tl *spendTally) {
		tl.sent.Add(1)
		req := spend.Request{Tenant: t.name, Scenario: t.scenario, Priority: t.priority}
		rc, err := router.Lookup(req.Tenant, req.Scenario)
		must(err)
		tk, err := ledger.Admit(context.Background(), req, rc.Estimate(usage))
		switch {
		case errors.Is(err, spend.ErrShed):
			tl.shed.Add(1)
			tl.shedFrom.CompareAndSwap(-1, cur.Load())
			return
		case errors.Is(err, spend.ErrLimitReached):
			tl.refused.Add(1)
			return
		case err != nil:
			panic(err)
		}
		defer tk.End()
		if _, err := rc.Do(tk, spendPrompt(int(seq.Add(1)))); err != nil {
			tl.failed.Add(1)
			return
		}
		tl.answered.Add(1)
	}
	start := time.Now()
	for p, n := range []int{c.Pre, c.Storm, c.Post} {
		cur.Store(int32(p))
		switch phase(p) {
		case phaseStorm:
			// Every call to Flash is refused with a RetryInfo longer than
			// the deadline: no retry fits, requests go to Pro.
			srv.SetScript(flashModel, fakegemini.Script{Latency: latency(c.Latency), FaultLatency: fakegemini.Latency{Fixed: time.Millisecond},
				Rules: []fakegemini.Rule{{Kind: fakegemini.RateLimited, P: fakegemini.Always, Params: fakegemini.Params{RetryDelay: 2 * c.Deadline}}}})
		case phasePost:
			srv.SetScript(flashModel, healthy)
			flash.Breaker.Reset()
		}
		var wg sync.WaitGroup
		for _, t := range spendTenants {
			tl := tallies[t.name]
			for range t.clients {
				wg.Go(func() {
					for range n {
						request(t, tl)
					}
				})
			}
		}
		wg.Wait()
	}
	wall := time.Since(start)

	all := sample{"wall": seconds(wall), "unitFlash": flashCost.Float(), "unitPro": proCost.Float(),
		"initechLimit": initechLimit.Float(), "globexLimit": globexLimit.Float()}
	per := map[string]sample{}
	for _, t := range spendTenants {
		tl, tot := tallies[t.name], ledger.Totals(t.name)
		rl := tot.ByClass[classify.RateLimited]
		per[t.name] = sample{
			"sent": float64(tl.sent.Load()), "answered": float64(tl.answered.Load()), "failed": float64(tl.failed.Load()),
			"refused": float64(tl.refused.Load()), "shed": float64(tl.shed.Load()),
			"ledgerShed": float64(tot.Shed), "ledgerRefused": float64(tot.Refused),
			"spend": tot.Cost.Float(), "fallbacks": float64(tot.Fallbacks), "fallbackCost": tot.FallbackCost.Float(),
			"extra": tot.FallbackExtra.Float(), "extra429": rl.FallbackExtra.Float(),
			"perValid": tot.CostPerValid().Float(), "callsPerAnswer": tot.CallsPerSuccess(), "primary": tot.PrimarySuccessRate(),
			"limitAt": float64(tl.limitAt.Load()), "shedFrom": float64(tl.shedFrom.Load()),
		}
	}
	return all, per
}

func scenarioSpend(c spendConfig, runs int, seed uint64) *result {
	res := &result{id: 8, title: fmt.Sprintf("spend: three tenants, a 429 storm on the primary (Flash → Pro); %d/%d/%d requests per client before/during/after",
		c.Pre, c.Storm, c.Post)}
	res.columns = []column{
		countCol("sent", "requests"), countCol("answered", "answered"), countCol("refused", "refused at limit"), countCol("shed", "shed (low priority)"),
		usdCol("spend", "spend"), countCol("fallbacks", "fallback answers"), usdCol("fallbackCost", "fallback cost"),
		usdCol("extra", "extra vs primary"), usdCol("extra429", "of it: 429s"),
		usdCol("perValid", "cost / valid result"), ratioCol("callsPerAnswer", "calls / answer"), pctCol("primary", "primary success"),
		phaseCol("limitAt", "limit reached"),
	}
	var alls []sample
	for run := range runs {
		all, per := runSpend(c, seed+uint64(run))
		alls = append(alls, all)
		for _, t := range spendTenants {
			r := res.row(t.name + " (" + t.scenario + map[bool]string{true: ", low priority", false: ""}[t.priority == spend.Low] + ")")
			r.runs = append(r.runs, per[t.name])
		}
	}
	acme, initech, globex := res.rows[0], res.rows[1], res.rows[2]
	all := alls[0]
	res.notes = append(res.notes, fmt.Sprintf("One request costs %s USD on Flash and %s USD on Pro (example list prices); initech's daily limit is %s USD, globex's %s USD. "+
		"\"extra vs primary\" is what the fallback answers cost beyond the same tokens on Flash; \"of it: 429s\" the part the ledger attributes to the 429s "+
		"(requests skipping Flash's open breaker included: a skip is attributed to the class of the last failure on the model). Wall time of the first run: %.2f s.",
		fmtUSD(all["unitFlash"]), fmtUSD(all["unitPro"]), fmtUSD(all["initechLimit"]), fmtUSD(all["globexLimit"]), all["wall"]))
	res.expect("initech reaches its daily limit during the storm (every run)", initech.minOf("limitAt") == float64(phaseStorm) && initech.maxOf("limitAt") == float64(phaseStorm),
		phaseName(initech.median("limitAt")))
	res.expect("initech's requests are refused after that, with ErrLimitReached, never sent upstream", initech.minOf("refused") > 0 && initech.maxOf("failed") == 0,
		fmt.Sprintf("%.0f refused, %.0f failed", initech.median("refused"), initech.maxOf("failed")))
	res.expect("initech never spends past its limit (the estimate reserves the dearest candidate)", initech.maxOf("spend") <= all["initechLimit"]+1e-12,
		fmt.Sprintf("%s of %s USD", fmtUSD(initech.maxOf("spend")), fmtUSD(all["initechLimit"])))
	res.expect("acme answers every request and pays the storm's extra cost, all of it attributed to the 429s",
		acme.minOf("answered") == acme.median("sent") && acme.minOf("extra") > 0 && acme.maxOf("extra") == acme.minOf("extra429"),
		fmt.Sprintf("%.0f/%.0f answered, %s USD extra", acme.median("answered"), acme.median("sent"), fmtUSD(acme.median("extra"))))
	res.expect("globex's low-priority requests are shed only once its limit is 90% used (after the storm), and none is refused at the limit",
		globex.minOf("shed") > 0 && globex.minOf("shedFrom") == float64(phasePost) && globex.maxOf("refused") == 0,
		fmt.Sprintf("%.0f shed from the phase %s", globex.median("shed"), phaseName(globex.median("shedFrom"))))
	for _, r := range res.rows {
		res.expect(r.name+": the ledger counts the refusals the clients saw", r.maxOf("ledgerShed") == r.maxOf("shed") && r.maxOf("ledgerRefused") == r.maxOf("refused"),
			fmt.Sprintf("%.0f shed, %.0f refused", r.maxOf("ledgerShed"), r.maxOf("ledgerRefused")))
	}
	return res
}

func usdCol(key, header string) column { return column{key, header, fmtUSD} }
func phaseCol(key, header string) column {
	return column{key, header, phaseName}
}

func fmtUSD(v float64) string { return fmt.Sprintf("$%.5f", v) }

func phaseName(v float64) string {
	if v < 0 || int(v) >= len(phaseNames) {
		return "never"
	}
	return phaseNames[int(v)] + " the storm"
}
