package fallback

import (
	"time"

	"github.com/tierguard/tierguard/classify"
)

// coolDownOf is how long a 429 with a server delay keeps its tier (or
// member) out: the delay, at most classify.LongRetryAfter — a longer one
// is a quota's, which the classifier parks as QuotaExhausted, so a longer
// RateLimited delay (a custom classifier's, a hostile header) is not
// believed beyond it — and at most MaxQuotaCooldown.
func coolDownOf(v classify.Verdict, maxPark time.Duration) time.Duration {
	return min(v.RetryAfter, classify.LongRetryAfter, maxPark)
}
