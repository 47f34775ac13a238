package riverjob

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
)

// Outcome is what one attempt of a job decided.
type Outcome uint8

const (
	// Completed: the chain answered, the answer passed validation and was
	// stored (or a result was already stored under the job's key). River
	// marks the job completed.
	Completed Outcome = iota + 1
	// Retried: the failure may pass (Transient, RateLimited,
	// DeadlineExhausted, an open breaker, ...). River retries the job at
	// the later of the server's retry-after and its own backoff; the
	// attempt counts toward the job's MaxAttempts.
	Retried
	// Snoozed: every tier that could answer is waiting for its quota to
	// reset (or the tenant is at its concurrency limit). River runs the
	// job again after Report.Wait; the attempt does not count.
	Snoozed
	// Discarded: the job will not run again unless replayed. A fail-closed
	// class (InvalidRequest, Auth, Safety), invalid output on every tier
	// and a failure no tier can recover from are cancelled at once (River's
	// JobCancel, state "cancelled"); a retryable failure on the last
	// attempt is discarded by River (state "discarded"). Both are dead
	// letters: see DeadLetters.
	Discarded
	// Interrupted: the attempt's context was cancelled (the client is
	// stopping, or the job was cancelled from outside). River decides
	// what follows: a soft stop makes the job available again without
	// counting the attempt.
	Interrupted
)

var outcomeNames = [...]string{Completed: "completed", Retried: "retried", Snoozed: "snoozed", Discarded: "discarded", Interrupted: "interrupted"}

// String returns "completed", "retried", "snoozed", "discarded" or
// "interrupted".
func (o Outcome) String() string {
	if o > 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "invalid_outcome"
}

// MarshalText encodes the outcome as its name.
func (o Outcome) MarshalText() ([]byte, error) {
	if o == 0 || int(o) >= len(outcomeNames) {
		return nil, fmt.Errorf("riverjob: invalid outcome %d", uint8(o))
	}
	return []byte(o.String()), nil
}

// UnmarshalText decodes an outcome's name.
func (o *Outcome) UnmarshalText(b []byte) error {
	for i := 1; i < len(outcomeNames); i++ {
		if outcomeNames[i] == string(b) {
			*o = Outcome(i)
			return nil
		}
	}
	return fmt.Errorf("riverjob: unknown outcome %q", b)
}

// Why phrases say why an attempt ended as it did. They are fixed strings,
// safe to log and to store with the job.
const (
	WhyAnswered       = "answered and validated"
	WhyAlreadyStored  = "a result is already stored under the key"
	WhyFailedClosed   = "failed closed"
	WhyInvalidOutput  = "invalid output on every tier"
	WhyNoTierCan      = "no tier can answer this input"
	WhyRetryable      = "no tier answered; the failure may pass"
	WhyExhausted      = "no tier answered; attempts exhausted"
	WhyQuota          = "every tier that can answer is out of quota"
	WhyTenantBusy     = "the tenant is at its concurrency limit"
	WhyInterrupted    = "the attempt's context was cancelled"
	WhyRejectedOutput = "the answer failed the worker's validation"
	WhyStoreFailed    = "the result store failed"
)

// Report is one attempt's outcome, as the worker recorded it with the job
// (River's job output, under the metadata key "output") and as observers
// see it. Every field is safe to log: classes, statuses, tier names and
// fixed phrases, never an input, an answer or upstream text.
type Report struct {
	// Outcome is what the attempt decided, and Why says why, in a fixed
	// phrase (one of the Why constants).
	Outcome Outcome
	Why     string
	// Cause is the verdict that decided a failed attempt: the chain's
	// (fallback.Error.Cause), or the validation's; zero for a completed
	// attempt.
	Cause classify.Verdict
	// Tiers is each tier's part in a failed attempt.
	Tiers []TierReport
	// Source and Tier say who answered a completed attempt; Degraded is
	// set when it was not the first tier.
	Source   fallback.Source
	Tier     string
	Degraded bool
	// UpstreamCalls counts the calls this attempt made to tiers. The
	// chain's retries all happen inside one attempt.
	UpstreamCalls int
	// Attempt is River's attempt number, from 1 (snoozes do not count).
	Attempt int
	// Wait is, for Retried, the server's retry-after that the next
	// attempt waits for at least (0: River's backoff alone), and for
	// Snoozed how long the job sleeps.
	Wait time.Duration
}

// TierReport is one tier's part in a failed attempt.
type TierReport struct {
	Tier string
	// Outcome is "failed", "skipped" or "not reached".
	Outcome string
	// Skip says why a skipped tier was passed over ("quota", "open", ...).
	Skip string
	// Class and HTTPStatus are its last verdict's.
	Class      classify.Class
	HTTPStatus int
	// Attempts counts the calls made to it.
	Attempts int
}

// tiersOf is each tier's part in a failed attempt; nil when err is not
// the chain's summary.
func tiersOf(err error) []TierReport {
	var e *fallback.Error
	if !errors.As(err, &e) {
		return nil
	}
	out := make([]TierReport, len(e.Tiers))
	for i, t := range e.Tiers {
		out[i] = TierReport{Tier: t.Tier, Outcome: t.Outcome.String(), Class: t.Verdict.Class, HTTPStatus: t.Verdict.HTTPStatus, Attempts: t.Attempts}
		if t.Outcome == fallback.TierSkipped {
			out[i].Skip = t.Skip.String()
		}
	}
	return out
}

