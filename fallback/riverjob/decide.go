package riverjob

import (
	"errors"
	"time"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
)

// parker is what deciding needs of a chain: when a parked stage may serve
// again.
type parker interface {
	ParkedUntil(i int) (time.Time, fallback.Skip)
}

// verdictOf is the deciding verdict of a chain's error.
func verdictOf(err error) classify.Verdict {
	var fe *fallback.Error
	if errors.As(err, &fe) {
		return fe.Cause
	}
	return classify.Classify(err)
}

// decide reads a failed attempt's error once and says what River does with
// the job: Retried (with the shortest retry-after a tier asked for),
// Snoozed (until the earliest quota reset), or Discarded. It never says
// Completed or Interrupted; the caller handles those.
//
// Each tier's prospect decides:
//   - a tier that may answer soon — a retryable failure (Transient,
//     RateLimited, DeadlineExhausted, Unknown, a local Rejected), a skip
//     for an open breaker, a full bulkhead or too little time, or a tier
//     the request never reached — makes the job Retried: River's attempts
//     bound it, and a breaker that stays open costs no upstream call;
//   - otherwise a tier out of quota (QuotaExhausted, or parked) makes it
//     Snoozed until the tier's parking ends — at once when it ended during
//     the attempt: waiting for a reset burns no attempt;
//   - otherwise no tier can answer (invalid output, a retired model, an
//     input too long, a request error): Discarded.
//
// A fail-closed error (InvalidRequest, Auth, Safety by default) is
// Discarded at once: the input or the configuration must change first.
func decide(err error, chain parker, now time.Time, quotaSnooze time.Duration) (out Outcome, why string, wait time.Duration) {
	var fe *fallback.Error
	if !errors.As(err, &fe) {
		// Not the chain's summary (a chain always returns one): let River's
		// attempts bound it.
		return Retried, WhyRetryable, 0
	}
	if fe.FailedClosed {
		if fe.Cause.Class == classify.Canceled {
			// A tier reported a cancel the job's context did not make (the
			// caller checks that first): a hiccup, not a verdict.
			return Retried, WhyRetryable, 0
		}
		return Discarded, WhyFailedClosed, 0
	}
	retry, quota := false, false
	var retryWait, quotaWait time.Duration
	invalid := 0
	for i, t := range fe.Tiers {
		tierWait, tierQuota, tierRetry := time.Duration(0), false, false
		switch t.Outcome {
		case fallback.TierNotReached:
			tierRetry = true
		case fallback.TierSkipped:
			switch t.Skip {
			case fallback.SkipQuota:
				tierQuota = true
			case fallback.SkipRetired:
			default: // open, full, budget
				tierRetry = true
			}
		default:
			switch t.Verdict.Class {
			case classify.QuotaExhausted:
				tierQuota = true
			case classify.InvalidOutput:
				invalid++
			case classify.Retired, classify.ContextTooLong, classify.InvalidRequest, classify.Auth, classify.Safety:
			default:
				tierRetry, tierWait = true, t.Verdict.RetryAfter
			}
		}
		switch {
		case tierRetry:
			// The earliest time any tier may serve: a tier with no
			// retry-after may serve at River's backoff.
			if !retry || tierWait < retryWait {
				retryWait = tierWait
			}
			retry = true
		case tierQuota:
			d := quotaSnooze
			until, why := chain.ParkedUntil(i)
			switch {
			case why == fallback.SkipQuota:
				d = until.Sub(now)
			case t.Outcome == fallback.TierSkipped:
				// The chain skipped the tier because it was parked, and the
				// parking has ended since, while a later tier was being
				// called: the tier may serve now. quotaSnooze is for a quota
				// nothing says the end of; here it would put the job to
				// sleep long after the tier is back.
				d = 0
			case t.Verdict.RetryAfter > 0:
				d = t.Verdict.RetryAfter
			}
			if !quota || d < quotaWait {
				quotaWait = d
			}
			quota = true
		}
	}
	switch {
	case retry:
		return Retried, WhyRetryable, retryWait
	case quota:
		return Snoozed, WhyQuota, max(quotaWait, 0)
	case invalid > 0 && invalid == len(fe.Tiers):
		return Discarded, WhyInvalidOutput, 0
	}
	return Discarded, WhyNoTierCan, 0
}
