package spend

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/internal/subscribers"
)

// Defaults applied to zero fields of Config.
const (
	defaultMaxTenants     = 10_000
	defaultShedAt         = 0.9
	defaultSyncInterval   = 500 * time.Millisecond
	defaultReserveTimeout = 250 * time.Millisecond
)

// defaultThresholds are the soft thresholds reported by default; the hard
// limit (1) is always reported.
var defaultThresholds = []float64{0.7, 0.9}

// Config configures a Ledger. The zero value is a working ledger that
// counts tokens, prices nothing and limits nothing.
type Config struct {
	// Prices prices every attempt's usage; nil counts tokens only (every
	// attempt is Unpriced). Required with any cost limit
	// (Allowance.DailyCost, MonthlyCost): without prices one would never
	// fill.
	Prices *Prices

	// Tenants are the allowances of the tenants you know.
	Tenants map[string]Allowance
	// Default is the allowance of every other tenant; the zero value sets
	// no limit.
	Default Allowance
	// RefuseUnknown refuses tenants absent from Tenants (ErrUnknownTenant)
	// instead of giving them Default.
	RefuseUnknown bool
	// MaxTenants bounds the tenants tracked beyond those of Tenants, so
	// that tenant ids made up per request cost bounded memory. Past it,
	// further tenants share one account (limited by Default). 0 means
	// 10000.
	MaxTenants int

	// Thresholds are the shares of a limit at which an event reports it
	// filling (ThresholdReached), in (0, 1); the limit itself (1) is always
	// reported. nil means 0.7 and 0.9.
	Thresholds []float64
	// ShedAt is the share of a limit from which Low priority requests are
	// shed (ErrShed). 0 means 0.9; a value of 1 or more sheds them only at
	// the limit, like any other request.
	ShedAt float64
	// Location sets the day and month boundaries; nil means UTC. Every
	// process sharing limits through a Store must use the same.
	Location *time.Location
	// TenantInErrors puts the tenant id in the text of a *LimitError. Off
	// by default: tenant ids stay out of logs that quote errors.
	TenantInErrors bool
	// Unpriced says what a tenant's cost limit does about a model the
	// price table has no price for; see UnpricedPolicy. The zero value is
	// FailClosedUnpriced.
	Unpriced UnpricedPolicy

	// Store, when set, shares the limits' figures with the other processes
	// that use the same store: see Store. Requests never wait on it,
	// unless it is a strict StrictStore: then Admit waits for one
	// reservation, at most ReserveTimeout.
	Store Store
	// SyncInterval is how often the figures are exchanged with the Store.
	// 0 means 500ms.
	SyncInterval time.Duration
	// SyncTimeout bounds each exchange. 0 means SyncInterval.
	SyncTimeout time.Duration
	// MaxStaleness is how long without a successful exchange before the
	// limits of a FailClosed allowance refuse requests. 0 means ten
	// SyncIntervals.
	MaxStaleness time.Duration
	// ReserveTimeout bounds how long Admit waits on a StrictStore to
	// reserve a request's estimate; past it, the request is decided as
	// while the store is away, and so are the next ones until an exchange
	// succeeds. 0 means 250ms.
	ReserveTimeout time.Duration
	// OnStoreError, when set, receives every failed exchange (and failed
	// reservation), on the goroutine where it failed. It must not block.
	OnStoreError func(error)
}

// UnpricedPolicy says what a tenant's cost limit (Allowance.DailyCost,
// MonthlyCost) does about a model the price table has no price for,
// whose calls would otherwise cost nothing against the limit. Model ids
// are compared in normal form (see Price.Model), so only a model the
// table really lacks is unpriced: a version it does not list, a model
// nobody priced. Tenants without a cost limit are not concerned: their
// unpriced calls count their tokens, and Totals.Unpriced counts them.
//
// Under either policy, Admit refuses a request whose estimate covers an
// unpriced model (its Cost is UnknownCost, as Prices.Estimate and the
// router's estimates give it): a *LimitError with Refusal UnpricedModel
// (ErrUnpriced) and a Refused event. They differ on
// calls billed for an unpriced model anyway — the estimate did not name
// the model (written by hand), or the tier picked another: the ledger
// notices them when it next looks at the tenant (an admission, the end
// of a request, an exchange with the Store, Use), and emits an
// UnpricedUsage event each time it finds new ones.
type UnpricedPolicy uint8

