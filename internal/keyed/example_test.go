package keyed_test

import (
	"fmt"

	"github.com/tierguard/tierguard/internal/keyed"
)

func Example() {
	limits := keyed.New(func(tenant string) (int, error) { return len(tenant), nil }, 2, -1, "_overflow")
	fmt.Println(limits.Get("acme"), limits.Get("globex"), limits.Get("initech"))
	// Output: 4 6 -1
}
