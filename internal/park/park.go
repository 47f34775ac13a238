// Package park takes a tier, or one member of a pool, out of rotation for
// a while: after an exhausted quota, a retired model, refused credentials,
// or a server's "come back in N seconds". The reasons are the caller's own
// small numbers; one kind of stay, the cool-down (CoolDown), ends with a
// single probe instead of a burst of every waiting caller.
package park

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/internal/modelid"
)

// None is the reason Check reports while nothing is parked. Callers number
// their own reasons from 1.
const None uint8 = 0

// coolingBit marks a stay set by CoolDown in Lot.why; ruleShift places
// the caller's rule for the cool-down above it.
const (
	coolingBit = 1 << 8
	ruleShift  = 16
)

// ProbeHold is how long the one call let through at the end of a
// cool-down holds the others off, at most: it ends the hold itself when it
// returns (EndProbe), or another cool-down extends the stay.
const ProbeHold = time.Minute

// Lot is one parking place. Its zero value is empty; it is safe for
// concurrent use. All times are nanoseconds since an epoch the owner
// keeps (see Since), so that reading a Lot costs one atomic load while it
// is empty.
type Lot struct {
	// until is when the stay ends, in Since units (0: not parked); why is
	// its reason, with coolingBit for a cool-down.
	until atomic.Int64
	why   atomic.Uint32
	// hold is the until of the probe let through at the end of a
	// cool-down (see Enter), which a new cool-down replaces.
	hold atomic.Int64
}

// Since is the instant now in a Lot's units: nanoseconds since epoch, plus
// one so that 0 means "not parked".
func Since(epoch time.Time) int64 { return int64(time.Since(epoch)) + 1 }

// Check reports the reason the lot is occupied now, or None. It reads the
// clock only while something is parked. An ended cool-down is left for
// Enter to hand over to its probe.
func (l *Lot) Check(epoch time.Time) uint8 {
	if until := l.until.Load(); until != 0 {
		why := l.why.Load()
		if Since(epoch) < until {
			return uint8(why)
		}
		if why&coolingBit == 0 {
			l.until.CompareAndSwap(until, 0)
		}
	}
	return None
}

// Enter says whether a call may go now, as Check does, with one
// difference: when a cool-down has just ended, one caller gets through and
// the others still see its reason until that caller returns — the server
// hears one request per delay, not a burst. probe is then the hold that
// caller ends with EndProbe; 0 otherwise.
func (l *Lot) Enter(epoch time.Time) (why uint8, probe int64) {
	until := l.until.Load()
	if until == 0 {
		return None, 0
	}
	now := Since(epoch)
	w := l.why.Load()
	if now < until {
		return uint8(w), 0
	}
	if w&coolingBit == 0 {
		l.until.CompareAndSwap(until, 0)
		return None, 0
	}
	hold := now + int64(ProbeHold)
	l.hold.Store(hold)
	if !l.until.CompareAndSwap(until, hold) {
		// Another caller took the probe, or the lot was taken again.
		return l.Check(epoch), 0
	}
	return None, hold
}

// EndProbe ends the hold of a cool-down's probe, unless the lot was taken
// again meanwhile.
func (l *Lot) EndProbe(probe int64) {
	if probe != 0 {
		l.until.CompareAndSwap(probe, 0)
	}
}

// Park occupies the lot for d for why, replacing any stay.
func (l *Lot) Park(epoch time.Time, why uint8, d time.Duration) {
	l.why.Store(uint32(why))
	l.until.Store(Since(epoch) + int64(d))
}

// ParkOnce parks for d for why, unless the lot is taken for why already,
// and reports whether it did: of concurrent failures that park it, one is
// told it was first.
func (l *Lot) ParkOnce(epoch time.Time, why uint8, d time.Duration) bool {
	for {
		u := l.until.Load()
		now := Since(epoch)
		if u != 0 && now < u && uint8(l.why.Load()) == why {
			return false
		}
		if l.until.CompareAndSwap(u, now+int64(d)) {
			l.why.Store(uint32(why))
			return true
		}
	}
}

// CoolDown occupies the lot for d for why, unless it is taken longer
// already (a quota's stay outlasts a server's retry delay), and reports
// whether it did. rule is the caller's name for the evidence that asked
// for it, which Rule reports until the stay ends. When it ends, Enter lets
// one probe through first.
func (l *Lot) CoolDown(epoch time.Time, why, rule uint8, d time.Duration) bool {
	cooled, _ := l.CoolDownFresh(epoch, why, rule, d)
	return cooled
}

// CoolDownFresh is CoolDown, and also reports whether the stay is a new
// one: the lot was free (or its stay had ended, or it held the probe at
// the end of one) rather than a live cool-down it lengthened. Of calls
// racing to cool a free lot, one finds it fresh.
func (l *Lot) CoolDownFresh(epoch time.Time, why, rule uint8, d time.Duration) (cooled, fresh bool) {
	for {
		u := l.until.Load()
		now := Since(epoch)
		next := now + int64(d)
		held := u == l.hold.Load()
		if u >= next && !held {
			return false, false
		}
		live := u > now && !held && l.why.Load()&coolingBit != 0
		if l.until.CompareAndSwap(u, next) {
			l.why.Store(uint32(why) | coolingBit | uint32(rule)<<ruleShift)
			return true, !live
		}
	}
}

