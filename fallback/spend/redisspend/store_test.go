package redisspend_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/fallback/spend/redisspend"
)

func newStore(t testing.TB, addr, prefix string) *redisspend.Store {
	t.Helper()
	s, err := redisspend.New(newClient(t, addr), redisspend.Options{Prefix: prefix})
	require.NoError(t, err)
	return s
}

func share(tenant string, tokens int64, cost spend.Amount) spend.Share {
	return spend.Share{Tenant: tenant, Period: spend.Daily, ID: 20261201, End: time.Now().Add(time.Hour), Tokens: tokens, Cost: cost}
}

// Each process's figure is cumulative: the store keeps the larger value,
// so a write sent again, or late, changes nothing, and the fleet's total
// is the sum over processes.
func TestSyncIsCumulativeAndIdempotent(t *testing.T) {
	addr := sharedAddr(t)
	p := prefix(t)
	a, b := newStore(t, addr, p), newStore(t, addr, p)
	ctx := context.Background()

	sa := []spend.Share{share("acme", 100, 5)}
	require.NoError(t, a.Sync(ctx, sa))
	assert.True(t, sa[0].Synced)
	assert.Equal(t, int64(100), sa[0].FleetTokens)
	sb := []spend.Share{share("acme", 40, 2), share("globex", 7, 0)}
	require.NoError(t, b.Sync(ctx, sb))
	assert.Equal(t, int64(140), sb[0].FleetTokens)
	assert.Equal(t, spend.Amount(7), sb[0].FleetCost)
	assert.Equal(t, int64(7), sb[1].FleetTokens)

	// The same write again (a retry), and an older one (a late retry):
	// nothing counts twice, nothing goes back.
	for _, v := range []int64{100, 60} {
		s := []spend.Share{share("acme", v, 5)}
		require.NoError(t, a.Sync(ctx, s))
		assert.Equal(t, int64(140), s[0].FleetTokens)
	}
	tot, err := a.Totals(ctx, "acme", spend.Daily, 20261201)
	require.NoError(t, err)
	assert.Equal(t, redisspend.Totals{Tokens: 140, Cost: 7, Processes: 2}, tot)

	// Figures past 2^53 stay exact (Lua's numbers would round them).
	big := int64(1)<<60 + 1
	s := []spend.Share{share("big", big, spend.Amount(big))}
	require.NoError(t, a.Sync(ctx, s))
	s = []spend.Share{share("big", big-1, spend.Amount(big))}
	require.NoError(t, a.Sync(ctx, s))
	assert.Equal(t, big, s[0].FleetTokens)

	// The tenant id reaches Redis only hashed.
	assert.NotContains(t, a.Key("acme", spend.Daily, 20261201), "acme")
	assert.True(t, strings.HasPrefix(a.Key("acme", spend.Monthly, 202612), p+"{"))
	keys, err := newClient(t, addr).Keys(ctx, p+"*").Result()
	require.NoError(t, err)
	for _, k := range keys {
		assert.NotContains(t, k, "acme")
		ttl, err := newClient(t, addr).PTTL(ctx, k).Result()
		require.NoError(t, err)
		if k == p+"pods" {
			// The processes seen in the last 30 s, for the pod count.
			assert.LessOrEqual(t, ttl, time.Minute)
			continue
		}
		assert.Greater(t, ttl, 48*time.Hour, "kept for its period and two days")
	}
}

// The script cache lost (a restart, SCRIPT FLUSH) costs one reload.
func TestScriptFlushed(t *testing.T) {
	addr := sharedAddr(t)
	s := newStore(t, addr, prefix(t))
	ctx := context.Background()
	require.NoError(t, s.Sync(ctx, []spend.Share{share("acme", 1, 1)}))
	require.NoError(t, newClient(t, addr).ScriptFlush(ctx).Err())
	sh := []spend.Share{share("acme", 2, 1)}
	require.NoError(t, s.Sync(ctx, sh))
	assert.Equal(t, int64(2), sh[0].FleetTokens)
}

func TestOptions(t *testing.T) {
	_, err := redisspend.New(nil, redisspend.Options{Prefix: "a b", Process: "x:y", KeepAfterEnd: -1})
	require.Error(t, err)
	for _, want := range []string{"a client is required", "Prefix", "Process", "KeepAfterEnd"} {
		assert.Contains(t, err.Error(), want)
	}
	s, err := redisspend.New(newClient(t, "127.0.0.1:1"), redisspend.Options{})
	require.NoError(t, err)
	assert.Len(t, s.Process(), 16)
	assert.True(t, strings.HasPrefix(s.Key("t", spend.Daily, 1), redisspend.DefaultPrefix))
	// A dead server fails the exchange within its context; nothing hangs.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	sh := []spend.Share{share("acme", 1, 1)}
	require.Error(t, s.Sync(ctx, sh))
	assert.False(t, sh[0].Synced)
}

// A claim Redis made after its client stopped waiting for the reply (a
// frozen server that thawed) is still the claiming process's when it
// asks again; another process's claim of the same event is not.
func TestClaimAskedAgainIsStillWon(t *testing.T) {
	addr := sharedAddr(t)
	ctx := context.Background()
	pre := prefix(t)
	a, err := redisspend.New(newClient(t, addr), redisspend.Options{Prefix: pre})
	require.NoError(t, err)
	b, err := redisspend.New(newClient(t, addr), redisspend.Options{Prefix: pre})
	require.NoError(t, err)
	claim := func() spend.Claim {
		return spend.Claim{Tenant: "acme", Period: spend.Daily, ID: 20261206, End: time.Now().Add(time.Hour), Event: "daily_tokens:0.7"}
	}
	for range 2 {
		cs := []spend.Claim{claim()}
		require.NoError(t, a.Claim(ctx, cs))
		assert.True(t, cs[0].Claimed)
		assert.True(t, cs[0].Won, "a's claim, asked again")
	}
	cs := []spend.Claim{claim()}
	require.NoError(t, b.Claim(ctx, cs))
	assert.True(t, cs[0].Claimed)
	assert.False(t, cs[0].Won, "b stays silent")
}
