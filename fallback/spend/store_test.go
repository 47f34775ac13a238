package spend_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback/spend"
)

// memStore is a Store in memory with the semantics a shared store must
// have: per process and period, the larger of what it holds and what is
// sent. Processes are told apart by the Store value each ledger uses.
type memStore struct {
	mu   sync.Mutex
	held map[memKey]*[2]int64 // per process: tokens, cost
	down atomic.Bool
	// syncs counts exchanges.
	syncs atomic.Int64
}

type memKey struct {
	proc   int
	tenant string
	period spend.Period
	id     int64
}

// proc is one process's view of a memStore.
type proc struct {
	s  *memStore
	id int
}

func (p proc) Sync(ctx context.Context, shares []spend.Share) error {
	p.s.syncs.Add(1)
	if p.s.down.Load() {
		return errors.New("store down")
	}
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	if p.s.held == nil {
		p.s.held = map[memKey]*[2]int64{}
	}
	for i := range shares {
		sh := &shares[i]
		k := memKey{p.id, sh.Tenant, sh.Period, sh.ID}
		v := p.s.held[k]
		if v == nil {
			v = new([2]int64)
			p.s.held[k] = v
		}
		v[0], v[1] = max(v[0], sh.Tokens), max(v[1], int64(sh.Cost))
		var tok, cost int64
		for k2, v2 := range p.s.held {
			if k2.tenant == sh.Tenant && k2.period == sh.Period && k2.id == sh.ID {
				tok, cost = tok+v2[0], cost+v2[1]
			}
		}
		sh.FleetTokens, sh.FleetCost, sh.Synced = tok, spend.Amount(cost), true
	}
	return nil
}

// Two processes share a tenant's limit through a store: each sees the
// other's spending within two sync intervals, and requests never wait.
func TestSharedLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &memStore{}
		limits := map[string]spend.Allowance{"acme": {DailyTokens: 1000}}
		a := newLedger(t, spend.Config{Tenants: limits, Store: proc{st, 1}, SyncInterval: 100 * time.Millisecond})
		b := newLedger(t, spend.Config{Tenants: limits, Store: proc{st, 2}, SyncInterval: 100 * time.Millisecond})
		ca := newChain(t, a, &tier{name: "pro", def: answer(100, 100)}, &tier{name: "flash"})
		cb := newChain(t, b, &tier{name: "pro", def: answer(100, 100)}, &tier{name: "flash"})
		req := spend.Request{Tenant: "acme"}
		for range 3 {
			_, err := do(t, a, ca, req, spend.Estimate{})
			require.NoError(t, err)
		}
		assert.Equal(t, int64(600), a.Use("acme")[spend.DailyTokens].Used)
		assert.Equal(t, int64(0), b.Use("acme")[spend.DailyTokens].Used, "b has not synced yet")
		time.Sleep(250 * time.Millisecond)
		assert.Equal(t, int64(600), b.Use("acme")[spend.DailyTokens].Used)
		for range 2 {
			_, err := do(t, b, cb, req, spend.Estimate{})
			require.NoError(t, err)
		}
		_, err := do(t, b, cb, req, spend.Estimate{})
		require.ErrorIs(t, err, spend.ErrLimitReached, "b is at 1000 with a's 600")
		time.Sleep(250 * time.Millisecond)
		_, err = do(t, a, ca, req, spend.Estimate{})
		require.ErrorIs(t, err, spend.ErrLimitReached, "a sees b's 400")
		assert.Equal(t, int64(1000), a.Use("acme")[spend.DailyTokens].Used)
	})
}

// When the store is down, limits fail open by default: each process
// counts on its own, and when the store is back the fleet's figure is
// the sum of what every process used, nothing counted twice. A FailClosed
// allowance refuses once the figures are older than MaxStaleness.
func TestStoreDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &memStore{}
		limits := map[string]spend.Allowance{"open": {DailyTokens: 10_000}, "closed": {DailyTokens: 10_000, FailClosed: true}}
		var storeErrs atomic.Int64
		cfg := spend.Config{Tenants: limits, SyncInterval: 100 * time.Millisecond, MaxStaleness: time.Second, OnStoreError: func(error) { storeErrs.Add(1) }}
		cfg.Store = proc{st, 1}
		a := newLedger(t, cfg)
		ev := watch(a)
		cfg.Store = proc{st, 2}
		b := newLedger(t, cfg)
		ca := newChain(t, a, &tier{name: "pro", def: answer(50, 50)}, &tier{name: "flash"})
		cb := newChain(t, b, &tier{name: "pro", def: answer(50, 50)}, &tier{name: "flash"})
		run := func(l *spend.Ledger, c any, tenant string) error {
			_, err := do(t, l, c.(chainT), spend.Request{Tenant: tenant}, spend.Estimate{})
			return err
		}
		for range 2 {
			require.NoError(t, run(a, ca, "open"))
			require.NoError(t, run(b, cb, "open"))
		}
		time.Sleep(250 * time.Millisecond)
		assert.Equal(t, int64(400), a.Use("open")[spend.DailyTokens].Used)

		st.down.Store(true)
		for range 5 {
			require.NoError(t, run(a, ca, "open"))
			require.NoError(t, run(b, cb, "open"))
			require.NoError(t, run(a, ca, "closed"), "within MaxStaleness")
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(time.Second)
		assert.Positive(t, storeErrs.Load())
		assert.Positive(t, ev.count(spend.StoreFailed))
		require.NoError(t, run(a, ca, "open"), "fail open")
		err := run(a, ca, "closed")
		require.ErrorIs(t, err, spend.ErrUnavailable, "fail closed past MaxStaleness")
		// Each process sees the fleet as of the outage plus its own since.
		assert.Equal(t, int64(400+600), a.Use("open")[spend.DailyTokens].Used)
		assert.Equal(t, int64(400+500), b.Use("open")[spend.DailyTokens].Used)

		st.down.Store(false)
		time.Sleep(250 * time.Millisecond)
		assert.Equal(t, 1, ev.count(spend.StoreRecovered))
		// 2+2 before, 6+5 during: 15 requests of 100 tokens, once each.
		assert.Equal(t, int64(1500), a.Use("open")[spend.DailyTokens].Used)
		assert.Equal(t, int64(1500), b.Use("open")[spend.DailyTokens].Used)
		require.NoError(t, run(a, ca, "closed"), "the store is back")
	})
}

