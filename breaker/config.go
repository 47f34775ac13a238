package breaker

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tierguard/tierguard/classify"
)

// Defaults applied to zero fields of Config.
const (
	defaultConsecutiveFailures = 5
	defaultCooldown            = 30 * time.Second
	defaultWindow              = 60 * time.Second
	defaultMinCalls            = 20
	defaultSlowCallRatio       = 0.5
	defaultHalfOpenProbes      = 1
	defaultProbeSuccesses      = 1
	// defaultMaxHalfOpenWait is long enough for any model call with its
	// retries (a fallback chain reports a probe when the stage ends), and
	// short enough that a lost probe does not keep a breaker half-open,
	// rejecting everything, for long.
	defaultMaxHalfOpenWait = 5 * time.Minute
)

// Config configures a Breaker. The zero value is a working breaker: it trips
// after 5 counted failures in a row, stays open for 30s, then lets one probe
// through and closes when it succeeds. Breaker.Config returns the
// configuration with these defaults filled in.
type Config struct {
	// Name identifies the breaker in errors, hooks and metrics.
	Name string

	// ConsecutiveFailures trips the breaker after this many counted failures
	// in a row. 0 means 5; negative disables it.
	ConsecutiveFailures int

	// FailureRatio trips the breaker when counted failures over the rolling
	// Window reach this share of at least MinCalls calls. 0 disables it.
	// The ratios are checked after every counted outcome, a success
	// included (f f f s s with MinCalls 5 and 0.5 opens on the last s).
	// Enabling a window costs a clock read per call outcome.
	FailureRatio float64
	// SlowCallDuration makes calls that take longer count as slow; 0
	// disables slow-call tracking. It costs a second clock read per call.
	SlowCallDuration time.Duration
	// SlowCallRatio trips the breaker when slow calls reach this share of at
	// least MinCalls calls over the Window. 0 means 0.5
	// (used only when SlowCallDuration is set). Half-open, it applies to the
	// probes: when ProbeSuccesses probes have succeeded, the breaker closes
	// only if the slow ones are below this share, and reopens otherwise.
	SlowCallRatio float64
	// Window is the rolling time window for the ratios, kept in ten
	// buckets. 0 means 60s.
	Window time.Duration
	// MinCalls is the least number of calls in the window before a ratio
	// may trip the breaker. 0 means 20.
	MinCalls int

	// Cooldown is how long the breaker stays open before it lets probes
	// through. 0 means 30s.
	Cooldown time.Duration
	// MaxCooldown, when above Cooldown, doubles the cooldown on every trip
	// that follows a failed probe, up to this cap; a close resets it.
	MaxCooldown time.Duration
	// CooldownJitter spreads each cooldown uniformly by ± this fraction
	// (0 ≤ j < 1) so a fleet of breakers tripped together does not probe
	// together. 0 means none.
	CooldownJitter float64

	// HalfOpenProbes is how many probes may be in flight at once while half
	// open, at most 1024. 0 means 1. The limit holds
	// across half-open periods: a probe admitted in an earlier period that
	// has not reported yet still holds its slot (see MaxHalfOpenWait).
	HalfOpenProbes int
	// ProbeSuccesses is how many probe successes in a row close the
	// breaker. 0 means 1.
	ProbeSuccesses int
	// MaxHalfOpenWait is how long a probe may go without reporting. A
	// probe that has not reported that long after it was admitted is
	// written off: its slot is freed (its report, if it ever comes, decides
	// nothing) and, if it was admitted in the current half-open period, the
	// breaker reopens as for a failed probe. It must exceed the longest a
	// probe's call may take. 0 means 5m; negative waits
	// for ever.
	MaxHalfOpenWait time.Duration

	// Outcome decides how an error counts; nil means OutcomeOf (the
	// default class table). Used by Do and Token.Report.
	Outcome func(err error) Outcome

	// Store shares state with other processes; nil keeps it local.
	Store Store

	// KeysInNames makes a Group name its members Name+"/"+key in errors,
	// transitions, logs and metrics, the key as it is. Use it when the keys
	// are public values, such as model names; without it a member goes by
	// Name+"/#"+ a short hash of its key (see Group). Outside a Group it
	// changes nothing.
	KeysInNames bool
}

