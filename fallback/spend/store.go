package spend

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Store shares the limits' figures of several processes (pods) that use
// the same tenants' limits: breaker/redisstore's approach for money.
// fallback/spend/redisspend implements it over Redis.
//
// The ledger is local-first unless the store is a strict StrictStore:
// Admit decides on the fleet's figures as of the last exchange plus this
// process's own since, and never waits on the store. Every SyncInterval
// the ledger sends, for each tenant with a limit (or new spending) and
// each current period, what this process has used in it in all — a cumulative figure, not an increment — and reads
// back the fleet's total. A cumulative figure makes every write
// idempotent: a write retried after a lost reply, or repeated after the
// store restarted empty, sets the same value again and never counts
// twice, and the store's totals rebuild themselves from the processes'
// next exchanges.
type Store interface {
	// Sync stores, for every share, this process's cumulative use of the
	// tenant's period (Tokens, Cost), keeping the larger of what it holds
	// and what is sent, and sets the fleet's totals (FleetTokens,
	// FleetCost) and Synced on each share it could exchange. It returns
	// an error when some share could not be exchanged. It must honour
	// ctx. One Store serves one Ledger.
	Sync(ctx context.Context, shares []Share) error
}

// StrictStore is a Store that can keep the fleet's limits strictly: with
// Strict set, Admit reserves each request's estimate against the fleet's
// figures in one atomic step (Reserve) before it admits the request, and
// the request's end releases the reservation in the same atomic step that
// stores what the request used (a Share's Release, exchanged promptly
// rather than at the next SyncInterval). A tenant's spend then never
// passes its limit across any number of processes while the store
// answers, as long as each request's estimate covers what it spends;
// what a request spends beyond its estimate is the only overshoot.
//
// Admit then waits on the store for one round trip, bounded by
// Config.ReserveTimeout. When the store does not answer in time, the
// ledger decides as it does while the store is away: on its share of what
// was left (see Config).
type StrictStore interface {
	Store
	// Strict reports whether the ledger must reserve through the store.
	// A StrictStore that is not strict is used as a plain Store.
	Strict() bool
	// Reserve checks, in one atomic step, that the fleet's use of each of
	// r's limited meters — what the processes stored, plus the estimates
	// reserved and not yet released — leaves room for r's estimate, and
	// if so reserves it in both of r's periods. It sets Granted, Meter
	// (the meter that refused, when not Granted) and the fleet's figures.
	// It returns an error only when it could not decide; it must honour
	// ctx.
	Reserve(ctx context.Context, r *Reservation) error
}

// Reservation is one request's estimate, reserved against its tenant's
// limits by StrictStore.Reserve.
type Reservation struct {
	// Tenant and the periods' ids and ends name the figures concerned
	// (as a Share does: ID 20261201 for a day, 202612 for a month).
	Tenant           string
	Day, Month       int64
	DayEnd, MonthEnd time.Time
	// Reserved is the estimate and the reservation's number in this
	// process.
	Reserved Reserved
	// Limits are the tenant's limits, by Meter; 0 for none.
	Limits [numMeters]int64

	// Floor is, per meter, this process's view of the fleet's use: the
	// store counts at least that much, should it hold less (it restarted
	// empty, or has not yet heard of what this process spent).
	Floor [numMeters]int64

	// Granted is set by Reserve when the estimate was reserved; Meter
	// then names the meter that refused it, when not.
	Granted bool
	Meter   Meter
	// Fleet is, per meter, the fleet's stored use at the decision, and
	// FleetReserved the estimates reserved and not yet released (r's not
	// included); Mine is this process's part of Fleet.
	Fleet, FleetReserved, Mine [numMeters]int64
}

// Reserved is a reservation a request holds: its number in this process
// and its estimate.
type Reserved struct {
	ID     uint64
	Tokens int64
	Cost   Amount
}

// PodCounter is a Store that knows how many processes share it: while the
// store is away, each process may spend its share of what was left of a
// limit when the store was last seen, that remainder divided by Pods.
type PodCounter interface {
	// Pods returns the number of processes sharing the limits, at least
	// 1; 0 when unknown.
	Pods() int
}

// Claimer is a Store through which the fleet's processes agree on who
// reports a threshold: the first process to claim an event for a
// tenant's period reports it, the others stay silent, so that an alert
// on a limit fires once for the fleet, not once per process.
type Claimer interface {
	// Claim tries every claim and sets Claimed on those it could try and
	// Won on those this process is the first to claim. It returns an
	// error when some claim could not be tried; it must honour ctx.
	Claim(ctx context.Context, claims []Claim) error
}

