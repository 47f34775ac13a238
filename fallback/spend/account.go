package spend

import (
	"math"
	"sync"

	"github.com/tierguard/tierguard/fallback"
)

// account is one tenant's figures: its meters in the current periods and
// its totals. mu guards everything but tenant and allow.
type account struct {
	tenant string
	allow  Allowance
	// limit is allow's limit per meter, 0 for none; thresholds the
	// ledger's (Ledger.levels).
	limit      [numMeters]int64
	thresholds []float64

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
	// reached counts the soft thresholds reported in the period, per
	// meter; full is set once the limit's event was (use reached the
	// limit), refusing once the first refusal at the limit was reported.
	reached  [numMeters]uint8
	full     [numMeters]bool
	refusing [numMeters]bool
	// share is, per meter, what this process may spend while the store is
	// away: its share of what the fleet had left when the store was last
	// seen in the period, past what it had spent then (shareBase); -1
	// before that.
	share, shareBase [numMeters]int64
	// stored is, per meter, the most of the other processes' use the
	// store held at an exchange in the period; behind marks the meters
	// whose store now holds less (view).
	stored [numMeters]int64
	behind [numMeters]bool
	// admitted are the requests a strict process admitted without the
	// store (away, or too slow to answer), whose reservations the next
	// exchange makes.
	admitted []release
	// releases are the reservations of ended requests not yet released
	// through the StrictStore; queued is set while the account waits for
	// a prompt exchange (guarded by the syncer's relMu, not mu).
	releases []release
	queued   bool
	// next is, per meter, a use below which no threshold is left to
	// report (math.MaxInt64 when none is left in the period): the end of a
	// request compares its meters with it, and looks at the thresholds
	// only past it (levels).
	next [numMeters]int64
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
		a.blind[m], a.full[m], a.refusing[m], a.behind[m], a.stored[m] = false, false, false, false, 0
		a.share[m] = -1
		a.rearm(m)
	}
}

// softMargin is how far below a soft threshold next is set: more than
// the rounding of an int64 use to a float64 (at most 512 below 2^63), so
// that next never passes a use the float comparison of levels counts as
// reached.
const softMargin = 1024

// rearm sets next[m] from the thresholds left to report in the period;
// a.mu is held (or a is not shared yet).
func (a *account) rearm(m Meter) {
	limit, n := a.limit[m], int64(math.MaxInt64)
	levels := a.thresholds
	switch {
	case limit <= 0:
	case int(a.reached[m]) < len(levels)-1:
		if x := levels[a.reached[m]] * float64(limit); x < 0x1p63 {
			n = max(int64(x)-softMargin, 0)
		} else {
			n = math.MaxInt64 - softMargin
		}
	case !a.full[m]:
		n = limit
	}
	a.next[m] = n
}

// due reports whether the end of a request must look at the thresholds
// (levels): a meter reached next, or unpriced usage awaits a look; a.mu
// is held.
func (a *account) due() bool {
	return a.used(DailyTokens) >= a.next[DailyTokens] || a.used(DailyCost) >= a.next[DailyCost] ||
		a.used(MonthlyTokens) >= a.next[MonthlyTokens] || a.used(MonthlyCost) >= a.next[MonthlyCost] ||
		a.totals.Unpriced != a.unpricedSeen
}

// periodOf returns the id of the period a's meter m counts.
func (a *account) periodOf(m Meter) int64 {
	if m.Period() == Monthly {
		return a.month
	}
	return a.day
}

// crossings collects the events found under an account's lock, to emit
// once it is released: compact, so that the request's path zeroes little
// when there are none, and never dropped (past the inline ones they
// spill into a slice, which only a request that crosses many
// thresholds at once, or an exchange that finds many tenants crossing,
// allocates).
type crossings struct {
	n     int
	inl   [8]crossing
	spill []crossing
}

// crossing is one event of crossings: a threshold reached (kind
// ThresholdReached) or unpriced usage found (UnpricedUsage).
type crossing struct {
	a           *account
	cal         *calendar
	kind        EventKind
	meter       Meter
	threshold   float64
	used, limit int64
}

func (c *crossings) add(e crossing) {
	if c.n < len(c.inl) {
		c.inl[c.n] = e
	} else {
		c.spill = append(c.spill, e)
	}
	c.n++
}