const (
	// FailClosedUnpriced, the default: once an unpriced call is billed
	// to a tenant with a cost limit, what the tenant spent is no longer
	// known, so its cost limits fail closed: every request of the tenant
	// is refused (UnpricedModel, with ResetAt) until the limit's period
	// ends — the day, or the month for a monthly limit — or the process
	// restarts with a table that prices the model.
	FailClosedUnpriced UnpricedPolicy = iota
	// RefuseUnpriced refuses only the requests whose estimate covers an
	// unpriced model; a call billed anyway is reported (UnpricedUsage)
	// and counts its tokens, not its unknown cost, so the tenant may
	// spend past its cost limit by that cost.
	RefuseUnpriced
)

var unpricedNames = [...]string{FailClosedUnpriced: "fail_closed", RefuseUnpriced: "refuse"}

// String returns "fail_closed" or "refuse".
func (p UnpricedPolicy) String() string {
	if int(p) < len(unpricedNames) {
		return unpricedNames[p]
	}
	return "invalid_unpriced_policy"
}

// Ledger records what requests cost and keeps tenants within their
// limits: the ingress guard in front of the chains, and the cost ledger
// behind them.
//
// A request is admitted with Admit (checked against its tenant's limits,
// its estimate reserved) or Begin (recorded only); the Ticket it gets is
// the request's context. Chains attached with Attach report every attempt
// to the ledger, which prices its usage, attributes the cost of failed
// attempts and fallbacks to the class that caused them, and at the end of
// the request replaces the estimate with what the request really used.
//
// A Ledger is safe for concurrent use. Close it when it has a Store.
type Ledger struct {
	prices        *Prices
	tenants       map[string]*account
	def           Allowance
	refuseUnknown bool
	maxTenants    int64
	levels        []float64 // thresholds, then 1
	shedAt        float64
	showTenant    bool
	unpriced      UnpricedPolicy
	clock         *clock

	others   sync.Map // tenant -> *account, for tenants not in Config.Tenants
	nothers  atomic.Int64
	overflow *account
	mu       sync.Mutex // creating accounts

	records subscribers.List[func(*Record)]
	// recordPool holds the Records handed to ObserveRecords' functions.
	recordPool sync.Pool
	events     subscribers.List[func(Event)]
	embeddings subscribers.List[func(*Embedding)]

	untracked atomic.Int64
	// tripped maps a model to the class of its last failed attempt, for
	// the cause of skips past its open breaker.
	tripped  *sync.Map
	ntripped atomic.Int64

	store *syncer
	// strict is the store when it reserves each request (StrictStore);
	// claimer when the fleet claims its threshold events (Claimer).
	strict         StrictStore
	reserveTimeout time.Duration
	reservations   atomic.Uint64
	claimer        Claimer

	closeOnce  sync.Once
	closeError error
}

