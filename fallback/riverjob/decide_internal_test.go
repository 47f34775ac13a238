package riverjob

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
)

// parked is a parker whose stages are parked until the times given.
type parked map[int]time.Time

func (p parked) ParkedUntil(i int) (time.Time, fallback.Skip) {
	if t, ok := p[i]; ok {
		return t, fallback.SkipQuota
	}
	return time.Time{}, fallback.NotSkipped
}

func failed(tier string, c classify.Class, ra time.Duration) fallback.TierFailure {
	return fallback.TierFailure{Tier: tier, Outcome: fallback.TierFailed, Attempts: 1, Verdict: classify.Verdict{Class: c, RetryAfter: ra}}
}

func skipped(tier string, s fallback.Skip) fallback.TierFailure {
	return fallback.TierFailure{Tier: tier, Outcome: fallback.TierSkipped, Skip: s, Verdict: classify.Verdict{Class: classify.Rejected}}
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	notReached := fallback.TierFailure{Tier: "flash", Outcome: fallback.TierNotReached}
	cases := []struct {
		name    string
		err     error
		parked  parked
		outcome Outcome
		why     string
		wait    time.Duration
	}{
		{"deadline_exhausted", &fallback.Error{Cause: classify.Verdict{Class: classify.DeadlineExhausted}, Tiers: []fallback.TierFailure{failed("pro", classify.Transient, 0), notReached}}, nil, Retried, WhyRetryable, 0},
		{"deadline_cut_last_tier", &fallback.Error{Cause: classify.Verdict{Class: classify.DeadlineExhausted}, Tiers: []fallback.TierFailure{failed("pro", classify.Transient, 0), failed("flash", classify.DeadlineExhausted, 0)}}, nil, Retried, WhyRetryable, 0},
		{"shortest_retry_after", &fallback.Error{Tiers: []fallback.TierFailure{failed("pro", classify.RateLimited, 30*time.Second), failed("flash", classify.RateLimited, 20*time.Second)}}, nil, Retried, WhyRetryable, 20 * time.Second},
		{"a_tier_without_retry_after_may_serve_at_backoff", &fallback.Error{Tiers: []fallback.TierFailure{failed("pro", classify.RateLimited, 30*time.Second), failed("flash", classify.Transient, 0)}}, nil, Retried, WhyRetryable, 0},
		{"open_breakers", &fallback.Error{Tiers: []fallback.TierFailure{skipped("pro", fallback.SkipOpen), skipped("flash", fallback.SkipOpen)}}, nil, Retried, WhyRetryable, 0},
		{"full_bulkhead", &fallback.Error{Tiers: []fallback.TierFailure{skipped("pro", fallback.SkipFull), failed("flash", classify.InvalidOutput, 0)}}, nil, Retried, WhyRetryable, 0},
		{"unknown", &fallback.Error{Tiers: []fallback.TierFailure{failed("pro", classify.Unknown, 0)}}, nil, Retried, WhyRetryable, 0},
		{"quota_parked", &fallback.Error{Tiers: []fallback.TierFailure{failed("pro", classify.QuotaExhausted, time.Second), skipped("flash", fallback.SkipQuota)}},
			parked{0: now.Add(time.Hour), 1: now.Add(10 * time.Minute)}, Snoozed, WhyQuota, 10 * time.Minute},
		{"quota_not_parked_retry_after", &fallback.Error{Tiers: []fallback.TierFailure{failed("pro", classify.QuotaExhausted, 90*time.Second)}}, nil, Snoozed, WhyQuota, 90 * time.Second},
		{"quota_not_parked_no_hint", &fallback.Error{Tiers: []fallback.TierFailure{failed("pro", classify.QuotaExhausted, 0)}}, nil, Snoozed, WhyQuota, 7 * time.Minute},
		// The chain skipped pro for its quota; pro's parking ended while
		// flash was being called: pro may serve now.
		{"quota_parking_ended_during_the_attempt", &fallback.Error{Tiers: []fallback.TierFailure{skipped("pro", fallback.SkipQuota), failed("flash", classify.InvalidOutput, 0)}},
			nil, Snoozed, WhyQuota, 0},
		{"quota_one_parking_ended", &fallback.Error{Tiers: []fallback.TierFailure{skipped("pro", fallback.SkipQuota), skipped("flash", fallback.SkipQuota)}},
			parked{1: now.Add(time.Minute)}, Snoozed, WhyQuota, 0},
		{"quota_and_retired", &fallback.Error{Tiers: []fallback.TierFailure{skipped("pro", fallback.SkipRetired), skipped("flash", fallback.SkipQuota)}}, parked{1: now.Add(time.Minute)}, Snoozed, WhyQuota, time.Minute},
		{"invalid_output_everywhere", &fallback.Error{Tiers: []fallback.TierFailure{failed("pro", classify.InvalidOutput, 0), failed("flash", classify.InvalidOutput, 0)}}, nil, Discarded, WhyInvalidOutput, 0},
		{"invalid_output_and_retired", &fallback.Error{Tiers: []fallback.TierFailure{failed("pro", classify.InvalidOutput, 0), skipped("flash", fallback.SkipRetired)}}, nil, Discarded, WhyNoTierCan, 0},
		{"context_too_long", &fallback.Error{Tiers: []fallback.TierFailure{failed("pro", classify.ContextTooLong, 0)}}, nil, Discarded, WhyNoTierCan, 0},
		{"fail_closed", &fallback.Error{FailedClosed: true, Cause: classify.Verdict{Class: classify.Safety}, Tiers: []fallback.TierFailure{failed("pro", classify.Safety, 0), notReached}}, nil, Discarded, WhyFailedClosed, 0},
		{"canceled_by_a_tier", &fallback.Error{FailedClosed: true, Cause: classify.Verdict{Class: classify.Canceled}, Tiers: []fallback.TierFailure{failed("pro", classify.Canceled, 0)}}, nil, Retried, WhyRetryable, 0},
		{"not_a_chain_error", errors.New("boom"), nil, Retried, WhyRetryable, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.parked
			if p == nil {
				p = parked{}
			}
			out, why, wait := decide(tc.err, p, now, 7*time.Minute)
			assert.Equal(t, tc.outcome, out)
			assert.Equal(t, tc.why, why)
			assert.Equal(t, tc.wait, wait)
		})
	}
}

func TestJitter(t *testing.T) {
	assert.Zero(t, jitter(0))
	for range 100 {
		d := jitter(time.Second)
		assert.GreaterOrEqual(t, d, time.Second)
		assert.LessOrEqual(t, d, 1100*time.Millisecond)
	}
}

func TestRetryHintsBounded(t *testing.T) {
	var h retryHints
	for i := range int64(2 * maxHints) {
		h.put(i, time.Second)
	}
	assert.LessOrEqual(t, len(h.m), maxHints)
	h.put(-1, 3*time.Second)
	d, ok := h.take(-1)
	assert.True(t, ok)
	assert.Equal(t, 3*time.Second, d)
	_, ok = h.take(-1)
	assert.False(t, ok, "taken once")
}
