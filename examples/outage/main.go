// Command outage is tierguard's demo: about twenty seconds of traffic against
// an in-process fake Gemini server while the primary model has a bad day.
// No API key, no network, no setup:
//
//	go run ./examples/outage           # or: make demo
//	go run ./examples/outage -metrics  # and print the OpenTelemetry metrics
//	go run ./examples/outage -report outage.html  # and draw it: one self-contained HTML page
//	go run ./examples/outage -prometheus 127.0.0.1:9464  # and serve /metrics for Prometheus
//
// # The story
//
// Sixteen clients ask questions one after another (with a short pause
// between), all through the same chain, inside a 2-second deadline per
// request:
//
//	pro (gemini-2.5-pro) → legacy (gemini-1.0-pro) → flash (gemini-2.5-flash) → cache → default answer
//
// Four more clients stream their answers (streamGenerateContent, server-sent
// events) through a stream chain with the same deadline:
//
//	pro → flash → default answer
//
// A stream falls back only until its first chunk arrives (the commit
// point); after that a failure ends it as incomplete, since the client has
// already shown text. Each stream attempt must deliver its first chunk
// within -first-chunk-timeout, and no gap between chunks may exceed
// -idle-timeout. The stream chain shares the chain's circuit breakers: one
// per model, whichever endpoint finds it failing.
//
// Every tier sits behind a bulkhead (unary chain), a circuit breaker and a
// retry policy with a shared retry budget; every attempt has a per-try
// timeout. The timeline, on the fake server's clock:
//
//   - 0s–3s: healthy. pro answers; 3% of its answers are malformed JSON,
//     which the stage's validator rejects: those requests move on to flash
//     and do not count against pro's breaker (a malformed streamed answer
//     is only seen whole: the stream ends with the validator's error).
//     Now and then pro stalls and the per-try (or first-chunk) timeout cuts
//     the attempt short. In this first phase only, 8% of pro's connections
//     drop mid-answer — a stream after two chunks, too late to fall back,
//     so it ends incomplete; a unary call is retried — and 2% of its
//     answers end without a finish reason (an incomplete stream; for a
//     unary call, invalid output).
//   - 3s–8s: pro outage, every call answers 503 UNAVAILABLE. The first
//     failures retry (within the retry budget) and fall through to flash;
//     pro's breaker opens, so later requests skip pro without calling it.
//     Every cooldown the breaker lets a few probes through (half-open);
//     while they fail it reopens, with a longer cooldown.
//   - 8s: pro recovers; the next probes succeed and the breaker closes.
//   - 12s–15s: a 429 storm on pro, with google.rpc.RetryInfo asking for 1s.
//     A retry that fits the deadline waits that long; the retry budget and
//     the breaker soon stop the chain from asking at all.
//   - with -drill-len: a chaos drill (package fallback/chaos) forces pro's
//     breaker open at -drill-start for -drill-len, as a Chaos Week feature
//     flag would; flash carries the load, and the drill gives the breaker
//     back when it ends.
//   - always: legacy names a model the server has retired. The chain's
//     catalog (models.list) does not list it, so legacy is skipped without
//     a single upstream call. With -catalog=false it answers 404 once and
//     is then parked. flash fails 1% of the time (retried), and its
//     bulkhead is smaller than the client count, so at the worst of the
//     outage some requests are answered from the cache or the default.
//
// # Reading the output
//
// While it runs, one line (updated every half second on a terminal, printed
// every two seconds otherwise) shows the phase, the request rate, the share
// of requests answered so far, where the last half second's answers came
// from, and the breaker states; breaker transitions print as they happen.
// Then a summary:
//
//   - answered: requests that got an answer from any source (a tier, the
//     cache or the default), and latency percentiles end to end;
//   - worst overrun: how far past its deadline the latest answer came
//     (0s: none was late);
//   - answers by source: which tier, or the cache, or the default, or an
//     error;
//   - by phase: the same per phase, with pro's upstream calls per request:
//     above 1 means retries, near 0 means the breaker is shedding load;
//   - streams: how many completed, how many broke after their first chunk
//     and why (connection cut, no finish reason, idle timeout, deadline),
//     how many the validator rejected at the end, how many fell back
//     before their first chunk (to flash or the default), the time to
//     first chunk (p50, p95), and the worst overrun of a stream's end past
//     its deadline;
//   - breaker transitions with their time since the start, and how long
//     after the outage pro's breaker closed again;
//   - upstream calls per model as the fake server counted them (unary and
//     streams), by outcome;
//   - validation rejects, retries and skips (open circuit, full bulkhead,
//     retired model, too little time left) per tier, and the streams each
//     tier started;
//   - with -metrics: every metric otelx exported (GenAI semantic
//     conventions and tierguard.*), read from an in-process OpenTelemetry
//     SDK MeterProvider with a ManualReader, one row per series: counters
//     and gauges with their value, histograms with count, sum, mean and
//     max; the requests' series are by tenant (the three tenants are
//     declared to otelx, so that each starts at 0);
//   - with -report FILE: one HTML page, charts drawn as inline SVG that
//     scales to the window's width (it loads nothing from anywhere), each
//     axis titled: answers per second by source (stacked), each tier's
//     breaker state as a band (grey where its model is retired), p50 and
//     p99 latency against the deadline, upstream calls per tier, streams
//     completed and incomplete, the fault phases shaded on every chart,
//     and the both-models-down act's answers by kind of cache match
//     (`make report-png` renders it to examples/outage/report.png);
//   - with -prometheus ADDR: otelx's metrics on http://ADDR/metrics through
//     the OpenTelemetry Prometheus exporter, during the run and after it
//     until Ctrl-C — the names the README's PromQL and the Grafana
//     dashboard (examples/outage/grafana-dashboard.json) use.
//
// Last, with -both-down (2s by default; 0 skips it), both models go down:
// pro and flash answer 503 while users keep asking the questions they asked
// before, reworded or not. A tierguard cache (fallback/cache) answers from
// what the models said while they were up — the same question (exact), an
// order status with another number (template), a paraphrase (semantic, a
// deterministic embedder standing in for an embedding model) and, labelled
// as approximate, a looser one (simplified) — and the default answers the
// rest. The table shows the share of each: the dashboard row of cache hits
// by kind.
//
// The command exits 1 when an invariant breaks: an answer (or the end of a
// stream) later than its deadline plus -slack, or less than -min-success of
// the requests answered. Every knob is a flag; see -help.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/catalog"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	"github.com/tierguard/tierguard/internal/testbed/gemrest"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

