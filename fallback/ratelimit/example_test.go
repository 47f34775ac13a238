package ratelimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/ratelimit"
)

// A tier behind its quota in a chain: over the limit, the chain skips it
// without an upstream call and the next tier answers.
func ExampleTier() {
	lim, err := ratelimit.New(ratelimit.Config{Name: "pro", Requests: 61, Burst: 1}) // one a second
	if err != nil {
		panic(err)
	}
	defer lim.Close()
	pro := fallback.Tier("pro", func(context.Context, string) (string, error) { return "pro answer", nil })
	flash := fallback.Tier("flash", func(context.Context, string) (string, error) { return "flash answer", nil })
	chain, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
		{Tier: ratelimit.Tier(pro, ratelimit.TierConfig[string]{Limiter: lim})},
		{Tier: flash},
	}})
	if err != nil {
		panic(err)
	}
	for range 2 {
		res, _ := chain.Do(context.Background(), "q")
		fmt.Println(res.Value, res.Attempts()[0].Skip)
	}
	// Output:
	// pro answer not_skipped
	// flash answer rate_limited
}

// A limiter for a tier whose quota is 60 requests and 100,000 tokens a
// minute: a call reserves one request and its estimated tokens, and the
// estimate is corrected with the answer's real usage.
func ExampleNew() {
	l, err := ratelimit.New(ratelimit.Config{Name: "gemini-2.5-pro", Requests: 60, Tokens: 100_000})
	if err != nil {
		panic(err)
	}
	r := l.Reserve(1200) // the prompt's estimated tokens
	fmt.Println(r.OK(), r.Delay())
	l.Adjust(1500 - 1200) // the answer reported 1,500
	fmt.Printf("burst %d calls, %d tokens\n", l.Config().Burst, l.Config().TokenBurst)
	// Output:
	// true 0s
	// burst 6 calls, 25000 tokens
}

// Do waits for the limiter's turn, never past the context's deadline.
func ExampleDo() {
	l, _ := ratelimit.New(ratelimit.Config{Name: "batch", Requests: 600, Burst: 1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for i := range 3 {
		out, err := ratelimit.Do(ctx, l, func(context.Context) (int, error) { return i, nil })
		fmt.Println(out, err)
	}
	// Output:
	// 0 <nil>
	// 1 <nil>
	// 2 <nil>
}

// A group gives every tenant its own quota: one tenant's calls cannot
// spend another's.
func ExampleNewGroup() {
	g, _ := ratelimit.NewGroup(ratelimit.Config{Name: "tenant", Requests: 20, Burst: 1}, 1000)
	fmt.Println(g.Get("acme").Allow(0), g.Get("acme").Allow(0), g.Get("globex").Allow(0))
	// Output: true false true
}

// Take asks for a turn now, taking nothing when there is none: a caller
// that will not wait moves on (to another tier) without a turn to give
// back, so callers contending for the last turns lose none of them.
func ExampleLimiter_Take() {
	l, _ := ratelimit.New(ratelimit.Config{Name: "pro", Requests: 61, Burst: 1}) // one a second
	for range 2 {
		r := l.Take(0)
		fmt.Println(r.Retry(), r.Delay().Round(time.Second))
	}
	// Output:
	// false 0s
	// true 1s
}
