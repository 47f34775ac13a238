package chaos

import (
	"time"

	"github.com/tierguard/tierguard/breaker"
)

// Fault is what one upstream call does.
type Fault uint8

// The faults a tier call can draw.
const (
	// OK answers after 1–40ms.
	OK Fault = iota
	// SlowOK answers after 110–140ms: a slow call for the breaker, within
	// the primary's per-try cap.
	SlowOK
	// Transient is a 503 UNAVAILABLE.
	Transient
	// RateLimited is a 429 with a google.rpc.RetryInfo of 5–150ms.
	RateLimited
	// RateLimitedHuge is a 503 with "Retry-After: 1000000000": a retryable
	// failure with a hostile delay (a 429 asking that long is a quota).
	RateLimitedHuge
	// HugeVerdict is an error carrying its own verdict (as an SDK adapter's
	// would): RateLimited with a retry-after of math.MaxInt64.
	HugeVerdict
	// Quota is a 429 naming a per-day quota: the tier is parked.
	Quota
	// Retired is a 404 NOT_FOUND: the tier is parked.
	Retired
	// Unknown is an error nothing recognises.
	Unknown
	// Stall waits for the attempt's context to end, past the per-try cap.
	Stall
	// Stuck ignores its context for 100–400ms, then answers.
	Stuck
	// StuckForever ignores its context until the run releases it (at most
	// a few per tier and run).
	StuckForever
	// Panic panics.
	Panic
	// InvalidOutput answers text the validator rejects.
	InvalidOutput
	// ZeroValue answers "" with a nil error.
	ZeroValue
	// Auth is a 400 API_KEY_INVALID: fail closed.
	Auth
	// BadRequest is a 400 INVALID_ARGUMENT: fail closed.
	BadRequest

	numFaults
)

// NumFaults is the number of fault kinds.
const NumFaults = int(numFaults)

var faultNames = [numFaults]string{
	OK: "ok", SlowOK: "slow_ok", Transient: "transient_503", RateLimited: "rate_limited_429",
	RateLimitedHuge: "retry_after_1e9s", HugeVerdict: "verdict_retry_after_maxint", Quota: "quota_per_day",
	Retired: "retired_404", Unknown: "unknown", Stall: "stall_past_cap", Stuck: "ignores_ctx",
	StuckForever: "ignores_ctx_forever", Panic: "panic", InvalidOutput: "invalid_output",
	ZeroValue: "zero_value_nil_error", Auth: "auth_fail_closed", BadRequest: "bad_request_fail_closed",
}

// String names the fault.
func (f Fault) String() string {
	if f < numFaults {
		return faultNames[f]
	}
	return "invalid_fault"
}

// Phase is a part of the fault cycle.
type Phase uint8

// The phases of one cycle, in order.
const (
	// Light: a few transient and permanent errors.
	Light Phase = iota
	// Storm: every fault kind on every tier.
	Storm
	// Outage: the primary answers only 503s and stalls; the second tier is
	// browned out (40% 503s and stalls on top of the storm), the third
	// light.
	Outage
	// Recovery: only faults that do not count against a breaker (rejected
	// output, zero values, fail-closed errors, panics). Every breaker must
	// close and stay closed.
	Recovery

	numPhases
)

var phaseNames = [numPhases]string{"light", "storm", "outage", "recovery"}

// String names the phase.
func (p Phase) String() string { return phaseNames[p] }

// phaseEnds are the ends of the phases as fractions of a cycle.
var phaseEnds = [numPhases]float64{0.20, 0.55, 0.75, 1.0}

// Durations of the profile. The breakers' cooldowns (less their jitter)
// are longer than their tiers' per-try cap plus AbandonAfter, so a probe
// call of one half-open phase has usually ended before the next half-open
// phase admits new probes; Config.ShortCooldowns swaps in shortCooldowns,
// shorter than that, so that probes of successive phases overlap and the
// probe limit is checked across phases.
const (
	total         = time.Second
	minAttempt    = 50 * time.Millisecond
	abandonAfter  = 20 * time.Millisecond
	parkFor       = 100 * time.Millisecond
	maxOKLatency  = 40 * time.Millisecond
	maxErrLatency = 5 * time.Millisecond
	stuckMin      = 100 * time.Millisecond
	stuckMax      = 400 * time.Millisecond
	foreverPerRun = 2 // StuckForever calls per tier and run
)

// stageProfile configures one tier of the soak's chain.
type stageProfile struct {
	name         string
	maxAttempts  int
	baseDelay    time.Duration
	maxDelay     time.Duration
	budgetTokens float64
	budgetRatio  float64
	tryTimeout   time.Duration
	bulkhead     int
	bulkWait     time.Duration
	bulkQueue    int
	breaker      *breaker.Config
}

