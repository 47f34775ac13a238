package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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

// One breaker per model, created on first use: a failing model trips only
// its own. Keys that are tenant ids would be hashed in names; model names
// are public, so KeysInNames shows them.
func ExampleGroup() {
	models, err := breaker.NewGroup(breaker.Config{Name: "gemini", ConsecutiveFailures: 1, KeysInNames: true}, 16)
	if err != nil {
		panic(err)
	}
	call := func(model string, fail bool) error {
		_, err := breaker.Do(context.Background(), models.Get(model), func(context.Context) (string, error) {
			if fail {
				return "", &statusError{code: 503, err: errors.New("503 UNAVAILABLE")}
			}
			return "ok", nil
		})
		return err
	}
	fmt.Println(call("gemini-2.5-pro", true))
	fmt.Println(call("gemini-2.5-pro", false))
	fmt.Println(call("gemini-2.5-flash", false))
	models.Each(func(key string, b *breaker.Breaker) {
		if key == "gemini-2.5-pro" || key == "gemini-2.5-flash" {
			fmt.Println(b.Name(), b.State())
		}
	})
	// Unordered output:
	// 503 UNAVAILABLE
	// tierguard: circuit "gemini/gemini-2.5-pro" open
	// <nil>
	// gemini/gemini-2.5-pro open
	// gemini/gemini-2.5-flash closed
}

// statusError stands for an HTTP error from a model API.
type statusError struct {
	code int
	err  error
}

func (e *statusError) Error() string   { return e.err.Error() }
func (e *statusError) StatusCode() int { return e.code }

// Two watchers of one breaker that must count each transition once — the
// instrumentation of two chains, say — share what they attach to it: the
// first to come subscribes, the second finds the subscription made.
func ExampleBreaker_Attach() {
	b, err := breaker.New(breaker.Config{Name: "gemini-pro"})
	if err != nil {
		panic(err)
	}
	type tripsKey struct{} // a key type of the watchers' own
	type trips struct {
		subscribe sync.Once
		n         atomic.Int64
	}
	watch := func() (*trips, func()) {
		v, detach := b.Attach(tripsKey{}, func() any { return &trips{} })
		t := v.(*trips)
		t.subscribe.Do(func() {
			b.Observe(func(tr breaker.Transition) {
				if tr.To == breaker.Open {
					t.n.Add(1)
				}
			})
		})
		return t, detach
	}
	unary, detachUnary := watch()
	stream, detachStream := watch()
	defer detachUnary()
	defer detachStream()
	b.ForceOpen()
	fmt.Println("trips:", unary.n.Load(), "shared:", unary == stream)
	// Output:
	// trips: 1 shared: true
}
