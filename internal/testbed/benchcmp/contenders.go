package benchcmp

import (
	"context"
	"errors"
	"iter"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go"
	fsbulkhead "github.com/failsafe-go/failsafe-go/bulkhead"
	fscb "github.com/failsafe-go/failsafe-go/circuitbreaker"
	fsfallback "github.com/failsafe-go/failsafe-go/fallback"
	fsretry "github.com/failsafe-go/failsafe-go/retrypolicy"
	fstimeout "github.com/failsafe-go/failsafe-go/timeout"
	"github.com/sony/gobreaker/v2"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/retry"
)

// Answer is what Work returns.
const Answer = "ok"

// Work is the function every contender wraps: it answers at once.
func Work() (string, error) { return Answer, nil }

// Second is the second tier's function in the fallback benchmarks.
func Second() (string, error) { return "second", nil }

// ErrBoom is the failure used to trip breakers.
var ErrBoom = errors.New("benchcmp: boom")

// Equivalent settings for every contender.
const (
	// Failures in a row that trip a count-based breaker.
	TripAfter = 5
	// How long an open breaker stays open: long enough never to half-open
	// during a benchmark.
	OpenFor = time.Hour
	// Rolling window: FailureRatio over Window, once MinCalls were seen.
	Window       = 60 * time.Second
	WindowBucket = Window / 10
	FailureRatio = 0.5
	MinCalls     = 20
	// Slots of every bulkhead: more than any benchmark holds at once.
	Slots = 1024
	// Retry: three attempts, exponential backoff from 200ms to 10s.
	Attempts  = 3
	BaseDelay = 200 * time.Millisecond
	MaxDelay  = 10 * time.Second
	// TryTimeout is the per-try timeout of the variants that set one.
	TryTimeout = time.Second
)

// TierguardBreaker is a tierguard breaker that trips after TripAfter
// failures in a row; window adds the rolling FailureRatio window.
func TierguardBreaker(window bool) *breaker.Breaker {
	cfg := breaker.Config{Name: "pro", ConsecutiveFailures: TripAfter, Cooldown: OpenFor}
	if window {
		cfg.FailureRatio, cfg.Window, cfg.MinCalls = FailureRatio, Window, MinCalls
	}
	b, err := breaker.New(cfg)
	if err != nil {
		panic(err)
	}
	return b
}

// GoBreakerSettings are gobreaker settings equivalent to TierguardBreaker:
// gobreaker's default ReadyToTrip trips after more than 5 failures in a row,
// so the threshold is set explicitly; the window variant keeps rolling
// counts in ten buckets and trips on the ratio once MinCalls were seen.
func GoBreakerSettings(window bool) gobreaker.Settings {
	st := gobreaker.Settings{
		Name:    "pro",
		Timeout: OpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return c.ConsecutiveFailures >= TripAfter
		},
	}
	if window {
		st.Interval, st.BucketPeriod = Window, WindowBucket
		st.ReadyToTrip = func(c gobreaker.Counts) bool {
			if c.ConsecutiveFailures >= TripAfter {
				return true
			}
			return c.Requests >= MinCalls && float64(c.TotalFailures) >= FailureRatio*float64(c.Requests)
		}
	}
	return st
}

// GoBreaker is gobreaker's CircuitBreaker with GoBreakerSettings.
func GoBreaker(window bool) *gobreaker.CircuitBreaker[string] {
	return gobreaker.NewCircuitBreaker[string](GoBreakerSettings(window))
}

// GoBreakerTwoStep is gobreaker's TwoStepCircuitBreaker with
// GoBreakerSettings.
func GoBreakerTwoStep(window bool) *gobreaker.TwoStepCircuitBreaker[string] {
	return gobreaker.NewTwoStepCircuitBreaker[string](GoBreakerSettings(window))
}

// FailsafeBreaker is failsafe-go's circuit breaker: count based (TripAfter
// failures in a row), or time based with a failure-rate threshold over
// Window once MinCalls executions were seen.
func FailsafeBreaker(window bool) fscb.CircuitBreaker[string] {
	b := fscb.NewBuilder[string]().WithDelay(OpenFor)
	if window {
		b = b.WithFailureRateThreshold(FailureRatio, MinCalls, Window)
	} else {
		b = b.WithFailureThreshold(TripAfter)
	}
	return b.Build()
}

// TierguardBulkhead is a fail-fast tierguard bulkhead of Slots slots.
func TierguardBulkhead() *bulkhead.Bulkhead {
	b, err := bulkhead.New(bulkhead.Config{Name: "pro", Max: Slots})
	if err != nil {
		panic(err)
	}
	return b
}

