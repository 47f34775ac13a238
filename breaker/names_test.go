package breaker_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
)

// TestMemberNamedOnceUnderRace: a Group member makes its name the first
// time it is asked, and callers racing to ask first all get the same one.
func TestMemberNamedOnceUnderRace(t *testing.T) {
	g, err := breaker.NewGroup(breaker.Config{Name: "pro"}, 8)
	require.NoError(t, err)
	b := g.Get("acme")
	names := make([]string, 8)
	var wg sync.WaitGroup
	for i := range names {
		wg.Go(func() { names[i] = b.Name() })
	}
	wg.Wait()
	for _, n := range names {
		assert.Equal(t, "pro/#"+sha256Prefix("acme"), n)
	}
}
