package benchcmp

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/failsafe-go/failsafe-go"
	fsbulkhead "github.com/failsafe-go/failsafe-go/bulkhead"
	fscb "github.com/failsafe-go/failsafe-go/circuitbreaker"
	fsfallback "github.com/failsafe-go/failsafe-go/fallback"
	fstimeout "github.com/failsafe-go/failsafe-go/timeout"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// The README's quick start: its settings, written out.
const (
	// QuickTotal is the quick start's Config.Total.
	QuickTotal = 10 * time.Second
	// QuickProTry and QuickFlashTry are its stages' TryTimeout.
	QuickProTry   = 8 * time.Second
	QuickFlashTry = 3 * time.Second
	// QuickCooldown is the pro breaker's Cooldown.
	QuickCooldown = 30 * time.Second
	// QuickSlots is the pro bulkhead's Max.
	QuickSlots = 32
	// QuickDefault is the quick start's default answer.
	QuickDefault = "We are busy, please retry."
)

// QuickFuncs are the quick start's two tier functions; nil means Work.
// The README's build a prompt and call Gemini: here they answer at once,
// so that what is measured is the guards.
type QuickFuncs struct {
	Pro, Flash func(ctx context.Context, q string) (string, error)
}

func (f QuickFuncs) withDefaults() QuickFuncs {
	work := func(context.Context, string) (string, error) { return Work() }
	if f.Pro == nil {
		f.Pro = work
	}
	if f.Flash == nil {
		f.Flash = work
	}
	return f
}

// TierguardQuickStart is the README's quick start as it prints it: two
// stages (pro behind a breaker with a 30s cooldown, a bulkhead of 32
// slots, an 8s TryTimeout and the NonEmpty validator; flash with a 3s
// TryTimeout and the validator), a Total of 10s and a default answer. Only
// the tiers' functions differ (QuickFuncs).
func TierguardQuickStart(f QuickFuncs) *fallback.Chain[string, string] {
	f = f.withDefaults()
	pro := fallback.Tier("pro", f.Pro)
	flash := fallback.Tier("flash", f.Flash)
	proBreaker, err := breaker.New(breaker.Config{Name: "pro", Cooldown: QuickCooldown})
	if err != nil {
		panic(err)
	}
	proSlots, err := bulkhead.New(bulkhead.Config{Name: "pro", Max: QuickSlots})
	if err != nil {
		panic(err)
	}
	chain, err := fallback.New(fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{
			{Tier: pro, Model: "gemini-2.5-pro", Breaker: proBreaker, Bulkhead: proSlots, TryTimeout: QuickProTry, Validate: validate.NonEmpty()},
			{Tier: flash, Model: "gemini-2.5-flash", TryTimeout: QuickFlashTry, Validate: validate.NonEmpty()},
		},
		Total:   QuickTotal,
		Default: func(context.Context, string) (string, bool) { return QuickDefault, true },
	})
	if err != nil {
		panic(err)
	}
	return chain
}

// QuickStartFloor is the quick start written by hand with tierguard's own
// guards and no chain: context.WithTimeout for the total and for each
// try, the pro bulkhead's TryAcquire and Release, the pro breaker's Allow
// and Token.Done, the validator's call on each answer, up to the retry
// package's default attempts on pro with its backoff between them, then one
// attempt on flash, then the default answer. It keeps no trail, classifies
// nothing (any error of the call is a failure) and reports to no one.
type QuickStartFloor struct {
	// OneDeadline, when set, makes no context for the total: each try
	// gets one context.WithDeadline, at the nearer of its timeout and the
	// total's end (one clock read per request for the total, one per
	// try), which is the least a hand-written deadline costs.
	OneDeadline bool

	f         QuickFuncs
	breaker   *breaker.Breaker
	slots     *bulkhead.Bulkhead
	validator validate.Validator[string]
}

// NewQuickStartFloor builds the floor with the quick start's settings.
func NewQuickStartFloor(f QuickFuncs) *QuickStartFloor {
	br, err := breaker.New(breaker.Config{Name: "pro", Cooldown: QuickCooldown})
	if err != nil {
		panic(err)
	}
	bh, err := bulkhead.New(bulkhead.Config{Name: "pro", Max: QuickSlots})
	if err != nil {
		panic(err)
	}
	return &QuickStartFloor{f: f.withDefaults(), breaker: br, slots: bh, validator: validate.NonEmpty()}
}

// Breaker is the floor's pro breaker.
func (q *QuickStartFloor) Breaker() *breaker.Breaker { return q.breaker }