// FailsafeBulkhead is a failsafe-go bulkhead of Slots slots.
func FailsafeBulkhead() fsbulkhead.Bulkhead[string] { return fsbulkhead.New[string](Slots) }

// TierguardRetry is the retry policy of the chain benchmarks: the package
// defaults written out (three attempts, full jitter from 200ms to 10s).
func TierguardRetry() retry.Policy {
	return retry.Policy{MaxAttempts: Attempts, BaseDelay: BaseDelay, MaxDelay: MaxDelay}
}

// FailsafeRetry is the equivalent failsafe-go retry policy.
func FailsafeRetry() fsretry.RetryPolicy[string] {
	return fsretry.NewBuilder[string]().WithMaxAttempts(Attempts).WithBackoff(BaseDelay, MaxDelay).WithJitterFactor(0.5).Build()
}

// Tier adapts f to a tierguard tier.
func Tier(name string, f func() (string, error)) fallback.ModelTier[string, string] {
	return fallback.Tier(name, func(context.Context, string) (string, error) { return f() })
}

// ChainOptions describe a chain benchmark's setup.
type ChainOptions struct {
	// PrimaryOpen opens the primary's breaker (tripped by failures, with a
	// cooldown of OpenFor), so that answers come from the second tier.
	PrimaryOpen bool
	// TryTimeout sets a per-try timeout (tierguard: Stage.TryTimeout;
	// failsafe-go: a timeout policy inside the retry policy).
	TryTimeout time.Duration
	// Total caps the whole request (tierguard: Config.Total; failsafe-go:
	// a timeout policy just inside the fallback).
	Total time.Duration
}

// TierguardChain is a tierguard chain: one stage (bulkhead → breaker →
// retry → Work) and a default answer; with PrimaryOpen, a second stage
// guarded the same way answers with Second.
func TierguardChain(o ChainOptions) *fallback.Chain[string, string] {
	stage := func(name string, f func() (string, error)) fallback.Stage[string, string] {
		bh, err := bulkhead.New(bulkhead.Config{Name: name, Max: Slots})
		if err != nil {
			panic(err)
		}
		return fallback.Stage[string, string]{
			Tier:       Tier(name, f),
			Bulkhead:   bh,
			Breaker:    TierguardBreaker(false),
			Retry:      TierguardRetry(),
			TryTimeout: o.TryTimeout,
		}
	}
	stages := []fallback.Stage[string, string]{stage("pro", Work)}
	if o.PrimaryOpen {
		stages = append(stages, stage("flash", Second))
		tripTierguard(stages[0].Breaker)
	}
	c, err := fallback.New(fallback.Config[string, string]{
		Stages:  stages,
		Total:   o.Total,
		Default: func(context.Context, string) (string, bool) { return "default", true },
	})
	if err != nil {
		panic(err)
	}
	return c
}

func tripTierguard(b *breaker.Breaker) {
	for range TripAfter {
		tok, err := b.Allow()
		if err != nil {
			break
		}
		tok.Done(breaker.Failure)
	}
	if b.State() != breaker.Open {
		panic("benchcmp: tierguard breaker did not open")
	}
}

// FailsafeChain is the failsafe-go equivalent of TierguardChain, built once:
// failsafe.With(fallback, bulkhead, circuitbreaker, retrypolicy[, timeout]).
// Its fallback answers "default"; with PrimaryOpen the breaker is tripped
// and the fallback function runs a second executor, built once with its own
// bulkhead, breaker and retry policy, on Second — the equivalent of a
// second tierguard stage. The second executor gets the execution's context
// when the first one has a context of its own (ctx).
func FailsafeChain(o ChainOptions, ctx bool) failsafe.Executor[string] {
	return failsafeChain(o, ctx, true)
}

// FailsafeChainPlain is FailsafeChain whose fallback function calls Second
// directly, without guards: the lightest failsafe-go fallback, a lower
// bound rather than an equivalent.
func FailsafeChainPlain(o ChainOptions) failsafe.Executor[string] {
	return failsafeChain(o, false, false)
}

