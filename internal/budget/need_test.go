package budget_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tierguard/tierguard/internal/budget"
)

// TestNeedSettlesNearAHighQuantile: fed latencies uniform in [100, 500)
// ms, the estimate settles near their 90th percentile and inside its
// bounds.
func TestNeedSettlesNearAHighQuantile(t *testing.T) {
	var n budget.Need
	n.Init(100*time.Millisecond, 0)
	assert.Equal(t, 100*time.Millisecond, n.Get(), "starts at the floor")
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		n.Answered(100*time.Millisecond + time.Duration(rng.Int64N(int64(400*time.Millisecond))))
	}
	assert.InDelta(t, float64(460*time.Millisecond), float64(n.Get()), float64(40*time.Millisecond))
}

// TestNeedLearnsFromCutsAndKeepsItsBounds: a call cut short raises the
// estimate by half (when cut at or past it), never beyond the ceiling, and
// successes never bring it under the floor.
func TestNeedLearnsFromCutsAndKeepsItsBounds(t *testing.T) {
	var n budget.Need
	n.Init(100*time.Millisecond, 3*time.Second)
	assert.False(t, n.Known())
	n.Cut(110 * time.Millisecond)
	assert.True(t, n.Known())
	assert.Equal(t, 165*time.Millisecond, n.Get())
	n.Cut(50 * time.Millisecond)
	assert.Equal(t, 165*time.Millisecond, n.Get(), "a cut before the estimate says nothing")
	for range 20 {
		n.Cut(n.Get())
	}
	assert.Equal(t, 3*time.Second, n.Get(), "the ceiling")
	for range 100000 {
		n.Answered(time.Millisecond)
	}
	assert.Equal(t, 100*time.Millisecond, n.Get(), "the floor")
}
