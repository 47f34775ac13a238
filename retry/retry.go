package retry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/internal/budget"
)

// Defaults applied to zero fields of Policy.
const (
	defaultMaxAttempts = 3
	defaultBaseDelay   = 200 * time.Millisecond
	defaultMaxDelay    = 10 * time.Second
)

// Jitter chooses how a backoff delay is randomised.
type Jitter uint8

// The backoff after failed attempt n (n ≥ 1) is
// min(MaxDelay, BaseDelay·2ⁿ⁻¹): BaseDelay before the second attempt,
// twice that before the third. The jitter spreads it.
const (
	// FullJitter waits rand(0, backoff): the spread that best breaks up
	// synchronised retries (AWS Architecture Blog, "Exponential Backoff And
	// Jitter"). The default.
	FullJitter Jitter = iota
	// EqualJitter waits half the backoff plus rand(0, half): never less than
	// half, still spread.
	EqualJitter
	// NoJitter waits exactly the backoff. For tests and reproductions;
	// synchronised clients retry together.
	NoJitter
)

// Policy is how one tier retries. The zero value retries twice (three
// attempts) with full jitter from 200ms, capped at 10s, without a shared
// budget, following the default class table. Every method applies the
// defaults to zero fields itself; WithDefaults shows them.
type Policy struct {
	// MaxAttempts counts every attempt, the first included. 0 means 3; 1
	// disables retrying; a negative value sets no limit: attempts go on
	// until one succeeds or fails in a way that is not retried, the
	// Budget runs out, or the next wait would not fit before the context's
	// deadline (without a deadline or a Budget, a tier that keeps failing
	// is retried for ever).
	MaxAttempts int
	// BaseDelay is the backoff before the second attempt; it doubles for
	// every further attempt. 0 means 200ms.
	BaseDelay time.Duration
	// MaxDelay caps the backoff (not a server's Retry-After). 0 means 10s.
	MaxDelay time.Duration
	// Jitter randomises the backoff; the zero value is FullJitter.
	Jitter Jitter
	// Budget, shared by every caller of the tier, throttles retries during
	// an outage. nil means no shared limit beyond MaxAttempts.
	Budget *Budget
	// OnAttempt is called after every failed attempt with the decision
	// taken, and after the successful one.
	OnAttempt func(Attempt)
}

// Attempt describes one attempt, for observability.
type Attempt struct {
	// N is the attempt's number, from 1.
	N int
	// Verdict is the attempt's classified outcome (class OK on success).
	Verdict classify.Verdict
	// Retry is set when another attempt follows after Wait.
	Retry bool
	// Wait is the delay chosen before the next attempt: the larger of the
	// server's retry-after and the jittered backoff. 0 when no attempt
	// follows.
	Wait time.Duration
	// Stop says why no attempt follows a failure.
	Stop StopReason
}

// StopReason says why retrying stopped.
type StopReason uint8

const (
	// NotStopped: another attempt follows (or the attempt succeeded).
	NotStopped StopReason = iota
	// NotRetryable: the class's action does not retry (a 400, a retired
	// model, a blocked prompt...).
	NotRetryable
	// AttemptsExhausted: MaxAttempts attempts were made.
	AttemptsExhausted
	// BudgetExhausted: the tier's shared retry budget is spent.
	BudgetExhausted
	// DeadlineTooClose: the wait plus a useful attempt would not fit before
	// the deadline, minus the reserve kept for later tiers. Decided before
	// sleeping, so the caller can fall back at once.
	DeadlineTooClose
	// ContextCanceled: the caller canceled the context, during an attempt
	// or the wait after it.
	ContextCanceled
	// CircuitOpen: the tier's circuit breaker changed state since the
	// request was admitted (it opened); retrying would call a tier the
	// breaker now refuses. Used by the fallback chain.
	CircuitOpen
	// DeadlineExceeded: the context's deadline passed during an attempt or
	// the wait after it.
	DeadlineExceeded
	// DelayTooLong: the server asked for a longer wait than the tier may
	// spend inside one request (fallback.Stage.MaxRetryWait) while a later
	// tier can take the request instead. Used by the fallback chain.
	DelayTooLong
)

