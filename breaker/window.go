package breaker

import (
	"math"
	"runtime"
	"sync/atomic"
	"time"
)

const windowBuckets = 10

// window counts calls, failures and slow calls over a rolling time window
// kept in buckets. Increments are lock-free; a bucket is reset by whoever
// first records into it in a new period, while the bucket is marked as
// resetting, so that no increment of the new period is wiped by it (a
// failure counted without its call would inflate the failure ratio of a
// fresh bucket). A late increment of the previous period may land in the
// new one: the ratios are statistics, and a call at a bucket boundary
// does not change them.
type window struct {
	width   int64
	buckets [windowBuckets]bucket
}

type bucket struct {
	period   atomic.Int64
	total    atomic.Int64
	failures atomic.Int64
	slow     atomic.Int64
}

func newWindow(span time.Duration, now int64) *window {
	w := &window{width: max(int64(span)/windowBuckets, 1)}
	p := now / w.width
	for i := range w.buckets {
		// Mark every bucket as belonging to an expired period.
		w.buckets[i].period.Store(p - windowBuckets)
	}
	return w
}

// resetting marks a bucket being reset for a new period; sum skips it.
const resetting = math.MinInt64

func (w *window) record(now int64, failure, slow bool) {
	p := now / w.width
	bk := &w.buckets[p%windowBuckets]
	for {
		old := bk.period.Load()
		if old >= p {
			// Current, or this record is late and a newer period has the
			// bucket: it counts there.
			break
		}
		if old != resetting && bk.period.CompareAndSwap(old, resetting) {
			bk.total.Store(0)
			bk.failures.Store(0)
			bk.slow.Store(0)
			bk.period.Store(p)
			break
		}
		// Another recorder is resetting it: three stores away.
		runtime.Gosched()
	}
	bk.total.Add(1)
	if failure {
		bk.failures.Add(1)
	}
	if slow {
		bk.slow.Add(1)
	}
}

// sum reads the window's figures. It reads each bucket's failures and
// slow calls before its total: record adds a call to the total first, so
// every failure read is in the total read after it, and calls recorded
// meanwhile can only lower the ratios a moment, never raise them — a
// breaker must not trip on a torn read (totals read first let two
// concurrent failures make 3 calls look like 3 failures).
func (w *window) sum(now int64) (total, failures, slow int64) {
	p := now / w.width
	for i := range w.buckets {
		bk := &w.buckets[i]
		if bp := bk.period.Load(); bp > p-windowBuckets && bp <= p {
			failures += bk.failures.Load()
			slow += bk.slow.Load()
			total += bk.total.Load()
		}
	}
	return total, failures, slow
}