func (e *crossing) event() Event {
	return Event{Kind: e.kind, Tenant: e.a.tenant, Meter: e.meter, Threshold: e.threshold, Used: e.used, Limit: e.limit, ResetAt: e.cal.end(e.meter.Period())}
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

// unpricedUsage is the UnpricedUsage event of a; a.mu is held.
func (a *account) unpricedUsage(cal *calendar) crossing {
	m := a.allow.costMeter()
	return crossing{a: a, cal: cal, kind: UnpricedUsage, meter: m, used: a.used(m), limit: a.allow.Limit(m)}
}

// emitUnpriced emits a's UnpricedUsage event, after noteUnpriced found
// one due; a.mu is not held.
func (l *Ledger) emitUnpriced(a *account, cal *calendar) {
	if fns := l.events.Load(); len(fns) > 0 {
		a.mu.Lock()
		e := a.unpricedUsage(cal)
		a.mu.Unlock()
		ev := e.event()
		for _, fn := range fns {
			fn(ev)
		}
	}
}

// levels checks the meters against the thresholds and records the newly
// reached ones in out: each soft threshold once per period, in order,
// and the limit once per period, when use reaches it (the first refusal
// at the limit is an event of its own: firstRefusal); a.mu is held.
func (a *account) levels(l *Ledger, cal *calendar, out *crossings) {
	if a.noteUnpriced(l) {
		out.add(a.unpricedUsage(cal))
	}
	soft := uint8(len(l.levels) - 1)
	for m := range numMeters {
		limit := a.limit[m]
		used := a.used(m)
		if limit <= 0 || used < a.next[m] {
			continue // nothing reached: next is below every threshold left
		}
		for a.reached[m] < soft && float64(used) >= l.levels[a.reached[m]]*float64(limit) {
			out.add(crossing{a: a, cal: cal, kind: ThresholdReached, meter: m, threshold: l.levels[a.reached[m]], used: used, limit: limit})
			a.reached[m]++
		}
		if !a.full[m] && used >= limit {
			a.full[m] = true
			out.add(crossing{a: a, cal: cal, kind: ThresholdReached, meter: m, threshold: 1, used: used, limit: limit})
		}
		a.rearm(m)
	}
}

// firstRefusal returns the FirstRefusal event of meter m when a refusal
// at its limit had not been reported in the period; used is where the
// meter stood (reservations included); a.mu is held.
func (a *account) firstRefusal(cal *calendar, m Meter, used int64) (crossing, bool) {
	if a.refusing[m] {
		return crossing{}, false
	}
	a.refusing[m] = true
	return crossing{a: a, cal: cal, kind: FirstRefusal, meter: m, threshold: 1, used: used, limit: a.allow.Limit(m)}, true
}

// view takes in the fleet's figures of a fresh exchange with the store
// for meter m of period id: fleet is the fleet's stored use, mine this
// process's part of it, reserved the estimates the fleet holds; pods
// share what is left while the store is away. The other processes' part
// never shrinks within a period (their figures are cumulative): a store
// that lost them (Redis restarted empty) holds less until each of them
// has sent its own again, and this process must not spend again what it
// saw them spend. a.mu is held.
//
// The share is what this process may spend past its part of the view
// (shareBase) while the store is away, and for a few exchanges after it
// is back: kept, not renewed, when frozen (the store away or settling),
// so that fresh views of a store that does not yet hold what the others
// spent on their shares do not hand out a new share each time.
//
// exchange is set for the views of the ledger's own exchanges, which
// follow one another: the store's part of the others then never shrinks
// but when the store lost it (a reservation's reply may be older than the
// exchange before it, and says nothing of that).
func (a *account) view(m Meter, id, fleet, mine, reserved int64, pods int, frozen, exchange bool) {
	if a.periodOf(m) != id {
		return // the period ended meanwhile
	}
	others := max(fleet-mine, a.fleet[m]-a.synced[m], 0)
	if exchange {
		// The store holds less of the others than it did: it restarted
		// empty, and they have not all sent their figures again. Until
		// they have, requests keep to the share too.
		a.behind[m] = fleet-mine < a.stored[m]
		a.stored[m] = max(a.stored[m], fleet-mine)
	}
	a.fleet[m], a.synced[m] = others+mine, mine
	if limit := a.limit[m]; limit > 0 && (!frozen && !a.behind[m] || a.share[m] < 0) {
		a.share[m] = max(limit-a.fleet[m]-max(reserved, 0), 0) / int64(max(pods, 1))
		a.shareBase[m] = mine
	}
}

// release is a reservation whose request ended, with the periods it was
// booked in.
type release struct {
	Reserved
	day, month int64
}

// emit reports the events of c. With a Claimer store, a threshold's
// events wait for the fleet's claim, which the store's next exchange
// makes: the process that wins it reports it.
func (l *Ledger) emit(c *crossings) {
	if c.n == 0 {
		return
	}
	fns := l.events.Load()
	if len(fns) == 0 {
		return
	}
	for i := range c.n {
		var ev Event
		if i < len(c.inl) {
			ev = c.inl[i].event()
		} else {
			ev = c.spill[i-len(c.inl)].event()
		}
		if l.claimer != nil && (ev.Kind == ThresholdReached || ev.Kind == FirstRefusal) && l.store.deferEvent(ev) {
			l.store.poke()
			continue
		}
		for _, fn := range fns {
			fn(ev)
		}
	}
}
