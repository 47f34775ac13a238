package otelx

import (
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
)

// Bounds of the caches of attribute sets made per request label or pool
// member. Past them a set is built for each measurement, as without the
// caches: slower, never wrong. The OpenTelemetry SDK keeps at most 2,000
// series per instrument by default, so a cache larger than that would
// hold sets whose series the SDK folds into its overflow series anyway.
const (
	// maxProfiles bounds the combinations of request labels cached.
	maxProfiles = 2000
	// maxMergedSets bounds the sets cached over every combination.
	maxMergedSets = 8192
	// maxMemberSets bounds a stage's sets named by a pool member: 64
	// members, hedged or not, each in a few classes.
	maxMemberSets = 1024
)

// labelProfile holds, for one combination of request labels (the values
// of Options.MetricAttributes a request carries), the attribute sets
// those labels make with each precomputed set, so that a labelled
// request's measurements build no set. Requests of the same tenant share
// one profile.
type labelProfile struct {
	// extra are the labels, shared read-only by every request with them.
	extra []attribute.KeyValue
	// sets maps a precomputed set to its union with extra.
	sets cowMap[*attrs, attrs]
}

// labelProfiles is an Instrumentation's cache of labelProfiles.
type labelProfiles struct {
	seed maphash.Seed
	// byHash holds the profiles by their labels' hash; copied on write
	// under mu.
	byHash atomic.Pointer[map[uint64][]*labelProfile]
	mu     sync.Mutex
	n      int // profiles cached, under mu
	// merged counts the sets cached in every profile.
	merged atomic.Int64
}

// hashLabels hashes kvs; ok is false when a value is of a kind the cache
// does not hold (a slice), whose requests build their sets as they go.
func (p *labelProfiles) hashLabels(kvs []attribute.KeyValue) (h uint64, ok bool) {
	var mh maphash.Hash
	mh.SetSeed(p.seed)
	for _, kv := range kvs {
		mh.WriteString(string(kv.Key))
		mh.WriteByte(byte(kv.Value.Type()))
		switch kv.Value.Type() {
		case attribute.STRING:
			mh.WriteString(kv.Value.AsString())
		case attribute.INT64:
			writeUint64(&mh, uint64(kv.Value.AsInt64()))
		case attribute.FLOAT64:
			writeUint64(&mh, math.Float64bits(kv.Value.AsFloat64()))
		case attribute.BOOL:
			if kv.Value.AsBool() {
				mh.WriteByte(1)
			} else {
				mh.WriteByte(0)
			}
		default:
			return 0, false
		}
	}
	return mh.Sum64(), true
}

func writeUint64(h *maphash.Hash, v uint64) {
	var b [8]byte
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
	_, _ = h.Write(b[:])
}

// sameLabels reports whether a and b hold the same labels in the same
// order; both hold scalar values only (hashLabels accepted them).
func sameLabels(a, b []attribute.KeyValue) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || a[i].Value != b[i].Value {
			return false
		}
	}
	return true
}

// of returns the profile of kvs, making it if there is room; nil when
// there is none or kvs cannot be cached. A profile made here keeps a copy
// of kvs, which may be the caller's buffer.
func (p *labelProfiles) of(kvs []attribute.KeyValue) *labelProfile {
	h, ok := p.hashLabels(kvs)
	if !ok {
		return nil
	}
	if m := p.byHash.Load(); m != nil {
		for _, lp := range (*m)[h] {
			if sameLabels(lp.extra, kvs) {
				return lp
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.byHash.Load()
	if old != nil {
		for _, lp := range (*old)[h] {
			if sameLabels(lp.extra, kvs) {
				return lp
			}
		}
	}
	if p.n >= maxProfiles {
		return nil
	}
	lp := &labelProfile{extra: append([]attribute.KeyValue(nil), kvs...)}
	m := make(map[uint64][]*labelProfile, p.n+1)
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[h] = append(m[h][:len(m[h]):len(m[h])], lp)
	p.byHash.Store(&m)
	p.n++
	return lp
}

// merged returns a's set with the profile's labels added, making it if
// there is room; nil when there is none.
func (lp *labelProfile) merged(all *labelProfiles, a *attrs) *attrs {
	return lp.sets.get(a, func(int) *attrs {
		if all.merged.Add(1) > maxMergedSets {
			all.merged.Add(-1)
			return nil
		}
		return newAttrs(append(a.set.ToSlice(), lp.extra...)...)
	})
}

// cowMap is a map read without a lock and copied on write, for the
// caches of attribute sets: read on every measurement, written once per
// key.
type cowMap[K comparable, V any] struct {
	m  atomic.Pointer[map[K]*V]
	mu sync.Mutex
}

// get returns k's value, making it with build(n), n the keys held, when
// there is none; build may return nil (no room), and then nothing is
// kept.
func (c *cowMap[K, V]) get(k K, build func(n int) *V) *V {
	if m := c.m.Load(); m != nil {
		if v := (*m)[k]; v != nil {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	n := 0
	if old != nil {
		if v := (*old)[k]; v != nil {
			return v
		}
		n = len(*old)
	}
	v := build(n)
	if v == nil {
		return nil
	}
	m := make(map[K]*V, n+1)
	if old != nil {
		for key, val := range *old {
			m[key] = val
		}
	}
	m[k] = v
	c.m.Store(&m)
	return v
}

// memberKey identifies an attempt's set named by its pool member or as
// a hedge.
type memberKey struct {
	class  int
	member string
	hedge  bool
}

// memberSets caches a stage's attempt sets named by a pool member or as
// a hedge.
type memberSets struct {
	sets cowMap[memberKey, attrs]
}

// get returns base (the attempts' set of the class) with the member and
// hedge added, making it if there is room; nil when there is none.
func (ms *memberSets) get(base *attrs, k memberKey) *attrs {
	return ms.sets.get(k, func(n int) *attrs {
		if n >= maxMemberSets {
			return nil
		}
		return newAttrs(withMember(base.set.ToSlice(), k.member, k.hedge)...)
	})
}

// withMember adds an attempt's member and hedge to kv.
func withMember(kv []attribute.KeyValue, member string, hedge bool) []attribute.KeyValue {
	if member != "" {
		kv = append(kv, attrMember.String(member))
	}
	if hedge {
		kv = append(kv, attrHedge.Bool(true))
	}
	return kv
}
