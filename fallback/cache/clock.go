package cache

import (
	"sync"
	"sync/atomic"
	"time"
)

// tick is how often a coarse clock reads the real one while the cache is
// being read.
const tick = 10 * time.Millisecond

// coarseClock spares the exact layer's hits a read of the monotonic clock,
// which costs more than the rest of a hit: a timer reads it every tick
// while hits use it, and a hit trusts it only for entries that expire
// more than a tick after its last reading. The next reading comes before
// the clock passes that tick — exactly so in a testing/synctest bubble,
// where time cannot move past a due timer; elsewhere as long as the
// runtime runs its timers on time — so such an entry has not expired.
// Entries closer to their expiry, and every hit while the clock is
// stopped, read the real clock. When a tick finds that no hit used the
// clock since the last one, the clock stops: an idle cache has no timer
// running.
type coarseClock struct {
	epoch time.Time
	// now is the last reading (nanoseconds since epoch), -1 when stopped.
	now  atomic.Int64
	used atomic.Bool

	closed atomic.Bool

	mu    sync.Mutex
	timer *time.Timer
}

func newCoarseClock(epoch time.Time) *coarseClock {
	k := &coarseClock{epoch: epoch}
	k.now.Store(-1)
	return k
}

// fresh reports whether an entry expiring at expires is known not to have
// expired; false means read the real clock to know.
func (k *coarseClock) fresh(expires int64) bool {
	now := k.now.Load()
	if now < 0 {
		if !k.closed.Load() {
			k.start()
		}
		return false
	}
	if !k.used.Load() {
		k.used.Store(true)
	}
	return expires > now+int64(tick)
}

// start reads the clock and arms the timer, unless it runs or the cache
// is closed.
func (k *coarseClock) start() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed.Load() || k.now.Load() >= 0 {
		return
	}
	// Armed before the reading, so that the next reading is due at most a
	// tick after this one.
	if k.timer == nil {
		k.timer = time.AfterFunc(tick, k.read)
	} else {
		k.timer.Reset(tick)
	}
	k.used.Store(false)
	k.now.Store(int64(time.Since(k.epoch)))
}

// read is the timer's reading, every tick while hits use the clock.
func (k *coarseClock) read() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed.Load() || !k.used.Swap(false) {
		k.now.Store(-1)
		return
	}
	k.timer.Reset(tick)
	k.now.Store(int64(time.Since(k.epoch)))
}

// stop stops the clock for good.
func (k *coarseClock) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed.Store(true)
	k.now.Store(-1)
	if k.timer != nil {
		k.timer.Stop()
	}
}
