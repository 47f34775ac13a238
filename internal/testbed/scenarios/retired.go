package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/catalog"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	"github.com/tierguard/tierguard/internal/testbed/gemrest"
	"github.com/tierguard/tierguard/retry"
)

// Scenario 1: a batch of jobs, some of them on a model that has
// been retired, through a fixed pool of workers.
//
// The seed compares three hand-written clients that differ only in what
// they retry: A retries every failure (4 attempts, 0.5s·2ⁿ), B only
// 429/500/502/503/504, C also drops the jobs whose model models.list does
// not list before submitting them. What it measures is the cost of calling
// a model that is certain to fail: not in success latency, but in the wall
// time of the batch and the time jobs wait in the queue behind workers
// stuck retrying dead calls.
//
// tierguard's mapping: every job names its model, and every model has one
// chain, shared by all the jobs on that model — a retired model's jobs go
// through a chain whose only tier is that model, exactly as the reference
// clients call the model the job names. There is no fallback model in the
// seed, so a retired job fails, as in A and B; what tierguard changes is how
// fast, and whether it calls the model at all. Without a catalog the first
// 404 parks the tier and every later job on it fails without an upstream
// call; with a catalog (models.list fetched once at the start, the same
// single request as C's preflight) no job calls a retired model at all. The
// jobs are still submitted and counted: the chain, not the submitter, is
// where the check lives, so a job's fate is known only when it runs.
//
// A further row ("+ successor tier") shows the other mapping a migration
// would use: a retired model's chain has the live successor as its second
// tier, so its jobs are answered (degraded) instead of failing. It does more
// work than C — C drops those jobs — so it is not compared with C.
type retiredConfig struct {
	Jobs         int
	RetiredShare float64
	Unavailable  float64
	Latency      time.Duration
	Workers      int
	Attempts     int
	Base         time.Duration
	CallTimeout  time.Duration
}

func defaultRetired() retiredConfig {
	return retiredConfig{
		Jobs: 200, RetiredShare: 0.12, Unavailable: 0.06, Latency: 40 * time.Millisecond, Workers: 16,
		Attempts: 4, Base: 500 * time.Millisecond, CallTimeout: 10 * time.Second,
	}
}

// The reference model ids. Each retired model's successor is a live one.
var (
	retiredModels = []string{"imagen-4.0-generate-001", "gemini-3-image-preview"}
	liveModels    = []string{"gemini-3.6-flash", "nano-banana-2-lite"}
	successorOf   = map[string]string{"imagen-4.0-generate-001": "nano-banana-2-lite", "gemini-3-image-preview": "gemini-3.6-flash"}
)

type job struct {
	id      int
	model   string
	retired bool
}

// makeJobs returns cfg.Jobs jobs, round(RetiredShare·Jobs) of them (at
// random positions) on a retired model, unless ideal.
func makeJobs(cfg retiredConfig, seed uint64, ideal bool) []job {
	rng := rand.New(rand.NewPCG(seed, 2))
	k := int(math.Round(cfg.RetiredShare * float64(cfg.Jobs)))
	if ideal {
		k = 0
	}
	retired := map[int]bool{}
	for _, i := range rng.Perm(cfg.Jobs)[:k] {
		retired[i] = true
	}
	jobs := make([]job, cfg.Jobs)
	for i := range jobs {
		if retired[i] {
			jobs[i] = job{id: i, model: retiredModels[rng.IntN(len(retiredModels))], retired: true}
		} else {
			jobs[i] = job{id: i, model: liveModels[rng.IntN(len(liveModels))]}
		}
	}
	return jobs
}

// retiredWatch counts, client-side, the calls to retired models and those
// that started after the model's first 404 was known: for a reference
// client, once the 404 had come back; for a chain, once the request that
// met it had ended (by then the chain has parked the model; a call
// already past its preflight while that request was still running is
// not late).
type retiredWatch struct {
	clock
	first404 map[string]*atomic.Int64 // since t0, +1; 0 while none
	known    map[string]*atomic.Int64 // likewise, for chains
	late     atomic.Int64
	lists    atomic.Int64 // models.list requests
}

func newRetiredWatch(c clock) *retiredWatch {
	w := &retiredWatch{clock: c, first404: map[string]*atomic.Int64{}, known: map[string]*atomic.Int64{}}
	for _, m := range retiredModels {
		w.first404[m], w.known[m] = new(atomic.Int64), new(atomic.Int64)
	}
	return w
}

// before counts a reference client's call to model.
func (w *retiredWatch) before(model string) { w.check(w.first404, model) }

// beforeChain counts a chain's call to model.
func (w *retiredWatch) beforeChain(model string) { w.check(w.known, model) }

