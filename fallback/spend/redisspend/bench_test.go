package redisspend_test

import (
	"context"
	"strconv"
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
