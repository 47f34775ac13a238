package spend

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// Store shares the limits' figures of several processes (pods) that use
// the same tenants' limits: breaker/redisstore's approach for money.
// fallback/spend/redisspend implements it over Redis.
//
// The ledger stays local-first: Admit decides on the fleet's figures as
// of the last exchange plus this process's own since, and never waits on
// the store. Every SyncInterval the ledger sends, for each tenant with a
// limit (or new spending) and each current period, what this process has
// used in it in all — a cumulative figure, not an increment — and reads
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
	// Synced is set by Sync when the share was exchanged.
	Synced bool
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

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	shares []Share
	accts  []*account
}

func startSyncer(l *Ledger, st Store, interval, timeout, staleness time.Duration, onError func(error)) *syncer {
	s := &syncer{l: l, store: st, interval: interval, timeout: timeout, staleness: staleness, onError: onError, done: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.lastOK.Store(time.Now().UnixNano())
	go s.run()
	return s
}

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
			s.once(s.ctx)
		}
	}
}

// stop ends the loop and makes a last exchange, so that the fleet sees
// this process's final figures: tried again until it succeeds or the sync
// timeout has passed.
func (s *syncer) stop() error {
	s.cancel()
	<-s.done
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	for {
		err := s.once(ctx)
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

// once exchanges the figures of every account with a limit or with new
// spending.
func (s *syncer) once(parent context.Context) error {
	l := s.l
	cal := l.clock.now(time.Now())
	s.shares, s.accts = s.shares[:0], s.accts[:0]
	l.each(func(a *account) {
		a.mu.Lock()
		a.roll(cal)
		if a.allow.limited() || a.dirty {
			a.dirty = false
			s.accts = append(s.accts, a)
			for _, p := range []Period{Daily, Monthly} {
				tok, cost := DailyTokens, DailyCost
				if p == Monthly {
					tok, cost = MonthlyTokens, MonthlyCost
				}
				s.shares = append(s.shares, Share{Tenant: a.tenant, Period: p, ID: cal.id(p), End: cal.end(p), Tokens: a.mine[tok], Cost: Amount(a.mine[cost])})
			}
		}
		a.mu.Unlock()
	})
	if len(s.shares) == 0 {
		s.ok()
		return nil
	}
	ctx, cancel := context.WithTimeout(parent, s.timeout)
	err := s.store.Sync(ctx, s.shares)
	cancel()
	var cross crossings
	for i, a := range s.accts {
		a.mu.Lock()
		for j, sh := range s.shares[2*i : 2*i+2] {
			if !sh.Synced {
				a.dirty = true
				continue
			}
			tok, cost := DailyTokens, DailyCost
			if j == 1 {
				tok, cost = MonthlyTokens, MonthlyCost
			}
			if a.periodOf(tok) != sh.ID {
				continue // the period ended meanwhile
			}
			a.fleet[tok], a.synced[tok] = max(sh.FleetTokens, sh.Tokens), sh.Tokens
			a.fleet[cost], a.synced[cost] = max(int64(sh.FleetCost), int64(sh.Cost)), int64(sh.Cost)
		}
		if a.allow.limited() {
			a.levels(l, cal, &cross)
		}
		a.mu.Unlock()
	}
	l.emit(&cross)
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
	s.ok()
	return nil
}

func (s *syncer) ok() {
	s.lastOK.Store(time.Now().UnixNano())
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
