package chaos_test

import (
	"fmt"
	"time"

	"github.com/tierguard/tierguard/internal/testbed/chaos"
)

// A soak on the real clock: 20,000 requests over one light → storm →
// outage → recovery cycle of five seconds, every invariant checked. (Not
// run as a test: TestSoak and TestSoakRealClock run it, on the fake and the
// real clock.)
func Example() {
	rep, err := chaos.Run(chaos.Config{Calls: 20000, Rate: 4000, Cycle: 5 * time.Second, Seed: 1, Slack: 250 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	fmt.Println(rep) // counts, worst overrun, peaks, and each violation
	if rep.ViolationCount > 0 {
		panic("invariants broken")
	}
}
