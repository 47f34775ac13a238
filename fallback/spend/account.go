package spend

import (
	"sync"

	"github.com/tierguard/tierguard/fallback"
)

// account is one tenant's figures: its meters in the current periods and
// its totals. mu guards everything but tenant and allow.
type account struct {
	tenant string
	allow  Allowance

	mu sync.Mutex
	// day and month are the ids of the periods the meters count.
	day, month int64
	// mine is what this process committed in the period; fleet the
	// fleet's figure at the last exchange with the store, of which synced
	// was this process's part. Without a store fleet and synced stay 0.
	mine, fleet, synced [numMeters]int64
	// reserved are the estimates of requests in flight, booked in the
	// current period.
	reserved [numMeters]int64
	// reached counts the levels (thresholds, then the limit) reported in
	// the period, per meter.
	reached [numMeters]uint8
	// dirty is set when mine changed since the last exchange.
	dirty bool
	// unpricedSeen is totals.Unpriced when it was last looked at; blind
	// marks the cost meters that fail closed for the rest of their period
	// because an unpriced model was billed (Config.Unpriced).
	unpricedSeen int64
	blind        [numMeters]bool

	totals Totals
	models []modelTotals // by price entry, unpriced last
}

type modelTotals struct {
	calls int64
	usage fallback.Usage
	cost  Amount
}

// used is the meter's figure: the fleet's at the last exchange, with this
// process's own since.
func (a *account) used(m Meter) int64 { return a.fleet[m] - a.synced[m] + a.mine[m] }

// roll starts new periods when the calendar moved on.
func (a *account) roll(cal *calendar) {
	if a.day != cal.day {
		a.day = cal.day
		a.reset(DailyTokens, DailyCost)
	}
	if a.month != cal.month {
		a.month = cal.month
		a.reset(MonthlyTokens, MonthlyCost)
	}
}

func (a *account) reset(ms ...Meter) {
	for _, m := range ms {
		a.mine[m], a.fleet[m], a.synced[m], a.reserved[m], a.reached[m] = 0, 0, 0, 0, 0
		a.blind[m] = false
	}
}

// periodOf returns the id of the period a's meter m counts.
func (a *account) periodOf(m Meter) int64 {
	if m.Period() == Monthly {
		return a.month
	}
	return a.day
}

// crossings collects the threshold events to emit once a.mu is released.
type crossings struct {
	n  int
	ev [8]Event
}

func (c *crossings) add(e Event) {
	if c.n < len(c.ev) {
		c.ev[c.n] = e
		c.n++
	}
}

// noteUnpriced looks for attempts billed without a price since it last
// looked, and reports whether a tenant with a cost limit had some: then
// an UnpricedUsage event is due (unpricedEvent), and with
// FailClosedUnpriced the cost meters fail closed until their periods
// end; a.mu is held.
func (a *account) noteUnpriced(l *Ledger) bool {
	return a.totals.Unpriced != a.unpricedSeen && a.foundUnpriced(l)
}

// foundUnpriced is noteUnpriced once it found new unpriced attempts.
func (a *account) foundUnpriced(l *Ledger) bool {
	a.unpricedSeen = a.totals.Unpriced
	if !a.allow.costLimited() {
		return false
	}
	if l.unpriced == FailClosedUnpriced {
		for _, m := range [...]Meter{DailyCost, MonthlyCost} {
			if a.allow.Limit(m) > 0 {
				a.blind[m] = true
			}
		}
	}
	return true
}

// unpricedEvent is the UnpricedUsage event of a; a.mu is held.
func (a *account) unpricedEvent(cal *calendar) Event {
	m := a.allow.costMeter()
	return Event{Kind: UnpricedUsage, Tenant: a.tenant, Meter: m, Used: a.used(m), Limit: a.allow.Limit(m), ResetAt: cal.end(m.Period())}
}

// emitUnpriced emits a's UnpricedUsage event, after noteUnpriced found
// one due; a.mu is not held.
func (l *Ledger) emitUnpriced(a *account, cal *calendar) {
	if fns := l.events.Load(); len(fns) > 0 {
		a.mu.Lock()
		e := a.unpricedEvent(cal)
		a.mu.Unlock()
		for _, fn := range fns {
			fn(e)
		}
	}
}

// levels checks the meters against the thresholds and records the newly
// reached ones in out; a.mu is held.
func (a *account) levels(l *Ledger, cal *calendar, out *crossings) {
	if a.noteUnpriced(l) {
		out.add(a.unpricedEvent(cal))
	}
	for m := range numMeters {
		limit := a.allow.Limit(m)
		if limit <= 0 || int(a.reached[m]) >= len(l.levels) {
			continue
		}
		used := a.used(m)
		for int(a.reached[m]) < len(l.levels) && float64(used) >= l.levels[a.reached[m]]*float64(limit) {
			out.add(Event{Kind: ThresholdReached, Tenant: a.tenant, Meter: m, Threshold: l.levels[a.reached[m]], Used: used, Limit: limit, ResetAt: cal.end(m.Period())})
			a.reached[m]++
		}
	}
}

func (l *Ledger) emit(c *crossings) {
	if c.n == 0 {
		return
	}
	fns := l.events.Load()
	for i := range c.n {
		for _, fn := range fns {
			fn(c.ev[i])
		}
	}
}