// A store that forgets everything (Redis restarted without persistence)
// gets every process's cumulative figure back at the next exchange.
func TestStoreRestartedEmpty(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &memStore{}
		limits := map[string]spend.Allowance{"acme": {DailyTokens: 10_000}}
		a := newLedger(t, spend.Config{Tenants: limits, Store: proc{st, 1}, SyncInterval: 100 * time.Millisecond})
		b := newLedger(t, spend.Config{Tenants: limits, Store: proc{st, 2}, SyncInterval: 100 * time.Millisecond})
		ca := newChain(t, a, &tier{name: "pro", def: answer(50, 50)}, &tier{name: "flash"})
		cb := newChain(t, b, &tier{name: "pro", def: answer(50, 50)}, &tier{name: "flash"})
		for range 3 {
			_, err := do(t, a, ca, spend.Request{Tenant: "acme"}, spend.Estimate{})
			require.NoError(t, err)
			_, err = do(t, b, cb, spend.Request{Tenant: "acme"}, spend.Estimate{})
			require.NoError(t, err)
		}
		time.Sleep(250 * time.Millisecond)
		st.mu.Lock()
		st.held = nil
		st.mu.Unlock()
		time.Sleep(250 * time.Millisecond)
		assert.Equal(t, int64(600), a.Use("acme")[spend.DailyTokens].Used)
		assert.Equal(t, int64(600), b.Use("acme")[spend.DailyTokens].Used)
	})
}

// offProc is a process whose exchanges fail while off is set.
type offProc struct {
	proc
	off *atomic.Bool
}

func (p offProc) Sync(ctx context.Context, shares []spend.Share) error {
	if p.off.Load() {
		return errors.New("process paused")
	}
	return p.proc.Sync(ctx, shares)
}

// A store restarted empty holds, until every process has sent its figure
// again, less than the fleet spent: a process that exchanged with it
// meanwhile keeps what it saw the others spend, and does not spend it
// again.
func TestStoreRestartedEmptyKeepsTheOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &memStore{}
		limits := map[string]spend.Allowance{"acme": {DailyTokens: 1000}}
		var bOff atomic.Bool
		a := newLedger(t, spend.Config{Tenants: limits, Store: proc{st, 1}, SyncInterval: 100 * time.Millisecond})
		b := newLedger(t, spend.Config{Tenants: limits, Store: offProc{proc{st, 2}, &bOff}, SyncInterval: 100 * time.Millisecond})
		ca := newChain(t, a, &tier{name: "pro", def: answer(50, 50)}, &tier{name: "flash"})
		cb := newChain(t, b, &tier{name: "pro", def: answer(50, 50)}, &tier{name: "flash"})
		for range 3 {
			_, err := do(t, a, ca, spend.Request{Tenant: "acme"}, spend.Estimate{})
			require.NoError(t, err)
			_, err = do(t, b, cb, spend.Request{Tenant: "acme"}, spend.Estimate{})
			require.NoError(t, err)
		}
		time.Sleep(250 * time.Millisecond)
		require.Equal(t, int64(600), a.Use("acme")[spend.DailyTokens].Used)
		// The store forgets everything; b cannot send its figure again.
		bOff.Store(true)
		st.mu.Lock()
		st.held = nil
		st.mu.Unlock()
		time.Sleep(250 * time.Millisecond)
		assert.Equal(t, int64(600), a.Use("acme")[spend.DailyTokens].Used, "a still counts b's 300")
		admitted := 0
		for range 10 {
			if _, err := do(t, a, ca, spend.Request{Tenant: "acme"}, spend.Estimate{Tokens: 100}); err == nil {
				admitted++
			}
		}
		assert.Equal(t, 4, admitted, "a spends what is left of the fleet's 1000, not of its own 300")
		bOff.Store(false)
		time.Sleep(250 * time.Millisecond)
		assert.Equal(t, int64(1000), a.Use("acme")[spend.DailyTokens].Used)
		assert.Equal(t, int64(1000), b.Use("acme")[spend.DailyTokens].Used)
	})
}

// Close makes a last exchange and stops the ledger's goroutine.
func TestCloseFlushes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &memStore{}
		l, err := spend.New(spend.Config{Store: proc{st, 1}, SyncInterval: time.Hour})
		require.NoError(t, err)
		tk := l.Begin(context.Background(), spend.Request{Tenant: "acme"})
		c := newChain(t, l, &tier{name: "pro", def: answer(5, 5)}, &tier{name: "flash"})
		_, err = c.Do(tk, "q")
		require.NoError(t, err)
		require.NoError(t, l.Close())
		require.NoError(t, l.Close())
		st.mu.Lock()
		defer st.mu.Unlock()
		assert.Equal(t, [2]int64{10, 0}, *st.held[memKey{1, "acme", spend.Daily, 20000101}])
	})
}
