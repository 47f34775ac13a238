package spend

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/classify"
)

// Period is the span a limit counts over; it resets at the boundary, in
// Config.Location.
type Period uint8

const (
	// Daily limits reset at midnight.
	Daily Period = iota
	// Monthly limits reset at midnight on the first of the month.
	Monthly
)

// String returns "daily" or "monthly".
func (p Period) String() string {
	if p == Monthly {
		return "monthly"
	}
	return "daily"
}

// Meter is one of a tenant's four limits.
type Meter uint8

const (
	// DailyTokens counts the tokens billed today, in and out.
	DailyTokens Meter = iota
	// DailyCost counts today's cost.
	DailyCost
	// MonthlyTokens counts the tokens billed this month.
	MonthlyTokens
	// MonthlyCost counts this month's cost.
	MonthlyCost
	numMeters
)

// Meters lists the meters, in order.
func Meters() []Meter { return []Meter{DailyTokens, DailyCost, MonthlyTokens, MonthlyCost} }

var meterNames = [...]string{DailyTokens: "daily_tokens", DailyCost: "daily_cost", MonthlyTokens: "monthly_tokens", MonthlyCost: "monthly_cost"}

// String returns "daily_tokens", "daily_cost", "monthly_tokens" or
// "monthly_cost".
func (m Meter) String() string {
	if m < numMeters {
		return meterNames[m]
	}
	return "invalid_meter"
}

// Period returns the period the meter counts over.
func (m Meter) Period() Period {
	if m >= MonthlyTokens {
		return Monthly
	}
	return Daily
}

// Cost reports whether the meter counts money (its figures are Amounts)
// rather than tokens.
func (m Meter) Cost() bool { return m == DailyCost || m == MonthlyCost }

// phrase is how an error names the meter.
func (m Meter) phrase() string {
	return strings.ReplaceAll(m.String(), "_", " ")
}

// Allowance is a tenant's limits. A zero field sets no limit.
type Allowance struct {
	// DailyTokens and MonthlyTokens cap the tokens billed (in and out,
	// every attempt included) per day and per month.
	DailyTokens, MonthlyTokens int64
	// DailyCost and MonthlyCost cap the cost per day and per month.
	DailyCost, MonthlyCost Amount
	// FailClosed refuses the tenant's requests (ErrUnavailable) when the
	// shared Store has not answered for Config.MaxStaleness. The default,
	// false, keeps admitting while the store is away, within this
	// process's share of what the tenant had left when the store was last
	// seen (see PodCounter), reconciled with the fleet's figures when the
	// store is back.
	FailClosed bool
}

// Limit returns the limit on m, 0 when none; cost limits in nano-units.
func (a Allowance) Limit(m Meter) int64 {
	switch m {
	case DailyTokens:
		return a.DailyTokens
	case DailyCost:
		return int64(a.DailyCost)
	case MonthlyTokens:
		return a.MonthlyTokens
	case MonthlyCost:
		return int64(a.MonthlyCost)
	}
	return 0
}

// limited reports whether the allowance sets any limit.
func (a Allowance) limited() bool {
	return a.DailyTokens > 0 || a.MonthlyTokens > 0 || a.DailyCost > 0 || a.MonthlyCost > 0
}

// costLimited reports whether the allowance limits cost.
func (a Allowance) costLimited() bool { return a.DailyCost > 0 || a.MonthlyCost > 0 }

// costMeter is the cost meter an unpriced model is refused under: the
// daily one when it is limited, else the monthly one.
func (a Allowance) costMeter() Meter {
	if a.DailyCost > 0 {
		return DailyCost
	}
	return MonthlyCost
}

func (a Allowance) check(name string) []error {
	var errs []error
	if a.DailyTokens < 0 || a.MonthlyTokens < 0 || a.DailyCost < 0 || a.MonthlyCost < 0 {
		errs = append(errs, errors.New(name+": limits must not be negative"))
	}
	return errs
}

// Refusal says why Admit refused a request.
type Refusal uint8

