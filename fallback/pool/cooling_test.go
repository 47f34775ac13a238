package pool_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/pool"
)

// The calls in flight on a key when it cools down come back 429 too:
// they lengthen its stay, and Observe hears of the stay once. The probe
// at its end failing starts a new one, heard again.
func TestMemberCoolingToldOncePerStay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		perMinute := classify.Wrap(errors.New("429"), classify.Verdict{Class: classify.RateLimited, HTTPStatus: 429, RetryAfter: 3 * time.Second, PerMinute: true, Reason: "scripted"})
		release := make(chan struct{})
		var back atomic.Int64
		a := fallback.Tier("a", func(ctx context.Context, _ string) (string, error) {
			<-release
			// They come back one after another, each lengthening the stay.
			time.Sleep(time.Duration(back.Add(1)) * 10 * time.Millisecond)
			return "", perMinute
		})
		var bCalls atomic.Int64
		b := fallback.Tier("b", func(context.Context, string) (string, error) {
			// Held too, so that least in flight sends half the calls to a.
			<-release
			bCalls.Add(1)
			return "b", nil
		})
		p, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{{Key: "a", Tier: a}, {Key: "b", Tier: b}}})
		require.NoError(t, err)
		var mu sync.Mutex
		var events []pool.MemberEvent
		defer p.Observe(func(e pool.MemberEvent) { mu.Lock(); events = append(events, e); mu.Unlock() })()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				out, err := p.Call(context.Background(), "q")
				assert.NoError(t, err)
				assert.Equal(t, "b", out, "rotated to the other key")
			})
		}
		synctest.Wait() // those sent to key a wait there
		require.Greater(t, p.Members()[0].InFlight, 1, "several calls on key a")
		close(release)
		wg.Wait()
		mu.Lock()
		require.Len(t, events, 1, "one stay, one event")
		assert.Equal(t, pool.MemberCooling, events[0].Out)
		mu.Unlock()

		time.Sleep(3 * time.Second)
		for range 2 {
			// Round the members: one call is the probe on a, 429 again.
			_, err = p.Call(context.Background(), "q")
			require.NoError(t, err)
		}
		mu.Lock()
		assert.Len(t, events, 2, "the failed probe starts a new stay")
		mu.Unlock()
	})
}
