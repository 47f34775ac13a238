package chaos

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/tierguard/tierguard/breaker"
)

// probeStore is a breaker.Store that shares nothing: its Member only
// watches the breaker's half-open probe permits. A breaker asks its Member
// for a permit (TryProbe) on the goroutine that calls Allow, right after
// taking a local probe slot. The chain calls Allow, then starts the
// stage's first attempt (telling its observer) on that same goroutine, so
// the observer binds the permit to the request's stage there (bind), and
// every attempt of that stage is a probe. Binding matters because the
// permit's release may come from another goroutine: an abandoned probe's
// detached call returns it when it ends, while the request's goroutine has
// moved on to other requests.
type probeStore struct{ m *probeMember }

func (s probeStore) Join(string, breaker.Local) (breaker.Member, error) { return s.m, nil }

type probeMember struct {
	held atomic.Int64 // permits held now
	peak atomic.Int64
	// taken counts permits ever taken.
	taken atomic.Int64

	mu sync.Mutex
	// byGo counts, per goroutine, the permits taken and not yet bound to
	// an attempt.
	byGo map[uint64]int
}

func newProbeMember() *probeMember { return &probeMember{byGo: make(map[uint64]int)} }

func (m *probeMember) Record(breaker.Outcome)          {}
func (m *probeMember) Transitioned(breaker.Transition) {}

func (m *probeMember) TryProbe() bool {
	g := goid()
	m.mu.Lock()
	m.byGo[g]++
	m.mu.Unlock()
	m.taken.Add(1)
	raise(&m.peak, m.held.Add(1))
	return true
}

// Leave does nothing: the soak holds its breakers to the end.
func (m *probeMember) Leave() {}

// ReleaseProbe returns a permit. One taken by this goroutine and never
// bound (the stage ended before its first attempt) is unbound here; a
// bound one needs nothing, whichever goroutine returns it.
func (m *probeMember) ReleaseProbe() {
	g := goid()
	m.mu.Lock()
	m.unbindLocked(g)
	m.mu.Unlock()
	m.held.Add(-1)
}

func (m *probeMember) unbindLocked(g uint64) bool {
	switch n := m.byGo[g]; {
	case n == 0:
		return false
	case n == 1:
		delete(m.byGo, g)
	default:
		m.byGo[g] = n - 1
	}
	return true
}

// bind reports whether the calling goroutine took a permit that no attempt
// has claimed yet, and claims it: the stage about to make its first
// attempt is a probe.
func (m *probeMember) bind() bool {
	if m.held.Load() == 0 {
		return false
	}
	g := goid()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.unbindLocked(g)
}

// goid returns the calling goroutine's id, read from its stack header
// ("goroutine 123 [running]:"). Slow, so it is called only around probes.
func goid() uint64 {
	var buf [40]byte
	n := runtime.Stack(buf[:], false)
	b := buf[:n]
	const prefix = "goroutine "
	if len(b) < len(prefix) {
		return 0
	}
	var id uint64
	for _, c := range b[len(prefix):] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}

// raise sets peak to v if v is larger.
func raise(peak *atomic.Int64, v int64) {
	for p := peak.Load(); v > p && !peak.CompareAndSwap(p, v); p = peak.Load() {
	}
}
