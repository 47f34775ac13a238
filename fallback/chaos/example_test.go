package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/chaos"
)

// A production service wraps its tiers once, at start-up, with one switch.
// The switch stays off until an operator starts a drill, which ends by
// itself.
func ExampleSwitch() {
	var drills chaos.Switch
	pro := chaos.Tier(fallback.Tier("pro", func(ctx context.Context, q string) (string, error) {
		return "answer to " + q, nil
	}), &drills)

	out, err := pro.Call(context.Background(), "q1")
	fmt.Println(out, err)

	// From an admin endpoint: every pro call fails with Gemini's real 503
	// for the next ten minutes, then the drill ends by itself.
	err = drills.Start(chaos.Drill{
		Name:  "pro overloaded",
		For:   10 * time.Minute,
		Rules: []chaos.Rule{{Tier: "pro", Rate: 1, Fault: chaos.Fail(chaos.GeminiOverloaded)}},
	})
	if err != nil {
		panic(err)
	}
	_, err = pro.Call(context.Background(), "q2")
	fmt.Println(errors.Is(err, chaos.ErrInjected), classify.Classify(err).Class)
	fmt.Println(err)

	drills.Stop()
	out, err = pro.Call(context.Background(), "q3")
	fmt.Println(out, err)
	// Output:
	// answer to q1 <nil>
	// true transient
	// chaos: injected fail_gemini_503_overloaded: upstream error: 503 UNAVAILABLE
	// answer to q3 <nil>
}

// Chaos Week in production: force the primary's breaker open for ten
// minutes during low traffic, and watch the service's own requests.
func ExampleRun_production() {
	var chain *fallback.Chain[string, string] // the service's chain
	var proBreaker *breaker.Breaker           // pro's breaker
	report, err := chaos.Run(context.Background(), chain, chaos.RunConfig[string]{
		Name:   "chaos week: pro forced open",
		Load:   chaos.Load{Duration: 10 * time.Minute}, // no load of its own: real traffic
		Drill:  chaos.Drill{Open: []chaos.Open{{Breaker: proBreaker}}},
		Checks: []chaos.Check{chaos.MinSuccess(0.95), chaos.MaxOverrun(100 * time.Millisecond)},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(report)
}

// A fault of your own: a gateway's 503 with a Retry-After header.
func ExampleNewResponse() {
	r, err := chaos.NewResponse("gateway_503_retry_after_2s", 503,
		map[string][]string{"Retry-After": {"2"}}, []byte(`{"error":{"message":"upstream busy"}}`))
	if err != nil {
		panic(err)
	}
	f := chaos.Fail(r).Delayed(500*time.Millisecond, time.Second)
	fmt.Println(f)
	// Output: fail_gateway_503_retry_after_2s_after_500ms-1s
}
