package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// config holds the demo's knobs. Times are offsets from the start.
type config struct {
	Clients  int
	Duration time.Duration
	Deadline time.Duration
	Think    time.Duration

	OutageStart, OutageLen time.Duration
	StormStart, StormLen   time.Duration
	StormRetry             time.Duration
	Malformed              float64
	Stall                  float64
	FlashErrors            float64

	Cooldown time.Duration
	// DrillStart and DrillLen place a chaos drill that forces pro's
	// breaker open (DrillLen 0: none).
	DrillStart, DrillLen time.Duration
	Catalog              bool
	Seed                 uint64

	// Streaming clients and their faults.
	StreamClients int
	FirstChunk    time.Duration
	Idle          time.Duration
	StreamCuts    float64
	NoFinish      float64

	Slack      time.Duration
	MinSuccess float64
	Progress   bool
	Metrics    bool
	// Prometheus is the address -prometheus serves /metrics on ("" for
	// none), Report the file -report writes.
	Prometheus string
	Report     string

	// reader, when set, also reads otelx's metrics (the Prometheus
	// exporter); the run leaves it serving (summary.stopMetrics).
	reader sdkmetric.Reader
	// beforeTraffic, when set, runs once the chains are instrumented and
	// before the first request (a test waits there for a first scrape).
	beforeTraffic func()
	// undeclared are tenants left out of otelx's KnownLabels, whose
	// series appear with their first requests (a test of the queries
	// that count them).
	undeclared []string
}

func defaultConfig() config {
	return config{
		Clients:     16,
		Duration:    20 * time.Second,
		Deadline:    2 * time.Second,
		Think:       20 * time.Millisecond,
		OutageStart: 3 * time.Second,
		OutageLen:   5 * time.Second,
		StormStart:  12 * time.Second,
		StormLen:    3 * time.Second,
		StormRetry:  time.Second,
		Malformed:   0.03,
		Stall:       0.005,
		FlashErrors: 0.01,
		Cooldown:    2 * time.Second,
		Catalog:     true,
		Seed:        1,

		StreamClients: 4,
		FirstChunk:    500 * time.Millisecond,
		Idle:          300 * time.Millisecond,
		StreamCuts:    0.08,
		NoFinish:      0.02,

		Slack:      50 * time.Millisecond,
		MinSuccess: 0.99,
		Progress:   true,
	}
}

