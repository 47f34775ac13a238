package gemrest_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	"github.com/tierguard/tierguard/internal/testbed/gemrest"
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

// A streaming chain over REST: the primary is overloaded before its first
// chunk, so the stream comes from the fallback. After the first chunk a
// chain never switches tiers silently.
func Example_stream() {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript("gemini-2.5-pro", fakegemini.Script{
		Rules: []fakegemini.Rule{{Kind: fakegemini.Unavailable, P: fakegemini.Always}},
	})
	srv.SetScript("gemini-2.5-flash", fakegemini.Script{Chunks: 3, Reply: fakegemini.Text("Rayleigh scattering.")})

	tier := func(name, model string) *gemrest.Tier[string] {
		c, err := gemrest.New(gemrest.Config{BaseURL: srv.URL(), Model: model, Name: name, HTTPClient: srv.Client()})
		if err != nil {
			panic(err)
		}
		return gemrest.NewTier(c, func(q string) gemrest.Request { return gemrest.Request{Prompt: q} })
	}
	pro, flash := tier("pro", "gemini-2.5-pro"), tier("flash", "gemini-2.5-flash")
	chain, err := fallback.NewStream(fallback.StreamConfig[string, gemrest.Chunk]{
		Stages: []fallback.StreamStage[string, gemrest.Chunk]{
			{Tier: pro, Model: pro.Model(), Retry: retry.Policy{MaxAttempts: 1}, FirstChunkTimeout: 2 * time.Second, IdleTimeout: time.Second},
			{Tier: flash, Model: flash.Model(), FirstChunkTimeout: 2 * time.Second, IdleTimeout: time.Second},
		},
		Total: 5 * time.Second,
	})
	if err != nil {
		panic(err)
	}

	s := chain.Stream(context.Background(), "why is the sky blue?")
	var shown []string
	for chunk, err := range s.Chunks() {
		if err != nil {
			// Before the first chunk: every tier failed. After it: the
			// answer shown so far is incomplete (a *fallback.IncompleteError).
			fmt.Println("stream failed:", err)
			return
		}
		shown = append(shown, chunk.Text) // show it to the user at once
	}
	res := s.Result()
	fmt.Println(strings.Join(shown, "|"))
	fmt.Println(res.Tier, res.Chunks, "chunks, finish", res.FinishReason, "complete:", res.Complete, "upstream calls:", res.UpstreamCalls)
	// Output:
	// Raylei|gh scat|tering.
	// flash 3 chunks, finish STOP complete: true upstream calls: 2
}
