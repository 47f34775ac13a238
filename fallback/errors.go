package fallback

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tierguard/tierguard/classify"
)

// TierOutcome says what happened to one tier in a failed request.
type TierOutcome uint8

const (
	// TierFailed: the tier was called and did not answer.
	TierFailed TierOutcome = iota
	// TierSkipped: the tier was passed over without a call (see Skip).
	TierSkipped
	// TierNotReached: the request ended before this tier's turn (a
	// fail-closed error, or no time left).
	TierNotReached
)

var outcomeNames = [...]string{TierFailed: "failed", TierSkipped: "skipped", TierNotReached: "not reached"}

// String names the outcome.
func (o TierOutcome) String() string { return name(outcomeNames[:], o, "invalid") }

// TierFailure is one tier's part in a failed request.
type TierFailure struct {
	// Tier and TierIndex name the tier.
	Tier      string
	TierIndex int
	// Outcome says whether it failed, was skipped or was not reached.
	Outcome TierOutcome
	// Skip says why a skipped tier was passed over, or, for a failed
	// tier, why its planned retry was refused (SkipRateLimited when its
	// limiter's turn did not fit; Err then joins the failure and the
	// refusal).
	Skip Skip
	// Attempts counts the calls made to it.
	Attempts int
	// Verdict is its last attempt's (or skip's) verdict.
	Verdict classify.Verdict
	// Err is its last error; nil when not reached.
	Err error
}

// Error is returned when no tier, cache or default answered, or when a
// failure closed the request at once (Auth, Safety, InvalidRequest,
// Canceled by default). errors.Is and errors.As reach every tier's error
// through it. Its text lists each tier's fate by class and status only:
// upstream messages may echo prompts or keys, so they stay in the wrapped
// errors for callers who choose to log them.
type Error struct {
	// FailedClosed is set when a failure's class stopped the request at
	// once, without trying later tiers, the cache or the default.
	FailedClosed bool
	// Cause is the verdict that decided the outcome: the fail-closed
	// failure, DeadlineExhausted when time ran out, otherwise the last
	// tier's failure.
	Cause classify.Verdict
	// Tiers lists every tier of the chain, in order.
	Tiers []TierFailure
}

// Error summarises each tier's fate.
func (e *Error) Error() string {
	var b strings.Builder
	if e.FailedClosed {
		b.WriteString("tierguard: failed closed (")
		b.WriteString(e.Cause.String())
		b.WriteString(")")
	} else {
		b.WriteString("tierguard: no tier answered")
		if e.Cause.Class == classify.DeadlineExhausted {
			b.WriteString(" before the deadline")
		}
	}
	for i, t := range e.Tiers {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(t.Tier)
		b.WriteByte(' ')
		switch t.Outcome {
		case TierFailed:
			b.WriteString("failed: ")
			b.WriteString(t.Verdict.Class.String())
			if t.Verdict.HTTPStatus != 0 {
				b.WriteByte(' ')
				b.WriteString(strconv.Itoa(t.Verdict.HTTPStatus))
			}
			if t.Attempts > 1 {
				b.WriteString(" after ")
				b.WriteString(strconv.Itoa(t.Attempts))
				b.WriteString(" attempts")
			}
		case TierSkipped:
			b.WriteString("skipped (")
			b.WriteString(t.Skip.String())
			b.WriteByte(')')
		default:
			b.WriteString("not reached")
		}
	}
	return b.String()
}

// Unwrap returns every tier's last error.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, len(e.Tiers))
	for _, t := range e.Tiers {
		if t.Err != nil {
			errs = append(errs, t.Err)
		}
	}
	return errs
}

// Is reports whether the request ended because its caller cancelled it,
// for target context.Canceled: whatever the tier returned on its way out
// (its own error, a wrapped one), errors.Is(err, context.Canceled) then
// holds, as it does for the context's own error. Other targets are
// matched through the tiers' errors (Unwrap).
func (e *Error) Is(target error) bool {
	return target == context.Canceled && e.Cause.Class == classify.Canceled
}

// Verdict returns the deciding verdict, so that classify.Classify of a
// chain's error names why the request failed.
func (e *Error) Verdict() classify.Verdict { return e.Cause }