func failsafeChain(o ChainOptions, ctx, guardedSecond bool) failsafe.Executor[string] {
	policies := func(cb fscb.CircuitBreaker[string]) []failsafe.Policy[string] {
		ps := []failsafe.Policy[string]{FailsafeBulkhead(), cb, FailsafeRetry()}
		if o.TryTimeout > 0 {
			ps = append(ps, fstimeout.New[string](o.TryTimeout))
		}
		return ps
	}
	fb := fsfallback.NewWithResult("default")
	cb := FailsafeBreaker(false)
	if o.PrimaryOpen {
		second := failsafe.With(policies(FailsafeBreaker(false))...)
		switch {
		case !guardedSecond:
			fb = fsfallback.NewWithFunc(func(failsafe.Execution[string]) (string, error) { return Second() })
		case ctx:
			fb = fsfallback.NewWithFunc(func(e failsafe.Execution[string]) (string, error) {
				return second.WithContext(e.Context()).Get(Second)
			})
		default:
			fb = fsfallback.NewWithFunc(func(failsafe.Execution[string]) (string, error) { return second.Get(Second) })
		}
		tripFailsafe(cb)
	}
	outer := []failsafe.Policy[string]{fb}
	if o.Total > 0 {
		outer = append(outer, fstimeout.New[string](o.Total))
	}
	return failsafe.With(append(outer, policies(cb)...)...)
}

// HandRolled is the floor a chain is held to: what a careful engineer
// would write by hand around one call — a bulkhead counter, a breaker
// state and failure count, one retry loop, a fallback answer — with no
// configurability, no events, no classification, and, with a deadline,
// the one monotonic clock read a budget needs. Nothing in it allocates.
type HandRolled struct {
	inFlight atomic.Int64
	open     atomic.Bool
	failures atomic.Int64
	// Until, when set, makes every call read the monotonic clock once
	// against it, as the cheapest budget check does.
	Until time.Time
}

// Do runs f under the hand-rolled guards.
func (h *HandRolled) Do(f func() (string, error)) (string, error) {
	if !h.Until.IsZero() && time.Until(h.Until) <= 0 {
		return "default", nil
	}
	if h.open.Load() {
		return "default", nil
	}
	if h.inFlight.Add(1) > Slots {
		h.inFlight.Add(-1)
		return "default", nil
	}
	defer h.inFlight.Add(-1)
	for attempt := 1; attempt <= Attempts; attempt++ {
		v, err := f()
		if err == nil {
			if h.failures.Load() != 0 {
				h.failures.Store(0)
			}
			return v, nil
		}
		if h.failures.Add(1) >= TripAfter {
			h.open.Store(true)
			break
		}
	}
	return "default", nil
}

func tripFailsafe(cb fscb.CircuitBreaker[string]) {
	for range TripAfter {
		if !cb.TryAcquirePermit() {
			break
		}
		cb.RecordError(ErrBoom)
	}
	if !cb.IsOpen() {
		panic("benchcmp: failsafe breaker did not open")
	}
}

// TripGoBreaker opens a gobreaker breaker.
func TripGoBreaker(cb *gobreaker.CircuitBreaker[string]) {
	for range TripAfter {
		_, _ = cb.Execute(func() (string, error) { return "", ErrBoom })
	}
	if cb.State() != gobreaker.StateOpen {
		panic("benchcmp: gobreaker did not open")
	}
}

// TripTierguard opens a tierguard breaker by reporting failures.
func TripTierguard(b *breaker.Breaker) { tripTierguard(b) }

// TripFailsafe opens a failsafe-go breaker by recording failures.
func TripFailsafe(cb fscb.CircuitBreaker[string]) { tripFailsafe(cb) }

// StreamTier answers with three chunks at once, the last with a finish
// reason.
func StreamTier() fallback.StreamTier[string, string] {
	return fallback.StreamTierFunc("pro", func(_ context.Context, _ string) iter.Seq2[string, error] {
		return func(yield func(string, error) bool) {
			for _, c := range [...]string{"o", "k", "."} {
				if !yield(c, nil) {
					return
				}
			}
		}
	}, func(c string) fallback.ChunkInfo {
		info := fallback.ChunkInfo{Text: c}
		if c == "." {
			info.FinishReason = "STOP"
		}
		return info
	})
}

// TierguardStreamChain streams StreamTier behind a bulkhead, a breaker and
// a retry policy.
func TierguardStreamChain() *fallback.StreamChain[string, string] {
	bh, err := bulkhead.New(bulkhead.Config{Name: "pro", Max: Slots})
	if err != nil {
		panic(err)
	}
	c, err := fallback.NewStream(fallback.StreamConfig[string, string]{Stages: []fallback.StreamStage[string, string]{{
		Tier: StreamTier(), Bulkhead: bh, Breaker: TierguardBreaker(false), Retry: TierguardRetry(),
	}}})
	if err != nil {
		panic(err)
	}
	return c
}
