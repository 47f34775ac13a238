package cache

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// errCounter counts its Err calls: each one reads the clock when the
// context is a budget's.
type errCounter struct {
	context.Context
	calls int
}

func (c *errCounter) Err() error {
	c.calls++
	return c.Context.Err()
}

// TestExtractChecksItsContextBeforeSlotsThatScan pins where extract reads
// its context: before the first slot, then only before a slot that scans
// the prompt. A prompt with none of the built-in slots' bytes is read for
// them once, and checked once; an ended context still cuts it.
func TestExtractChecksItsContextBeforeSlotsThatScan(t *testing.T) {
	require.Greater(t, len(builtins), 1)
	for _, s := range builtins {
		require.NotZero(t, s.needs, "every built-in slot has a prefilter")
	}
	ctx := &errCounter{Context: context.Background()}
	_, how := extract(ctx, "Why is the sky blue?", builtins, normalizeWithin, 1<<20)
	assert.Equal(t, constant, how)
	assert.Equal(t, 1, ctx.calls, "checked before the first slot only")

	ended, cancel := context.WithCancel(context.Background())
	cancel()
	_, how = extract(ended, "Why is the sky blue?", builtins, normalizeWithin, 1<<20)
	assert.Equal(t, cut, how, "an ended context cuts even a prompt no slot scans")
}