// New returns a ledger, or an error naming every invalid field.
func New(cfg Config) (*Ledger, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for name, a := range cfg.Tenants {
		errs = append(errs, a.check(fmt.Sprintf("Tenants[%q]", name))...)
	}
	errs = append(errs, cfg.Default.check("Default")...)
	if cfg.Prices == nil {
		// A cost limit without prices could never fill.
		if cfg.Default.costLimited() {
			bad("Prices is required with a cost limit: Default.%s", costFields(cfg.Default))
		}
		n := 0
		for _, a := range cfg.Tenants {
			if a.costLimited() {
				n++
			}
		}
		if n > 0 {
			bad("Prices is required with a cost limit: Tenants[…].DailyCost or .MonthlyCost (%d tenants)", n)
		}
	}
	if cfg.MaxTenants < 0 {
		bad("MaxTenants must not be negative, got %d", cfg.MaxTenants)
	}
	levels := defaultThresholds
	if cfg.Thresholds != nil {
		levels = slices.Clone(cfg.Thresholds)
		slices.Sort(levels)
		for _, v := range levels {
			if math.IsNaN(v) || v <= 0 || v >= 1 {
				bad("Thresholds must lie in (0, 1), got %v", v)
			}
		}
		levels = slices.Compact(levels)
	}
	levels = append(slices.Clone(levels), 1)
	if cfg.Unpriced > RefuseUnpriced {
		bad("Unpriced: unknown policy %d", cfg.Unpriced)
	}
	if math.IsNaN(cfg.ShedAt) || cfg.ShedAt < 0 {
		bad("ShedAt must not be negative, got %v", cfg.ShedAt)
	}
	if cfg.SyncInterval < 0 || cfg.SyncTimeout < 0 || cfg.MaxStaleness < 0 || cfg.ReserveTimeout < 0 {
		bad("SyncInterval, SyncTimeout, MaxStaleness and ReserveTimeout must not be negative")
	}
	if cfg.Store == nil && (cfg.SyncInterval != 0 || cfg.SyncTimeout != 0 || cfg.MaxStaleness != 0 || cfg.ReserveTimeout != 0) {
		bad("SyncInterval, SyncTimeout, MaxStaleness and ReserveTimeout need a Store")
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("spend: invalid config: %w", err)
	}
	l := &Ledger{
		prices: cfg.Prices, tenants: make(map[string]*account, len(cfg.Tenants)), def: cfg.Default,
		refuseUnknown: cfg.RefuseUnknown, maxTenants: int64(cmp.Or(cfg.MaxTenants, defaultMaxTenants)),
		levels: levels, shedAt: cmp.Or(cfg.ShedAt, defaultShedAt), showTenant: cfg.TenantInErrors,
		unpriced: cfg.Unpriced,
	}
	loc := cfg.Location
	if loc == nil {
		loc = time.UTC
	}
	l.clock = newClock(loc)
	for name, a := range cfg.Tenants {
		l.tenants[name] = l.newAccount(name, a)
	}
	l.overflow = l.newAccount("", cfg.Default)
	l.tripped = &sync.Map{}
	if cfg.Store != nil {
		interval := cmp.Or(cfg.SyncInterval, defaultSyncInterval)
		if ss, ok := cfg.Store.(StrictStore); ok && ss.Strict() {
			l.strict, l.reserveTimeout = ss, cmp.Or(cfg.ReserveTimeout, defaultReserveTimeout)
		}
		l.claimer, _ = cfg.Store.(Claimer)
		l.store = startSyncer(l, cfg.Store, interval, cmp.Or(cfg.SyncTimeout, interval), cmp.Or(cfg.MaxStaleness, 10*interval), cfg.OnStoreError)
	}
	return l, nil
}

// costFields names the cost limits a sets.
func costFields(a Allowance) string {
	switch {
	case a.DailyCost > 0 && a.MonthlyCost > 0:
		return "DailyCost and .MonthlyCost"
	case a.DailyCost > 0:
		return "DailyCost"
	}
	return "MonthlyCost"
}

// Close stops the ledger's timer (it moves the periods on at midnight) and
// the exchanges with the Store, after one last exchange bounded by
// SyncTimeout, whose error it returns. Requests are still admitted and
// recorded afterwards, on this process's figures alone, with periods that
// move on only when something reads the time (Use, Totals). Close is
// idempotent.
func (l *Ledger) Close() error {
	l.closeOnce.Do(func() {
		l.clock.stop()
		if l.store != nil {
			l.closeError = l.store.stop()
		}
	})
	return l.closeError
}

// Prices returns the ledger's price table (nil when it has none).
func (l *Ledger) Prices() *Prices { return l.prices }

