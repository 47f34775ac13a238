package attach_test

import (
	"fmt"

	"github.com/tierguard/tierguard/internal/attach"
)

func ExampleSet() {
	type counterKey struct{}
	var s attach.Set
	a, detachA := s.Attach("guard", counterKey{}, func() any { return new(int) })
	b, detachB := s.Attach("guard", counterKey{}, func() any { return new(int) })
	*a.(*int) += 2
	fmt.Println(*b.(*int), s.Len())
	detachA()
	detachB()
	fmt.Println(s.Len())
	// Output:
	// 2 1
	// 0
}
