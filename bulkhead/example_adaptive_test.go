package bulkhead_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
)

// An adaptive bulkhead starts at Max and learns its limit from the calls
// reported to Record: a 503 lowers it, a 429 that names its delay does
// not. In a chain, throttle.Feed reports every call.
func ExampleAdaptive() {
	b, err := bulkhead.New(bulkhead.Config{Name: "gemini-pro", Max: 32,
		Adaptive: &bulkhead.Adaptive{Floor: 4, Ceiling: 128, Window: 1}})
	if err != nil {
		panic(err)
	}
	unavailable := classify.Verdict{Class: classify.Transient, HTTPStatus: 503}
	quota := classify.Verdict{Class: classify.RateLimited, HTTPStatus: 429, RetryAfter: 20 * time.Second}

	b.Record(0, bulkhead.SampleOf(unavailable))
	fmt.Println(b.Limit())
	b.Record(0, bulkhead.SampleOf(quota))
	fmt.Println(b.Limit())
	// Output:
	// 28
	// 28
}

// With a Reserve, each priority leaves a share of the limit to those
// above it: a free tenant's calls are refused while a paying user's still
// get a slot. fallback.Request.Priority sets the priority with the rest of
// who is asking; WithPriority does it outside a chain.
func ExamplePriority() {
	b, err := bulkhead.New(bulkhead.Config{Name: "gemini-pro", Max: 10, Reserve: 0.1})
	if err != nil {
		panic(err)
	}
	free := bulkhead.WithPriority(context.Background(), bulkhead.Sheddable)
	paying := bulkhead.WithPriority(context.Background(), bulkhead.Interactive)
	n := 0
	for b.Acquire(free) == nil {
		n++
	}
	fmt.Println("free calls admitted:", n)
	fmt.Println("paying call:", b.Acquire(paying))
	fmt.Println(b.Stats().RejectedAt)
	// Output:
	// free calls admitted: 7
	// paying call: <nil>
	// [0 0 0 1]
}
