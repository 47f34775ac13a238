package redislimit_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback/ratelimit"
	"github.com/tierguard/tierguard/fallback/ratelimit/redislimit"
	"github.com/tierguard/tierguard/internal/testbed/redisserver"
)

// hammer makes every pod's workers ask for a call every millisecond until
// stop is closed, and returns, once they have stopped, when each admitted
// call was admitted since start, by the machine's monotonic clock (the
// clock the limiters count on), sorted.
func hammer(pods []pod, workers int, start time.Time, stop <-chan struct{}) func() []time.Duration {
	var mu sync.Mutex
	var admitted []time.Duration
	var wg sync.WaitGroup
	for _, p := range pods {
		for range workers {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if p.lim.Allow(0) {
						at := time.Since(start)
						mu.Lock()
						admitted = append(admitted, at)
						mu.Unlock()
					}
					time.Sleep(time.Millisecond)
				}
			})
		}
	}
	return func() []time.Duration {
		wg.Wait()
		slices.Sort(admitted)
		return admitted
	}
}

// worstWindow is the most admissions in any window of per, and when that
// window began.
func worstWindow(admitted []time.Duration, per time.Duration) (int, time.Duration) {
	worst, from := 0, time.Duration(0)
	for i := range admitted {
		j, _ := slices.BinarySearch(admitted[i:], admitted[i]+per)
		if j > worst {
			worst, from = j, admitted[i]
		}
	}
	return worst, from
}

// TestFleetKeepsToItsSharesWhileRedisIsOut: four pods, each with its own
// client and store (Pods: 4, or left to count the pods that take turns
// through Redis), share a quota of 400 calls per 2 s through
// one redis-server, and ask for far more. Redis is killed (then
// restarted) or paused (then resumed) for three windows. While it is out,
// each pod keeps to a quarter of the quota, so no window of 2 s — before,
// across the outage's start and end, or within it — holds more than 110 %
// of the quota; and the pods still admit most of their shares, not
// nothing. Before Options.Pods (and with Pods: 1, the default before
// Redis counted the pods), each pod fell back to the whole quota: the
// fleet admitted about four times it.
func TestFleetKeepsToItsSharesWhileRedisIsOut(t *testing.T) {
	redisserver.Skip(t)
	kill := func(s *redisserver.Server) error { s.Kill(); return nil }
	for _, c := range []struct {
		name     string
		out, end func(*redisserver.Server) error
		// pods is Options.Pods: 0 leaves the store to count the pods.
		pods int
	}{
		{"killed", kill, (*redisserver.Server).Restart, 4},
		{"paused", (*redisserver.Server).Freeze, (*redisserver.Server).Thaw, 4},
		{"killed, Pods counted by Redis", kill, (*redisserver.Server).Restart, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := redisserver.Start(t)
			const pods, quota, per = 4, 400, 2 * time.Second
			cfg := ratelimit.Config{Name: "gemini-2.5-pro", Requests: quota, Per: per}
			// A bound that a loaded machine's Redis answers within: a pod
			// that finds Redis slower keeps to its share while the others
			// take the fleet's rate (see Options.Pods).
			opts := redislimit.Options{Pods: c.pods, RequestBound: 100 * time.Millisecond, RetryHealth: 50 * time.Millisecond, OpTimeout: 300 * time.Millisecond}
			p := prefix(t)
			fleet := make([]pod, pods)
			for i := range fleet {
				fleet[i] = newPod(t, srv.Addr, p, cfg, opts)
			}
			stop := make(chan struct{})
			start := time.Now()
			done := hammer(fleet, 4, start, stop)
			time.Sleep(per)
			began := time.Since(start)
			require.NoError(t, c.out(srv))
			ended := false
			defer func() {
				if !ended {
					_ = c.end(srv)
				}
			}()
			time.Sleep(3 * per)
			outage := time.Since(start) - began
			require.NoError(t, c.end(srv))
			ended = true
			requireEventually(t, func() bool {
				for _, x := range fleet {
					if !x.store.Stats().Healthy {
						return false
					}
				}
				return true
			}, "every pod uses Redis again")
			time.Sleep(per)
			close(stop)
			admitted := done()

			worst, from := worstWindow(admitted, per)
			t.Logf("%d admitted in %v; worst window of %v: %d (%.0f %% of the quota), from %v (the outage began at %v)",
				len(admitted), admitted[len(admitted)-1].Round(time.Millisecond), per, worst, 100*float64(worst)/quota,
				from.Round(time.Millisecond), began.Round(time.Millisecond))
			var outages []uint64
			for _, x := range fleet {
				outages = append(outages, x.store.Stats().Outages)
			}
			t.Logf("outages seen by each pod: %v", outages)
			if worst > quota*110/100 {
				// Where the calls went, by tenth of a second around the
				// worst window.
				hist := map[int]int{}
				for _, at := range admitted {
					if at >= from && at < from+per {
						hist[int((at-from)/(100*time.Millisecond))]++
					}
				}
				t.Logf("the worst window's calls by 100 ms: %v", hist)
			}
			assert.LessOrEqual(t, worst, quota*110/100, "no window over 110 % of the quota")
			// Within the outage the shares start empty and come back at
			// (quota − burst) per window, together: 360 per 2 s.
			var during int
			for _, at := range admitted {
				if at >= began && at < began+outage {
					during++
				}
			}
			want := float64(quota-quota/10) * outage.Seconds() / per.Seconds()
			t.Logf("%d admitted during the %v outage, the shares allow %.0f", during, outage.Round(time.Millisecond), want)
			assert.GreaterOrEqual(t, float64(during), want/2, "the pods kept serving from their shares")
			var refused uint64
			for _, x := range fleet {
				refused += x.store.Stats().ShareRefused
			}
			assert.Positive(t, refused, "the shares refused calls the local limits would have admitted")
		})
	}
}
