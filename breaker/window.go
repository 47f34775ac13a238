package breaker

import (
	"sync/atomic"
	"time"
)

const windowBuckets = 10

// window counts calls, failures and slow calls over a rolling time window
// kept in buckets. Increments are lock-free; a bucket is reset by whoever
// first records into it in a new period. An increment racing with that
// reset may be lost or land in the new period: the ratios are statistics,
// and a handful of calls at a bucket boundary does not change them.
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

func (w *window) record(now int64, failure, slow bool) {
	p := now / w.width
	bk := &w.buckets[p%windowBuckets]
	if old := bk.period.Load(); old != p && bk.period.CompareAndSwap(old, p) {
		bk.total.Store(0)
		bk.failures.Store(0)
		bk.slow.Store(0)
	}
	bk.total.Add(1)
	if failure {
		bk.failures.Add(1)
	}
	if slow {
		bk.slow.Add(1)
	}
}

func (w *window) sum(now int64) (total, failures, slow int64) {
	p := now / w.width
	for i := range w.buckets {
		bk := &w.buckets[i]
		if bp := bk.period.Load(); bp > p-windowBuckets && bp <= p {
			total += bk.total.Load()
			failures += bk.failures.Load()
			slow += bk.slow.Load()
		}
	}
	return total, failures, slow
}
