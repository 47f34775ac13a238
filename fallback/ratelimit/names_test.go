package ratelimit_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback/ratelimit"
)

// TestMemberNamedOnceUnderRace: a Group member makes its name the first
// time it is asked, and callers racing to ask first all get the same one;
// its first observer, added while others are, sees its events.
func TestMemberNamedOnceUnderRace(t *testing.T) {
	g, err := ratelimit.NewGroup(ratelimit.Config{Name: "tenant", Requests: 2, Burst: 1, KeysInNames: true}, 8)
	require.NoError(t, err)
	l := g.Get("acme")
	names := make([]string, 8)
	var mu sync.Mutex
	var seen []string
	var wg sync.WaitGroup
	for i := range names {
		wg.Go(func() {
			names[i] = l.Name()
			l.Observe(func(e ratelimit.Event) { mu.Lock(); seen = append(seen, e.Limiter); mu.Unlock() })
		})
	}
	wg.Wait()
	for _, n := range names {
		assert.Equal(t, "tenant/acme", n)
	}
	require.True(t, l.Allow(0))
	assert.False(t, l.Allow(0))
	assert.Equal(t, []string{"tenant/acme", "tenant/acme", "tenant/acme", "tenant/acme", "tenant/acme", "tenant/acme", "tenant/acme", "tenant/acme"}, seen, "every observer saw the refusal")
}
