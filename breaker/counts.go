package breaker

import (
	"github.com/tierguard/tierguard/internal/striped"
)

// Counts is a snapshot of a breaker's figures in its current state, for
// dashboards and tests. Reading it takes no lock and allocates nothing;
// figures updated concurrently may be a call apart.
type Counts struct {
	// State is the breaker's state and Generation its number.
	State      State
	Generation uint64

	// Calls counts the counted outcomes (successes and failures; ignored
	// ones are not counted) of the current state, Failures and SlowCalls
	// those that failed or were slow: closed, over the rolling window
	// (kept only when FailureRatio or SlowCallDuration is set; without a
	// window, a closed breaker counts only ConsecutiveFailures); half-open,
	// the probes of this period that succeeded (a counted probe failure
	// ends the period).
	Calls, Failures, SlowCalls int64
	// FailureRatio and SlowCallRatio are Failures and SlowCalls over
	// Calls, as the thresholds see them; 0 when Calls is 0.
	FailureRatio, SlowCallRatio float64
	// ConsecutiveFailures is the current run of counted failures while
	// closed.
	ConsecutiveFailures int64
	// Rejected counts the calls refused in the current state: open, or
	// half-open with every probe slot held. An OpenError that returned an
	// error counts, as the call it stood for was skipped.
	Rejected int64
	// ProbesInFlight is the number of probe slots held, by probes of this
	// half-open period or of earlier ones that have not reported yet.
	ProbesInFlight int
}

// Counts returns the breaker's figures in its current state.
func (b *Breaker) Counts() Counts {
	ph := b.cur.Load()
	c := Counts{
		State:          ph.state,
		Generation:     ph.gen,
		Rejected:       max(b.rejected()-ph.rejectedBefore, 0),
		ProbesInFlight: b.probesInFlight(),
	}
	switch ph.state {
	case Closed:
		c.ConsecutiveFailures = ph.failures.Load()
		if ph.win != nil {
			c.Calls, c.Failures, c.SlowCalls = ph.win.sum(b.now())
		}
	case HalfOpen:
		c.Calls, c.SlowCalls = ph.successes.Load(), ph.slows.Load()
	}
	if c.Calls > 0 {
		c.FailureRatio = float64(c.Failures) / float64(c.Calls)
		c.SlowCallRatio = float64(c.SlowCalls) / float64(c.Calls)
	}
	return c
}

// reject counts one refused call. During an outage every request takes
// the reject path at once, so the count is striped; its stripes are
// allocated on the first refusal, as most breakers never refuse anything.
func (b *Breaker) reject() {
	r := b.rejects.Load()
	if r == nil {
		b.rejects.CompareAndSwap(nil, new(striped.Counter))
		r = b.rejects.Load()
	}
	r.Add(1)
}

// rejected returns the number of calls refused since the breaker was made.
func (b *Breaker) rejected() int64 {
	r := b.rejects.Load()
	if r == nil {
		return 0
	}
	return int64(r.Load())
}
