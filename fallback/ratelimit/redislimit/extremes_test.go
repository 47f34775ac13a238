package redislimit_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback/ratelimit"
	"github.com/tierguard/tierguard/fallback/ratelimit/redislimit"
	"github.com/tierguard/tierguard/internal/testbed/redisserver"
)

const year = 365 * 24 * time.Hour

// allowed is how many of tries calls of tokens tokens l admits now.
func allowed(l *ratelimit.Limiter, tries int, tokens int64) int {
	n := 0
	for range tries {
		if l.Allow(tokens) {
			n++
		}
	}
	return n
}

// TestTinyLimitAcrossTheFleet: golang.org/x/time/rate's TestTinyLimit for
// a fleet — a burst of one that takes two centuries, or the longest
// Duration, to come back. Each pod's own limiter admits one call, the
// fleet one in all; the fleet's refusal says the turn is centuries away
// (its wait saturates, where a sum of durations wrapped round to the
// past), and the refused pod does not ask Redis again meanwhile.
func TestTinyLimitAcrossTheFleet(t *testing.T) {
	srv := redisserver.Need(t, shared)
	for _, c := range []struct {
		name      string
		per, wait time.Duration
	}{
		{"two centuries", 200 * year, 199 * year},
		// The fleet's wait is counted to 2^53 µs, 285 years.
		{"the longest Duration", math.MaxInt64, 280 * year},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := prefix(t)
			cfg := ratelimit.Config{Name: "tiny", Requests: 2, Burst: 1, Per: c.per}
			a := newPod(t, srv.Addr, p, cfg, redislimit.Options{Pods: 1})
			b := newPod(t, srv.Addr, p, cfg, redislimit.Options{Pods: 1})
			assert.Equal(t, 1, allowed(a.lim, 10, 0), "a's own burst of one, granted by the fleet")
			assert.Zero(t, allowed(b.lim, 10, 0), "the fleet's turn is spent")
			r := b.lim.Reserve(0)
			assert.True(t, r.Retry(), "refused by the fleet")
			assert.Greater(t, r.Delay(), c.wait)
			takes := b.store.Stats().Takes
			assert.Zero(t, allowed(b.lim, 10, 0))
			assert.Equal(t, takes, b.store.Stats().Takes, "b waits for the fleet's word, without asking again")
			for _, x := range []pod{a, b} {
				st := x.store.Stats()
				assert.Zero(t, st.Errors)
				assert.True(t, st.Healthy)
			}
		})
	}
}

// TestHugeBurstAcrossTheFleet: a token burst near the largest int64 at
// one token a minute. Its window would be 10^26 µs, beyond what Lua's
// doubles count and what SET takes as an expiry (written 5.5e+23): every
// take failed, and the store stopped using Redis for all its limiters.
// The fleet's window is cut as the local one is, to an int64 of
// nanoseconds: what one pod spends at once, another cannot.
func TestHugeBurstAcrossTheFleet(t *testing.T) {
	srv := redisserver.Need(t, shared)
	p := prefix(t)
	cfg := ratelimit.Config{Name: "huge", Tokens: math.MaxInt64, TokenBurst: math.MaxInt64 - 1}
	a := newPod(t, srv.Addr, p, cfg, redislimit.Options{Pods: 1})
	b := newPod(t, srv.Addr, p, cfg, redislimit.Options{Pods: 1})
	const call = 100_000_000
	require.True(t, a.lim.Allow(call))
	assert.False(t, b.lim.Allow(call), "a spent the fleet's window")
	for _, x := range []pod{a, b} {
		st := x.store.Stats()
		assert.Zero(t, st.Errors)
		assert.Zero(t, st.FailedOpen)
		assert.True(t, st.Healthy)
	}
	assert.Equal(t, uint64(1), b.store.Stats().Refused)
}
