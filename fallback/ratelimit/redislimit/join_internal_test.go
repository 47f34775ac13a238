package redislimit

import (
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback/ratelimit"
)

// TestJoinShapesTheFleetsBucket: the fleet's bucket keeps what the quota
// says to the fraction of a microsecond — a Per cut to whole microseconds
// ran the fleet faster than its quota, and below one it lost its
// requests limit (an interval of 0 means none) — and its window stays
// within the local bucket's, an int64 of nanoseconds.
func TestJoinShapesTheFleetsBucket(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rdb.Close() })
	s, err := New(rdb, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	join := func(q ratelimit.Quota) *member {
		m, err := s.Join("x", q)
		require.NoError(t, err)
		return m.(*member)
	}

	m := join(ratelimit.Quota{Requests: 2, Burst: 1, Per: 500 * time.Nanosecond})
	assert.InDelta(t, 0.5, m.req.interval, 1e-12, "half a microsecond a call")
	assert.InDelta(t, 0.5, m.req.window, 1e-12)

	m = join(ratelimit.Quota{Requests: 3, Burst: 1, Per: 1500 * time.Nanosecond})
	assert.InDelta(t, 0.75, m.req.interval, 1e-12)

	m = join(ratelimit.Quota{Tokens: math.MaxInt64, TokenBurst: math.MaxInt64 - 1, Per: time.Minute})
	assert.Equal(t, 60e6, m.tok.interval)
	assert.Equal(t, maxWindow, m.tok.window, "cut to an int64 of nanoseconds")

	m = join(ratelimit.Quota{Requests: 2, Burst: 1, Per: math.MaxInt64})
	assert.Equal(t, maxWindow, m.req.window, "one call, the longest Duration")
}