func main() {
	cfg := defaultConfig()
	cfg.register(flag.CommandLine)
	flag.Parse()
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "outage:", err)
		os.Exit(2)
	}
	var prom *promServer
	if cfg.Prometheus != "" {
		ln, err := net.Listen("tcp", cfg.Prometheus)
		if err == nil {
			prom, err = servePrometheus(ln)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "outage: -prometheus:", err)
			os.Exit(2)
		}
		cfg.reader = prom.reader
		fmt.Fprintf(os.Stderr, "serving metrics on http://%s/metrics\n", prom.addr())
	}
	// Ctrl-C stops new requests early; the summary still prints.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	var progress io.Writer // nil: no live progress
	if cfg.Progress {
		progress = os.Stderr
	}
	sum, err := run(ctx, cfg, progress)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "outage:", err)
		os.Exit(1)
	}
	sum.print(os.Stdout)
	var bd *bothDownSummary
	if *bothDownLen > 0 {
		bd, err = runBothDown(context.Background(), cfg, *bothDownLen)
		if err != nil {
			fmt.Fprintln(os.Stderr, "outage:", err)
			os.Exit(1)
		}
		bd.print(os.Stdout)
	}
	if cfg.Report != "" {
		if err := writeReportFile(sum, bd, cfg.Report); err != nil {
			fmt.Fprintln(os.Stderr, "outage: -report:", err)
			os.Exit(1)
		}
		fmt.Printf("\nreport written to %s\n", cfg.Report)
	}
	if prom != nil {
		// Prometheus scrapes the last figures until Ctrl-C.
		fmt.Fprintf(os.Stderr, "still serving metrics on http://%s/metrics; Ctrl-C to stop\n", prom.addr())
		hold, stopHold := signal.NotifyContext(context.Background(), os.Interrupt)
		<-hold.Done()
		stopHold()
		sum.stopMetrics()
		_ = prom.close()
	}
	if len(sum.violations()) > 0 {
		os.Exit(1)
	}
}