// account finds the tenant's account, making one if needed; nil when the
// tenant is refused.
func (l *Ledger) account(tenant string) *account {
	if a, ok := l.tenants[tenant]; ok {
		return a
	}
	if l.refuseUnknown {
		return nil
	}
	if a, ok := l.others.Load(tenant); ok {
		return a.(*account)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if a, ok := l.others.Load(tenant); ok {
		return a.(*account)
	}
	if l.nothers.Load() >= l.maxTenants {
		return l.overflow
	}
	a := l.newAccount(tenant, l.def)
	l.others.Store(tenant, a)
	l.nothers.Add(1)
	return a
}

func (l *Ledger) newAccount(tenant string, a Allowance) *account {
	n := 1
	if l.prices != nil {
		n += len(l.prices.entries)
	}
	acct := &account{tenant: tenant, allow: a, models: make([]modelTotals, n), thresholds: l.levels}
	for m := range numMeters {
		acct.limit[m], acct.share[m] = a.Limit(m), -1
		acct.rearm(m)
	}
	return acct
}

// maxTripped bounds the models whose last failure is remembered.
const maxTripped = 1024

// lastFailure returns the cell holding the class of model's last failed
// attempt (0 for none).
func (l *Ledger) lastFailure(model string) *atomic.Int32 {
	if v, ok := l.tripped.Load(model); ok {
		return v.(*atomic.Int32)
	}
	if l.ntripped.Load() >= maxTripped {
		return &atomic.Int32{}
	}
	v, loaded := l.tripped.LoadOrStore(model, &atomic.Int32{})
	if !loaded {
		l.ntripped.Add(1)
	}
	return v.(*atomic.Int32)
}

// Estimate is what a request is expected to use, reserved against its
// tenant's limits until its real usage replaces it.
type Estimate struct {
	// Tokens is the expected number of billed tokens, in and out.
	Tokens int64
	// Cost is the expected cost: UnknownCost when the estimate covers a
	// model the price table has no price for.
	Cost Amount
}

// UnknownCost is the Cost of an estimate that covers a model the price
// table has no price for (Prices.Estimate, and the router's estimates
// when any candidate is one): an unknown cost, taken as unbounded. Admit
// refuses such a request to a tenant with a cost limit (Refusal
// UnpricedModel, see UnpricedPolicy); for any other tenant it reserves
// no cost. A sentinel rather than a flag beside Cost: an Estimate is
// copied into every Ticket and Record, and a third word costs the
// ledger's path about 13 ns per request (BenchmarkLedger).
const UnknownCost Amount = math.MaxInt64

// Unpriced reports whether the estimate covers a model the price table
// has no price for (its Cost is UnknownCost).
func (e Estimate) Unpriced() bool { return e.Cost == UnknownCost }

// of returns the estimate's figure for meter m.
func (e Estimate) of(m Meter) int64 {
	if m.Cost() {
		return int64(e.Cost)
	}
	return e.Tokens
}

// Admit checks a request against its tenant's limits and, if it may go
// on, reserves its estimate and returns its Ticket: pass the Ticket as the
// context of the chain's Do. A refused request gets a *LimitError saying
// which limit and when it resets; a request that would take a meter past
// its limit is refused, and one marked Low is shed from ShedAt of a
// limit. With a Store, Admit decides on the figures of the last exchange
// plus this process's own since, and never waits, unless the store is a
// strict StrictStore: then it reserves the estimate through the store
// first, one round trip bounded by Config.ReserveTimeout, and is refused
// when the fleet's figures leave no room for it. ctx bounds that wait
// too: a caller that gives up gets ctx's error.
func (l *Ledger) Admit(ctx context.Context, req Request, est Estimate) (*Ticket, error) {
	t := new(Ticket)
	if err := l.AdmitInto(t, ctx, req, est); err != nil {
		return nil, err
	}
	return t, nil
}

// AdmitInto is Admit into a Ticket the caller provides, so that a server
// that keeps its per-request state in a pool allocates nothing per
// request. Reuse a Ticket only after its End, and only when nothing can
// still hold it as a context: not for chains with an idempotency key
// (Config.Key) or AbandonAfter, whose executions may outlive the request,
// nor with a cache whose semantic layer embeds written answers (the cache
// embeds them later, on its own goroutine, with the request's context,
// and RecordEmbedding reads the Ticket's tenant then).
func (l *Ledger) AdmitInto(t *Ticket, ctx context.Context, req Request, est Estimate) error {
	est.Tokens, est.Cost = max(est.Tokens, 0), max(est.Cost, 0)
	a := l.account(req.Tenant)
	if a == nil {
		l.overflow.mu.Lock()
		l.overflow.totals.Refused++
		l.overflow.mu.Unlock()
		err := &LimitError{Refusal: UnknownTenant, Tenant: req.Tenant, showTenant: l.showTenant}
		l.emitRefusal(req, err)
		return err
	}
	cal := l.clock.calendar()
	if est == (Estimate{}) && !a.allow.limited() {
		// Nothing to check, nothing to reserve: the account's lock is
		// left alone (its periods roll, and its unpriced usage is looked
		// at, at the request's end; the latter matters only under a cost
		// limit).
		t.init(ctx, l, a, req, est, cal)
		return nil
	}
	var lerr *LimitError
	a.mu.Lock()
	a.roll(cal)
	unpriced := a.noteUnpriced(l)
	if a.allow.limited() {
		switch {
		case a.allow.FailClosed && l.store != nil && l.store.stale(time.Now()):
			lerr = &LimitError{Refusal: Unavailable}
		case a.allow.costLimited() && (est.Cost == UnknownCost || a.blind[DailyCost] || a.blind[MonthlyCost]):
			lerr = l.refuseUnpriced(a, cal, est)
		default:
			lerr = l.check(a, cal, req.Priority, est, l.store != nil && l.store.byShare())
		}
	}
	if lerr != nil {
		return l.refuse(a, cal, req, lerr, unpriced)
	}
	if est.Cost == UnknownCost {
		est.Cost = 0 // admitted without a cost limit: nothing to reserve
	}
	a.book(est, 1)
	var res Reserved
	strict := l.strict != nil && a.allow.limited() && !l.store.stopped.Load()
	if strict && l.store.failed.Load() {
		// Admitted on the share while the store is away: the fleet
		// hears of it at the next exchange that succeeds.
		res = l.admitWithout(a, cal, est)
		strict = false
	}
	a.mu.Unlock()
	if res.ID != 0 {
		l.store.releasing(a)
	}
	if unpriced {
		l.emitUnpriced(a, cal)
	}
	if strict {
		var err error
		if res, err = l.reserve(ctx, a, cal, req, est); err != nil {
			return err
		}
	}
	t.init(ctx, l, a, req, est, cal)
	t.res = res
	return nil
}

// admitWithout numbers a request a strict ledger admitted without the
// store, and queues its reservation (admittedWithout); a.mu is held.
func (l *Ledger) admitWithout(a *account, cal *calendar, est Estimate) Reserved {
	res := Reserved{ID: l.reservations.Add(1), Tokens: est.Tokens, Cost: est.Cost}
	a.admittedWithout(res, cal)
	return res
}

// admittedWithout queues the reservation of a request admitted without
// the store for the next exchange, which makes it whatever the fleet's
// figures (the request runs already). Past maxPendingReleases the store
// is away for long: the exchanges carry the figures, not the estimates
// of requests still in flight. a.mu is held.
func (a *account) admittedWithout(res Reserved, cal *calendar) {
	if len(a.admitted) < maxPendingReleases {
		a.admitted = append(a.admitted, release{Reserved: res, day: cal.day, month: cal.month})
	}
}

// book adds (sign 1) or takes back (-1) a request's estimate in the
// account's reservations; a.mu is held.
func (a *account) book(est Estimate, sign int64) {
	for m := range numMeters {
		a.reserved[m] += sign * est.of(m)
	}
}

// refuse counts and reports a refusal; a.mu is held, and released.
func (l *Ledger) refuse(a *account, cal *calendar, req Request, lerr *LimitError, unpriced bool) error {
	var first crossing
	refusing := false
	if lerr.Refusal == Shed {
		a.totals.Shed++
	} else {
		a.totals.Refused++
		if lerr.Refusal == LimitReached {
			first, refusing = a.firstRefusal(cal, lerr.Meter, lerr.Used)
		}
	}
	a.mu.Unlock()
	if unpriced {
		l.emitUnpriced(a, cal)
	}
	if refusing {
		var c crossings
		c.add(first)
		l.emit(&c)
	}
	lerr.Tenant, lerr.showTenant = req.Tenant, l.showTenant
	l.emitRefusal(req, lerr)
	return lerr
}

// reserve makes the fleet's reservation of a request admitted on this
// process's figures, whose estimate is booked in a: the StrictStore
// grants it (its Reserved is returned), refuses it (the estimate is taken
// back and the *LimitError returned), or cannot decide in time. Then the
// request is decided again on this process's share of what the fleet
// had left, and if admitted, its reservation waits for the next exchange
// under the same number — a reservation the store made after all is not
// made twice. One late reply is no outage: the store counts as away
// after maxLateReserves in a row, or at once on any other error.
func (l *Ledger) reserve(ctx context.Context, a *account, cal *calendar, req Request, est Estimate) (Reserved, error) {
	r := Reservation{Tenant: req.Tenant, Day: cal.day, Month: cal.month, DayEnd: cal.end(Daily), MonthEnd: cal.end(Monthly),
		Reserved: Reserved{ID: l.reservations.Add(1), Tokens: est.Tokens, Cost: est.Cost}, Limits: a.limit}
	a.mu.Lock()
	for m := range numMeters {
		r.Floor[m] = a.used(Meter(m))
	}
	a.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, l.reserveTimeout)
	err := l.strict.Reserve(rctx, &r)
	cancel()
	if err == nil {
		l.store.lateReserves.Store(0)
	} else if ctx.Err() == nil {
		late := errors.Is(err, context.DeadlineExceeded) && l.store.lateReserves.Add(1) < maxLateReserves
		if !late {
			l.store.fail(fmt.Errorf("spend: reserving: %w", err))
		}
	}
	pods := l.store.pods()
	frozen := l.store.byShare()
	a.mu.Lock()
	if a.day != cal.day || a.month != cal.month {
		// The period ended while the store decided: the new one holds
		// neither the estimate nor the reservation; admit the request as
		// the old period did.
		a.mu.Unlock()
		if err == nil && r.Granted {
			return r.Reserved, nil
		}
		return Reserved{}, nil
	}
	switch {
	case err != nil && ctx.Err() != nil:
		// The caller gave up: the request will not run. The store may
		// have made the reservation: release it.
		a.book(est, -1)
		a.releases = append(a.releases, release{r.Reserved, cal.day, cal.month})
		a.mu.Unlock()
		return Reserved{}, ctx.Err()
	case err != nil:
		a.book(est, -1)
		if lerr := l.check(a, cal, req.Priority, est, true); lerr != nil {
			a.releases = append(a.releases, release{r.Reserved, cal.day, cal.month})
			return Reserved{}, l.refuse(a, cal, req, lerr, false)
		}
		a.book(est, 1)
		a.admittedWithout(r.Reserved, cal)
		a.mu.Unlock()
		l.store.releasing(a)
		return r.Reserved, nil
	}
	for _, m := range Meters() {
		id := r.Day
		if m.Period() == Monthly {
			id = r.Month
		}
		a.view(m, id, r.Fleet[m], r.Mine[m], r.FleetReserved[m], pods, frozen, false)
	}
	if r.Granted {
		if frozen || a.behind != [numMeters]bool{} {
			// Settling after the store was away: the share holds too.
			a.book(est, -1)
			if lerr := l.check(a, cal, req.Priority, est, true); lerr != nil {
				a.releases = append(a.releases, release{r.Reserved, cal.day, cal.month})
				return Reserved{}, l.refuse(a, cal, req, lerr, false)
			}
			a.book(est, 1)
		}
		a.mu.Unlock()
		return r.Reserved, nil
	}
	a.book(est, -1)
	m := r.Meter
	lerr := &LimitError{Refusal: LimitReached, Meter: m, Used: max(r.Fleet[m], r.Floor[m]) + r.FleetReserved[m], Limit: a.limit[m], ResetAt: cal.end(m.Period()), Threshold: 1}
	return Reserved{}, l.refuse(a, cal, req, lerr, false)
}

