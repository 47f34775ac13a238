// Command drill runs a fault-injection drill with package
// github.com/tierguard/tierguard/fallback/chaos against a chain of two
// Gemini tiers over an in-process fake Gemini server, and prints the
// drill's report: the five signals (breaker trips, bulkhead rejection
// rate, fallback rate, cache-hit ratio, end-to-end success), latency
// percentiles and the worst deadline overrun, judged against thresholds.
// It exits 1 when a check fails. No API key, no network:
//
//	go run ./examples/drill                               # 20% Gemini 503 on pro for 20 s
//	go run ./examples/drill -fault none -open 15s         # pro's breaker forced open for 15 s
//	go run ./examples/drill -fault 429 -rate 1 -after 5s -for 5s -min-success 0.99
//	go run ./examples/drill -fault stall -rate 0.05 -max-p99 2s
//
// The chain is pro (gemini-2.5-pro) → flash (gemini-2.5-flash) → a default
// answer; pro has a breaker, a bulkhead and two attempts; pro's tier is
// wrapped with chaos.Tier, so the drill's rule reaches its calls. Your own
// drill looks the same with your chain: see fallback/chaos's drill_test.go
// for drills that run in go test under testing/synctest.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/chaos"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	"github.com/tierguard/tierguard/internal/testbed/gemrest"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

type config struct {
	fault       string
	rate        float64
	after, span time.Duration
	open        time.Duration
	rps         float64
	duration    time.Duration
	concurrency int
	deadline    time.Duration
	seed        uint64
	minSuccess  float64
	maxDefault  float64
	maxOverrun  time.Duration
	maxP99      time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.fault, "fault", "503", "fault on pro: 503, 429, quota, retired, 499, auth, stall, malformed, empty, cut, none")
	flag.Float64Var(&c.rate, "rate", 0.2, "share of pro's calls the fault hits, in (0, 1]")
	flag.DurationVar(&c.after, "after", 0, "the fault starts this long after the drill")
	flag.DurationVar(&c.span, "for", 0, "the fault lasts this long (0: to the end)")
	flag.DurationVar(&c.open, "open", 0, "force pro's breaker open for this long from the start (0: no)")
	flag.Float64Var(&c.rps, "rps", 50, "requests per second")
	flag.DurationVar(&c.duration, "duration", 20*time.Second, "how long the load lasts")
	flag.IntVar(&c.concurrency, "concurrency", 64, "most requests in flight")
	flag.DurationVar(&c.deadline, "deadline", 2*time.Second, "each request's total deadline")
	flag.Uint64Var(&c.seed, "seed", 1, "the drill's seed")
	flag.Float64Var(&c.minSuccess, "min-success", 0.999, "check: end-to-end success at least this share")
	flag.Float64Var(&c.maxDefault, "max-default", 0.01, "check: the default answer answers at most this share")
	flag.DurationVar(&c.maxOverrun, "max-overrun", 50*time.Millisecond, "check: no request ends later than its deadline plus this")
	flag.DurationVar(&c.maxP99, "max-p99", 0, "check: p99 latency at most this (0: no check)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := run(ctx, c, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "drill:", err)
		os.Exit(2)
	}
	fmt.Print(rep)
	if !rep.Passed() {
		os.Exit(1)
	}
}

// faults maps the -fault names to the chaos vocabulary.
var faults = map[string]chaos.Fault{
	"503":       chaos.Fail(chaos.GeminiOverloaded),
	"429":       chaos.Fail(chaos.GeminiRateLimited),
	"quota":     chaos.Fail(chaos.GeminiDailyQuota),
	"retired":   chaos.Fail(chaos.GeminiModelNotFound.WithModel("gemini-2.5-pro")),
	"499":       chaos.Fail(chaos.GeminiCancelled),
	"auth":      chaos.Fail(chaos.GeminiInvalidKey),
	"stall":     chaos.Stall(),
	"malformed": chaos.MalformedJSON(),
	"empty":     chaos.EmptyText(),
	"cut":       chaos.CutAfter(0),
}

