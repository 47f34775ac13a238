package spend_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/ratelimit"
	"github.com/tierguard/tierguard/fallback/spend"
)

// strictStore is a StrictStore that answers from its own count, or,
// paused, never (as a Redis stopped by SIGSTOP).
type strictStore struct {
	paused   atomic.Bool
	reserves atomic.Int64
	mu       sync.Mutex
	used     int64
	made     map[uint64]bool
	released int
}

// admitted counts the reservations made by exchanges whose release
// followed.
func (s *strictStore) admitted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.released
}

func (s *strictStore) Strict() bool { return true }

func (s *strictStore) Sync(ctx context.Context, shares []spend.Share) error {
	if s.paused.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range shares {
		if shares[i].Period == spend.Daily {
			s.used = max(s.used, shares[i].Tokens)
			for _, r := range shares[i].Admitted {
				s.made[r.ID] = true
			}
			for _, r := range shares[i].Release {
				if s.made[r.ID] {
					s.released++
				}
			}
		}
		shares[i].FleetTokens, shares[i].Synced = s.used, true
	}
	return nil
}

func (s *strictStore) Reserve(ctx context.Context, r *spend.Reservation) error {
	s.reserves.Add(1)
	if s.paused.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	r.Granted = true
	return nil
}

// A reservation that does not come back within ReserveTimeout decides
// its request on the share (here admitted: nothing was seen to share
// yet) and is made by the next exchange; one late reply is no outage,
// three in a row are, and then no request waits on the store until an
// exchange succeeds again.
func TestLateReservationsDecideOnTheShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &strictStore{made: map[uint64]bool{}}
		l, err := spend.New(spend.Config{Tenants: map[string]spend.Allowance{"acme": {DailyTokens: 1000}}, Store: st,
			SyncInterval: time.Second, ReserveTimeout: 100 * time.Millisecond})
		require.NoError(t, err)
		defer l.Close()
		ev := watch(l)
		admit := func() {
			t.Helper()
			tk, err := l.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{Tokens: 10})
			require.NoError(t, err)
			tk.End()
		}

		admit()
		assert.Equal(t, int64(1), st.reserves.Load(), "reserved through the store")

		st.paused.Store(true)
		start := time.Now()
		for i := range 3 {
			admit()
			assert.Equal(t, time.Duration(i+1)*100*time.Millisecond, time.Since(start), "each waited ReserveTimeout, no more")
			assert.Equal(t, i/2, ev.count(spend.StoreFailed), "the third late reply in a row is an outage")
		}
		for range 5 {
			admit()
		}
		assert.Equal(t, int64(4), st.reserves.Load(), "no request waits on a store known away")
		assert.Equal(t, 300*time.Millisecond, time.Since(start))

		st.paused.Store(false)
		time.Sleep(2 * time.Second) // the next exchanges succeed
		synctest.Wait()
		assert.Equal(t, 1, ev.count(spend.StoreRecovered))
		assert.Equal(t, 8, st.admitted(), "every request admitted without the store was reserved by an exchange, and released")
		admit()
		assert.Equal(t, int64(5), st.reserves.Load(), "back to reserving")
	})
}

// A first tier that skipped a request as too large for its rate limiter
// (fallback.SkipTooLarge) hands it to the next as a too-long input would:
// the fallback's cost is the ContextTooLong class's, not a local
// rejection's.
func TestTooLargeSkipIsAFallbackForContextTooLong(t *testing.T) {
	l := newLedger(t, spend.Config{Prices: testPrices(t)})
	lim, err := ratelimit.New(ratelimit.Config{Name: "pro", Tokens: 100_000, TokenBurst: 1_000})
	require.NoError(t, err)
	defer lim.Close()
	pro := &tier{name: "pro", def: answer(10, 10)}
	c, err := fallback.New(fallback.Config[string, reply]{Stages: []fallback.Stage[string, reply]{
		{Tier: ratelimit.Tier[string, reply](pro, ratelimit.TierConfig[string]{Limiter: lim}), Model: "pro",
			Tokens: func(string) int64 { return 5_000 }},
		{Tier: &tier{name: "flash", def: answer(10, 10)}, Model: "flash"},
	}})
	require.NoError(t, err)
	_, err = l.Attach(c)
	require.NoError(t, err)
	_, err = do(t, l, c, spend.Request{Tenant: "acme"}, spend.Estimate{})
	require.NoError(t, err)
	tot := l.Totals("acme")
	assert.Equal(t, int64(1), tot.Fallbacks)
	assert.Equal(t, int64(1), tot.ByClass[classify.ContextTooLong].Fallbacks)
}
