package otelx

import (
	"context"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// maxActiveSeries bounds the series of tierguard.active_requests: past
// it, requests with a new set of labels (Options.MetricAttributes) are
// counted in one series marked otel.metric.overflow=true, as the SDK does
// with the series of a synchronous instrument past its cardinality limit.
const maxActiveSeries = 2000

// overflowAttr marks the overflow series.
var overflowAttr = attribute.Bool("otel.metric.overflow", true)

// activeSeries counts the requests in flight under one attribute set. The
// gauge callback reports every series: a request costs two atomic adds,
// not two measurements of a synchronous instrument.
type activeSeries struct {
	obs []metric.ObserveOption
	n   atomic.Int64
}

// activeSet holds the series of tierguard.active_requests.
type activeSet struct {
	// series holds every series by its attribute set; an operation's
	// state caches the series of its requests without extra labels.
	series sync.Map // attribute.Distinct → *activeSeries
	count  atomic.Int64
	over   *activeSeries
	once   sync.Once
}

// of returns the series of r's requests.
func (s *activeSet) of(r *reqState) *activeSeries {
	if r.extra == nil {
		if a := r.op.series.Load(); a != nil {
			return a
		}
		a := s.get(r.op.active.set)
		r.op.series.Store(a)
		return a
	}
	if m := r.merged(r.op.active); m != nil {
		if a := m.series.Load(); a != nil {
			return a
		}
		a := s.get(m.set)
		if a != s.over {
			m.series.Store(a)
		}
		return a
	}
	return s.get(r.merge(r.op.active))
}

// get returns set's series, making it if there is room.
func (s *activeSet) get(set attribute.Set) *activeSeries {
	k := set.Equivalent()
	if v, ok := s.series.Load(k); ok {
		return v.(*activeSeries)
	}
	if s.count.Add(1) > maxActiveSeries {
		s.count.Add(-1)
		s.once.Do(func() {
			over := attribute.NewSet(overflowAttr)
			s.over = &activeSeries{obs: []metric.ObserveOption{metric.WithAttributeSet(over)}}
			s.series.Store(over.Equivalent(), s.over)
		})
		return s.over
	}
	v, loaded := s.series.LoadOrStore(k, &activeSeries{obs: []metric.ObserveOption{metric.WithAttributeSet(set)}})
	if loaded {
		s.count.Add(-1)
	}
	return v.(*activeSeries)
}

// observe reports every series.
func (s *activeSet) observe(o metric.Observer, inst metric.Int64ObservableUpDownCounter) {
	s.series.Range(func(_, v any) bool {
		a := v.(*activeSeries)
		o.ObserveInt64(inst, a.n.Load(), a.obs...)
		return true
	})
}

// started counts r in flight.
func (i *Instrumentation) started(r *reqState) {
	r.active = i.active.of(r)
	r.active.n.Add(1)
}

// ended counts r out.
func (i *Instrumentation) ended(_ context.Context, r *reqState) {
	if r.active != nil {
		r.active.n.Add(-1)
		r.active = nil
	}
}
