package bulkhead

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/classify"
)

// Adaptive configures a bulkhead whose limit follows what the tier
// behind it can take (Config.Adaptive). The limit starts at Config.Max
// and moves, one window of reported calls at a time, by this rule:
//
//   - Overload: when at least one call in twenty of the window (and at
//     least one) was an overload signal — a 5xx, a 529, a per-try timeout,
//     a connection reset (class Transient), a 429 that names no delay, a
//     call cut by the request's deadline — the limit is multiplied by
//     Backoff. A 429 that names its delay is a quota speaking, not a busy
//     server: it counts for nothing, as does any local refusal, a 4xx or
//     a cancel. An answer a validator rejected is a latency sample: the
//     server was fine.
//   - Slowing: otherwise the window's mean latency is compared to the
//     baseline, the lowest window mean seen, drifting up by 1/32 of the
//     gap each window so that a model that got slower for good is learnt
//     again (the first window of answers only sets it). Above Tolerance ×
//     baseline the limit falls in proportion (never by more than
//     Backoff); below the midpoint between baseline and that mark it
//     rises by its square root, if it binds (calls were refused or queued
//     since the last window, or the slots held are within that square
//     root of it); in between, it holds.
//   - Memory of the edge: a window of overload also notes where the tier
//     refused, the higher of the limit in force then and in the window
//     before it (a 503 may answer a call let in under the older limit),
//     and the lowest such limit is kept. While it is, the limit stays at
//     most Backoff² times it: one Backoff takes the limit off the edge,
//     the second keeps it off. A provider's latency climbs steepest just
//     below its capacity: without the memory a limit climbs back there
//     after every backoff, as AIMD's sawtooth does, and every answer at
//     the top of the tooth is as slow as the provider gets. TCP CUBIC
//     (RFC 9438) keeps its W_max for the same reason.
//   - Recovery: once the calls let in before the refusal drained, the
//     latency under the memory is learnt over a few windows. The memory
//     goes when answers come faster than that, by a one-sided CUSUM of
//     each window's speed-up less 5 % reaching 0.35 (one window 40 %
//     faster, or a run of smaller speed-ups; one window a little faster
//     is noise); the limit then returns to Backoff times where it stood
//     before the refusals. After 128 windows of answers without that,
//     about 64 × limit calls, the memory lapses instead, and the limit
//     probes the tier's edge again.
//
// The limit never leaves [Floor, Ceiling]. A window is Window calls, or
// half the limit (at least 8, at most 256). The rule needs no clock:
// only the calls reported to Record, which are counted in steps of
// 64 µs.
//
// An adaptive limit is per process: pods sharing Redis each learn their
// own, from their own calls, and together they may offer the provider up
// to the sum of their limits.
type Adaptive struct {
	// Floor and Ceiling bound the limit; 1 <= Floor <= Config.Max <=
	// Ceiling.
	Floor, Ceiling int
	// Window is the number of calls between two adjustments; 0 means half
	// the limit, at least 8 and at most 256.
	Window int
	// Tolerance is how much slower than its baseline the tier may answer
	// before the limit falls; 0 means 1.5. Larger than 1.
	Tolerance float64
	// Backoff multiplies the limit on overload; 0 means 0.9. Between 0.5
	// and 1, exclusive of 1.
	Backoff float64
}

const (
	defaultTolerance = 1.5
	defaultBackoff   = 0.9
	minWindow        = 8
	maxWindow        = 256
	// latencyUnit is the step latencies are summed in, and maxSample the
	// longest single latency counted, so that a window's sum fits in the
	// 32 bits it has (a window of 256 calls of 17 minutes each).
	latencyUnit = 64 * time.Microsecond
	maxSample   = 1<<24 - 1
	// The window word: calls in its low 16 bits, overload signals in the
	// next 16, the latencies' sum above.
	callOne     = 1
	dropOne     = 1 << 16
	sumShift    = 32
	countMask   = 1<<16 - 1
	baseDrift   = 1.0 / 32
	dropsPerOne = 20
	// rememberWindows is how long the edge is remembered: 128 windows of
	// half the limit, some 64 × limit calls, about twice Netflix Vegas's
	// interval between probes of its baseline (30 to 60 × limit).
	rememberWindows = 128
	// Recovery is a CUSUM of relative speed-ups: each window adds how much
	// faster than the latency under the memory it came, less cusumSlack,
	// and cusumAlarm of it says the capacity came back. The latency under
	// the memory is learnt as the mean of learnWindows windows, once the
	// calls let in above the new limit drained: after minSettle windows,
	// and on while they get faster, maxSettle at most. Then it follows
	// the answers by slowDrift while the CUSUM is at zero.
	cusumSlack   = 0.05
	cusumAlarm   = 0.35
	learnWindows = 8
	slowDrift    = 1.0 / 8
	minSettle    = 4
	maxSettle    = 16
)