// ErrTooLarge reports a request no tier can ever admit: every tier skipped
// it as too large (SkipTooLarge: its token estimate exceeds the burst of
// the tier's rate limiter), so waiting or retrying cannot help. The
// chain's *Error matches it with errors.Is, as does the *SkipError of a
// tier that skipped a request as too large; ratelimit.ErrTooLarge is
// this error. A gateway answers 413 to it, where it answers 429 or the
// default to a request merely rate-limited.
var ErrTooLarge = errors.New("tierguard: request too large to be admitted")

// SkipError reports a tier passed over without an upstream call: its
// model is retired, its quota is exhausted and it is parked, or a tier
// decorator refused the call (a rate limit's turn, every pool member out).
// A tier returns one, after Record.CountCalls, to be skipped rather than
// failed.
type SkipError struct {
	// Tier and Model name the tier passed over and the model the call
	// would have used.
	Tier  string
	Model string
	// Skip says why.
	Skip Skip
	// Cause is what refused the call, when it says more (a
	// *ratelimit.LimitedError with when to come back); nil otherwise.
	Cause error
	// Cooling says which rule took the tier out and until when, when it
	// is skipped (SkipRateLimited) cooling down after a server's 429s.
	Cooling Cooling
}

// Unwrap returns the cause.
func (e *SkipError) Unwrap() error { return e.Cause }

// Is reports whether target is ErrTooLarge and the tier skipped the
// request as too large.
func (e *SkipError) Is(target error) bool { return target == ErrTooLarge && e.Skip == SkipTooLarge }

// Error names the tier and why it was skipped.
func (e *SkipError) Error() string {
	msg := "tierguard: tier " + e.Tier + " skipped: " + skipReasons[e.Skip]
	if e.Cooling.Rule != NotCooled {
		msg = "tierguard: tier " + e.Tier + " skipped: cooling down after the server's 429s (" + e.Cooling.Rule.String() +
			") until " + e.Cooling.Until.Format(time.RFC3339)
	}
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

// Verdict classifies the skip as Rejected: no upstream call was made.
func (e *SkipError) Verdict() classify.Verdict {
	return classify.Verdict{Class: classify.Rejected, Reason: skipReasons[e.Skip]}
}

// PanicError carries a tier's panic from the goroutine it happened on to
// the caller's, with the stack where it happened: when a call runs on its
// own goroutine (Config.AbandonAfter, a shared execution of Config.Key),
// its panic is re-raised on the caller's goroutine as a *PanicError.
// Observers see one as the failure of any request a panic ended. A panic
// of a tier called on the caller's own goroutine propagates as it is.
type PanicError struct {
	// Value is what the tier (or a catalog's fetch, or a cache's embedder)
	// panicked with.
	Value any
	// Stack is the panicking goroutine's stack; nil when the panic was
	// not carried across goroutines.
	Stack []byte
}

// Error renders the panic value and its stack, as an unrecovered panic
// would print them. It holds whatever the tier panicked with: observers
// must not export it.
func (e *PanicError) Error() string {
	if e.Stack == nil {
		return fmt.Sprintf("tierguard: panic: %v", e.Value)
	}
	return fmt.Sprintf("tierguard: panic: %v\n\n%s", e.Value, e.Stack)
}

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// buildError summarises a failed request's trail per tier.
func buildError(stages []stage, trail []Attempt, cause classify.Verdict, closed bool) *Error {
	e := &Error{FailedClosed: closed, Cause: cause, Tiers: make([]TierFailure, len(stages))}
	for i := range stages {
		e.Tiers[i] = TierFailure{Tier: stages[i].name, TierIndex: i, Outcome: TierNotReached}
	}
	for _, a := range trail {
		if a.Hedge && a.Skip != NotSkipped {
			// A hedge that found nowhere to go says nothing of the tier's
			// fate in this request.
			continue
		}
		t := &e.Tiers[a.TierIndex]
		prev, prevErr := t.Verdict, t.Err
		t.Verdict, t.Err = a.Verdict, a.Err
		switch {
		case a.Skip != NotSkipped && t.Outcome == TierFailed:
			// A retry refused after a failure (its rate limit, the time
			// left): the failure decided, the refusal is named with it.
			t.Skip, t.Verdict, t.Err = a.Skip, prev, errors.Join(prevErr, a.Err)
		case a.Skip != NotSkipped:
			t.Outcome, t.Skip = TierSkipped, a.Skip
		default:
			t.Outcome = TierFailed
			t.Attempts = a.N
		}
	}
	return e
}