var profile = [...]stageProfile{
	{
		name: "pro", maxAttempts: 3, baseDelay: 10 * time.Millisecond, maxDelay: 100 * time.Millisecond,
		budgetTokens: 20, budgetRatio: 0.2, tryTimeout: 150 * time.Millisecond, bulkhead: 24,
		breaker: &breaker.Config{
			Name: "pro", ConsecutiveFailures: 5, FailureRatio: 0.5, Window: time.Second, MinCalls: 20,
			SlowCallDuration: 100 * time.Millisecond, SlowCallRatio: 0.8,
			Cooldown: 250 * time.Millisecond, MaxCooldown: 500 * time.Millisecond, CooldownJitter: 0.2,
			HalfOpenProbes: 3, ProbeSuccesses: 5,
		},
	},
	{
		name: "flash", maxAttempts: 2, baseDelay: 5 * time.Millisecond, maxDelay: 50 * time.Millisecond,
		budgetTokens: 10, budgetRatio: 0.1, tryTimeout: 100 * time.Millisecond, bulkhead: 32,
		bulkWait: 20 * time.Millisecond, bulkQueue: 64,
		breaker: &breaker.Config{
			Name: "flash", ConsecutiveFailures: 8,
			Cooldown: 200 * time.Millisecond, MaxCooldown: 400 * time.Millisecond, CooldownJitter: 0.1,
			HalfOpenProbes: 2, ProbeSuccesses: 2,
		},
	},
	{
		name: "lite", maxAttempts: 2, baseDelay: 5 * time.Millisecond, maxDelay: 20 * time.Millisecond,
		budgetTokens: 10, budgetRatio: 0.5, bulkhead: 16,
	},
}

const numStages = len(profile)

// shortCooldowns are the breakers' Cooldown and MaxCooldown under
// Config.ShortCooldowns: with their jitter, below the tier's TryTimeout
// plus AbandonAfter (pro: at most 144ms against 170ms; flash: 88ms against
// 120ms). A probe stalled to its per-try cap, or ignoring its context until
// it is abandoned, is then still running when the next half-open period
// begins.
var shortCooldowns = [numStages][2]time.Duration{
	{60 * time.Millisecond, 120 * time.Millisecond},
	{40 * time.Millisecond, 80 * time.Millisecond},
	{},
}

// maxCalls is the most upstream calls one request may make.
var maxCalls = func() int32 {
	n := 0
	for _, p := range profile {
		n += p.maxAttempts
	}
	return int32(n)
}()

// weights are per 10,000 calls; the rest is OK. Recovery holds nothing that
// counts as a breaker failure.
var (
	lightMix = mix{Transient: 200, RateLimited: 100, Unknown: 30, InvalidOutput: 100, ZeroValue: 50,
		Auth: 10, BadRequest: 10, Panic: 5, SlowOK: 50}
	// The rare faults weigh enough that a short run draws each of them:
	// a 429's RetryInfo cools its tier down for the requests after it, so
	// a storm makes fewer calls than it has requests.
	stormMix = mix{Transient: 800, RateLimited: 400, RateLimitedHuge: 120, HugeVerdict: 120, Quota: 100,
		Retired: 100, Unknown: 100, Stall: 300, Stuck: 150, StuckForever: 80, Panic: 60, InvalidOutput: 300,
		ZeroValue: 100, Auth: 40, BadRequest: 40, SlowOK: 300}
	outageMix   = mix{Transient: 7000, Stall: 3000}
	brownoutMix = func() mix { m := stormMix; m[Transient], m[Stall] = 3000, 1000; return m }()
	recoveryMix = mix{InvalidOutput: 100, ZeroValue: 50, Auth: 10, BadRequest: 10, Panic: 5}
)

type mix [numFaults]int

// mixes[phase][stage]
var mixes = [numPhases][numStages]mix{
	Light:    {lightMix, lightMix, lightMix},
	Storm:    {stormMix, stormMix, stormMix},
	Outage:   {outageMix, brownoutMix, lightMix},
	Recovery: {recoveryMix, recoveryMix, recoveryMix},
}

func (m *mix) pick(u uint64) Fault {
	x := int(u % 10000)
	for f := Fault(0); f < numFaults; f++ {
		if x < m[f] {
			return f
		}
		x -= m[f]
	}
	return OK
}

// livenessBound is the longest a stage's breaker may take to close after an
// outage ends: the last failure of a call started before the end, the
// longest cooldown with its jitter, a tier parked by a quota or retired
// answer, and the rounds of probes needed, plus the scheduling slack.
func livenessBound(p stageProfile, slack, gap time.Duration) time.Duration {
	c := p.breaker
	try := p.tryTimeout
	if try == 0 {
		try = total
	}
	rounds := (c.ProbeSuccesses + c.HalfOpenProbes - 1) / c.HalfOpenProbes
	cooldown := time.Duration(float64(c.MaxCooldown) * (1 + c.CooldownJitter))
	return try + abandonAfter + cooldown + parkFor + time.Duration(rounds)*(maxOKLatency+2*gap) + slack
}
