package redisspend_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/fallback/spend/redisspend"
)

// countingStore counts the exchanges, each one pipelined round trip.
type countingStore struct {
	spend.Store
	syncs atomic.Int64
}

func (c *countingStore) Sync(ctx context.Context, shares []spend.Share) error {
	c.syncs.Add(1)
	return c.Store.Sync(ctx, shares)
}

// Requests never make a Redis round trip: a process exchanges its figures
// once per SyncInterval, in one pipeline, however many requests it serves.
func TestRoundTripsPerRequest(t *testing.T) {
	addr := sharedAddr(t)
	store, err := redisspend.New(newClient(t, addr), redisspend.Options{Prefix: prefix(t)})
	require.NoError(t, err)
	cs := &countingStore{Store: store}
	l, err := spend.New(spend.Config{Prices: prices, Tenants: map[string]spend.Allowance{"acme": {DailyTokens: 1 << 40}},
		Store: cs, SyncInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	c, err := fallback.New(fallback.Config[string, reply]{Stages: []fallback.Stage[string, reply]{{Tier: billedTier{}, Model: "pro"}}})
	require.NoError(t, err)
	_, err = l.Attach(c)
	require.NoError(t, err)
	start := time.Now()
	requests := 0
	for time.Since(start) < 300*time.Millisecond {
		for range 100 {
			tk, err := l.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{Tokens: 100})
			require.NoError(t, err)
			_, err = c.Do(tk, "q")
			require.NoError(t, err)
			tk.End()
			requests++
		}
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	require.NoError(t, l.Close())
	syncs := cs.syncs.Load()
	assert.LessOrEqual(t, syncs, int64(elapsed/(50*time.Millisecond))+2, "one exchange per interval, and the last at Close")
	tot, err := store.Totals(context.Background(), "acme", spend.Daily, dayID(time.Now()))
	require.NoError(t, err)
	if dayID(start) == dayID(time.Now()) {
		assert.Equal(t, int64(requests)*tokensPerRequest, tot.Tokens)
	}
	t.Logf("%d requests in %v, %d exchanges (one pipelined round trip each): %.4f round trips per request", requests, elapsed.Round(time.Millisecond), syncs, float64(syncs)/float64(requests))
}

// BenchmarkSync is one exchange of tenants × 2 shares (day and month).
func BenchmarkSync(b *testing.B) {
	if shared == nil {
		b.Skip("no redis-server")
	}
	for _, tenants := range []int{1, 100} {
		b.Run("tenants="+strconv.Itoa(tenants), func(b *testing.B) {
			s, err := redisspend.New(newClient(b, shared.Addr), redisspend.Options{Prefix: prefix(b)})
			require.NoError(b, err)
			shares := make([]spend.Share, 0, 2*tenants)
			for i := range tenants {
				for _, p := range []spend.Period{spend.Daily, spend.Monthly} {
					shares = append(shares, spend.Share{Tenant: "t" + strconv.Itoa(i), Period: p, ID: 20261201, End: time.Now().Add(time.Hour)})
				}
			}
			ctx := context.Background()
			b.ReportAllocs()
			n := int64(0)
			for b.Loop() {
				n++
				for i := range shares {
					shares[i].Tokens = n
				}
				if err := s.Sync(ctx, shares); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// countingStrict counts a strict store's round trips: each reservation,
// and each exchange (one pipeline).
type countingStrict struct {
	*redisspend.Store
	reserves, syncs atomic.Int64
}

func (c *countingStrict) Sync(ctx context.Context, shares []spend.Share) error {
	c.syncs.Add(1)
	return c.Store.Sync(ctx, shares)
}

func (c *countingStrict) Reserve(ctx context.Context, r *spend.Reservation) error {
	c.reserves.Add(1)
	return c.Store.Reserve(ctx, r)
}

// Strict: each request makes exactly one round trip of its own (its
// reservation); the releases travel in exchanges that carry every
// request ended since the last, so with callers in parallel they cost a
// fraction of a round trip per request.
func TestStrictRoundTripsPerRequest(t *testing.T) {
	addr := sharedAddr(t)
	store, err := redisspend.New(newClient(t, addr), redisspend.Options{Prefix: prefix(t), Strict: true})
	require.NoError(t, err)
	cs := &countingStrict{Store: store}
	l, err := spend.New(spend.Config{Prices: prices, Tenants: map[string]spend.Allowance{"acme": {DailyTokens: 1 << 40}},
		Store: cs, SyncInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	c, err := fallback.New(fallback.Config[string, reply]{Stages: []fallback.Stage[string, reply]{{Tier: billedTier{}, Model: "pro"}}})
	require.NoError(t, err)
	_, err = l.Attach(c)
	require.NoError(t, err)
	const callers, each = 16, 100
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range each {
				tk, err := l.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{Tokens: 100})
				if !assert.NoError(t, err) {
					return
				}
				_, err = c.Do(tk, "q")
				assert.NoError(t, err)
				tk.End()
			}
		})
	}
	wg.Wait()
	require.NoError(t, l.Close())
	requests := int64(callers * each)
	assert.Equal(t, requests, cs.reserves.Load(), "one reservation per request")
	assert.LessOrEqual(t, cs.syncs.Load(), requests+1, "at most one exchange per request's end, and the last at Close")
	tot, err := store.Totals(context.Background(), "acme", spend.Daily, dayID(time.Now()))
	require.NoError(t, err)
	if tot.Tokens == requests*tokensPerRequest { // not across midnight
		assert.Zero(t, tot.ReservedTokens, "every reservation released")
	}
	t.Logf("%d requests, %d callers: %d reservations, %d exchanges: %.3f round trips per request",
		requests, callers, cs.reserves.Load(), cs.syncs.Load(), float64(cs.reserves.Load()+cs.syncs.Load())/float64(requests))
}

// BenchmarkAdmit is one request's admission and end through a ledger on
// Redis (loopback): local-first, which never waits on Redis, and strict,
// which waits for its reservation.
func BenchmarkAdmit(b *testing.B) {
	if shared == nil {
		b.Skip("no redis-server")
	}
	for _, strict := range []bool{false, true} {
		b.Run(map[bool]string{false: "local-first", true: "strict"}[strict], func(b *testing.B) {
			s, err := redisspend.New(newClient(b, shared.Addr), redisspend.Options{Prefix: prefix(b), Strict: strict})
			require.NoError(b, err)
			l, err := spend.New(spend.Config{Prices: prices, Tenants: map[string]spend.Allowance{"acme": {DailyTokens: 1 << 50}}, Store: s})
			require.NoError(b, err)
			defer l.Close()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				tk, err := l.Admit(ctx, spend.Request{Tenant: "acme"}, spend.Estimate{Tokens: 100})
				if err != nil {
					b.Fatal(err)
				}
				tk.End()
			}
		})
	}
}
