package subscribers_test

import (
	"fmt"

	"github.com/tierguard/tierguard/internal/subscribers"
)

func ExampleList() {
	var l subscribers.List[func(string)]
	remove := l.Add(func(s string) { fmt.Println("got", s) })
	for _, f := range l.Load() {
		f("an event")
	}
	remove()
	fmt.Println(len(l.Load()))
	// Output:
	// got an event
	// 0
}