func (c *config) register(fs *flag.FlagSet) {
	fs.IntVar(&c.Clients, "clients", c.Clients, "concurrent clients, each sending one request after another")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "how long clients send requests")
	fs.DurationVar(&c.Deadline, "deadline", c.Deadline, "total deadline of each request (the chain's Total)")
	fs.DurationVar(&c.Think, "think", c.Think, "mean pause of a client between two requests (uniform in [0, 2×think))")
	fs.DurationVar(&c.OutageStart, "outage-start", c.OutageStart, "when pro starts answering 503 UNAVAILABLE")
	fs.DurationVar(&c.OutageLen, "outage-len", c.OutageLen, "how long the pro outage lasts (0: no outage)")
	fs.DurationVar(&c.StormStart, "storm-start", c.StormStart, "when the 429 storm on pro starts")
	fs.DurationVar(&c.StormLen, "storm-len", c.StormLen, "how long the 429 storm lasts (0: no storm)")
	fs.DurationVar(&c.StormRetry, "storm-retry", c.StormRetry, "the delay the 429s ask for in google.rpc.RetryInfo")
	fs.Float64Var(&c.Malformed, "malformed", c.Malformed, "share of pro's answers that are malformed JSON")
	fs.Float64Var(&c.Stall, "stall", c.Stall, "share of pro's calls that stall until the per-try timeout")
	fs.Float64Var(&c.FlashErrors, "flash-errors", c.FlashErrors, "share of flash's calls that answer 503")
	fs.DurationVar(&c.Cooldown, "cooldown", c.Cooldown, "breaker cooldown before half-open probes (doubles on a failed probe)")
	fs.DurationVar(&c.DrillStart, "drill-start", c.DrillStart, "when a chaos drill (fallback/chaos) forces pro's breaker open, as a Chaos Week feature flag would")
	fs.DurationVar(&c.DrillLen, "drill-len", c.DrillLen, "how long the drill keeps pro's breaker open (0: no drill); it gives the breaker back when it ends")
	fs.BoolVar(&c.Catalog, "catalog", c.Catalog, "preflight tiers against models.list; false: the retired tier is parked after its first 404")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "seed of the fake server's and the clients' random draws")
	fs.IntVar(&c.StreamClients, "stream-clients", c.StreamClients, "concurrent streaming clients (0: none), through a stream chain pro → flash → default")
	fs.DurationVar(&c.FirstChunk, "first-chunk-timeout", c.FirstChunk, "streams: longest wait for a tier's first chunk (time to first token) per attempt")
	fs.DurationVar(&c.Idle, "idle-timeout", c.Idle, "streams: longest gap between two chunks once a stream has started")
	fs.Float64Var(&c.StreamCuts, "stream-cuts", c.StreamCuts, "share of pro's answers whose connection drops mid-body (a stream after two chunks), before the first outage or storm")
	fs.Float64Var(&c.NoFinish, "no-finish", c.NoFinish, "share of pro's answers that end without a finish reason, before the first outage or storm")
	fs.DurationVar(&c.Slack, "slack", c.Slack, "invariant: no answer later than its deadline plus this")
	fs.Float64Var(&c.MinSuccess, "min-success", c.MinSuccess, "invariant: at least this share of requests answered (any source)")
	fs.BoolVar(&c.Progress, "progress", c.Progress, "show live progress on stderr")
	fs.BoolVar(&c.Metrics, "metrics", c.Metrics, "instrument the chains with otelx (OpenTelemetry SDK, in-process reader) and print the metrics at the end")
	fs.StringVar(&c.Prometheus, "prometheus", c.Prometheus, "serve otelx's metrics for Prometheus on this address (/metrics, OpenTelemetry Prometheus exporter), until interrupted after the run")
	fs.StringVar(&c.Report, "report", c.Report, "write the run as one self-contained HTML page with charts to this file")
}

func (c *config) validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(c.Clients >= 1, "-clients must be at least 1")
	check(c.StreamClients >= 0, "-stream-clients must not be negative")
	check(c.FirstChunk >= 0 && c.Idle >= 0, "-first-chunk-timeout and -idle-timeout must not be negative")
	check(c.Duration > 0, "-duration must be positive")
	check(c.Deadline >= 300*time.Millisecond, "-deadline must be at least 300ms (each tier needs a useful attempt)")
	check(c.Think >= 0, "-think must not be negative")
	check(c.OutageStart >= 0 && c.OutageLen >= 0, "-outage-start and -outage-len must not be negative")
	check(c.StormStart >= 0 && c.StormLen >= 0, "-storm-start and -storm-len must not be negative")
	check(c.DrillStart >= 0 && c.DrillLen >= 0, "-drill-start and -drill-len must not be negative")
	check(c.StormRetry >= 0, "-storm-retry must not be negative")
	for _, p := range []struct {
		name string
		v    float64
	}{{"-malformed", c.Malformed}, {"-stall", c.Stall}, {"-flash-errors", c.FlashErrors}, {"-min-success", c.MinSuccess},
		{"-stream-cuts", c.StreamCuts}, {"-no-finish", c.NoFinish}} {
		check(p.v >= 0 && p.v <= 1, "%s must be within [0, 1], got %v", p.name, p.v)
	}
	check(c.Cooldown > 0, "-cooldown must be positive")
	check(c.Slack >= 0, "-slack must not be negative")
	return errors.Join(errs...)
}