// checkAdaptive adds to errs what is wrong with cfg.Adaptive and
// cfg.Reserve.
func (cfg *Config) checkAdaptive(errs []error) []error {
	// Each message starts with the field it is about, as in check.
	invalid := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !(cfg.Reserve >= 0 && cfg.Reserve <= maxReserve) {
		invalid("Reserve must be between 0 and %v, got %v", maxReserve, cfg.Reserve)
	}
	a := cfg.Adaptive
	if a == nil {
		return errs
	}
	if a.Floor < 1 || a.Floor > cfg.Max || a.Ceiling < cfg.Max || a.Ceiling > maxBulkheadMax {
		invalid("Adaptive needs 1 <= Floor <= Max <= Ceiling <= %d, got Floor %d, Max %d, Ceiling %d", maxBulkheadMax, a.Floor, cfg.Max, a.Ceiling)
	}
	if a.Window < 0 || a.Window > countMask/2 {
		invalid("Adaptive.Window must be between 0 and %d, got %d", countMask/2, a.Window)
	}
	if a.Tolerance != 0 && !(a.Tolerance > 1) {
		invalid("Adaptive.Tolerance must be above 1, got %v", a.Tolerance)
	}
	if a.Backoff != 0 && !(a.Backoff >= 0.5 && a.Backoff < 1) {
		invalid("Adaptive.Backoff must be in [0.5, 1), got %v", a.Backoff)
	}
	return errs
}

// tuning is the state of an adaptive bulkhead or one with priorities,
// made when the first window closes or the first call is refused.
type tuning struct {
	// rejectedAt counts a priority bulkhead's refusals by priority, in
	// the order of Priorities.
	rejectedAt [len(Priorities)]atomic.Uint64

	mu sync.Mutex
	// limit is the limit before rounding; baseline, in latencyUnits, 0
	// until the first window of answers; previous, the limit in force in
	// the window before the last. In float32, as refusals is in 32 bits,
	// so that the state stays one 64-byte object per member of a Group.
	limit, baseline, previous float32
	// refusals is extra.rejected (plus the queue's length) at the last
	// window's close, wrapping: more since, and the limit binds.
	refusals uint32
	// edge is the memory of where the tier refused, made by the first
	// overload window and dropped when it goes.
	edge *edge
}

// edge is the memory of the limit at which the tier refused (see
// Adaptive).
type edge struct {
	// refused is the lowest limit at which the tier refused; before, the
	// limit when the refusals began, to return to on recovery.
	refused, before float64
	// slow is the mean latency of answers under the memory, faster the
	// CUSUM of speed-ups on it.
	slow, faster float64
	// remember counts the windows of answers the memory has left.
	remember int
	// learnt counts the windows the latency under the memory was learnt
	// from, once the calls let in before it drained.
	learnt int
}

// Sample is what a call's verdict says of the tier's capacity, as Record
// takes it.
type Sample uint8

const (
	// Ignored calls say nothing about the tier's capacity: a 4xx, a 429
	// naming its delay, a cancel, a local refusal.
	Ignored Sample = iota
	// Latency calls were served: their latency is a sample.
	Latency
	// Overload calls were turned away or cut for want of capacity.
	Overload
)

// SampleOf says what a call that ended with v tells an adaptive limit.
func SampleOf(v classify.Verdict) Sample {
	switch v.Class {
	case classify.OK, classify.InvalidOutput:
		return Latency
	case classify.Transient, classify.DeadlineExhausted:
		return Overload
	case classify.RateLimited:
		if v.RetryAfter > 0 {
			return Ignored
		}
		return Overload
	}
	return Ignored
}

// Record reports one upstream call made under a slot of b: its latency,
// and what its verdict says of the tier's capacity (SampleOf). An
// adaptive bulkhead learns its limit from these; on a fixed one Record
// does nothing. A fallback chain reports its stages' calls when
// throttle.Feed observes it; a caller holding slots of its own reports
// them here, once per upstream call, retries included. Safe for
// concurrent use; it allocates nothing, and costs one atomic add, on the
// line Acquire and Release write, but for the report that closes a
// window.
func (b *Bulkhead) Record(latency time.Duration, s Sample) {
	a := b.cfg.Adaptive
	if a == nil {
		return
	}
	var add uint64
	switch s {
	case Latency:
		u := uint64(max(latency, 0) / latencyUnit)
		add = callOne | min(u, maxSample)<<sumShift
	case Overload:
		add = callOne | dropOne
	default:
		return
	}
	w := b.win.Add(add)
	if w&countMask < uint64(a.window(b.max.Load())) || !b.closing.CompareAndSwap(false, true) {
		return
	}
	b.adapt(b.tuned(), a)
}

// Limit returns the bulkhead's limit now: Config.Max for a fixed one.
func (b *Bulkhead) Limit() int { return int(b.max.Load()) }

// window is the number of calls a window holds at limit.
func (a *Adaptive) window(limit uint64) int {
	if a.Window > 0 {
		return a.Window
	}
	return min(max(int(limit/2), minWindow), maxWindow)
}

