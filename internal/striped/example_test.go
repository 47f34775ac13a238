package striped_test

import (
	"fmt"
	"sync"

	"github.com/tierguard/tierguard/internal/striped"
)

// A hit counter that parallel lookups add to, read for statistics.
func ExampleCounter() {
	var hits striped.Counter
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { hits.Add(1) })
	}
	wg.Wait()
	fmt.Println(hits.Load())
	// Output: 4
}
