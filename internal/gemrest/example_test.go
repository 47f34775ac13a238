package gemrest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/internal/fakegemini"
	"github.com/tierguard/tierguard/internal/gemrest"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// Two Gemini tiers over REST, each phrasing its own prompt from the same
// question. The primary is overloaded; the fallback answers.
func Example() {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript("gemini-2.5-pro", fakegemini.Script{
		Rules: []fakegemini.Rule{{Kind: fakegemini.Unavailable, P: fakegemini.Always}},
	})

	client := func(name, model string) *gemrest.Client {
		c, err := gemrest.New(gemrest.Config{BaseURL: srv.URL(), APIKey: "key", Model: model, Name: name, HTTPClient: srv.Client()})
		if err != nil {
			panic(err)
		}
		return c
	}
	pro := gemrest.NewTier(client("pro", "gemini-2.5-pro"), func(q string) gemrest.Request {
		return gemrest.Request{System: "Answer thoroughly.", Prompt: q}
	})
	flash := gemrest.NewTier(client("flash", "gemini-2.5-flash"), func(q string) gemrest.Request {
		return gemrest.Request{Prompt: "In one sentence: " + q}
	})
	text := func(r gemrest.Response) string { return r.Text }

	chain, err := fallback.New(fallback.Config[string, gemrest.Response]{
		Stages: []fallback.Stage[string, gemrest.Response]{
			{Tier: pro, Model: pro.Model(), Retry: retry.Policy{MaxAttempts: 2, BaseDelay: 10 * time.Millisecond}},
			{Tier: flash, Model: flash.Model(), Validate: validate.Field(text, validate.NonEmpty())},
		},
		Total: 5 * time.Second,
	})
	if err != nil {
		panic(err)
	}

	res, err := chain.Do(context.Background(), "why is the sky blue?")
	if err != nil {
		fmt.Println(classify.Classify(err))
		return
	}
	fmt.Println(res.Tier+":", res.Value.Text)
	for _, a := range res.Attempts() {
		fmt.Println(" ", a.Tier, a.N, a.Verdict.Class, a.Verdict.HTTPStatus)
	}
	fmt.Println("upstream calls to pro:", srv.Requests("gemini-2.5-pro"))
	// Output:
	// flash: answer from gemini-2.5-flash: In one sentence: why is the sky blue?
	//   pro 1 transient 503
	//   pro 2 transient 503
	//   flash 1 ok 0
	// upstream calls to pro: 2
}
