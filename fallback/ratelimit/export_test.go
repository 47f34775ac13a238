package ratelimit

import (
	"context"
	"math"
	"time"
)

// TurnCame is turnCame: whether a wait for a turn due at due, which ctx
// ended, takes its turn.
func TurnCame(ctx context.Context, due time.Time) bool { return turnCame(ctx, due) }

// TestBucket drives a bucket on explicit times (offsets from an epoch), as
// golang.org/x/time/rate's tests drive its Limiter with AllowN(t, n).
type TestBucket struct{ b bucket }

// TestReservation is a bucket reservation the tests may cancel.
type TestReservation struct {
	after, c int64
	Act      time.Duration
	OK       bool
}

// NewTestBucket returns a bucket of limit tokens per second and burst; a
// token's time is rounded to whole nanoseconds (exact for the limits the
// tests use).
func NewTestBucket(limit float64, burst int64) *TestBucket {
	t := &TestBucket{}
	t.b.init(newRate(int64(math.Round(float64(time.Second)/limit)), 1, burst))
	return t
}

// NewTestBucketRate returns a bucket of count tokens per per (the shape a
// Limiter's Config gives its buckets: count is the quota less the burst)
// and burst.
func NewTestBucketRate(per time.Duration, count, burst int64) *TestBucket {
	t := &TestBucket{}
	t.b.init(newRate(int64(per), count, burst))
	return t
}

// AllowN takes n tokens at t if they are there.
func (t *TestBucket) AllowN(at time.Duration, n int64) bool {
	_, _, _, ok := t.b.reserve(int64(at), n, int64(at))
	return ok
}

// ReserveN reserves n tokens at t, acting no later than at+maxWait.
func (t *TestBucket) ReserveN(at time.Duration, n int64, maxWait time.Duration) TestReservation {
	limit := int64(math.MaxInt64)
	if maxWait >= 0 {
		limit = int64(at + maxWait)
	}
	after, act, c, ok := t.b.reserve(int64(at), n, limit)
	return TestReservation{after: after, c: c, Act: time.Duration(act), OK: ok}
}

// CancelAt cancels r at t.
func (t *TestBucket) CancelAt(r TestReservation, at time.Duration) {
	if r.OK {
		t.b.cancel(int64(at), r.after, r.c, int64(r.Act))
	}
}

// TokensAt returns the tokens at t.
func (t *TestBucket) TokensAt(at time.Duration) float64 { return t.b.tokens(int64(at)) }

// Adjust takes (or gives back) n tokens at t.
func (t *TestBucket) Adjust(at time.Duration, n int64) { t.b.adjust(int64(at), n) }