// tuned returns b's tuning state, making it on first use.
func (b *Bulkhead) tuned() *tuning {
	if t := b.tuning.Load(); t != nil {
		return t
	}
	t := &tuning{limit: float32(b.cfg.Max)}
	if b.tuning.CompareAndSwap(nil, t) {
		return t
	}
	return b.tuning.Load()
}

// adapt closes the window and moves the limit; the caller holds
// b.closing, which it lets go.
func (b *Bulkhead) adapt(st *tuning, a *Adaptive) {
	w := b.win.Swap(0)
	st.mu.Lock()
	var refusals uint64
	if x := b.extra.Load(); x != nil {
		refusals = x.rejected.Load() + uint64(x.queued.Load())
	}
	binding := uint32(refusals) != st.refusals
	st.refusals = uint32(refusals)
	held := float64(b.state.Load() & inFlightMask)
	old := b.max.Load()
	limit := float64(st.limit)
	next := st.next(a, w, binding || held >= limit-math.Sqrt(limit))
	b.max.Store(next)
	st.mu.Unlock()
	b.closing.Store(false)
	if next > old {
		// More room: the refusing hint is stale, and waiters may go.
		f := b.flags.Load()
		if f&refusingFlag != 0 {
			b.flags.And(^refusingFlag)
		}
		if f>>waitingShift != 0 {
			b.handOff()
		}
	}
}

// next applies the rule to window w and returns the limit to enforce.
// binding says whether the limit held calls back.
func (st *tuning) next(a *Adaptive, w uint64, binding bool) uint64 {
	calls, drops := w&countMask, w>>16&countMask
	backoff, tolerance := a.Backoff, a.Tolerance
	if backoff == 0 {
		backoff = defaultBackoff
	}
	if tolerance == 0 {
		tolerance = defaultTolerance
	}
	l, previous := float64(st.limit), float64(st.previous)
	st.previous = st.limit
	switch served := calls - drops; {
	case drops > 0 && drops*dropsPerOne >= calls:
		e := st.edge
		if e == nil {
			e = &edge{before: l}
			st.edge = e
		}
		// A window's refusals may answer calls let in under the limit
		// before it: the higher of the two is where the tier refused.
		if at := max(l, previous); e.refused == 0 || at < e.refused {
			e.refused = at
		}
		e.remember, e.slow, e.faster, e.learnt = rememberWindows, 0, 0, 0
		l *= backoff
	case served > 0:
		mean := float64(w>>sumShift) / float64(served)
		mean = max(mean, 1) // below one unit, as good as one
		baseline := float64(st.baseline)
		if baseline == 0 {
			// The first window of answers only sets the baseline.
			st.baseline = float32(mean)
			break
		}
		ratio := mean / baseline
		switch e := st.edge; {
		case e != nil && e.recovered(mean):
			// The capacity came back: so does the limit it had, less one
			// Backoff, for it may not be all back.
			l = max(l, e.before*backoff)
			st.edge = nil
		case ratio > tolerance:
			l = min(l-1, l*max(backoff, tolerance/ratio))
		case ratio <= (1+tolerance)/2 && binding:
			l += math.Sqrt(l)
		}
		if e := st.edge; e != nil {
			if e.remember--; e.remember <= 0 {
				st.edge = nil
			} else {
				// One Backoff took the limit off the edge; the second
				// keeps it off, where the provider is still quick.
				l = min(l, backoff*backoff*e.refused)
			}
		}
		if mean < baseline {
			baseline = mean
		} else {
			baseline += (mean - baseline) * baseDrift
		}
		st.baseline = float32(baseline)
	}
	l = min(max(l, float64(a.Floor)), float64(a.Ceiling))
	st.limit = float32(l)
	return uint64(l)
}

// recovered learns from a window of answers of mean latency mean under
// the memory, and says whether the capacity came back.
func (e *edge) recovered(mean float64) bool {
	switch settling := rememberWindows - e.remember; {
	case e.slow == 0:
		e.slow = mean
	case e.learnt == 0 && settling < maxSettle && (settling < minSettle || mean < (1-cusumSlack)*e.slow):
		// The first windows after a refusal still hold calls let in
		// above the new limit, and get faster as they drain.
		e.slow = mean
	case e.learnt < learnWindows:
		// Then the latency under the memory is the mean of a few
		// windows.
		e.slow = (e.slow*float64(e.learnt) + mean) / float64(e.learnt+1)
		e.learnt++
	default:
		// A one-sided CUSUM of how much faster than slow answers come:
		// one fast window may be noise, a run of them is a change.
		e.faster = max(0, e.faster+1-mean/e.slow-cusumSlack)
		if e.faster == 0 {
			// No sign of a change: the reference follows the latency.
			// With a sign, it holds, or it would learn the recovery it is
			// there to see.
			e.slow += (mean - e.slow) * slowDrift
		}
	}
	return e.faster >= cusumAlarm
}