// maxLateReserves is how many reservations in a row may time out before
// the store counts as away.
const maxLateReserves = 3

// refuseUnpriced is the refusal of a request under a cost limit that
// cannot be kept: its estimate covers an unpriced model, or the limit
// fails closed after one was billed; a.mu is held.
func (l *Ledger) refuseUnpriced(a *account, cal *calendar, est Estimate) *LimitError {
	m := a.allow.costMeter()
	if est.Cost == UnknownCost {
		return &LimitError{Refusal: UnpricedModel, Meter: m, Used: a.used(m), Limit: a.allow.Limit(m)}
	}
	if !a.blind[m] {
		m = MonthlyCost
	}
	return &LimitError{Refusal: UnpricedModel, Meter: m, Used: a.used(m), Limit: a.allow.Limit(m), ResetAt: cal.end(m.Period())}
}

// check decides on a request's admission; a.mu is held. With byShare
// (the store away or settling after it was, or a reservation it did not
// answer in time), a meter whose share is known also keeps what this
// process spent past the view the share was taken from, with its
// requests in flight and this one, within that share.
func (l *Ledger) check(a *account, cal *calendar, p Priority, est Estimate, byShare bool) *LimitError {
	for m := range numMeters {
		limit := a.limit[m]
		if limit <= 0 {
			continue
		}
		used := a.used(m) + a.reserved[m]
		after := used + est.of(m)
		if after < used {
			after = math.MaxInt64 // an estimate too large to add
		}
		overShare := false
		if (byShare || a.behind[m]) && a.share[m] >= 0 {
			own := a.mine[m] - a.shareBase[m] + a.reserved[m]
			overShare = own+est.of(m) > a.share[m] || own+est.of(m) < own
		}
		switch {
		case used >= limit || after > limit || overShare:
			return &LimitError{Refusal: LimitReached, Meter: m, Used: used, Limit: limit, ResetAt: cal.end(m.Period()), Threshold: 1}
		case p == Low && l.shedAt < 1 && float64(after) >= l.shedAt*float64(limit):
			return &LimitError{Refusal: Shed, Meter: m, Used: used, Limit: limit, ResetAt: cal.end(m.Period()), Threshold: l.shedAt}
		}
	}
	return nil
}

