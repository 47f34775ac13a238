package main

import (
	"testing"
	"time"
)

// The spend scenario, shrunk: every target holds (they do not depend on
// the machine's speed: the run is paced by requests).
func TestSpend(t *testing.T) {
	res := scenarioSpend(spendConfig{Pre: 10, Storm: 16, Post: 10, Deadline: time.Second, Latency: time.Millisecond}, 1, 1)
	for _, c := range res.checks {
		if !c.ok {
			t.Errorf("missed: %s — %s", c.what, c.got)
		}
	}
	if len(res.rows) != 3 {
		t.Fatalf("%d rows", len(res.rows))
	}
}