// writeReportFile writes the -report page, with the last act if it ran.
func writeReportFile(sum *summary, bd *bothDownSummary, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := sum.writeReport(f, bd); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// The models of the story. The fake server retires legacyModel.
const (
	proModel    = "gemini-2.5-pro"
	legacyModel = "gemini-1.0-pro"
	flashModel  = "gemini-2.5-flash"
)

// question is the chain's input: every tier builds its own prompt from it.
type question struct {
	ID   int
	Text string
}

// answer is what a valid answer decodes to: the tiers ask for JSON.
type answer struct {
	Model  string `json:"model"`
	Answer string `json:"answer"`
}

// validAnswer accepts the JSON of an answer with a non-empty answer field.
var validAnswer = validate.Decode(func(a answer) error {
	if a.Answer == "" {
		return validate.Errorf("decode", "empty answer")
	}
	return nil
})

// guards are the chain's circuit breakers, for the stream chain (which
// shares them), the progress line and the cleanup at the end.
type guards struct {
	breakers []*breaker.Breaker
}

// breaker returns the breaker of the named tier.
func (g *guards) breaker(name string) *breaker.Breaker {
	for _, b := range g.breakers {
		if b.Name() == name {
			return b
		}
	}
	return nil
}

// buildChain assembles pro → legacy → flash → cache → default. This is the
// part of the demo that shows how a service uses tierguard.
func buildChain(cfg config, srv *fakegemini.Server, models *catalog.Catalog, onBreaker func(breaker.Transition)) (*fallback.Chain[question, gemrest.Response], *guards, error) {
	g := &guards{}
	client := func(name, model string) (*gemrest.Client, error) {
		return gemrest.New(gemrest.Config{BaseURL: srv.URL(), APIKey: "demo-key", Model: model, Name: name, HTTPClient: srv.Client()})
	}
	// Answers must be JSON of the right shape: a malformed one moves on to
	// the next tier without counting against the breaker.
	valid := validate.Field(func(r gemrest.Response) string { return r.Text }, validAnswer)

	type tierSpec struct {
		name, model string
		prompt      func(question) gemrest.Request
		slots       int           // bulkhead size
		attempts    int           // retry.Policy.MaxAttempts
		tryTimeout  time.Duration // per attempt
	}
	specs := []tierSpec{
		{name: "pro", model: proModel, slots: cfg.Clients, attempts: 2, tryTimeout: cfg.Deadline * 2 / 5,
			prompt: func(q question) gemrest.Request {
				return gemrest.Request{System: "Answer in JSON.", Prompt: q.Text, JSON: true}
			}},
		{name: "legacy", model: legacyModel, slots: max(cfg.Clients/4, 1), attempts: 1, tryTimeout: cfg.Deadline / 4,
			prompt: func(q question) gemrest.Request {
				return gemrest.Request{Prompt: "Answer in JSON: " + q.Text, JSON: true}
			}},
		{name: "flash", model: flashModel, slots: max(cfg.Clients*3/4, 1), attempts: 3, tryTimeout: cfg.Deadline * 3 / 10,
			prompt: func(q question) gemrest.Request {
				return gemrest.Request{Prompt: "Briefly, in JSON: " + q.Text, JSON: true, MaxOutputTokens: 256}
			}},
	}

	var stages []fallback.Stage[question, gemrest.Response]
	for _, s := range specs {
		c, err := client(s.name, s.model)
		if err != nil {
			return nil, nil, err
		}
		bh, err := bulkhead.New(bulkhead.Config{Name: s.name, Max: s.slots})
		if err != nil {
			return nil, nil, err
		}
		br, err := breaker.New(breaker.Config{
			Name: s.name,
			// Trip on 5 failures in a row, or on half the calls failing over
			// a 5s window once 20 calls were seen.
			ConsecutiveFailures: 5,
			FailureRatio:        0.5,
			MinCalls:            20,
			Window:              5 * time.Second,
			// Stay open for the cooldown, doubled after a failed probe.
			Cooldown:    cfg.Cooldown,
			MaxCooldown: 2 * cfg.Cooldown,
			// Half-open: two probes at a time, three successes to close.
			HalfOpenProbes: 2,
			ProbeSuccesses: 3,
		})
		if err != nil {
			return nil, nil, err
		}
		br.Observe(onBreaker)
		// gRPC-style budget: retries stop after 5 failures in a row and come
		// back one per 10 successes, so an outage cannot multiply the load.
		budget, err := retry.NewBudget(10, 0.1)
		if err != nil {
			return nil, nil, err
		}
		g.breakers = append(g.breakers, br)
		stages = append(stages, fallback.Stage[question, gemrest.Response]{
			Tier:       gemrest.NewTier(c, s.prompt),
			Model:      s.model,
			Provider:   "gcp.gemini",
			Bulkhead:   bh,
			Breaker:    br,
			Retry:      retry.Policy{MaxAttempts: s.attempts, BaseDelay: 50 * time.Millisecond, MaxDelay: 250 * time.Millisecond, Budget: budget},
			TryTimeout: s.tryTimeout,
			Validate:   valid,
		})
	}

	chain, err := fallback.New(fallback.Config[question, gemrest.Response]{
		Stages: stages,
		// One deadline for the whole request, every tier and retry included.
		Total: cfg.Deadline,
		// Skip tiers whose model the API no longer serves (nil: no preflight).
		Catalog: models,
		// After the tiers: the last good answer to the same question...
		Cache: newAnswerCache(),
		// ...and last of all a canned answer.
		Default: func(context.Context, question) (gemrest.Response, bool) {
			return gemrest.Response{Text: `{"model":"default","answer":"We are busy right now; please try again shortly."}`}, true
		},
		MeasureLatency: true,
	})
	return chain, g, err
}

// answerCache keeps the last validated answer per question. The chain
// writes only answers that came from a tier and passed validation.
type answerCache struct {
	mu sync.RWMutex
	m  map[int]gemrest.Response
}

func newAnswerCache() *answerCache { return &answerCache{m: make(map[int]gemrest.Response)} }

// Get returns the cached answer to q.
func (c *answerCache) Get(_ context.Context, q question) (gemrest.Response, string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	r, ok := c.m[q.ID]
	return r, "", ok
}

// Put stores a validated answer to q.
func (c *answerCache) Put(_ context.Context, q question, r gemrest.Response) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[q.ID] = r
}