// Begin records a request without checking limits (its cost still counts
// toward them) and returns its Ticket: pass it as the context of the
// chain's Do.
func (l *Ledger) Begin(ctx context.Context, req Request) *Ticket {
	a := l.account(req.Tenant)
	if a == nil {
		a = l.overflow
	}
	t := new(Ticket)
	t.init(ctx, l, a, req, Estimate{}, l.clock.calendar())
	return t
}

// Totals returns the tenant's figures since the ledger was made. A tenant
// past MaxTenants shares the overflow account, whose figures
// OverflowTotals returns.
func (l *Ledger) Totals(tenant string) Totals {
	a, ok := l.tenants[tenant]
	if !ok {
		v, found := l.others.Load(tenant)
		if !found {
			return Totals{}
		}
		a = v.(*account)
	}
	return l.snapshot(a)
}

// OverflowTotals returns the figures of the tenants past MaxTenants, of
// refused unknown tenants, and of requests Begun for them.
func (l *Ledger) OverflowTotals() Totals { return l.snapshot(l.overflow) }

// AllTotals returns the sum of every tenant's figures.
func (l *Ledger) AllTotals() Totals {
	var sum Totals
	byModel := make([]ModelTotals, len(l.overflow.models))
	l.each(func(a *account) {
		s := l.snapshotModels(a, byModel)
		sum.add(&s)
	})
	sum.ByModel = l.compactModels(byModel)
	return sum
}