// Do answers in as the quick start would.
func (q *QuickStartFloor) Do(ctx context.Context, in string) (string, error) {
	var until time.Time
	if q.OneDeadline {
		until = time.Now().Add(QuickTotal)
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, QuickTotal)
		defer cancel()
	}
	if q.slots.TryAcquire() {
		v, ok := q.pro(ctx, until, in)
		q.slots.Release()
		if ok {
			return v, nil
		}
	}
	if v, ok := q.try(ctx, until, q.f.Flash, QuickFlashTry, in); ok == nil {
		return v, nil
	}
	return QuickDefault, nil
}

// pro runs pro's attempts behind its breaker.
func (q *QuickStartFloor) pro(ctx context.Context, until time.Time, in string) (string, bool) {
	tok, err := q.breaker.Allow()
	if err != nil {
		return "", false
	}
	policy := retry.Policy{}.WithDefaults()
	for attempt := 1; ; attempt++ {
		v, err := q.try(ctx, until, q.f.Pro, QuickProTry, in)
		var invalid *validate.Error
		switch {
		case err == nil:
			tok.Done(breaker.Success)
			return v, true
		case errors.As(err, &invalid):
			tok.Done(breaker.Ignored)
			return "", false
		case attempt >= policy.MaxAttempts:
			tok.Done(breaker.Failure)
			return "", false
		}
		wait := policy.Backoff(attempt)
		if !until.IsZero() && time.Until(until) <= wait {
			tok.Done(breaker.Ignored)
			return "", false
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			tok.Done(breaker.Ignored)
			return "", false
		}
	}
}

// try makes one attempt of f under its own timeout, and the total's end
// unless until is zero, and validates the answer.
func (q *QuickStartFloor) try(ctx context.Context, until time.Time, f func(context.Context, string) (string, error), timeout time.Duration, in string) (string, error) {
	var (
		tctx   context.Context
		cancel context.CancelFunc
	)
	if until.IsZero() {
		tctx, cancel = context.WithTimeout(ctx, timeout)
	} else {
		d := time.Now().Add(timeout)
		if until.Before(d) {
			d = until
		}
		tctx, cancel = context.WithDeadline(ctx, d)
	}
	v, err := f(tctx, in)
	cancel()
	if err != nil {
		return "", err
	}
	if err := q.validator.Validate(v); err != nil {
		return "", err
	}
	return v, nil
}

// ErrEmpty is what the failsafe-go quick start's functions return for an
// empty answer.
var ErrEmpty = errors.New("benchcmp: empty answer")

// FailsafeQuick is the quick start in failsafe-go, built once: outside, a
// 10s timeout; then a fallback that runs flash; then pro's bulkhead of 32,
// breaker (30s delay, trips after TripAfter failures in a row), retry
// policy (FailsafeRetry) and 8s timeout. Flash runs in an executor of its
// own, built once, with a 3s timeout and a fallback to the default answer.
// failsafe-go has no validator: each tier's function returns ErrEmpty for
// an empty answer, which failsafe-go's breaker and retry policy count as a
// failure (tierguard counts a rejected answer for nothing and retries it
// only when told to).
type FailsafeQuick struct {
	pro   failsafe.Executor[string]
	proFn func(failsafe.Execution[string]) (string, error)
	// Breaker is pro's circuit breaker.
	Breaker fscb.CircuitBreaker[string]
}

// NewFailsafeQuick builds FailsafeQuick around f's functions.
func NewFailsafeQuick(f QuickFuncs) *FailsafeQuick {
	f = f.withDefaults()
	validated := func(fn func(context.Context, string) (string, error)) func(failsafe.Execution[string]) (string, error) {
		return func(e failsafe.Execution[string]) (string, error) {
			v, err := fn(e.Context(), "q")
			if err == nil && strings.TrimSpace(v) == "" {
				return "", ErrEmpty
			}
			return v, err
		}
	}
	flashFn := validated(f.Flash)
	flash := failsafe.With[string](fsfallback.NewWithResult(QuickDefault), fstimeout.New[string](QuickFlashTry))
	fb := fsfallback.NewWithFunc(func(e failsafe.Execution[string]) (string, error) {
		return flash.WithContext(e.Context()).GetWithExecution(flashFn)
	})
	cb := fscb.NewBuilder[string]().WithDelay(QuickCooldown).WithFailureThreshold(TripAfter).Build()
	pro := failsafe.With[string](fstimeout.New[string](QuickTotal), fb,
		fsbulkhead.New[string](QuickSlots), cb, FailsafeRetry(), fstimeout.New[string](QuickProTry))
	return &FailsafeQuick{pro: pro, proFn: validated(f.Pro), Breaker: cb}
}

// Get answers one request.
func (q *FailsafeQuick) Get() (string, error) { return q.pro.GetWithExecution(q.proFn) }