func run(ctx context.Context, c config, log io.Writer) (*chaos.Report, error) {
	var rules []chaos.Rule
	if c.fault != "none" {
		f, ok := faults[c.fault]
		if !ok {
			return nil, fmt.Errorf("unknown -fault %q", c.fault)
		}
		rules = append(rules, chaos.Rule{Tier: "pro", Rate: c.rate, Fault: f, After: c.after, For: c.span})
	}
	var open []chaos.Open
	if c.open > 0 {
		open = append(open, chaos.Open{Tier: "pro", For: c.open})
	}

	srv := fakegemini.New(fakegemini.WithSeed(c.seed))
	defer srv.Close()
	srv.SetScript("gemini-2.5-pro", fakegemini.Script{Latency: fakegemini.Latency{Fixed: 60 * time.Millisecond, Jitter: 40 * time.Millisecond}})
	srv.SetScript("gemini-2.5-flash", fakegemini.Script{Latency: fakegemini.Latency{Fixed: 20 * time.Millisecond, Jitter: 20 * time.Millisecond}})

	var drills chaos.Switch
	chain, err := buildChain(srv, &drills, c.deadline)
	if err != nil {
		return nil, err
	}
	// The default answer keeps success high whatever happens: a drill
	// also bounds how often it is needed.
	checks := []chaos.Check{chaos.MinSuccess(c.minSuccess), chaos.MaxDefaultRatio(c.maxDefault), chaos.MaxOverrun(c.maxOverrun)}
	if c.maxP99 > 0 {
		checks = append(checks, chaos.MaxLatency(0.99, c.maxP99))
	}
	fmt.Fprintf(log, "drill: %v of load at %v rps through pro → flash → default (fault %s on %.0f%% of pro's calls, pro forced open for %v)...\n",
		c.duration, c.rps, c.fault, 100*c.rate, c.open)
	rep, err := chaos.Run(ctx, chain, chaos.RunConfig[string]{
		Name:   "fault " + c.fault,
		Load:   chaos.Load{RPS: c.rps, Duration: c.duration, Concurrency: c.concurrency},
		Input:  func(n int) string { return fmt.Sprintf("Question %d: what should I know about topic %d?", n, n%400) },
		Switch: &drills,
		Drill:  chaos.Drill{Seed: c.seed, Rules: rules, Open: open},
		Checks: checks,
	})
	if errors.Is(err, context.Canceled) {
		err = nil // interrupted: report what was seen
	}
	return rep, err
}

func buildChain(srv *fakegemini.Server, drills *chaos.Switch, total time.Duration) (*fallback.Chain[string, string], error) {
	tier := func(name, model string) (fallback.ModelTier[string, string], error) {
		client, err := gemrest.New(gemrest.Config{BaseURL: srv.URL(), APIKey: "demo-key", Model: model, Name: name, HTTPClient: srv.Client()})
		if err != nil {
			return nil, err
		}
		t := gemrest.NewTier(client, func(q string) gemrest.Request { return gemrest.Request{Prompt: q} })
		return fallback.MapTier(t, func(r gemrest.Response) string { return r.Text }), nil
	}
	pro, err := tier("pro", "gemini-2.5-pro")
	if err != nil {
		return nil, err
	}
	flash, err := tier("flash", "gemini-2.5-flash")
	if err != nil {
		return nil, err
	}
	proBreaker, err := breaker.New(breaker.Config{Name: "pro", FailureRatio: 0.5, MinCalls: 20, Window: 10 * time.Second, Cooldown: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	proSlots, err := bulkhead.New(bulkhead.Config{Name: "pro", Max: 32})
	if err != nil {
		return nil, err
	}
	answer := validate.NonEmpty()
	return fallback.New(fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{
			{Tier: chaos.Tier(pro, drills), Model: "gemini-2.5-pro", Provider: "gcp.gemini", Breaker: proBreaker, Bulkhead: proSlots,
				TryTimeout: time.Second, Retry: retry.Policy{MaxAttempts: 2}, Validate: answer},
			{Tier: flash, Model: "gemini-2.5-flash", Provider: "gcp.gemini", TryTimeout: 500 * time.Millisecond,
				Retry: retry.Policy{MaxAttempts: 2}, Validate: answer},
		},
		Total:   total,
		Default: func(context.Context, string) (string, bool) { return "We are busy, please retry.", true },
	})
}