// Tenants lists the tenants the ledger tracks: those of Config.Tenants and
// those seen since (not those past MaxTenants).
func (l *Ledger) Tenants() []string {
	var out []string
	l.each(func(a *account) {
		if a != l.overflow {
			out = append(out, a.tenant)
		}
	})
	slices.Sort(out)
	return out
}

// Untracked counts requests that ended in an attached chain without a
// Ticket in their context: they were not recorded.
func (l *Ledger) Untracked() int64 { return l.untracked.Load() }

// each calls f for every account, the overflow last.
func (l *Ledger) each(f func(*account)) {
	for _, a := range l.tenants {
		f(a)
	}
	l.others.Range(func(_, v any) bool {
		f(v.(*account))
		return true
	})
	f(l.overflow)
}

func (l *Ledger) snapshot(a *account) Totals {
	byModel := make([]ModelTotals, len(a.models))
	t := l.snapshotModels(a, byModel)
	t.ByModel = l.compactModels(byModel)
	return t
}

// snapshotModels copies a's totals and adds its per-model figures to
// byModel.
func (l *Ledger) snapshotModels(a *account, byModel []ModelTotals) Totals {
	a.mu.Lock()
	t := a.totals
	for i, m := range a.models {
		b := &byModel[i]
		b.Calls += m.calls
		addUsage(&b.Usage, m.usage)
		b.Cost = addSat(b.Cost, m.cost)
	}
	a.mu.Unlock()
	return t
}

func (l *Ledger) compactModels(byModel []ModelTotals) []ModelTotals {
	out := byModel[:0]
	for i, m := range byModel {
		if m.Calls == 0 && m.Usage == (ModelTotals{}.Usage) {
			continue
		}
		if l.prices != nil && i < len(l.prices.entries) {
			m.Model, m.CostGroup = l.prices.entries[i].model, l.prices.entries[i].group
		}
		out = append(out, m)
	}
	return slices.Clip(out)
}

// Usage is a tenant's use of one meter in the current period.
type Usage struct {
	// Meter is the meter; Period its period and ResetAt when it ends.
	Meter   Meter
	ResetAt time.Time
	// Used is what the period has used so far, fleet-wide with a Store
	// (as of the last exchange, plus this process's own since); Reserved
	// the estimates of this process's requests in flight; Limit the limit
	// (0 for none). Cost meters count nano-units.
	Used, Reserved, Limit int64
}

// Utilization is Used over Limit, 0 without a limit.
func (u Usage) Utilization() float64 {
	if u.Limit <= 0 {
		return 0
	}
	return float64(u.Used) / float64(u.Limit)
}

// Use returns the tenant's four meters in the current period, indexed by
// Meter.
func (l *Ledger) Use(tenant string) [4]Usage {
	a, ok := l.tenants[tenant]
	if !ok {
		v, found := l.others.Load(tenant)
		if !found {
			a = l.newAccount(tenant, l.def)
		} else {
			a = v.(*account)
		}
	}
	return l.use(a)
}

