package main

import (
	"errors"
	"flag"
	"fmt"
	"time"
)

// config holds the demo's knobs. Times are offsets from the start.
type config struct {
	Jobs     int
	Rate     float64
	Tenants  int
	Workers  int
	PerTen   int
	Postgres string
	DB       string

	OutageStart, OutageLen time.Duration
	QuotaStart, QuotaLen   time.Duration
	FlashQuotaDelay        time.Duration
	FlashQuotaLen          time.Duration
	QuotaCooldown          time.Duration
	// Steps, when positive, paces the story by what the workers did
	// instead of by the clock (the times above are then unused): healthy
	// until Steps jobs completed, the outage until Steps jobs have each
	// had a second attempt fail in it, healthy again until Steps jobs
	// completed on pro, pro out of quota until Steps completed on flash,
	// both out until Steps attempts were snoozed. How much work fits into
	// a stretch of time depends on the machine; the tests use Steps.
	Steps int

	Latency     time.Duration
	Deadline    time.Duration
	MaxAttempts int
	Backoff     time.Duration
	MaxBackoff  time.Duration
	Cooldown    time.Duration

	Unreadable float64
	TooLong    float64
	Duplicates float64
	Seed       uint64
	Replay     bool
	Progress   bool
	Breakers   bool
}

func defaultConfig() config {
	return config{
		Jobs:    500,
		Rate:    40,
		Tenants: 5,
		Workers: 16,
		PerTen:  6,

		OutageStart:     3 * time.Second,
		OutageLen:       3 * time.Second,
		QuotaStart:      8 * time.Second,
		QuotaLen:        4 * time.Second,
		FlashQuotaDelay: 1500 * time.Millisecond,
		FlashQuotaLen:   2 * time.Second,
		QuotaCooldown:   time.Second,

		Latency:     120 * time.Millisecond,
		Deadline:    3 * time.Second,
		MaxAttempts: 8,
		Backoff:     250 * time.Millisecond,
		MaxBackoff:  3 * time.Second,
		Cooldown:    time.Second,

		Unreadable: 0.02,
		TooLong:    0.01,
		Duplicates: 0.1,
		Seed:       1,
		Replay:     true,
		Progress:   true,
		Breakers:   true,
	}
}

func (c *config) register(fs *flag.FlagSet) {
	fs.IntVar(&c.Jobs, "jobs", c.Jobs, "contract extraction jobs to submit")
	fs.Float64Var(&c.Rate, "rate", c.Rate, "jobs submitted per second")
	fs.IntVar(&c.Tenants, "tenants", c.Tenants, "tenants the jobs are spread over")
	fs.IntVar(&c.Workers, "workers", c.Workers, "River workers (QueueConfig.MaxWorkers)")
	fs.IntVar(&c.PerTen, "per-tenant", c.PerTen, "jobs of one tenant in flight at once (a bulkhead per tenant)")
	fs.StringVar(&c.Postgres, "postgres", c.Postgres, "run against this PostgreSQL database URL instead of SQLite (its River tables are migrated; earlier jobs of the demo's kind are deleted)")
	fs.StringVar(&c.DB, "db", c.DB, "SQLite database file (default: a new file in a temporary directory)")
	fs.DurationVar(&c.OutageStart, "outage-start", c.OutageStart, "when both models start answering 503")
	fs.DurationVar(&c.OutageLen, "outage-len", c.OutageLen, "how long the outage lasts")
	fs.DurationVar(&c.QuotaStart, "quota-start", c.QuotaStart, "when pro's daily quota runs out")
	fs.DurationVar(&c.QuotaLen, "quota-len", c.QuotaLen, "until pro's quota is back")
	fs.DurationVar(&c.FlashQuotaDelay, "flash-quota-delay", c.FlashQuotaDelay, "flash's quota runs out this long after pro's")
	fs.DurationVar(&c.FlashQuotaLen, "flash-quota-len", c.FlashQuotaLen, "until flash's quota is back")
	fs.DurationVar(&c.QuotaCooldown, "quota-cooldown", c.QuotaCooldown, "how long the chain parks a tier out of quota before it checks again")
	fs.IntVar(&c.Steps, "steps", c.Steps, "pace the story by the workers instead of the clock: each phase lasts until this many jobs did what it is about (0: the times above)")
	fs.DurationVar(&c.Latency, "latency", c.Latency, "a model's typical answer time")
	fs.DurationVar(&c.Deadline, "deadline", c.Deadline, "the chain's total deadline per job attempt")
	fs.IntVar(&c.MaxAttempts, "max-attempts", c.MaxAttempts, "River attempts per job")
	fs.DurationVar(&c.Backoff, "backoff", c.Backoff, "River's first retry delay (doubling)")
	fs.DurationVar(&c.MaxBackoff, "max-backoff", c.MaxBackoff, "River's longest retry delay")
	fs.DurationVar(&c.Cooldown, "cooldown", c.Cooldown, "the breakers' cooldown")
	fs.Float64Var(&c.Unreadable, "unreadable", c.Unreadable, "share of contracts every model misreads (an amount as a string): invalid output")
	fs.Float64Var(&c.TooLong, "too-long", c.TooLong, "share of contracts too long for every model")
	fs.Float64Var(&c.Duplicates, "duplicates", c.Duplicates, "share of jobs submitted twice with the same idempotency key")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "random seed")
	fs.BoolVar(&c.Replay, "replay", c.Replay, "at the end, fix the misread contracts and replay their dead letters")
	fs.BoolVar(&c.Progress, "progress", c.Progress, "print a progress line every second")
	fs.BoolVar(&c.Breakers, "breakers", c.Breakers, "give each tier a circuit breaker and a retry budget; with -breakers=false every retried job calls both models again, for comparison")
}

func (c *config) validate() error {
	var errs []error
	if c.Jobs <= 0 {
		errs = append(errs, errors.New("-jobs must be positive"))
	}
	if c.Rate <= 0 {
		errs = append(errs, errors.New("-rate must be positive"))
	}
	if c.Steps < 0 {
		errs = append(errs, errors.New("-steps must not be negative"))
	}
	if c.Tenants <= 0 || c.Workers <= 0 || c.PerTen <= 0 || c.MaxAttempts <= 0 {
		errs = append(errs, errors.New("-tenants, -workers, -per-tenant and -max-attempts must be positive"))
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"unreadable", c.Unreadable}, {"too-long", c.TooLong}, {"duplicates", c.Duplicates}} {
		if f.v < 0 || f.v > 1 {
			errs = append(errs, fmt.Errorf("-%s must be in [0,1]", f.name))
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"latency", c.Latency}, {"deadline", c.Deadline}, {"backoff", c.Backoff}, {"max-backoff", c.MaxBackoff}, {"cooldown", c.Cooldown}, {"quota-cooldown", c.QuotaCooldown}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("-%s must be positive", d.name))
		}
	}
	return errors.Join(errs...)
}