// Claim is one event that one process of the fleet reports.
type Claim struct {
	// Tenant, Period, ID and End name the tenant's period.
	Tenant string
	Period Period
	ID     int64
	End    time.Time
	// Event names the event: "<meter>:<threshold>" (daily_cost:0.9),
	// or "<meter>:first_refusal".
	Event string

	// Claimed and Won are set by Claim.
	Claimed, Won bool
}

// Share is one tenant's use of one period by this process, as Store.Sync
// exchanges it.
type Share struct {
	// Tenant, Period and ID name the period (ID 20261201 for a day,
	// 202612 for a month, in the ledger's Location); End is when it ends,
	// after which the store may forget it.
	Tenant string
	Period Period
	ID     int64
	End    time.Time
	// Tokens and Cost are this process's cumulative use of the period.
	Tokens int64
	Cost   Amount
	// FleetTokens and FleetCost are set by Sync: the fleet's totals, this
	// process's included.
	FleetTokens int64
	FleetCost   Amount
	// FleetReserved is set by a StrictStore's Sync: the estimates the
	// fleet reserved in the period and has not yet released.
	FleetReserved struct {
		Tokens int64
		Cost   Amount
	}
	// Synced is set by Sync when the share was exchanged.
	Synced bool
	// Admitted lists the requests this process admitted in the period
	// without the store (StrictStore): it was away, or did not answer a
	// reservation in time. Sync reserves their estimates, whatever the
	// figures (they run already), before it drops the releases; one the
	// store holds already is left as it is.
	Admitted []Reserved
	// Release lists the reservations of this process's requests that
	// ended in the period (StrictStore): Sync drops them in the same
	// atomic step that stores Tokens and Cost, which include what those
	// requests used, so that the fleet never counts a request both ways
	// nor neither.
	Release []Reserved
}

// syncer runs the exchanges with a Store on its own goroutine.
type syncer struct {
	l                 *Ledger
	store             Store
	interval, timeout time.Duration
	staleness         time.Duration
	onError           func(error)

	// lastOK is when the last exchange succeeded (Unix ns); it starts at
	// the ledger's creation, so that a new process is not stale at once.
	lastOK atomic.Int64
	failed atomic.Bool
	// stopped is set by stop: from then on requests are decided on this
	// process's figures alone, and events reported at once.
	stopped atomic.Bool
	// settling counts the exchanges left, after the store came back, in
	// which requests keep to the share as well: until then the store may
	// not hold what the other processes spent on theirs.
	settling atomic.Int32
	// lateReserves counts the reservations in a row the store did not
	// answer in time.
	lateReserves atomic.Int32

	// npods is the fleet's size as the store last told it (PodCounter),
	// 0 when unknown.
	npods atomic.Int64

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// wake asks the loop for a prompt exchange of the accounts that hold
	// releases (StrictStore).
	wake chan struct{}

	// relMu guards relAccts: the accounts that got releases since the
	// last prompt exchange.
	relMu    sync.Mutex
	relAccts []*account

	// claimsMu guards claims: the events waiting for the fleet to say
	// which process reports them (Claimer).
	claimsMu sync.Mutex
	claims   []pendingClaim

	shares []Share
	accts  []*account
	// sent is, per account of accts, how many of its admissions without
	// the store and of its releases the exchange carries.
	sent [][2]int
}

// pendingClaim is an event this process found, which it reports if it
// wins the fleet's claim on it.
type pendingClaim struct {
	claim Claim
	event Event
}

// maxPendingClaims bounds the events waiting for a claim; past it (the
// store away for long while many tenants cross thresholds), events are
// reported unclaimed.
const maxPendingClaims = 4096

func startSyncer(l *Ledger, st Store, interval, timeout, staleness time.Duration, onError func(error)) *syncer {
	s := &syncer{l: l, store: st, interval: interval, timeout: timeout, staleness: staleness, onError: onError,
		done: make(chan struct{}), wake: make(chan struct{}, 1)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.lastOK.Store(time.Now().UnixNano())
	go s.run()
	return s
}

// releasing queues an account that now holds releases for a prompt
// exchange; a.mu is not held.
func (s *syncer) releasing(a *account) {
	s.relMu.Lock()
	if !a.queued {
		a.queued = true
		s.relAccts = append(s.relAccts, a)
	}
	s.relMu.Unlock()
	s.poke()
}

// byShare reports whether requests keep to this process's share: the
// store is away, or back for too few exchanges yet.
func (s *syncer) byShare() bool { return s.failed.Load() || s.settling.Load() > 0 }

// settleExchanges is how many exchanges after the store is back keep
// requests to their share as well: the other processes' first exchanges
// after the outage tell the store what they spent on theirs.
const settleExchanges = 2

// poke asks for a prompt exchange; it never blocks.
func (s *syncer) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// pods is the number of processes sharing the limits, at least 1.
func (s *syncer) pods() int { return int(max(s.npods.Load(), 1)) }

// stale reports whether the fleet's figures are older than the staleness
// bound.
func (s *syncer) stale(now time.Time) bool {
	return now.UnixNano()-s.lastOK.Load() > int64(s.staleness)
}

func (s *syncer) run() {
	defer close(s.done)
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			s.once(s.ctx, false)
		case <-s.wake:
			s.once(s.ctx, true)
		}
	}
}

