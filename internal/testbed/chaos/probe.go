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
// taking a local probe slot, and returns it (ReleaseProbe) from Token.Done.
// The chain calls Allow, then starts the attempt (telling its observer) on
// that same goroutine, so the observer can tell exactly which attempts are
// probes by asking which goroutine holds a permit.
type probeStore struct{ m *probeMember }

func (s probeStore) Join(string, breaker.Local) (breaker.Member, error) { return s.m, nil }

type probeMember struct {
	held atomic.Int64 // permits held now
	peak atomic.Int64
	// taken counts permits ever taken.
	taken atomic.Int64

	mu   sync.Mutex
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

func (m *probeMember) ReleaseProbe() {
	g := goid()
	m.mu.Lock()
	if m.byGo[g] > 1 {
		m.byGo[g]--
	} else {
		delete(m.byGo, g)
	}
	m.mu.Unlock()
	m.held.Add(-1)
}

// holdsProbe reports whether the calling goroutine holds a probe permit.
func (m *probeMember) holdsProbe() bool {
	if m.held.Load() == 0 {
		return false
	}
	g := goid()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.byGo[g] > 0
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