const (
	// LimitReached: the request would take a meter past its limit.
	LimitReached Refusal = iota
	// Shed: a Low priority request when a meter is at or past the shed
	// threshold.
	Shed
	// Unavailable: the tenant's limits fail closed and the shared store
	// has not answered for too long.
	Unavailable
	// UnknownTenant: the tenant has no allowance and Config.RefuseUnknown
	// is set.
	UnknownTenant
	// UnpricedModel: the tenant has a cost limit and the request's
	// estimate covers a model the price table does not price
	// (Estimate.Unpriced), or, with Config.Unpriced FailClosedUnpriced,
	// the tenant was billed for such a model earlier in the period: what
	// it spent is no longer known.
	UnpricedModel
)

var refusalNames = [...]string{LimitReached: "limit_reached", Shed: "shed", Unavailable: "unavailable", UnknownTenant: "unknown_tenant", UnpricedModel: "unpriced_model"}

// String returns "limit_reached", "shed", "unavailable",
// "unknown_tenant" or "unpriced_model".
func (r Refusal) String() string {
	if int(r) < len(refusalNames) {
		return refusalNames[r]
	}
	return "invalid_refusal"
}

// Sentinels an *LimitError matches with errors.Is, one per Refusal.
var (
	ErrLimitReached  = errors.New("spend: limit reached")
	ErrShed          = errors.New("spend: low-priority request shed")
	ErrUnavailable   = errors.New("spend: shared limits unavailable")
	ErrUnknownTenant = errors.New("spend: unknown tenant")
	ErrUnpriced      = errors.New("spend: model without a price under a cost limit")
)

// LimitError is why Admit refused a request: which limit, how far it is
// used, and when it resets. Its text names no tenant unless
// Config.TenantInErrors is set.
type LimitError struct {
	// Refusal says why.
	Refusal Refusal
	// Meter is the limit concerned (LimitReached, Shed, UnpricedModel:
	// the cost limit).
	Meter Meter
	// Used and Limit are the meter's figures when the request was
	// refused, the request's estimate not included; nano-units for a cost
	// meter.
	Used, Limit int64
	// ResetAt is when the meter's period ends (LimitReached, Shed, and
	// UnpricedModel when the limit fails closed until then).
	ResetAt time.Time
	// Threshold is the share of the limit the refusal enforces: 1 at the
	// limit (LimitReached), Config.ShedAt for a shed request, 0 for the
	// refusals that are not about a threshold.
	Threshold float64
	// Tenant is the tenant refused. It is in the error's text only when
	// Config.TenantInErrors is set.
	Tenant string

	showTenant bool
}

// Error says which limit refused the request and when it resets.
func (e *LimitError) Error() string {
	var b strings.Builder
	b.WriteString("spend: ")
	switch e.Refusal {
	case LimitReached:
		b.WriteString(e.Meter.phrase() + " limit reached")
	case Shed:
		b.WriteString("low-priority request shed at " + strconv.Itoa(int(e.Threshold*100+0.5)) + "% of the " + e.Meter.phrase() + " limit")
	case Unavailable:
		b.WriteString("shared limits unavailable, failing closed")
	case UnknownTenant:
		b.WriteString("unknown tenant")
	case UnpricedModel:
		if e.ResetAt.IsZero() {
			b.WriteString("the estimate covers a model without a price; refused under the " + e.Meter.phrase() + " limit")
		} else {
			b.WriteString(e.Meter.phrase() + " limit failing closed: a model without a price was billed")
		}
	default:
		b.WriteString("request refused")
	}
	if e.showTenant {
		b.WriteString(" for tenant " + strconv.Quote(e.Tenant))
	}
	if !e.ResetAt.IsZero() {
		b.WriteString(" (resets " + e.ResetAt.Format(time.RFC3339) + ")")
	}
	return b.String()
}

// Is matches the sentinel of the refusal.
func (e *LimitError) Is(target error) bool {
	switch target {
	case ErrLimitReached:
		return e.Refusal == LimitReached
	case ErrShed:
		return e.Refusal == Shed
	case ErrUnavailable:
		return e.Refusal == Unavailable
	case ErrUnknownTenant:
		return e.Refusal == UnknownTenant
	case ErrUnpriced:
		return e.Refusal == UnpricedModel
	}
	return false
}

