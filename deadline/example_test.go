package deadline_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tierguard/tierguard/deadline"
)

// A request with 10s, two tiers: the first tier's attempt keeps 3s in reserve
// for the second, so a stalled primary cannot eat the fallback's chance.
func ExampleBudget_Attempt() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	budget := deadline.New(ctx, 0)
	attempt, done, err := budget.Attempt(ctx, deadline.Try{Cap: 8 * time.Second, Reserve: 3 * time.Second})
	if err != nil {
		fmt.Println("no time for the primary:", err)
		return
	}
	defer done()
	d, _ := attempt.Deadline()
	fmt.Println("primary may run for about", time.Until(d).Round(time.Second))
	// Output: primary may run for about 7s
}