func (w *retiredWatch) check(since map[string]*atomic.Int64, model string) {
	if f, ok := since[model]; ok {
		if at := f.Load(); at != 0 && int64(w.now())+1 > at {
			w.late.Add(1)
		}
	}
}

// ended records a chain's request whose trail holds a 404 from model.
func (w *retiredWatch) ended(model string) {
	if f, ok := w.known[model]; ok {
		f.CompareAndSwap(0, int64(w.now())+1)
	}
}

func (w *retiredWatch) after(model string, err error) {
	var he *classify.HTTPError
	if f, ok := w.first404[model]; ok && errors.As(err, &he) && he.Facts.HTTPStatus == 404 {
		f.CompareAndSwap(0, int64(w.now())+1)
	}
}

// watchedTier reports a tier's calls to a retiredWatch.
type watchedTier struct {
	inner fallback.ModelTier[job, gemrest.Response]
	model string
	watch *retiredWatch
}

func (t watchedTier) Name() string { return t.inner.Name() }

func (t watchedTier) Call(ctx context.Context, j job) (gemrest.Response, error) {
	t.watch.beforeChain(t.model)
	out, err := t.inner.Call(ctx, j)
	t.watch.after(t.model, err)
	return out, err
}

// retiredEnv is what a client of scenario 1 runs against.
type retiredEnv struct {
	cfg     retiredConfig
	srv     *fakegemini.Server
	clients map[string]*gemrest.Client
	watch   *retiredWatch
}

func prompt(j job) gemrest.Request { return gemrest.Request{Prompt: fmt.Sprintf("job %d", j.id)} }

// status makes one call for j (under the reference per-call timeout) and
// returns its HTTP status, 0 for a transport failure.
func (e *retiredEnv) status(ctx context.Context, j job) int {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.CallTimeout)
	defer cancel()
	e.watch.before(j.model)
	_, err := e.clients[j.model].Call(ctx, prompt(j))
	e.watch.after(j.model, err)
	if err == nil {
		return 200
	}
	var he *classify.HTTPError
	if errors.As(err, &he) {
		return he.Facts.HTTPStatus
	}
	return 0
}

func (e *retiredEnv) listModels(ctx context.Context) ([]string, error) {
	e.watch.lists.Add(1)
	return e.clients[liveModels[0]].ListModels(ctx)
}

// retiredClient is one implementation: prepare runs at the start of the
// batch (inside its wall time) and returns the jobs to submit; do runs one.
type retiredClient struct {
	prepare func(ctx context.Context, jobs []job) ([]job, error)
	do      func(ctx context.Context, j job) bool
}

func submitAll(_ context.Context, jobs []job) ([]job, error) { return jobs, nil }

// naive is the reference A: every failure is retried, 0.5s·2ⁿ apart.
func naive(e *retiredEnv) retiredClient {
	return retiredClient{prepare: submitAll, do: func(ctx context.Context, j job) bool {
		for i := range e.cfg.Attempts {
			if e.status(ctx, j) == 200 {
				return true
			}
			if i < e.cfg.Attempts-1 {
				time.Sleep(e.cfg.Base << i)
			}
		}
		return false
	}}
}

var retryable = map[int]bool{429: true, 500: true, 502: true, 503: true, 504: true}

// classified is the reference B: only 429/500/502/503/504 are retried.
func classified(e *retiredEnv) retiredClient {
	return retiredClient{prepare: submitAll, do: func(ctx context.Context, j job) bool {
		for i := range e.cfg.Attempts {
			code := e.status(ctx, j)
			if code == 200 {
				return true
			}
			if !retryable[code] {
				return false
			}
			if i < e.cfg.Attempts-1 {
				time.Sleep(e.cfg.Base << i)
			}
		}
		return false
	}}
}

// preflight is the reference C: models.list once, jobs on unlisted models are
// dropped before submission, the rest run as B.
func preflight(e *retiredEnv) retiredClient {
	b := classified(e)
	return retiredClient{
		prepare: func(ctx context.Context, jobs []job) ([]job, error) {
			ids, err := e.listModels(ctx)
			if err != nil {
				return nil, err
			}
			return slices.DeleteFunc(slices.Clone(jobs), func(j job) bool { return !slices.Contains(ids, j.model) }), nil
		},
		do: b.do,
	}
}

