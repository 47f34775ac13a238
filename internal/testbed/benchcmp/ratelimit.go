package benchcmp

import (
	"context"
	"time"

	"github.com/failsafe-go/failsafe-go"
	fsfallback "github.com/failsafe-go/failsafe-go/fallback"
	fsratelimiter "github.com/failsafe-go/failsafe-go/ratelimiter"
	"golang.org/x/time/rate"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/ratelimit"
)

// The rate limiters' quota: RateRequests calls per RatePer, RateBurst of
// them at once. It is far above what a benchmark can spend (about one call
// a nanosecond), so that every call is admitted: what is measured is the
// admission, not a refusal.
const (
	RateRequests = 60_000_000_000
	RatePer      = time.Minute
	RateBurst    = RateRequests / 10
)

// RateQuota is a quota of requests per period with a burst, given to each
// rate limiter contender in its own terms.
type RateQuota struct {
	Requests int
	Per      time.Duration
	Burst    int
}

// BenchQuota is the quota of the rate limiter benchmarks.
var BenchQuota = RateQuota{Requests: RateRequests, Per: RatePer, Burst: RateBurst}

// TierguardLimiter is a tierguard rate limiter of q (requests only).
func TierguardLimiter(q RateQuota) *ratelimit.Limiter {
	l, err := ratelimit.New(ratelimit.Config{Name: "pro", Requests: q.Requests, Per: q.Per, Burst: q.Burst})
	if err != nil {
		panic(err)
	}
	return l
}

// XRateLimiter is golang.org/x/time/rate's limiter shaped as tierguard's:
// a bucket of q.Burst refilled at (Requests − Burst) per Per, so that no
// window of Per holds more than Requests calls.
func XRateLimiter(q RateQuota) *rate.Limiter {
	return rate.NewLimiter(rate.Limit(float64(q.Requests-q.Burst)/q.Per.Seconds()), q.Burst)
}

// FailsafeLimiter is failsafe-go's bursty rate limiter of q.Requests per
// q.Per, with no wait. failsafe-go's bursty limiter hands out a period's
// permits at once and refills them all at the next period (a fixed
// window); its smooth one spaces calls evenly, with no burst. Neither is a
// token bucket: the bursty one is the nearer to a quota per minute.
func FailsafeLimiter(q RateQuota) fsratelimiter.RateLimiter[string] {
	return fsratelimiter.NewBursty[string](uint(q.Requests), q.Per)
}

// TierguardLimitedChain is TierguardChain's chain (one stage: bulkhead,
// breaker, retry; a default answer) whose tier is behind l through
// ratelimit.Tier: each attempt takes its turn. nil l leaves the tier
// unlimited, the reference the limiter's cost is read against.
func TierguardLimitedChain(l *ratelimit.Limiter) *fallback.Chain[string, string] {
	tier := Tier("pro", Work)
	if l != nil {
		tier = ratelimit.Tier(tier, ratelimit.TierConfig[string]{Limiter: l})
	}
	c, err := fallback.New(fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{{
			Tier: tier, Bulkhead: TierguardBulkhead(), Breaker: TierguardBreaker(false), Retry: TierguardRetry(),
		}},
		Default: func(context.Context, string) (string, bool) { return "default", true },
	})
	if err != nil {
		panic(err)
	}
	return c
}

// FailsafeLimitedChain is FailsafeChain's executor (fallback, bulkhead,
// breaker, retry) with failsafe-go's rate limiter innermost, so that each
// attempt takes its turn, as in TierguardLimitedChain.
func FailsafeLimitedChain(rl fsratelimiter.RateLimiter[string]) failsafe.Executor[string] {
	return failsafe.With[string](fsfallback.NewWithResult("default"), FailsafeBulkhead(), FailsafeBreaker(false), FailsafeRetry(), rl)
}