// stop ends the loop and makes a last exchange, so that the fleet sees
// this process's final figures: tried again until it succeeds or the sync
// timeout has passed.
func (s *syncer) stop() error {
	s.stopped.Store(true)
	s.cancel()
	<-s.done
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	// Events the fleet could not be asked about are reported unclaimed:
	// an alert twice rather than never.
	defer s.unclaimed()
	for {
		err := s.once(ctx, false)
		if err == nil || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(min(s.interval, 10*time.Millisecond))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
}

// unclaimed reports the events still waiting for a claim.
func (s *syncer) unclaimed() {
	s.claimsMu.Lock()
	pend := s.claims
	s.claims = nil
	s.claimsMu.Unlock()
	fns := s.l.events.Load()
	for _, p := range pend {
		for _, fn := range fns {
			fn(p.event)
		}
	}
}

// maxPendingReleases bounds the releases an account keeps while the
// store is away; past it the oldest are dropped, and the store frees
// their reservations when their lease ends.
const maxPendingReleases = 1 << 14

// once exchanges the figures of every account with a limit or with new
// spending, or with releases only of those that hold some (a prompt
// exchange after requests ended), then tries the pending claims.
func (s *syncer) once(parent context.Context, releasesOnly bool) error {
	l := s.l
	cal := l.clock.now(time.Now())
	s.shares, s.accts, s.sent = s.shares[:0], s.accts[:0], s.sent[:0]
	each := l.each
	if releasesOnly {
		s.relMu.Lock()
		queued := s.relAccts
		s.relAccts = nil
		for _, a := range queued {
			a.queued = false
		}
		s.relMu.Unlock()
		each = func(f func(*account)) {
			for _, a := range queued {
				f(a)
			}
		}
	}
	each(func(a *account) {
		a.mu.Lock()
		a.roll(cal)
		if releasesOnly && len(a.releases)+len(a.admitted) == 0 || !releasesOnly && !a.allow.limited() && !a.dirty {
			a.mu.Unlock()
			return
		}
		a.dirty = false
		if n := len(a.releases); n > maxPendingReleases {
			a.releases = append(a.releases[:0], a.releases[n-maxPendingReleases:]...)
		}
		s.accts, s.sent = append(s.accts, a), append(s.sent, [2]int{len(a.admitted), len(a.releases)})
		for _, p := range []Period{Daily, Monthly} {
			tok, cost := DailyTokens, DailyCost
			if p == Monthly {
				tok, cost = MonthlyTokens, MonthlyCost
			}
			sh := Share{Tenant: a.tenant, Period: p, ID: cal.id(p), End: cal.end(p), Tokens: a.mine[tok], Cost: Amount(a.mine[cost])}
			in := func(r release) bool { return r.day == sh.ID && p == Daily || r.month == sh.ID && p == Monthly }
			for _, r := range a.admitted {
				if in(r) {
					sh.Admitted = append(sh.Admitted, r.Reserved)
				}
			}
			for _, r := range a.releases {
				if in(r) {
					sh.Release = append(sh.Release, r.Reserved)
				}
			}
			s.shares = append(s.shares, sh)
		}
		a.mu.Unlock()
	})
	if len(s.shares) == 0 {
		s.claim(parent)
		if !releasesOnly {
			s.ok(true)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(parent, s.timeout)
	err := s.store.Sync(ctx, s.shares)
	cancel()
	if pc, ok := s.store.(PodCounter); ok && err == nil {
		s.npods.Store(int64(pc.Pods()))
	}
	pods, frozen := s.pods(), s.byShare()
	var cross crossings
	var requeue []*account
	for i, a := range s.accts {
		a.mu.Lock()
		day, month := s.shares[2*i], s.shares[2*i+1]
		if day.Synced && month.Synced {
			// The releases sent are released (those of periods that had
			// ended were not sent: the store forgets them with their
			// period); those of requests that ended meanwhile follow.
			a.admitted = append(a.admitted[:0], a.admitted[s.sent[i][0]:]...)
			a.releases = append(a.releases[:0], a.releases[s.sent[i][1]:]...)
			if len(a.releases)+len(a.admitted) > 0 {
				requeue = append(requeue, a)
			}
		}
		for j, sh := range s.shares[2*i : 2*i+2] {
			if !sh.Synced {
				a.dirty = true
				continue
			}
			tok, cost := DailyTokens, DailyCost
			if j == 1 {
				tok, cost = MonthlyTokens, MonthlyCost
			}
			a.view(tok, sh.ID, sh.FleetTokens, sh.Tokens, sh.FleetReserved.Tokens, pods, frozen, true)
			a.view(cost, sh.ID, int64(sh.FleetCost), int64(sh.Cost), int64(sh.FleetReserved.Cost), pods, frozen, true)
		}
		if a.allow.limited() {
			a.levels(l, cal, &cross)
		}
		a.mu.Unlock()
	}
	l.emit(&cross)
	for _, a := range requeue {
		s.releasing(a)
	}
	s.claim(parent)
	if err == nil {
		for _, sh := range s.shares {
			if !sh.Synced {
				err = errors.New("spend: the store did not exchange every share")
				break
			}
		}
	}
	if err != nil {
		s.fail(err)
		return err
	}
	s.ok(!releasesOnly)
	return nil
}

// ok records a successful exchange: of every account (full), or of
// those with releases only, which does not count toward settling.
func (s *syncer) ok(full bool) {
	s.lastOK.Store(time.Now().UnixNano())
	s.lateReserves.Store(0)
	if n := s.settling.Load(); n > 0 && full {
		s.settling.CompareAndSwap(n, n-1)
	}
	if s.failed.Load() {
		s.settling.Store(settleExchanges)
	}
	if s.failed.CompareAndSwap(true, false) {
		e := Event{Kind: StoreRecovered}
		for _, fn := range s.l.events.Load() {
			fn(e)
		}
	}
}

func (s *syncer) fail(err error) {
	s.failed.Store(true)
	if s.onError != nil {
		s.onError(err)
	}
	e := Event{Kind: StoreFailed, Err: err}
	for _, fn := range s.l.events.Load() {
		fn(e)
	}
}

// claim tries the pending claims, and reports the events whose claim this
// process won. While the store is away they wait for it (an alert late
// rather than once per process; StoreFailed tells of the outage at
// once); past maxPendingClaims, and at Close, they are reported
// unclaimed.
func (s *syncer) claim(parent context.Context) {
	cl, ok := s.store.(Claimer)
	if !ok {
		return
	}
	s.claimsMu.Lock()
	pend := s.claims
	s.claims = nil
	s.claimsMu.Unlock()
	if len(pend) == 0 {
		return
	}
	claims := make([]Claim, len(pend))
	for i := range pend {
		claims[i] = pend[i].claim
	}
	ctx, cancel := context.WithTimeout(parent, s.timeout)
	err := cl.Claim(ctx, claims)
	cancel()
	if err != nil && s.onError != nil {
		s.onError(fmt.Errorf("spend: claiming events: %w", err))
	}
	fns := s.l.events.Load()
	var keep []pendingClaim
	for i, c := range claims {
		switch {
		case c.Claimed && c.Won:
			for _, fn := range fns {
				fn(pend[i].event)
			}
		case !c.Claimed:
			keep = append(keep, pend[i])
		}
	}
	if len(keep) > 0 {
		s.claimsMu.Lock()
		s.claims = append(keep, s.claims...)
		s.claimsMu.Unlock()
	}
}

// deferEvent queues an event for the fleet's claim, and reports whether it
// did (false: the queue is full, report it now).
func (s *syncer) deferEvent(e Event) bool {
	c := Claim{Tenant: e.Tenant, Period: e.Meter.Period(), End: e.ResetAt, Event: claimName(e)}
	c.ID = newCalendar(e.ResetAt.Add(-time.Nanosecond), s.l.clock.loc).id(c.Period)
	s.claimsMu.Lock()
	defer s.claimsMu.Unlock()
	if len(s.claims) >= maxPendingClaims || s.stopped.Load() {
		return false
	}
	s.claims = append(s.claims, pendingClaim{claim: c, event: e})
	return true
}

// claimName names an event in the fleet's claims.
func claimName(e Event) string {
	if e.Kind == FirstRefusal {
		return e.Meter.String() + ":first_refusal"
	}
	return e.Meter.String() + ":" + strconv.FormatFloat(e.Threshold, 'g', -1, 64)
}
