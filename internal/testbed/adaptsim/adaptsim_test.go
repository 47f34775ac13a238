package adaptsim

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tierguard/tierguard/bulkhead"
)

func TestHandSize(t *testing.T) {
	assert.Equal(t, 32, Default().HandSize(), "1 s × 48/s × 1.3 / 2 = 31.2")
}

// A short run prints a row per contender and the goals.
func TestRunShort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for a second of real time")
	}
	c := Default()
	c.Scale = 100
	var out bytes.Buffer
	rs := []Report{Run(c, "static 32", Static(32), 1), Run(c, "adaptive", Bulkhead(bulkhead.Config{Name: "a", Max: 32, Reserve: 0.1,
		Adaptive: &bulkhead.Adaptive{Floor: 4, Ceiling: 128}}), 1)}
	Write(&out, c, rs, "adaptive")
	assert.Contains(t, out.String(), "| static 32 |")
	assert.Contains(t, out.String(), "goodput ≥ the best static size's")
	assert.Positive(t, rs[0].Answers)
}

// The oracle admits 0.9 of the capacity of the phase it is in, and is a
// mark in the report, not a contender whose goodput is a goal.
func TestOracle(t *testing.T) {
	c := Default()
	// A healthy phase no stalled machine outlasts: the oracle's phases
	// run on the real clock.
	c.Healthy = 24 * time.Hour
	o := Oracle(c, 0.9)
	assert.Equal(t, 57, o.Limit(), "0.9 × 64 while healthy")
	var dones []func(time.Duration, bool)
	for {
		done, ok := o.Acquire(context.Background(), bulkhead.Interactive)
		if !ok {
			break
		}
		dones = append(dones, done)
	}
	assert.Len(t, dones, 57)
	for _, done := range dones {
		done(0, false)
	}
	var out bytes.Buffer
	Write(&out, c, []Report{{Name: TierguardAdaptive, Goodput: 1}, {Name: OracleName + " x", Goodput: 2}}, TierguardAdaptive)
	assert.NotContains(t, out.String(), "goodput ≥ "+OracleName)
}
