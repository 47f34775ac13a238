package deadline_test

import (
	"context"
	"errors"
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/tierguard/tierguard/deadline"
)

func bigD(d time.Duration) *big.Int { return big.NewInt(int64(d)) }

// avail is remaining - max(reserve, 0), computed without overflow.
func avail(remaining, reserve time.Duration) *big.Int {
	return new(big.Int).Sub(bigD(remaining), bigD(max(reserve, 0)))
}

// FuzzBudget builds budgets from arbitrary context timeouts and totals and
// asks them arbitrary questions: no attempt is allowed, and no wait fits,
// unless it really does; an attempt's context never ends after the budget's
// deadline minus the reserve, nor after its cap.
func FuzzBudget(f *testing.F) {
	f.Add(int64(time.Second), true, int64(0), int64(100*time.Millisecond), int64(200*time.Millisecond), int64(50*time.Millisecond), int64(10*time.Millisecond))
	f.Add(int64(-time.Second), true, int64(0), int64(0), int64(math.MaxInt64), int64(0), int64(0))
	f.Add(int64(time.Second), true, int64(0), int64(0), int64(0), int64(0), int64(math.MaxInt64))
	f.Add(int64(time.Second), true, int64(0), int64(0), int64(0), int64(math.MaxInt64), int64(time.Hour))
	f.Add(int64(0), false, int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MinInt64), int64(math.MinInt64), int64(math.MinInt64))
	f.Add(int64(math.MaxInt64), true, int64(1), int64(-1), int64(-1), int64(-1), int64(-1))
	f.Fuzz(func(t *testing.T, timeout int64, hasCtx bool, total, capD, reserve, minUseful, wait int64) {
		ctx := context.Background()
		if hasCtx {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Duration(timeout))
			defer cancel()
		}
		b := deadline.New(ctx, time.Duration(total))
		d, limited := b.Deadline()
		if limited != (hasCtx || total > 0) {
			t.Fatalf("limited = %v with ctx %v, total %v", limited, hasCtx, total)
		}
		if cd, ok := ctx.Deadline(); ok && d.After(cd) {
			t.Fatalf("budget deadline %v after the context's %v", d, cd)
		}
		if !limited && b.Remaining() != deadline.Unlimited {
			t.Fatalf("unlimited budget has %v remaining", b.Remaining())
		}
		try := deadline.Try{Cap: time.Duration(capD), Reserve: time.Duration(reserve), MinUseful: time.Duration(minUseful)}
		need := bigD(max(try.MinUseful, 1))

		r0 := b.Remaining()
		actx, cancel, err := b.Attempt(ctx, try)
		r1 := b.Remaining()
		switch {
		case err != nil:
			if !errors.Is(err, deadline.ErrExhausted) || !limited {
				t.Fatalf("Attempt: %v (limited %v)", err, limited)
			}
			// Refused: at the moment it decided, less than MinUseful (or
			// nothing) was left after the reserve.
			if avail(r1, try.Reserve).Cmp(need) >= 0 {
				t.Fatalf("Attempt refused with %v left, reserve %v, min useful %v", r1, try.Reserve, try.MinUseful)
			}
		default:
			if limited && avail(r0, try.Reserve).Cmp(need) < 0 {
				t.Fatalf("Attempt allowed with %v left, reserve %v, min useful %v", r0, try.Reserve, try.MinUseful)
			}
			ad, ok := actx.Deadline()
			switch {
			case limited && !ok:
				t.Fatalf("attempt without a deadline in a limited budget")
			case limited && d.Sub(ad) < max(try.Reserve, 0):
				t.Fatalf("attempt ends at %v, less than the reserve %v before the deadline %v", ad, try.Reserve, d)
			case ok && try.Cap > 0 && time.Until(ad) > try.Cap:
				t.Fatalf("attempt ends %v from now, cap %v", time.Until(ad), try.Cap)
			case !limited && try.Cap <= 0 && ok:
				t.Fatalf("attempt has a deadline without budget or cap")
			}
			cancel()
		}

		if _, _, err := b.Attempt(context.Background(), try); err != nil && !limited {
			t.Fatalf("Attempt refused an unlimited budget: %v", err)
		}

		r0 = b.Remaining()
		fits := b.Fits(time.Duration(wait), try)
		r1 = b.Remaining()
		w := new(big.Int).Add(bigD(max(time.Duration(wait), 0)), need)
		switch {
		case !limited && !fits:
			t.Fatalf("nothing fits an unlimited budget")
		case limited && fits && avail(r0, try.Reserve).Cmp(w) < 0:
			t.Fatalf("a wait of %v fits %v left, reserve %v, min useful %v", time.Duration(wait), r0, try.Reserve, try.MinUseful)
		case limited && !fits && avail(r1, try.Reserve).Cmp(w) >= 0:
			t.Fatalf("a wait of %v does not fit %v left, reserve %v, min useful %v", time.Duration(wait), r1, try.Reserve, try.MinUseful)
		}
	})
}
