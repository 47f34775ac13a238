package corpus

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/retry"
)

// Seen is what a test saw when a case went through a chain whose first
// tier ("pro", one attempt) met the case's response and whose second tier
// ("next") always answers.
type Seen struct {
	// Verdict is pro's attempt's verdict and Stop the decision after it:
	// with one attempt allowed, AttemptsExhausted says the class retries.
	Verdict classify.Verdict
	Stop    retry.StopReason
	// Tier is the tier that answered ("pro", "next"), "" when none did;
	// Err the request's error.
	Tier string
	Err  error
	// Again is what became of pro on a second request: NotSkipped, or the
	// skip a park caused.
	Again fallback.Skip
}

// Check judges what a chain did with c against what the case expects: the
// class, the retry-after, the model a retired case names, and the action.
func Check(t testing.TB, c Case, s Seen) {
	t.Helper()
	if c.Class == "ok" {
		assert.NoError(t, s.Err, "source: %s", c.Source)
		assert.Equal(t, "pro", s.Tier, "the answer stands")
		return
	}
	got := s.Verdict.Class.String()
	assert.Equal(t, c.Class, got, "%v\nsource: %s\nrule: %s", s.Verdict, c.Source, c.ExpectNote)
	if d := c.RetryAfter; d > 0 && c.Header.Get("Retry-After") != "" && !isDigits(c.Header.Get("Retry-After")) {
		// An HTTP-date counts from now: one second of resolution.
		assert.InDelta(t, float64(d), float64(s.Verdict.RetryAfter), float64(2*time.Second))
	} else {
		assert.Equal(t, d, s.Verdict.RetryAfter, "retry-after of %v", s.Verdict)
	}
	if c.Class == "retired" {
		assert.Equal(t, c.Model, s.Verdict.Model, "the model the 404 names")
	}
	var fe *fallback.Error
	switch c.Action {
	case "retry":
		assert.Equal(t, retry.AttemptsExhausted, s.Stop, "the class retries (one attempt allowed here)")
		assert.Equal(t, "next", s.Tier, "then the next tier answers")
	case "next_tier":
		assert.Equal(t, retry.NotRetryable, s.Stop)
		assert.Equal(t, "next", s.Tier)
		assert.Equal(t, fallback.NotSkipped, s.Again, "nothing parked")
	case "park_quota":
		assert.Equal(t, "next", s.Tier)
		assert.Equal(t, fallback.SkipQuota, s.Again, "the tier is parked")
	case "park_retired":
		assert.Equal(t, "next", s.Tier)
		assert.Equal(t, fallback.SkipRetired, s.Again, "the model is retired")
	case "fail_closed":
		if assert.True(t, errors.As(s.Err, &fe), "want a *fallback.Error, got %v", s.Err) {
			assert.True(t, fe.FailedClosed, "fails closed: %v", s.Err)
		}
		assert.Empty(t, s.Tier, "no other tier asked")
	default:
		t.Errorf("unknown action %q", c.Action)
	}
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
