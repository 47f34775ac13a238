//go:build !race

package striped_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tierguard/tierguard/internal/striped"
)

// TestAddAllocatesNothing: a processor's token is made once and reused.
// (Under the race detector a sync.Pool drops some of what it is given,
// so this runs without it.)
func TestAddAllocatesNothing(t *testing.T) {
	var c striped.Counter
	c.Add(1)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { c.Add(1) }))
}
