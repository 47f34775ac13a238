package retry_test

import (
	"context"
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/deadline"
	"github.com/tierguard/tierguard/retry"
)

// FuzzDecide asks a policy what follows an arbitrary failure under an
// arbitrary budget and retry budget: never a negative wait, never a retry
// of a class the table does not retry, past a positive MaxAttempts, without a budget
// token, or with a wait (plus a useful attempt) that does not fit the time
// left minus the reserve; and never sooner than the server asked.
func FuzzDecide(f *testing.F) {
	f.Add(1, uint8(classify.Transient), int64(0), 3, int64(time.Millisecond), int64(time.Second), uint8(0), 10.0, 0.1, uint8(0), int64(time.Second), int64(0), int64(0))
	f.Add(1, uint8(classify.RateLimited), int64(math.MaxInt64), 0, int64(0), int64(0), uint8(2), 0.0, 0.0, uint8(0), int64(time.Second), int64(0), int64(0))
	f.Add(2, uint8(classify.RateLimited), int64(37*time.Second), 5, int64(0), int64(0), uint8(1), 10.0, 0.1, uint8(5), int64(time.Minute), int64(10*time.Second), int64(time.Second))
	f.Add(1, uint8(classify.Transient), int64(math.MinInt64), 2, int64(1)<<62, int64(math.MaxInt64), uint8(0), 1e6, 1e6, uint8(255), int64(0), int64(math.MaxInt64), int64(math.MaxInt64))
	f.Add(1000, uint8(200), int64(-1), 1<<30, int64(-1), int64(-1), uint8(7), math.NaN(), math.Inf(1), uint8(1), int64(-time.Second), int64(-1), int64(-1))
	f.Fuzz(func(t *testing.T, n int, class uint8, retryAfter int64, maxAttempts int, base, maxDelay int64, jitter uint8,
		tokens, ratio float64, failures uint8, remaining, reserve, minUseful int64) {
		p := retry.Policy{MaxAttempts: maxAttempts, BaseDelay: time.Duration(base), MaxDelay: time.Duration(maxDelay), Jitter: retry.Jitter(jitter % 4)}
		if p.Validate() != nil {
			return
		}
		if bud, err := retry.NewBudget(tokens, ratio); err == nil {
			for range failures {
				bud.Failure()
			}
			p.Budget = bud
		}
		p = p.WithDefaults()
		n = 1 + int(uint(n)%1000)
		ctx := context.Background()
		if remaining != 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Duration(remaining))
			defer cancel()
		}
		b := deadline.New(ctx, 0)
		try := deadline.Try{Reserve: time.Duration(reserve), MinUseful: time.Duration(minUseful)}
		v := classify.Verdict{Class: classify.Class(class % 16), RetryAfter: time.Duration(retryAfter)}

		left := b.Remaining()
		a := p.DecideIn(n, v, b, try)

		if a.N != n || a.Verdict != v {
			t.Fatalf("attempt %+v for n=%d, %+v", a, n, v)
		}
		if a.Wait < 0 {
			t.Fatalf("negative wait %v", a.Wait)
		}
		if p.Budget != nil {
			if tk := p.Budget.Tokens(); tk < 0 || tk > tokens {
				t.Fatalf("budget holds %v tokens of %v", tk, tokens)
			}
		}
		if !a.Retry {
			if a.Wait != 0 || a.Stop == retry.NotStopped {
				t.Fatalf("no retry, yet wait %v and stop %v", a.Wait, a.Stop)
			}
			return
		}
		switch {
		case a.Stop != retry.NotStopped:
			t.Fatalf("retry with stop reason %v", a.Stop)
		case !classify.DefaultTable().Action(v.Class).Retry:
			t.Fatalf("retry of %v, which the table does not retry", v.Class)
		case p.MaxAttempts > 0 && n >= p.MaxAttempts:
			t.Fatalf("retry after attempt %d of %d", n, p.MaxAttempts)
		case p.Budget != nil && p.Budget.Tokens() <= tokens/2:
			t.Fatalf("retry with %v of %v tokens", p.Budget.Tokens(), tokens)
		case v.RetryAfter > 0 && a.Wait < v.RetryAfter:
			t.Fatalf("wait %v is shorter than the server's %v", a.Wait, v.RetryAfter)
		case a.Wait > max(p.MaxDelay, v.RetryAfter):
			t.Fatalf("wait %v beyond MaxDelay %v and retry-after %v", a.Wait, p.MaxDelay, v.RetryAfter)
		}
		if left != deadline.Unlimited {
			need := new(big.Int).Add(big.NewInt(int64(a.Wait)), big.NewInt(int64(max(try.MinUseful, 1))))
			have := new(big.Int).Sub(big.NewInt(int64(left)), big.NewInt(int64(max(try.Reserve, 0))))
			if need.Cmp(have) > 0 {
				t.Fatalf("retry after %v with %v left, reserve %v, min useful %v", a.Wait, left, try.Reserve, try.MinUseful)
			}
		}
	})
}
