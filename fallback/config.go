package fallback

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// Defaults applied to zero fields of Config.
const (
	DefaultMinAttempt     = 100 * time.Millisecond
	DefaultQuotaCooldown  = time.Minute
	DefaultRetiredRecheck = 10 * time.Minute
)

// Stage attaches guards to a tier. The chain wraps every stage as
// bulkhead → breaker → retry → call, in that fixed order: retries live
// inside the breaker, so one request counts once toward tripping it, and
// the breaker inside the bulkhead, so an open circuit frees the slot at
// once.
type Stage[In, Out any] struct {
	// Tier answers the request. Required.
	Tier ModelTier[In, Out]
	// Model is the tier's model id ("gemini-2.5-pro"), used for preflight
	// against Config.Catalog and reported to observers as
	// gen_ai.request.model. Optional.
	Model string
	// Provider names the API for observers ("gcp.gemini", "openai").
	Provider string

	// Bulkhead bounds the tier's calls in flight; nil means unbounded.
	Bulkhead *bulkhead.Bulkhead
	// Breaker stops calls to a failing tier; nil means none.
	Breaker *breaker.Breaker
	// Retry is the tier's retry policy; the zero value retries transient
	// failures twice with full jitter. Set MaxAttempts to 1 to disable.
	// Its Table and Classifier default to the chain's; a stage with its
	// own Classifier classifies its tier's errors with it.
	Retry retry.Policy
	// TryTimeout caps each attempt; 0 means an attempt may use all the time
	// the reserve leaves.
	TryTimeout time.Duration
	// MinAttempt is the least time worth starting an attempt on this tier
	// with; earlier tiers keep it in reserve for this one. 0 means
	// Config.MinAttempt.
	MinAttempt time.Duration
	// Reserve is the time this tier's attempts leave for later tiers. 0
	// means the sum of the later tiers' MinAttempt (each plus a tenth, for
	// the time a fallback takes), so each of them can make
	// one meaningful attempt; negative means none.
	Reserve time.Duration
	// Validate checks the tier's answers; a rejected answer moves on to the
	// next tier and does not count against the breaker. nil accepts all.
	Validate validate.Validator[Out]
}

// Config configures a Chain.
type Config[In, Out any] struct {
	// Operation names what the chain does, for observers
	// (gen_ai.operation.name: "generate_content", "chat"). Defaults to
	// "generate_content".
	Operation string
	// Stages are the tiers, in order of preference. At least one.
	Stages []Stage[In, Out]
	// Total caps each request's time, every attempt and fallback included;
	// the context's deadline applies too, and the earlier wins. 0 means the
	// context's deadline only.
	Total time.Duration
	// MinAttempt is the default Stage.MinAttempt. 0 means
	// DefaultMinAttempt.
	MinAttempt time.Duration

	// Table overrides the class table; nil means classify.DefaultTable().
	Table *classify.Table
	// Classifier classifies tier errors; nil means classify.Classify. SDK
	// adapters provide one that knows their error types.
	Classifier classify.Classifier

	// Cache answers after every tier failed. If it also implements
	// CacheWriter, validated tier answers are written back.
	Cache Cache[In, Out]
	// Default answers last, from the input alone.
	Default func(ctx context.Context, in In) (Out, bool)

	// Catalog, when set, lets the chain skip tiers whose Model is not
	// served, without an upstream call.
	Catalog *Catalog
	// QuotaCooldown is how long a tier that reported an exhausted quota is
	// parked (longer if the server asked for longer). 0 means
	// DefaultQuotaCooldown.
	QuotaCooldown time.Duration
	// RetiredRecheck is how long a tier whose model answered 404 is parked
	// when there is no Catalog to say when it is back. 0 means
	// DefaultRetiredRecheck.
	RetiredRecheck time.Duration

	// Key, when set, returns an idempotency key for a request; requests
	// with the same non-empty key that are in flight together share one
	// execution, and each receives its result. A waiter whose own deadline
	// passes first is answered from the cache or the default; once every
	// waiter has left, the execution is cancelled and a later request
	// starts afresh. The key never appears in errors or signals.
	Key func(in In) string

	// Observer receives every decision; see also Chain.Observe.
	Observer Observer
	// MeasureLatency times every attempt even without an observer (two
	// clock reads per attempt).
	MeasureLatency bool

	// AbandonAfter, when positive, protects the request from tiers that
	// ignore their context: each call runs on its own goroutine, and once
	// the attempt's context has ended the chain waits at most AbandonAfter
	// more before it abandons the call, classifies it Transient ("call
	// abandoned") and moves on. The abandoned call keeps its bulkhead slot
	// until it really returns, and Chain.Stats counts it, so a stuck call
	// is accounted for instead of leaked silently. 0 (the default) calls
	// tiers directly: no goroutine, no allocation, and a tier that ignores
	// its context holds the request.
	AbandonAfter time.Duration
}

func (cfg *Config[In, Out]) validate() error {
	var errs []error
	if len(cfg.Stages) == 0 {
		errs = append(errs, errors.New("at least one stage is required"))
	}
	if cfg.Total < 0 {
		errs = append(errs, fmt.Errorf("negative Total %v", cfg.Total))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"MinAttempt", cfg.MinAttempt}, {"QuotaCooldown", cfg.QuotaCooldown}, {"RetiredRecheck", cfg.RetiredRecheck}, {"AbandonAfter", cfg.AbandonAfter}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("negative %s %v", d.name, d.v))
		}
	}
	names := map[string]bool{}
	for i, st := range cfg.Stages {
		if st.Tier == nil {
			errs = append(errs, fmt.Errorf("stage %d: Tier is required", i))
			continue
		}
		name := st.Tier.Name()
		if name == "" {
			errs = append(errs, fmt.Errorf("stage %d: tier name is empty", i))
		} else if names[name] {
			errs = append(errs, fmt.Errorf("stage %d: tier name %q is used twice", i, name))
		}
		names[name] = true
		if st.TryTimeout < 0 || st.MinAttempt < 0 {
			errs = append(errs, fmt.Errorf("stage %d (%s): TryTimeout and MinAttempt must not be negative", i, name))
		}
		if err := st.Retry.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("stage %d (%s): %w", i, name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("fallback: invalid config: %w", err)
	}
	return nil
}

// PickByHash returns a Config.Default that answers with one of answers,
// chosen by a stable hash of key(in): the same input always gets the same
// default (seed 001), and different inputs spread over the list.
func PickByHash[In, Out any](answers []Out, key func(In) string) func(context.Context, In) (Out, bool) {
	answers = append([]Out(nil), answers...)
	return func(_ context.Context, in In) (Out, bool) {
		if len(answers) == 0 {
			var zero Out
			return zero, false
		}
		// FNV-1a: stable across processes and releases, unlike maphash.
		h := uint64(14695981039346656037)
		k := key(in)
		for i := 0; i < len(k); i++ {
			h ^= uint64(k[i])
			h *= 1099511628211
		}
		return answers[h%uint64(len(answers))], true
	}
}