// chains is tierguard: one chain per model, shared by that model's jobs.
func chains(pol retry.Policy, withCatalog, successor bool) func(e *retiredEnv) retiredClient {
	return func(e *retiredEnv) retiredClient {
		var models *catalog.Catalog
		if withCatalog {
			var err error
			models, err = catalog.New(e.listModels, catalog.Options{})
			must(err)
		}
		// One bulkhead and one breaker per model, shared by every chain
		// that calls it.
		stage := map[string]fallback.Stage[job, gemrest.Response]{}
		for _, m := range append(slices.Clone(liveModels), retiredModels...) {
			bh, err := bulkhead.New(bulkhead.Config{Name: m, Max: e.cfg.Workers})
			must(err)
			br, err := breaker.New(breaker.Config{Name: m})
			must(err)
			stage[m] = fallback.Stage[job, gemrest.Response]{
				Tier:  watchedTier{inner: gemrest.NewTier(e.clients[m], prompt), model: m, watch: e.watch},
				Model: m, Provider: "gcp.gemini", Bulkhead: bh, Breaker: br, Retry: pol, TryTimeout: e.cfg.CallTimeout,
			}
		}
		byModel := map[string]*fallback.Chain[job, gemrest.Response]{}
		for m, st := range stage {
			stages := []fallback.Stage[job, gemrest.Response]{st}
			if s, ok := successorOf[m]; ok && successor {
				stages = append(stages, stage[s])
			}
			c, err := fallback.New(fallback.Config[job, gemrest.Response]{Stages: stages, Catalog: models})
			must(err)
			byModel[m] = c
		}
		return retiredClient{
			prepare: func(ctx context.Context, jobs []job) ([]job, error) {
				if models != nil {
					if err := models.Refresh(ctx); err != nil {
						return nil, err
					}
				}
				return jobs, nil
			},
			do: func(ctx context.Context, j job) bool {
				res, err := byModel[j.model].Do(ctx, j)
				for _, a := range res.Attempts() {
					if a.Verdict.HTTPStatus == 404 {
						e.watch.ended(a.Model)
					}
				}
				return err == nil
			},
		}
	}
}

type retiredVariant struct {
	name  string
	ideal bool
	build func(*retiredEnv) retiredClient
}

func retiredVariants(cfg retiredConfig) []retiredVariant {
	seedPolicy := retry.Policy{MaxAttempts: cfg.Attempts, BaseDelay: cfg.Base, MaxDelay: cfg.Base << max(cfg.Attempts-2, 0), Jitter: retry.NoJitter}
	defaults := retry.Policy{}
	return []retiredVariant{
		{name: "A naive retry", build: naive},
		{name: "B classified", build: classified},
		{name: "C preflight + classified", build: preflight},
		{name: "ideal (no retired, no 503)", ideal: true, build: classified},
		{name: "tierguard, reference retry, no catalog", build: chains(seedPolicy, false, false)},
		{name: "tierguard, reference retry, catalog", build: chains(seedPolicy, true, false)},
		{name: "tierguard, defaults, no catalog", build: chains(defaults, false, false)},
		{name: "tierguard, defaults, catalog", build: chains(defaults, true, false)},
		{name: "tierguard, reference retry, catalog + successor tier", build: chains(seedPolicy, true, true)},
	}
}

// runRetired runs one variant once.
func runRetired(cfg retiredConfig, v retiredVariant, seed uint64) (sample, error) {
	models := make([]fakegemini.Model, 0, len(liveModels)+len(retiredModels))
	for _, m := range append(slices.Clone(liveModels), retiredModels...) {
		models = append(models, fakegemini.Model{ID: m})
	}
	srv := fakegemini.New(fakegemini.WithSeed(seed), fakegemini.WithModels(models...), fakegemini.WithRetired(retiredModels...))
	defer srv.Close()
	script := fakegemini.Script{Latency: fakegemini.Latency{Fixed: cfg.Latency}}
	if !v.ideal {
		script.Rules = []fakegemini.Rule{{Kind: fakegemini.Unavailable, P: cfg.Unavailable}}
	}
	srv.SetDefaultScript(script)

	e := &retiredEnv{cfg: cfg, srv: srv, clients: map[string]*gemrest.Client{}}
	for _, m := range append(slices.Clone(liveModels), retiredModels...) {
		e.clients[m] = client(srv, m, m)
	}
	all := makeJobs(cfg, seed, v.ideal)
	e.watch = newRetiredWatch(clock{})
	c := v.build(e)

	// The batch starts now: preflight and catalog refresh count in its wall
	// time.
	ctx := context.Background()
	clk := clock{t0: time.Now()}
	e.watch.clock = clk
	jobs, err := c.prepare(ctx, all)
	if err != nil {
		return nil, err
	}
	submit := make([]time.Duration, len(jobs))
	wait := make([]time.Duration, len(jobs))
	ok := make([]bool, len(jobs))
	queue := make(chan int, len(jobs))
	for i := range jobs {
		submit[i] = clk.now()
		queue <- i
	}
	close(queue)
	st := watchStalls(clk)
	var wg sync.WaitGroup
	for range cfg.Workers {
		wg.Go(func() {
			for i := range queue {
				wait[i] = clk.now() - submit[i]
				ok[i] = c.do(ctx, jobs[i])
			}
		})
	}
	wg.Wait()
	wall := clk.now()
	stall := st.end()

	upstream, retiredCalls := e.watch.lists.Load(), int64(0)
	for m, st := range srv.Stats() {
		upstream += st.Requests
		if slices.Contains(retiredModels, m) {
			retiredCalls += st.Requests
		}
	}
	successes := 0
	for _, b := range ok {
		if b {
			successes++
		}
	}
	return sample{
		"wall":     seconds(wall),
		"upstream": float64(upstream),
		"queue95":  millis(percentile(wait, 0.95)),
		"ok":       float64(successes),
		"jobs":     float64(len(jobs)),
		"retired":  float64(retiredCalls),
		"late":     float64(e.watch.late.Load()),
		"stall":    millis(stall),
	}, nil
}