// Verdict classifies the refusal, for a caller that maps errors to actions
// (a job queue snoozing until the reset): a limit or a shed is
// QuotaExhausted with a retry-after until the period resets, an
// unavailable store Transient, an unknown tenant Auth (a configuration
// error), an unpriced model InvalidRequest (a configuration error: price
// the model) or, when the cost limit fails closed until the period ends,
// QuotaExhausted with a retry-after until then. The reason names no
// tenant.
func (e *LimitError) Verdict() classify.Verdict {
	switch e.Refusal {
	case Unavailable:
		return classify.Verdict{Class: classify.Transient, Reason: "shared limits unavailable"}
	case UnknownTenant:
		return classify.Verdict{Class: classify.Auth, Reason: "unknown tenant"}
	case UnpricedModel:
		if e.ResetAt.IsZero() {
			return classify.Verdict{Class: classify.InvalidRequest, Reason: "model without a price under a tenant cost limit"}
		}
		return classify.Verdict{Class: classify.QuotaExhausted, Reason: "tenant " + e.Meter.phrase() + " limit failing closed after an unpriced model", RetryAfter: max(time.Until(e.ResetAt), 0)}
	}
	v := classify.Verdict{Class: classify.QuotaExhausted, Reason: "tenant " + e.Meter.phrase() + " limit reached"}
	if e.Refusal == Shed {
		v.Reason = "low-priority request shed near the tenant " + e.Meter.phrase() + " limit"
	}
	if !e.ResetAt.IsZero() {
		v.RetryAfter = max(time.Until(e.ResetAt), 0)
	}
	return v
}

// calendar is the current day and month in the ledger's location: their
// ids (20261201, 202612) and when each ends. It is recomputed only when
// the day ends.
type calendar struct {
	day, month       int64
	dayEnd, monthEnd time.Time
	// dayStartNs and dayEndNs bound the day in Unix nanoseconds, for a
	// cheap comparison.
	dayStartNs, dayEndNs int64
}

func newCalendar(now time.Time, loc *time.Location) *calendar {
	t := now.In(loc)
	y, m, d := t.Date()
	dayEnd := time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	return &calendar{
		day: int64(y)*10000 + int64(m)*100 + int64(d), month: int64(y)*100 + int64(m),
		dayEnd: dayEnd, monthEnd: time.Date(y, m+1, 1, 0, 0, 0, 0, loc),
		dayStartNs: time.Date(y, m, d, 0, 0, 0, 0, loc).UnixNano(), dayEndNs: dayEnd.UnixNano(),
	}
}

// id returns the id of the period p in c.
func (c *calendar) id(p Period) int64 {
	if p == Monthly {
		return c.month
	}
	return c.day
}

// end returns when the period p of c ends.
func (c *calendar) end(p Period) time.Time {
	if p == Monthly {
		return c.monthEnd
	}
	return c.dayEnd
}

// clock holds the calendar of the present. A timer moves it on at each
// midnight, so that admitting a request reads no clock (a clock read
// costs more than the rest of the admission on some virtual machines).
// Anything that reads the time anyway (a sync with the store, Use)
// moves it on too, should the timer be late.
type clock struct {
	loc *time.Location
	cur atomic.Pointer[calendar]

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
}

func newClock(loc *time.Location) *clock {
	k := &clock{loc: loc}
	k.refresh()
	return k
}

// refresh computes the calendar from the time and arms the timer for the
// end of the day. A timer fired early (the wall clock was stepped back)
// re-arms for what remains.
func (k *clock) refresh() {
	now := time.Now()
	c := k.now(now)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return
	}
	k.timer = time.AfterFunc(max(c.dayEnd.Sub(now), time.Millisecond), k.refresh)
}

func (k *clock) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped = true
	if k.timer != nil {
		k.timer.Stop()
	}
}

// calendar returns the current calendar, without reading the clock.
func (k *clock) calendar() *calendar { return k.cur.Load() }

// now returns the calendar of now, moving the current one on if needed.
func (k *clock) now(now time.Time) *calendar {
	c := k.cur.Load()
	if ns := now.UnixNano(); c != nil && ns < c.dayEndNs && ns >= c.dayStartNs {
		return c
	}
	c = newCalendar(now, k.loc)
	k.cur.Store(c)
	return c
}

// The four meters are indexed by Meter in the [4]Usage arrays of Use.
var _ [4]struct{} = [numMeters]struct{}{}