// String renders the report in one line, e.g.
// "discarded: failed closed: auth (401 UNAUTHENTICATED): ...; pro failed auth 401".
func (r Report) String() string {
	var b strings.Builder
	b.WriteString(r.Outcome.String())
	b.WriteString(": ")
	b.WriteString(r.Why)
	if r.Cause.Class != classify.OK {
		b.WriteString(": ")
		b.WriteString(r.Cause.String())
	}
	if r.Outcome == Completed && r.Source != fallback.SourceTier {
		b.WriteString(" (from the ")
		b.WriteString(r.Source.String())
		b.WriteByte(')')
	}
	if r.Tier != "" {
		b.WriteString(" by ")
		b.WriteString(r.Tier)
	}
	if r.Wait > 0 {
		b.WriteString(", wait ")
		b.WriteString(r.Wait.String())
	}
	for i, t := range r.Tiers {
		if i == 0 {
			b.WriteString("; ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(t.Tier)
		b.WriteByte(' ')
		b.WriteString(t.Outcome)
		switch {
		case t.Skip != "":
			b.WriteString(" (")
			b.WriteString(t.Skip)
			b.WriteByte(')')
		case t.Outcome == "failed":
			b.WriteByte(' ')
			b.WriteString(t.Class.String())
			if t.HTTPStatus != 0 {
				b.WriteByte(' ')
				b.WriteString(strconv.Itoa(t.HTTPStatus))
			}
		}
	}
	return b.String()
}

// reportJSON is Report's stored form.
type reportJSON struct {
	Outcome       Outcome    `json:"outcome"`
	Why           string     `json:"why"`
	Class         string     `json:"class,omitempty"`
	HTTPStatus    int        `json:"http_status,omitempty"`
	Status        string     `json:"status,omitempty"`
	RetryAfterMS  int64      `json:"retry_after_ms,omitempty"`
	Reason        string     `json:"reason,omitempty"`
	Tiers         []tierJSON `json:"tiers,omitempty"`
	Source        string     `json:"source,omitempty"`
	Tier          string     `json:"tier,omitempty"`
	Degraded      bool       `json:"degraded,omitempty"`
	UpstreamCalls int        `json:"upstream_calls"`
	Attempt       int        `json:"attempt"`
	WaitMS        int64      `json:"wait_ms,omitempty"`
}

type tierJSON struct {
	Tier       string `json:"tier"`
	Outcome    string `json:"outcome"`
	Skip       string `json:"skip,omitempty"`
	Class      string `json:"class,omitempty"`
	HTTPStatus int    `json:"http_status,omitempty"`
	Attempts   int    `json:"attempts,omitempty"`
}

// MarshalJSON encodes the report with classes and sources by name.
func (r Report) MarshalJSON() ([]byte, error) {
	j := reportJSON{
		Outcome: r.Outcome, Why: r.Why, HTTPStatus: r.Cause.HTTPStatus, Status: r.Cause.Status,
		RetryAfterMS: r.Cause.RetryAfter.Milliseconds(), Reason: r.Cause.Reason, Tier: r.Tier, Degraded: r.Degraded,
		UpstreamCalls: r.UpstreamCalls, Attempt: r.Attempt, WaitMS: r.Wait.Milliseconds(),
	}
	if r.Cause.Class != classify.OK {
		j.Class = r.Cause.Class.String()
	}
	if r.Outcome == Completed {
		j.Source = r.Source.String()
	}
	for _, t := range r.Tiers {
		j.Tiers = append(j.Tiers, tierJSON{Tier: t.Tier, Outcome: t.Outcome, Skip: t.Skip, Class: t.Class.String(), HTTPStatus: t.HTTPStatus, Attempts: t.Attempts})
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes a report that MarshalJSON encoded.
func (r *Report) UnmarshalJSON(b []byte) error {
	var j reportJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = Report{
		Outcome: j.Outcome, Why: j.Why, Tier: j.Tier, Degraded: j.Degraded, UpstreamCalls: j.UpstreamCalls,
		Attempt: j.Attempt, Wait: time.Duration(j.WaitMS) * time.Millisecond,
		Cause: classify.Verdict{
			Class: classOf(j.Class), HTTPStatus: j.HTTPStatus, Status: j.Status,
			RetryAfter: time.Duration(j.RetryAfterMS) * time.Millisecond, Reason: j.Reason,
		},
	}
	for _, s := range []fallback.Source{fallback.SourceTier, fallback.SourceCache, fallback.SourceDefault} {
		if s.String() == j.Source {
			r.Source = s
		}
	}
	for _, t := range j.Tiers {
		r.Tiers = append(r.Tiers, TierReport{Tier: t.Tier, Outcome: t.Outcome, Skip: t.Skip, Class: classOf(t.Class), HTTPStatus: t.HTTPStatus, Attempts: t.Attempts})
	}
	return nil
}

// classOf is the class named s; OK for "" and Unknown for a name this
// version does not know.
func classOf(s string) classify.Class {
	if s == "" {
		return classify.OK
	}
	for _, c := range classify.Classes() {
		if c.String() == s {
			return c
		}
	}
	return classify.Unknown
}

// Error is what the worker returns to River for an attempt that did not
// complete; River records its text with the job. The text is the report's
// (classes, statuses, tier names), never an input, an answer or upstream
// text. errors.Is and errors.As reach the chain's error through it.
type Error struct {
	Report Report
	// Err is the chain's (or the store's, or the validator's) error.
	Err error
}

// Error renders the report.
func (e *Error) Error() string { return "riverjob: " + e.Report.String() }

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Verdict returns the deciding verdict.
func (e *Error) Verdict() classify.Verdict { return e.Report.Cause }