// String names the reason.
func (r StopReason) String() string {
	switch r {
	case NotStopped:
		return "not stopped"
	case NotRetryable:
		return "not retryable"
	case AttemptsExhausted:
		return "attempts exhausted"
	case BudgetExhausted:
		return "retry budget exhausted"
	case DeadlineTooClose:
		return "deadline too close"
	case ContextCanceled:
		return "context canceled"
	case CircuitOpen:
		return "circuit opened"
	case DeadlineExceeded:
		return "deadline exceeded"
	case DelayTooLong:
		return "server delay too long"
	}
	return "invalid stop reason"
}

// Validate reports a policy that cannot work.
func (p Policy) Validate() error {
	var errs []error
	if p.BaseDelay < 0 {
		errs = append(errs, fmt.Errorf("BaseDelay must not be negative, got %v", p.BaseDelay))
	}
	if p.MaxDelay < 0 {
		errs = append(errs, fmt.Errorf("MaxDelay must not be negative, got %v", p.MaxDelay))
	}
	if p.Jitter > NoJitter {
		errs = append(errs, fmt.Errorf("unknown Jitter %d", p.Jitter))
	}
	q := p.WithDefaults()
	if q.BaseDelay > q.MaxDelay {
		errs = append(errs, fmt.Errorf("BaseDelay %v exceeds MaxDelay %v", q.BaseDelay, q.MaxDelay))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("retry policy: %w", err)
	}
	return nil
}

// WithDefaults returns p with its zero fields set to the defaults.
func (p Policy) WithDefaults() Policy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = defaultMaxAttempts
	}
	if p.BaseDelay == 0 {
		p.BaseDelay = defaultBaseDelay
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = defaultMaxDelay
	}
	return p
}

// Rules are what Do classifies and decides with besides the policy: which
// classes retry (Table) and how errors are classified (Classifier). A
// fallback chain has its own (Config.Table, Stage.Classifier); Rules are
// for Do outside a chain.
type Rules struct {
	// Table decides which classes are retried; nil means
	// classify.DefaultTable().
	Table *classify.Table
	// Classifier classifies errors; nil means classify.Classify.
	Classifier classify.Classifier
}

// defaultTable is shared by every Rules without a table; it is never
// written.
var defaultTable = classify.DefaultTable()

// Backoff returns the jittered delay after attempt n (n ≥ 1) failed, before
// attempt n+1: min(MaxDelay, BaseDelay·2ⁿ⁻¹), randomised by the policy's
// Jitter. n below 1 counts as 1.
func (p Policy) Backoff(n int) time.Duration {
	base, maxDelay := cmp.Or(p.BaseDelay, defaultBaseDelay), cmp.Or(p.MaxDelay, defaultMaxDelay)
	ceiling := base
	for i := 1; i < n && ceiling < maxDelay; i++ {
		if ceiling > maxDelay/2 {
			ceiling = maxDelay // doubling would pass the cap (or overflow)
			break
		}
		ceiling *= 2
	}
	ceiling = min(ceiling, maxDelay)
	if ceiling <= 0 {
		return 0
	}
	switch p.Jitter {
	case NoJitter:
		return ceiling
	case EqualJitter:
		half := ceiling / 2
		return half + upTo(ceiling-half)
	default:
		return upTo(ceiling)
	}
}

// upTo returns a uniform random duration in [0, d], d > 0.
func upTo(d time.Duration) time.Duration {
	if d == math.MaxInt64 {
		return rand.N(d)
	}
	return rand.N(d + 1)
}

// Decide chooses what follows failed attempt n (n ≥ 1) with verdict v:
// another attempt after Wait, or why not. retryable says whether v's class
// is retried at all (the caller's class table); fits says whether an
// attempt still fits after waiting a given time (before the deadline, less
// what later tiers need). It consumes a token of the shared Budget for a
// retryable failure. Do and the fallback chain both decide with it.
func (p Policy) Decide(n int, v classify.Verdict, retryable bool, fits func(wait time.Duration) bool) Attempt {
	a := Attempt{N: n, Verdict: v}
	if !retryable {
		a.Stop = NotRetryable
		return a
	}
	if p.Budget != nil {
		p.Budget.Failure()
	}
	switch maxAttempts := cmp.Or(p.MaxAttempts, defaultMaxAttempts); {
	case maxAttempts > 0 && n >= maxAttempts:
		a.Stop = AttemptsExhausted
	case p.Budget != nil && !p.Budget.Allow():
		a.Stop = BudgetExhausted
	default:
		wait := max(v.RetryAfter, p.Backoff(n))
		if !fits(wait) {
			a.Stop = DeadlineTooClose
		} else {
			a.Retry, a.Wait = true, wait
		}
	}
	return a
}