func scenarioRetired(cfg retiredConfig, runs int, seed uint64) (*result, error) {
	res := &result{id: 1, title: fmt.Sprintf("retired models: %d jobs, %.0f%% on a retired model, %.0f%% random 503, %v per success, %d workers",
		cfg.Jobs, 100*cfg.RetiredShare, 100*cfg.Unavailable, cfg.Latency, cfg.Workers)}
	res.columns = []column{
		secCol("wall", "wall"), countCol("upstream", "upstream"), msCol("queue95", "queue-wait p95"),
		countCol("ok", "successes"), countCol("jobs", "submitted"),
		countCol("retired", "calls to retired"), countCol("late", "… after its 1st 404"), msCol("stall", "max stall"),
	}
	vs := retiredVariants(cfg)
	for run := range runs {
		for _, v := range vs {
			s, err := runRetired(cfg, v, seed+uint64(run))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", v.name, err)
			}
			res.row(v.name).runs = append(res.row(v.name).runs, s)
		}
	}
	res.notes = append(res.notes,
		"upstream counts generateContent requests and models.list requests (C and the models rows make one). "+
			"C submits only the jobs on listed models; every other row submits all jobs. "+
			"\"… after its 1st 404\" counts calls to a retired model that started after the first 404 from that model had come back. "+
			"\"max stall\" is the longest a 1 ms timer fired late during the run: how long the machine kept the process from running. "+
			"The tierguard rows run 176 real jobs (a retired job fails in microseconds), the ideal row 200.")

	c, ideal := res.find("C preflight + classified"), res.find("ideal (no retired, no 503)")
	// With a catalog, tierguard does what C does (one models.list, no call
	// to a retired model): it must match C on every column. Without one it
	// learns from the first 404 of each retired model, so it makes those
	// calls (and any sent concurrently before the first 404 came back)
	// instead of C's models.list: upstream is not compared.
	for _, name := range []string{"tierguard, reference retry, catalog", "tierguard, reference retry, no catalog"} {
		tg := res.find(name)
		for _, k := range []string{"wall", "queue95"} {
			r := paired(tg, c, k)
			res.expect(fmt.Sprintf("%s: %s ≤ C's, paired per seed (5%% tolerance for noise)", name, k), r <= 1.05,
				fmt.Sprintf("median of per-seed ratios ×%.3f (medians %.3f vs %.3f)", r, tg.median(k), c.median(k)))
		}
		if name == "tierguard, reference retry, catalog" {
			r := paired(tg, c, "upstream")
			res.expect(name+": upstream ≤ C's, paired per seed", r <= 1,
				fmt.Sprintf("×%.3f (medians %.0f vs %.0f)", r, tg.median("upstream"), c.median("upstream")))
		}
		r := paired(tg, c, "ok")
		res.expect(name+": successes ≥ C's, paired per seed", r >= 1,
			fmt.Sprintf("×%.3f (medians %.0f vs %.0f)", r, tg.median("ok"), c.median("ok")))
		res.expect(name+": no call to a retired model after its first 404 (every run)", tg.maxOf("late") == 0,
			fmt.Sprintf("max %.0f", tg.maxOf("late")))
	}
	for _, name := range []string{"tierguard, reference retry, catalog", "tierguard, defaults, catalog"} {
		res.expect(name+": no call to a retired model at all (every run)", res.find(name).maxOf("retired") == 0,
			fmt.Sprintf("max %.0f", res.find(name).maxOf("retired")))
	}
	for _, name := range []string{"tierguard, defaults, no catalog", "tierguard, defaults, catalog"} {
		r := paired(res.find(name), ideal, "queue95")
		res.expect(name+": queue-wait p95 ≤ 1.2 × ideal's, paired per seed", r <= 1.2,
			fmt.Sprintf("×%.2f (medians %.0f ms vs %.0f ms)", r, res.find(name).median("queue95"), ideal.median("queue95")))
	}
	return res, nil
}
