package main

import (
	"errors"
	"flag"
	"fmt"
	"time"
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
	Catalog  bool
	Seed     uint64

	Slack      time.Duration
	MinSuccess float64
	Progress   bool
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
		Slack:       50 * time.Millisecond,
		MinSuccess:  0.99,
		Progress:    true,
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
	fs.BoolVar(&c.Catalog, "catalog", c.Catalog, "preflight tiers against models.list; false: the retired tier is parked after its first 404")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "seed of the fake server's and the clients' random draws")
	fs.DurationVar(&c.Slack, "slack", c.Slack, "invariant: no answer later than its deadline plus this")
	fs.Float64Var(&c.MinSuccess, "min-success", c.MinSuccess, "invariant: at least this share of requests answered (any source)")
	fs.BoolVar(&c.Progress, "progress", c.Progress, "show live progress on stderr")
}

func (c *config) validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(c.Clients >= 1, "-clients must be at least 1")
	check(c.Duration > 0, "-duration must be positive")
	check(c.Deadline >= 300*time.Millisecond, "-deadline must be at least 300ms (each tier needs a useful attempt)")
	check(c.Think >= 0, "-think must not be negative")
	check(c.OutageStart >= 0 && c.OutageLen >= 0, "-outage-start and -outage-len must not be negative")
	check(c.StormStart >= 0 && c.StormLen >= 0, "-storm-start and -storm-len must not be negative")
	check(c.StormRetry >= 0, "-storm-retry must not be negative")
	for _, p := range []struct {
		name string
		v    float64
	}{{"-malformed", c.Malformed}, {"-stall", c.Stall}, {"-flash-errors", c.FlashErrors}, {"-min-success", c.MinSuccess}} {
		check(p.v >= 0 && p.v <= 1, "%s must be within [0, 1], got %v", p.name, p.v)
	}
	check(c.Cooldown > 0, "-cooldown must be positive")
	check(c.Slack >= 0, "-slack must not be negative")
	return errors.Join(errs...)
}
