package bulkhead_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/tierguard/tierguard/bulkhead"
)

func ExampleNew() {
	b, err := bulkhead.New(bulkhead.Config{Name: "gemini-pro", Max: 1})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()

	// One call holds the only slot...
	_ = b.Acquire(ctx)
	// ...so the next one fails fast instead of queueing in our workers.
	_, err = bulkhead.Do(ctx, b, func(context.Context) (string, error) { return "answer", nil })
	fmt.Println(errors.Is(err, bulkhead.ErrFull), err)

	b.Release()
	out, err := bulkhead.Do(ctx, b, func(context.Context) (string, error) { return "answer", nil })
	fmt.Println(out, err)
	// Output:
	// true tierguard: bulkhead "gemini-pro" full (1 in flight)
	// answer <nil>
}