// Do calls fn until it succeeds or the policy stops, sleeping between
// attempts, and returns fn's last result. It never sleeps past ctx's
// deadline: a wait that would leave no time for an attempt is not started.
// A non-retryable error is returned as fn returned it; when retrying stops
// for any other reason the error is a *StoppedError wrapping the last one —
// when ctx ended (ContextCanceled, DeadlineExceeded), ctx's error too.
func Do[T any](ctx context.Context, p Policy, fn func(context.Context) (T, error)) (T, error) {
	return DoWith(ctx, p, Rules{}, fn)
}

// DoWith is Do with rules of its own: a class table and a classifier (an
// SDK adapter's, say).
func DoWith[T any](ctx context.Context, p Policy, rules Rules, fn func(context.Context) (T, error)) (T, error) {
	p = p.WithDefaults()
	table, classifier := rules.Table, rules.Classifier
	if table == nil {
		table = &defaultTable
	}
	if classifier == nil {
		classifier = classify.Func(classify.Classify)
	}
	b := budget.New(ctx, 0)
	fits := func(wait time.Duration) bool { return b.Fits(wait, budget.Try{}) }
	for n := 1; ; n++ {
		out, err := fn(ctx)
		if err == nil {
			if p.Budget != nil {
				p.Budget.Success()
			}
			if p.OnAttempt != nil {
				p.OnAttempt(Attempt{N: n})
			}
			return out, nil
		}
		v := classify.InContext(ctx, classifier.Classify(err))
		var a Attempt
		if cerr := ctx.Err(); cerr != nil {
			// The caller's context ended: not a verdict on the tier, and
			// no budget token is spent.
			a = Attempt{N: n, Verdict: v, Stop: contextStop(cerr)}
		} else {
			a = p.Decide(n, v, table.Action(v.Class).Retry, fits)
		}
		if p.OnAttempt != nil {
			p.OnAttempt(a)
		}
		var zero T
		if !a.Retry {
			switch a.Stop {
			case NotRetryable:
				return zero, err
			case ContextCanceled, DeadlineExceeded:
				return zero, &StoppedError{Attempts: n, Reason: a.Stop, Verdict: v, Last: err, ctxErr: ctx.Err()}
			}
			return zero, &StoppedError{Attempts: n, Reason: a.Stop, Verdict: v, Last: err}
		}
		if serr := budget.Sleep(ctx, a.Wait); serr != nil {
			return zero, &StoppedError{Attempts: n, Reason: contextStop(serr), Verdict: v, Last: err, ctxErr: serr}
		}
	}
}

// contextStop is the reason for a stop caused by a context's error.
func contextStop(err error) StopReason {
	if errors.Is(err, context.DeadlineExceeded) {
		return DeadlineExceeded
	}
	return ContextCanceled
}

// StoppedError reports that retrying stopped before success. errors.Is and
// errors.As reach the last attempt's error through it (and the context's
// error when the context ended).
type StoppedError struct {
	// Attempts is how many attempts were made.
	Attempts int
	// Reason says why no further attempt was made.
	Reason StopReason
	// Verdict is the last attempt's classified outcome.
	Verdict classify.Verdict
	// Last is the last attempt's error.
	Last   error
	ctxErr error
}

// Error says how many attempts were made, why it stopped, and the last error.
func (e *StoppedError) Error() string {
	s := "tierguard: retry stopped after " + strconv.Itoa(e.Attempts) + " attempt"
	if e.Attempts != 1 {
		s += "s"
	}
	return s + " (" + e.Reason.String() + "): " + e.Last.Error()
}

// Unwrap returns the last error and, if the context ended, its error.
func (e *StoppedError) Unwrap() []error {
	if e.ctxErr != nil {
		return []error{e.Last, e.ctxErr}
	}
	return []error{e.Last}
}
