package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/retry"
)

func ExampleDo() {
	budget, err := retry.NewBudget(10, 0.1) // gRPC's defaults, shared by the tier
	if err != nil {
		panic(err)
	}
	policy := retry.Policy{MaxAttempts: 3, BaseDelay: time.Millisecond, Budget: budget}

	calls := 0
	answer, err := retry.Do(context.Background(), policy, func(context.Context) (string, error) {
		calls++
		if calls < 3 {
			return "", classify.Wrap(errors.New("503"), classify.Verdict{Class: classify.Transient})
		}
		return "the answer", nil
	})
	fmt.Println(answer, err, calls)

	// A retired model is not retried.
	calls = 0
	_, err = retry.Do(context.Background(), policy, func(context.Context) (string, error) {
		calls++
		return "", classify.Wrap(errors.New("404"), classify.Verdict{Class: classify.Retired})
	})
	fmt.Println(err, calls)
	// Output:
	// the answer <nil> 3
	// tierguard: retired: 404 1
}
