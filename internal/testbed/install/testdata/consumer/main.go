// Command consumer is what a newcomer's program looks like after go get:
// one import and one call per tierguard module, built from the module
// proxy `make install-check` makes from the checkout.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/tierguard/tierguard/fallback"

	breakerredis "github.com/tierguard/tierguard/breaker/redisstore"
	"github.com/tierguard/tierguard/fallback/anthropic"
	cacheredis "github.com/tierguard/tierguard/fallback/cache/redisstore"
	"github.com/tierguard/tierguard/fallback/gemini"
	"github.com/tierguard/tierguard/fallback/oaicompat"
	"github.com/tierguard/tierguard/fallback/ratelimit/redislimit"
	"github.com/tierguard/tierguard/fallback/riverjob"
	"github.com/tierguard/tierguard/fallback/spend/redisspend"
)

type jobArgs struct{ riverjob.Args[string] }

func (jobArgs) Kind() string { return "consumer" }

func main() {
	failed := 0
	check := func(module string, ok bool) {
		if !ok {
			failed++
		}
		fmt.Printf("%-55s %v\n", module, ok)
	}

	// The root module: a chain over one tier.
	chain, err := fallback.New(fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{{Tier: fallback.Tier("echo", func(_ context.Context, q string) (string, error) { return q, nil })}},
	})
	if err == nil {
		var res fallback.Result[string]
		res, err = chain.Do(context.Background(), "hello")
		err = errors.Join(err, func() error {
			if res.Value != "hello" {
				return fmt.Errorf("answer %q", res.Value)
			}
			return nil
		}())
	}
	check("github.com/tierguard/tierguard", err == nil)

	// The SDK adapters: their classifier rules.
	_, ok := gemini.Rule(errors.New("not an SDK error"))
	check("github.com/tierguard/tierguard/fallback/gemini", !ok)
	_, ok = oaicompat.Rule(errors.New("not an SDK error"))
	check("github.com/tierguard/tierguard/fallback/oaicompat", !ok)
	_, ok = anthropic.Rule(errors.New("not an SDK error"))
	check("github.com/tierguard/tierguard/fallback/anthropic", !ok)

	// The Redis stores: names, and constructors that refuse a missing client.
	check("github.com/tierguard/tierguard/breaker/redisstore", breakerredis.ID("pro") != "")
	_, err = cacheredis.New(cacheredis.Config{})
	check("github.com/tierguard/tierguard/fallback/cache/redisstore", err != nil)
	check("github.com/tierguard/tierguard/fallback/ratelimit/redislimit", redislimit.ID("pro") != "")
	_, err = redisspend.New(nil, redisspend.Options{})
	check("github.com/tierguard/tierguard/fallback/spend/redisspend", err != nil)

	// The River worker: a config without a chain is refused.
	_, err = riverjob.NewWorker[jobArgs](riverjob.Config[string, string]{})
	check("github.com/tierguard/tierguard/fallback/riverjob", err != nil)

	if failed > 0 {
		os.Exit(1)
	}
}