func (l *Ledger) use(a *account) [4]Usage {
	cal := l.clock.now(time.Now())
	var out [4]Usage
	a.mu.Lock()
	a.roll(cal)
	unpriced := a.noteUnpriced(l)
	for m := range numMeters {
		out[m] = Usage{Meter: m, ResetAt: cal.end(m.Period()), Used: a.used(m), Reserved: a.reserved[m], Limit: a.allow.Limit(m)}
	}
	a.mu.Unlock()
	if unpriced {
		l.emitUnpriced(a, cal)
	}
	return out
}

// EachUse calls f with every tracked tenant's meters in the current
// period (the overflow account as tenant ""), for gauges.
func (l *Ledger) EachUse(f func(tenant string, use [4]Usage)) {
	l.each(func(a *account) { f(a.tenant, l.use(a)) })
}

// EventKind says what an Event reports.
type EventKind uint8

const (
	// ThresholdReached: a tenant's use of a meter reached a threshold (a
	// soft one, or the limit: Threshold 1) for the first time in its
	// period — use, what was billed, not what requests in flight
	// reserved. Each fires once per period (once per fleet with a
	// Claimer store, such as redisspend's).
	ThresholdReached EventKind = iota
	// Refused: Admit refused a request (Refusal says why, shed included).
	Refused
	// StoreFailed: an exchange with the Store failed; the ledger goes on
	// with its own figures.
	StoreFailed
	// StoreRecovered: an exchange succeeded after one or more failed.
	StoreRecovered
	// UnpricedUsage: a tenant with a cost limit was billed for calls to
	// a model the price table has no price for (see UnpricedPolicy):
	// Meter is its cost limit, which with FailClosedUnpriced now refuses
	// every request until ResetAt. The calls' Records name the model
	// (AttemptCost billed, not priced).
	UnpricedUsage
	// FirstRefusal: the first request of a meter's period refused at its
	// limit (LimitReached: use and the estimates reserved, plus the
	// request's, would pass it), just before that request's Refused
	// event. Used says where the meter stood, reservations included: the
	// limit binds from here, though use may still be short of it, which
	// ThresholdReached with Threshold 1 reports when use gets there. It
	// fires once per period (once per fleet with a Claimer store).
	FirstRefusal
)

var eventKindNames = [...]string{ThresholdReached: "threshold_reached", Refused: "refused", StoreFailed: "store_failed", StoreRecovered: "store_recovered", UnpricedUsage: "unpriced_usage", FirstRefusal: "first_refusal"}

// String returns the kind in snake_case.
func (k EventKind) String() string {
	if int(k) < len(eventKindNames) {
		return eventKindNames[k]
	}
	return "invalid_event"
}

// Event reports a limit filling, a refusal, or the store's health. Tenant
// ids are in events (they are for your own alerting); export them only if
// you mean to.
type Event struct {
	Kind EventKind
	// Tenant and Meter name the meter (ThresholdReached, Refused,
	// UnpricedUsage).
	Tenant string
	Meter  Meter
	// Threshold is the share reached (ThresholdReached: 0.7, 0.9, 1 for
	// the limit), or the share a refusal enforces (Refused: 1 at the
	// limit, ShedAt for a shed request, 0 for the other refusals).
	Threshold float64
	// Used and Limit are the meter's figures; ResetAt when it resets.
	Used, Limit int64
	ResetAt     time.Time
	// Request is the refused request's identity (Refused).
	Request Request
	// Refusal says why a request was refused (Refused).
	Refusal Refusal
	// Err is the refusal (Refused) or the store's error (StoreFailed).
	Err error
}

// Observe calls fn with every event, on the goroutine where it happened
// (a request's, the ledger's own for the Store, or that of a caller of
// Use or EachUse when it finds unpriced usage): keep fn fast. The
// returned function removes it.
func (l *Ledger) Observe(fn func(Event)) (remove func()) { return l.events.Add(fn) }

// ObserveRecords calls fn with the Record of every request that ends, on
// the request's goroutine: keep fn fast, and copy what you keep — the
// Record is reused after fn returns. The returned function removes it.
func (l *Ledger) ObserveRecords(fn func(*Record)) (remove func()) { return l.records.Add(fn) }

func (l *Ledger) emitRefusal(req Request, err *LimitError) {
	fns := l.events.Load()
	if len(fns) == 0 {
		return
	}
	e := Event{Kind: Refused, Tenant: req.Tenant, Meter: err.Meter, Threshold: err.Threshold, Used: err.Used, Limit: err.Limit, ResetAt: err.ResetAt, Request: req, Refusal: err.Refusal, Err: err}
	for _, fn := range fns {
		fn(e)
	}
}
