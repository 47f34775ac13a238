package redisspend_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/fallback/spend/redisspend"
)

// Every pod of a fleet shares its tenants' money limits strictly: a
// request is admitted only once Redis has reserved its estimate against
// what the whole fleet spent and holds in flight. While Redis is away,
// each pod spends at most its share of what was left (Pods: 8).
func ExampleNew_strict() {
	rdb := redis.NewClient(&redis.Options{Addr: "redis:6379", ContextTimeoutEnabled: true, MaxRetries: -1})
	defer rdb.Close()
	store, err := redisspend.New(rdb, redisspend.Options{Prefix: "myservice:spend:", Strict: true, Pods: 8, Lease: 5 * time.Minute})
	if err != nil {
		panic(err)
	}
	prices, err := spend.NewPrices(spend.PriceTable{Currency: "USD", Prices: []spend.Price{{Model: "gemini-2.5-pro",
		Rates: spend.Rates{Input: spend.MustParseAmount("1.25"), Output: spend.MustParseAmount("10")}}}})
	if err != nil {
		panic(err)
	}
	ledger, err := spend.New(spend.Config{Prices: prices, Store: store,
		Tenants: map[string]spend.Allowance{"acme": {DailyCost: spend.MustParseAmount("20")}}})
	if err != nil {
		panic(err)
	}
	defer ledger.Close()
	// One pod pages for the fleet.
	ledger.Observe(func(e spend.Event) {
		if e.Kind == spend.ThresholdReached || e.Kind == spend.FirstRefusal {
			fmt.Println(e.Kind, e.Meter, e.Threshold)
		}
	})

	est := prices.Estimate("gemini-2.5-pro", "", fallback.Usage{InputTokens: 2000, OutputTokens: 1000})
	tk, err := ledger.Admit(context.Background(), spend.Request{Tenant: "acme"}, est)
	if errors.Is(err, spend.ErrLimitReached) {
		return // answer 429 with the LimitError's ResetAt
	}
	if err != nil {
		return
	}
	defer tk.End()
	// chain.Do(tk, prompt)
}