// Rule reports the rule of the cool-down that occupies the lot, or 0 when
// it is free or occupied for another kind of stay.
func (l *Lot) Rule(epoch time.Time) uint8 {
	until, w := l.until.Load(), l.why.Load()
	if until == 0 || w&coolingBit == 0 || Since(epoch) >= until {
		return 0
	}
	return uint8(w >> ruleShift)
}

// Until reports when the current stay ends and why, or the zero time and
// None when the lot is free.
func (l *Lot) Until(epoch time.Time) (time.Time, uint8) {
	until := l.until.Load()
	if until == 0 || Since(epoch) >= until {
		return time.Time{}, None
	}
	return epoch.Add(time.Duration(until - 1)), uint8(l.why.Load())
}

// Occupied reports whether anything is parked, without reading the clock:
// a stay that has ended but was not yet cleared counts.
func (l *Lot) Occupied() bool { return l.until.Load() != 0 }

// Clear frees the lot at once.
func (l *Lot) Clear() { l.until.Store(0) }

// Tally weighs the evidence of a tier's 429s: how many came within a
// window, and what share of the tier's calls they were. It only counts
// while a 429 is recent — the window opens with the first one — so that a
// tier that answers costs one atomic load per call. Counts are
// approximate under concurrency (a window that opens races with the calls
// that end meanwhile), which a threshold of several 429s absorbs. Its
// zero value is empty.
type Tally struct {
	// start is when the window opened, in Since units; 0 when no 429 is
	// recent.
	start   atomic.Int64
	calls   atomic.Int64
	limited atomic.Int64
}

// Call counts a call that did not end in a 429, while a window is open.
func (t *Tally) Call(epoch time.Time, window time.Duration) {
	s := t.start.Load()
	if s == 0 {
		return
	}
	if Since(epoch)-s >= int64(window) {
		t.start.CompareAndSwap(s, 0)
		return
	}
	t.calls.Add(1)
}

// Limited counts a 429 and reports whether the window now holds at least
// count of them, and at least share of its calls. A 429 after the window
// ended opens a new one.
func (t *Tally) Limited(epoch time.Time, window time.Duration, count int, share float64) bool {
	now := Since(epoch)
	s := t.start.Load()
	if (s == 0 || now-s >= int64(window)) && t.start.CompareAndSwap(s, now) {
		t.calls.Store(0)
		t.limited.Store(0)
	}
	c, n := t.calls.Add(1), t.limited.Add(1)
	return n >= int64(count) && float64(n) >= share*float64(c)
}

// The rules by which Judge takes a tier out; the fallback package's
// CoolRule numbers them the same.
const (
	// ByQuota: the 429 named a per-minute quota.
	ByQuota uint8 = 1 + iota
	// ByStorm: enough 429s in the window, and a large enough share of
	// its calls.
	ByStorm
	// ByProbe: the call let through at the end of a cool-down got a 429
	// again.
	ByProbe
)

// Judge counts a 429 that carries a server delay and says by which rule
// it takes the tier out for every caller, or 0 when it is the request's
// own business: perMinute is set when it named a per-minute quota, probe
// when the call was the probe at the end of a cool-down. A rule that
// fires closes the window (Reset).
func (t *Tally) Judge(epoch time.Time, perMinute, probe bool, window time.Duration, count int, share float64) uint8 {
	var rule uint8
	switch {
	case perMinute:
		rule = ByQuota
	case probe:
		rule = ByProbe
	case t.Limited(epoch, window, count, share):
		rule = ByStorm
	default:
		return 0
	}
	t.Reset()
	return rule
}

// Reset closes the window: the evidence that took the tier out is spent,
// and after its cool-down the tier is judged afresh.
func (t *Tally) Reset() { t.start.Store(0) }

// Models is a set of model ids parked each until its own time — the models
// that answered 404, until a recheck. Ids compare in modelid's normal
// form. The request path reads an immutable map with one atomic load, and
// nothing else while the set is empty. Its zero value is empty.
type Models struct {
	m  atomic.Pointer[map[string]int64]
	mu sync.Mutex
}

// Has reports whether model is parked now.
func (r *Models) Has(model string, epoch time.Time) bool {
	m := r.m.Load()
	if m == nil {
		return false
	}
	until, ok := (*m)[modelid.Normalize(model)]
	return ok && Since(epoch) < until
}

// Mark parks model for d, dropping entries whose time has passed.
func (r *Models) Mark(model string, epoch time.Time, d time.Duration) {
	model = modelid.Normalize(model)
	now := Since(epoch)
	r.mu.Lock()
	defer r.mu.Unlock()
	next := map[string]int64{model: now + int64(d)}
	if old := r.m.Load(); old != nil {
		for k, until := range *old {
			if k != model && until > now {
				next[k] = until
			}
		}
	}
	r.m.Store(&next)
}

// Clear forgets every parked model.
func (r *Models) Clear() {
	r.mu.Lock()
	r.m.Store(nil)
	r.mu.Unlock()
}
