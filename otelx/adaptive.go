package otelx

import (
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tierguard/tierguard/bulkhead"
)

// An adaptive bulkhead's limit and calls in flight are the
// tierguard.bulkhead.limit and tierguard.bulkhead.in_flight every watched
// bulkhead exports (its Stats().Max is the limit now); what a bulkhead with
// priorities adds is its refusals by priority, here. A throttled call is a
// skip of its own reason (throttled) in tierguard.skips, as every skip is.

const (
	// metricBulkheadRejectedPriority counts a priority bulkhead's refusals
	// by priority.
	metricBulkheadRejectedPriority = "tierguard.bulkhead.priority.rejected"
)

// attrPriority is the priority of a bulkhead's refused calls.
var attrPriority = attribute.Key("tierguard.bulkhead.priority")

// priorityAttrs are a bulkhead's attribute sets, one per priority, in the
// order of bulkhead.Priorities.
type priorityAttrs [len(bulkhead.Priorities)]*attrs

func newPriorityAttrs(name string) *priorityAttrs {
	var a priorityAttrs
	for i, p := range bulkhead.Priorities {
		a[i] = newAttrs(attrBulkhead.String(name), attrPriority.String(p.String()))
	}
	return &a
}

// createAdaptive makes the instrument of refusals by priority.
func (m *instruments) createAdaptive(meter metric.Meter) error {
	var err error
	m.bhRejectedPriority, err = meter.Int64ObservableCounter(metricBulkheadRejectedPriority, metric.WithUnit("{call}"),
		metric.WithDescription("Refusals of a bulkhead with priorities (bulkhead.Config.Reserve), by priority."))
	return err
}

// observePriorities reports the refusals by priority of w's bulkhead, whose
// figures are s, if it has priorities: a bulkhead without reads none and
// gets no series.
func (i *Instrumentation) observePriorities(o metric.Observer, w *watchedBulkhead, s bulkhead.Stats) {
	if w.b.Config().Reserve == 0 {
		return
	}
	a := w.priorities.Load()
	if a == nil {
		w.priorities.CompareAndSwap(nil, newPriorityAttrs(w.b.Name()))
		a = w.priorities.Load()
	}
	for k, n := range s.RejectedAt {
		o.ObserveInt64(i.m.bhRejectedPriority, int64(n), a[k].obs...)
	}
}

// priorityCache is the lazily made attribute sets of a watched bulkhead's
// priorities.
type priorityCache = atomic.Pointer[priorityAttrs]
