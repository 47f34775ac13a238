package breaker

import (
	"math"
	"sync/atomic"
)

// maxHalfOpenProbes bounds HalfOpenProbes: each probe has a slot, and a
// hostile configuration must not allocate without bound.
const maxHalfOpenProbes = 1024

// releasing marks a slot whose probe is being released: taken by nobody,
// written off by nobody.
const releasing = math.MaxUint64

// probeSlots are a breaker's half-open probe slots. They belong to the
// breaker, not to one half-open period: a probe holds its slot from Allow
// until its token reports, whatever the breaker did meanwhile, so that a
// probe still running from an earlier period counts against the limit of
// the next one. A slot holds its probe's ticket — the breaker's monotonic
// clock when it was admitted, plus one — or 0 when free; a token gives its
// slot back only if the slot still holds its ticket.
type probeSlots struct {
	// held counts the slots taken or being taken; it never exceeds
	// len(slots), so a caller that raised it finds a free slot.
	held  atomic.Int64
	slots []atomic.Uint64
}

func newProbeSlots(n int) *probeSlots {
	return &probeSlots{slots: make([]atomic.Uint64, n)}
}

// take reserves a slot for a probe admitted at now and returns its index
// and ticket, or false when every slot is held.
func (s *probeSlots) take(now int64) (int32, uint64, bool) {
	limit := int64(len(s.slots))
	for {
		n := s.held.Load()
		if n >= limit {
			return 0, 0, false
		}
		if s.held.CompareAndSwap(n, n+1) {
			break
		}
	}
	ticket := ticketOf(now)
	// held counts at most len(slots) holders, this one included: a free
	// slot exists, though others may take the ones this scan sees first.
	for {
		for i := range s.slots {
			if s.slots[i].Load() == 0 && s.slots[i].CompareAndSwap(0, ticket) {
				return int32(i), ticket, true
			}
		}
	}
}

// ticketOf is the ticket of a probe admitted at start.
func ticketOf(start int64) uint64 { return uint64(start) + 1 }

// claim starts giving back slot i for the probe with ticket; it reports
// false when the slot no longer holds that probe.
func (s *probeSlots) claim(i int32, ticket uint64) bool {
	return s.slots[i].CompareAndSwap(ticket, releasing)
}

// free ends the release of a claimed slot.
func (s *probeSlots) free(i int32) {
	s.slots[i].Store(0)
	s.held.Add(-1)
}

// inFlight returns the number of slots held.
func (s *probeSlots) inFlight() int { return int(s.held.Load()) }

// oldest returns the admission time of the longest-held probe, if any.
func (s *probeSlots) oldest() (int64, bool) {
	first, ok := int64(0), false
	for i := range s.slots {
		v := s.slots[i].Load()
		if v == 0 || v == releasing {
			continue
		}
		if start := int64(v - 1); !ok || start < first {
			first, ok = start, true
		}
	}
	return first, ok
}

// writeOff frees the slots of the probes admitted at or before deadline,
// calling release with each one's admission time before its slot is
// freed.
func (s *probeSlots) writeOff(deadline int64, release func(start int64)) {
	for i := range s.slots {
		v := s.slots[i].Load()
		if v == 0 || v == releasing || int64(v-1) > deadline {
			continue
		}
		if s.slots[i].CompareAndSwap(v, releasing) {
			release(int64(v - 1))
			s.free(int32(i))
		}
	}
}

// probesInFlight is the probes held now, 0 before any half-open period.
func (b *Breaker) probesInFlight() int {
	if p := b.probes.Load(); p != nil {
		return p.inFlight()
	}
	return 0
}