// Outcome is how one call counts for the breaker.
type Outcome uint8

const (
	// Success counts as a healthy call.
	Success Outcome = iota
	// Failure counts toward tripping (and reopens a half-open breaker).
	Failure
	// Ignored counts for nothing: a 4xx, the caller's cancel, an output a
	// validator rejected. A probe that ends ignored frees its slot and
	// decides nothing.
	Ignored
)

// String names the outcome.
func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Failure:
		return "failure"
	case Ignored:
		return "ignored"
	}
	return "invalid_outcome"
}

// OutcomeOf is the default mapping from an error to an Outcome: nil is a
// success, and classes whose default action counts as a breaker failure
// (Transient, RateLimited, Unknown) are failures; the rest are ignored.
func OutcomeOf(err error) Outcome {
	if err == nil {
		return Success
	}
	return outcomeFor(classify.DefaultTable(), classify.Classify(err).Class)
}

// outcomeFor maps a class to an Outcome with table t.
func outcomeFor(t classify.Table, c classify.Class) Outcome {
	if c == classify.OK {
		return Success
	}
	if t.Action(c).BreakerFailure {
		return Failure
	}
	return Ignored
}

// normalize validates c and fills in defaults.
func (c Config) normalize() (Config, error) {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	validRatio := func(r float64) bool { return !math.IsNaN(r) && r >= 0 && r <= 1 }
	check(validRatio(c.FailureRatio), "FailureRatio must be within [0, 1], got %v", c.FailureRatio)
	check(validRatio(c.SlowCallRatio), "SlowCallRatio must be within [0, 1], got %v", c.SlowCallRatio)
	check(!math.IsNaN(c.CooldownJitter) && c.CooldownJitter >= 0 && c.CooldownJitter < 1, "CooldownJitter must be within [0, 1), got %v", c.CooldownJitter)
	check(c.SlowCallDuration >= 0, "SlowCallDuration must not be negative, got %v", c.SlowCallDuration)
	check(c.Window >= 0, "Window must not be negative, got %v", c.Window)
	check(c.MinCalls >= 0, "MinCalls must not be negative, got %d", c.MinCalls)
	check(c.Cooldown >= 0, "Cooldown must not be negative, got %v", c.Cooldown)
	check(c.MaxCooldown >= 0, "MaxCooldown must not be negative, got %v", c.MaxCooldown)
	check(c.HalfOpenProbes >= 0 && c.HalfOpenProbes <= maxHalfOpenProbes, "HalfOpenProbes must be within [0, %d], got %d", maxHalfOpenProbes, c.HalfOpenProbes)
	check(c.ProbeSuccesses >= 0, "ProbeSuccesses must not be negative, got %d", c.ProbeSuccesses)
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("breaker %q: invalid config: %w", c.Name, err)
	}
	if c.ConsecutiveFailures == 0 {
		c.ConsecutiveFailures = defaultConsecutiveFailures
	}
	if c.SlowCallDuration > 0 && c.SlowCallRatio == 0 {
		c.SlowCallRatio = defaultSlowCallRatio
	}
	if c.Window == 0 {
		c.Window = defaultWindow
	}
	if c.MinCalls == 0 {
		c.MinCalls = defaultMinCalls
	}
	if c.Cooldown == 0 {
		c.Cooldown = defaultCooldown
	}
	if c.MaxCooldown < c.Cooldown {
		c.MaxCooldown = c.Cooldown
	}
	if c.HalfOpenProbes == 0 {
		c.HalfOpenProbes = defaultHalfOpenProbes
	}
	if c.ProbeSuccesses == 0 {
		c.ProbeSuccesses = defaultProbeSuccesses
	}
	if c.MaxHalfOpenWait == 0 {
		c.MaxHalfOpenWait = defaultMaxHalfOpenWait
	}
	if c.Outcome == nil {
		c.Outcome = OutcomeOf
	}
	return c, nil
}

// windowed reports whether outcomes must be recorded in the rolling window.
func (c Config) windowed() bool { return c.FailureRatio > 0 || c.SlowCallDuration > 0 }
