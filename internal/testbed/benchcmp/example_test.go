package benchcmp_test

import (
	"context"
	"fmt"

	"github.com/tierguard/tierguard/internal/testbed/benchcmp"
)

// The contenders answer the same function the same way; the benchmarks then
// only measure what each library adds around it.
func Example() {
	tg := benchcmp.TierguardChain(benchcmp.ChainOptions{})
	res, err := tg.Do(context.Background(), "q")
	fmt.Println(res.Value, err)

	fs := benchcmp.FailsafeChain(benchcmp.ChainOptions{}, false)
	out, err := fs.Get(benchcmp.Work)
	fmt.Println(out, err)

	fb := benchcmp.TierguardChain(benchcmp.ChainOptions{PrimaryOpen: true})
	res, err = fb.Do(context.Background(), "q")
	fmt.Println(res.Value, res.Tier, err)
	// Output:
	// ok <nil>
	// ok <nil>
	// second flash <nil>
}
