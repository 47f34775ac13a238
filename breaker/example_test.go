package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tierguard/tierguard/breaker"
)

func ExampleNew() {
	b, err := breaker.New(breaker.Config{
		Name:                "gemini-pro",
		ConsecutiveFailures: 2,
		Cooldown:            30 * time.Second,
	})
	if err != nil {
		panic(err)
	}
	b.Observe(func(t breaker.Transition) {
		fmt.Printf("%s: %v -> %v (%s)\n", t.Name, t.From, t.To, t.Reason)
	})
	overloaded := errors.New("503 UNAVAILABLE")
	for range 3 {
		_, err := breaker.Do(context.Background(), b, func(context.Context) (string, error) {
			return "", &statusError{code: 503, err: overloaded}
		})
		fmt.Println(err, errors.Is(err, breaker.ErrOpen))
	}
	// Output:
	// 503 UNAVAILABLE false
	// gemini-pro: closed -> open (consecutive failures)
	// 503 UNAVAILABLE false
	// tierguard: circuit "gemini-pro" open true
}

// statusError stands for an HTTP error from a model API.
type statusError struct {
	code int
	err  error
}

func (e *statusError) Error() string   { return e.err.Error() }
func (e *statusError) StatusCode() int { return e.code }
