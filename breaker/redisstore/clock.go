package redisstore

import (
	"math"
	"sync/atomic"
	"time"
)

// offset translates this process's monotonic clock into the clock of the
// Redis server that holds one breaker's keys (Redis's TIME), so that a
// proposal can say until when it is valid, when it was decided and when its
// cooldown ends in Redis's terms, whatever the processes' own clocks say.
//
// Each reply carries Redis's clock r, read while the command ran: somewhere
// between the local instants sent and received. So the offset is at least
// r − received and at most r − sent. The estimate is the highest lower
// bound seen, which the fastest reply makes tight (its error is below that
// reply's round trip). A reply whose upper bound falls below the estimate
// means Redis's clock went back (a failover to a server with a slower
// clock): the estimate starts again from that reply. Being a lower bound,
// the estimate errs towards expiring a proposal early, never late.
type offset struct {
	us atomic.Int64 // Redis µs minus local µs; noOffset until a reply
}

// noOffset marks an offset never measured.
const noOffset = math.MinInt64

func newOffset() *offset {
	o := &offset{}
	o.us.Store(noOffset)
	return o
}

// get returns the offset in microseconds, and whether a reply measured it.
func (o *offset) get() (int64, bool) {
	v := o.us.Load()
	return v, v != noOffset
}

// observe takes one reply: Redis's clock redisUs, read by a command sent at
// local sentUs and answered at local recvUs.
func (o *offset) observe(redisUs, sentUs, recvUs int64) {
	lo, hi := redisUs-recvUs, redisUs-sentUs
	for {
		cur := o.us.Load()
		next := lo
		if cur != noOffset && lo <= cur && cur <= hi {
			next = cur
		}
		if next == cur || o.us.CompareAndSwap(cur, next) {
			return
		}
	}
}

// toRedis converts a local instant (µs since the store's epoch) into
// Redis's clock, in milliseconds.
func toRedis(localUs, off int64) int64 {
	return (localUs + off) / 1000
}

// sinceEpoch is t in microseconds since the store's epoch, on the monotonic
// clock.
func sinceEpoch(t, epoch time.Time) int64 { return t.Sub(epoch).Microseconds() }
