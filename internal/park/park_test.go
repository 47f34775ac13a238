package park_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tierguard/tierguard/internal/park"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const quota, cooling = uint8(1), uint8(2)

func TestParkEndsOnItsOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		epoch := time.Now()
		var l park.Lot
		assert.Equal(t, park.None, l.Check(epoch))
		l.Park(epoch, quota, time.Minute)
		assert.Equal(t, quota, l.Check(epoch))
		until, why := l.Until(epoch)
		assert.Equal(t, epoch.Add(time.Minute), until)
		assert.Equal(t, quota, why)
		time.Sleep(time.Minute)
		assert.Equal(t, park.None, l.Check(epoch))
		assert.False(t, l.Occupied(), "an ended stay is cleared")
	})
}

// TestCoolDownLetsOneProbeThrough: when a cool-down ends, of 64 callers
// one goes through and the others still see it until that one is done.
func TestCoolDownLetsOneProbeThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		epoch := time.Now()
		var l park.Lot
		l.CoolDown(epoch, cooling, 1, 30*time.Second)
		why, _ := l.Enter(epoch)
		assert.Equal(t, cooling, why)
		time.Sleep(30 * time.Second)
		var through atomic.Int32
		var probe atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				if w, p := l.Enter(epoch); w == park.None {
					through.Add(1)
					probe.Store(p)
				}
			})
		}
		wg.Wait()
		assert.Equal(t, int32(1), through.Load())
		l.EndProbe(probe.Load())
		w, p := l.Enter(epoch)
		assert.Equal(t, park.None, w)
		assert.Zero(t, p, "no cool-down left: no probe to end")
	})
}

// TestCoolDownNeverShortensALongerStay: a quota's hour outlasts a
// server's 30 s, and a second ParkOnce for the same reason is not first.
func TestCoolDownNeverShortensALongerStay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		epoch := time.Now()
		var l park.Lot
		assert.True(t, l.ParkOnce(epoch, quota, time.Hour))
		assert.False(t, l.ParkOnce(epoch, quota, time.Hour))
		l.CoolDown(epoch, cooling, 1, 30*time.Second)
		until, why := l.Until(epoch)
		assert.Equal(t, quota, why)
		assert.Equal(t, epoch.Add(time.Hour), until)
		l.Clear()
		assert.Equal(t, park.None, l.Check(epoch))
	})
}

func TestModelsCompareInNormalForm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		epoch := time.Now()
		var m park.Models
		assert.False(t, m.Has("gemini-2.5-pro", epoch))
		m.Mark("models/Gemini-2.5-Pro ", epoch, time.Minute)
		assert.True(t, m.Has("gemini-2.5-pro", epoch))
		time.Sleep(time.Minute)
		assert.False(t, m.Has("gemini-2.5-pro", epoch))
		m.Mark("gemini-2.0-flash", epoch, time.Hour)
		m.Clear()
		assert.False(t, m.Has("gemini-2.0-flash", epoch))
	})
}

// TestTallyWeighsEvidence: a 429 takes the tier out only when the window
// holds count of them and they are share of its calls; a per-minute quota
// or a failed probe does at once; a rule that fires closes the window,
// and so does its end.
func TestTallyWeighsEvidence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		epoch := time.Now()
		const window, count, share = 10 * time.Second, 3, 0.5
		var tl park.Tally
		judge := func() uint8 { return tl.Judge(epoch, false, false, window, count, share) }
		tl.Call(epoch, window)
		assert.Zero(t, judge(), "one 429")
		for range 10 {
			tl.Call(epoch, window)
		}
		assert.Zero(t, judge(), "two 429s among eleven calls")
		assert.Zero(t, judge(), "three 429s, but a quarter of the calls")
		time.Sleep(window)
		assert.Zero(t, judge(), "a new window")
		assert.Zero(t, judge())
		assert.Equal(t, park.ByStorm, judge(), "three 429s, every call of the window")
		assert.Zero(t, judge(), "the window closed when the rule fired")
		assert.Equal(t, park.ByQuota, tl.Judge(epoch, true, false, window, count, share))
		assert.Equal(t, park.ByProbe, tl.Judge(epoch, false, true, window, count, share))
	})
}

// TestCoolDownKeepsItsRule: Rule names the cool-down's rule while it
// lasts, and nothing for another stay.
func TestCoolDownKeepsItsRule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		epoch := time.Now()
		var l park.Lot
		assert.True(t, l.CoolDown(epoch, cooling, park.ByStorm, 30*time.Second))
		assert.Equal(t, park.ByStorm, l.Rule(epoch))
		assert.Equal(t, cooling, l.Check(epoch))
		assert.False(t, l.CoolDown(epoch, cooling, park.ByQuota, time.Second), "a shorter delay does not shorten it")
		time.Sleep(30 * time.Second)
		assert.Zero(t, l.Rule(epoch))
		l.Park(epoch, quota, time.Minute)
		assert.Zero(t, l.Rule(epoch))
	})
}

// TestCoolDownFreshOncePerStay: a cool-down is fresh when it starts, and
// again when the probe at its end fails; lengthening a live one is not,
// and of 64 racing to cool a free lot one finds it fresh.
func TestCoolDownFreshOncePerStay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		epoch := time.Now()
		var l park.Lot
		cooled, fresh := l.CoolDownFresh(epoch, cooling, park.ByStorm, 3*time.Second)
		assert.True(t, cooled)
		assert.True(t, fresh)
		time.Sleep(time.Second)
		cooled, fresh = l.CoolDownFresh(epoch, cooling, park.ByStorm, 3*time.Second)
		assert.True(t, cooled, "lengthened")
		assert.False(t, fresh, "the same stay")
		time.Sleep(3 * time.Second)
		why, probe := l.Enter(epoch)
		require.Equal(t, park.None, why)
		require.NotZero(t, probe, "the probe at the end of the stay")
		cooled, fresh = l.CoolDownFresh(epoch, cooling, park.ByProbe, 3*time.Second)
		l.EndProbe(probe)
		assert.True(t, cooled)
		assert.True(t, fresh, "the failed probe starts a new stay")

		var racing park.Lot
		var fresh64 atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				if _, f := racing.CoolDownFresh(epoch, cooling, park.ByStorm, 3*time.Second); f {
					fresh64.Add(1)
				}
			})
		}
		wg.Wait()
		assert.EqualValues(t, 1, fresh64.Load())
	})
}
