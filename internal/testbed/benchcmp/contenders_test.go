package benchcmp

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	fscb "github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/sony/gobreaker/v2"
	"go.uber.org/goleak"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/fallback"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestContenders runs each benchmark's contenders once: they must end as
// the benchmark expects, or it would measure something else.
func TestContenders(t *testing.T) {
	for _, window := range []bool{false, true} {
		for _, c := range breakerContenders(window) {
			if !c.op() {
				t.Errorf("breaker (window %v) %s: unexpected outcome", window, c.impl)
			}
		}
	}
}

func TestBreakersTripAlike(t *testing.T) {
	tg := TierguardBreaker(false)
	TripTierguard(tg)
	if _, err := tg.Allow(); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("tierguard: %v", err)
	}
	gb := GoBreaker(false)
	TripGoBreaker(gb)
	if _, err := gb.Execute(Work); !errors.Is(err, gobreaker.ErrOpenState) {
		t.Fatalf("gobreaker: %v", err)
	}
	fs := FailsafeBreaker(false)
	TripFailsafe(fs)
	if _, err := failsafe.With(fs).Get(Work); !errors.Is(err, fscb.ErrOpen) {
		t.Fatalf("failsafe: %v", err)
	}

	// The window variants trip on the ratio too: 10 successes, then two
	// failures for every success (never 5 in a row) until the ratio
	// reaches 50%.
	tgw := TierguardBreaker(true)
	gbw := GoBreaker(true)
	fsw := FailsafeBreaker(true)
	for i := range 60 {
		var err error
		if i >= 10 && i%3 != 0 {
			err = ErrBoom
		}
		if tok, aerr := tgw.Allow(); aerr == nil {
			tok.Report(err)
		}
		_, _ = gbw.Execute(func() (string, error) { return "", err })
		if fsw.TryAcquirePermit() {
			fsw.RecordError(err)
		}
	}
	if tgw.State() != breaker.Open || gbw.State() != gobreaker.StateOpen || !fsw.IsOpen() {
		t.Fatalf("window breakers: tierguard %v, gobreaker %v, failsafe %v", tgw.State(), gbw.State(), fsw.State())
	}
}

func TestChains(t *testing.T) {
	deadline, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for _, v := range chainVariants {
		ctx := context.Background()
		if v.deadline {
			ctx = deadline
		}
		for _, open := range []bool{false, true} {
			o := ChainOptions{PrimaryOpen: open, TryTimeout: v.try}
			want, tier := Answer, "pro"
			if open {
				want, tier = "second", "flash"
			}
			res, err := TierguardChain(o).Do(ctx, "q")
			if err != nil || res.Value != want || res.Tier != tier || res.UpstreamCalls != 1 {
				t.Errorf("%s open=%v: tierguard %+v, %v", v.name, open, res, err)
			}
			fs := FailsafeChain(o, v.deadline)
			if v.deadline {
				fs = fs.WithContext(ctx)
			}
			// The second executor must run Work's counterpart exactly once,
			// and the primary never when open.
			calls := 0
			got, err := fs.Get(func() (string, error) { calls++; return Work() })
			wantCalls := 1
			if open {
				wantCalls = 0
			}
			if err != nil || got != want || calls != wantCalls {
				t.Errorf("%s open=%v: failsafe %q, %v, %d primary calls", v.name, open, got, err, calls)
			}
			if open {
				if got, err := FailsafeChainPlain(o).Get(Work); err != nil || got != want {
					t.Errorf("%s: failsafe plain fallback %q, %v", v.name, got, err)
				}
			}
		}
	}
}

// TestTryTimeoutReachesTheTier checks that the per-try timeout variants give
// the tier a context that ends within TryTimeout. tierguard's carries the
// deadline; failsafe-go's timeout policy cancels a child context from a
// timer, so its context is cancellable but carries no deadline.
func TestTryTimeoutReachesTheTier(t *testing.T) {
	within := func(ctx context.Context) bool {
		d, ok := ctx.Deadline()
		return ok && time.Until(d) <= TryTimeout
	}
	var tgOK bool
	c, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{
		Tier: fallback.Tier("pro", func(ctx context.Context, _ string) (string, error) {
			tgOK = within(ctx)
			return Answer, nil
		}),
		TryTimeout: TryTimeout,
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(context.Background(), "q"); err != nil || !tgOK {
		t.Fatalf("tierguard: per-try deadline not seen (%v)", err)
	}
	var fsOK bool
	fs := FailsafeChain(ChainOptions{TryTimeout: TryTimeout}, false)
	if _, err := fs.GetWithExecution(func(e failsafe.Execution[string]) (string, error) {
		fsOK = e.Context().Done() != nil
		return Answer, nil
	}); err != nil || !fsOK {
		t.Fatalf("failsafe: per-try deadline not seen (%v)", err)
	}
}
