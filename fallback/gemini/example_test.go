package gemini_test

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/genai"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/cache"
	"github.com/tierguard/tierguard/fallback/gemini"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	"github.com/tierguard/tierguard/retry"
)

// A Pro → Flash chain over the genai SDK. The fake server stands in for
// the Gemini API: Pro is overloaded, Flash answers.
func Example() {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript("gemini-2.5-pro", fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.Unavailable, P: fakegemini.Always}}})
	srv.SetScript("gemini-2.5-flash", fakegemini.Script{Reply: fakegemini.Text("Rayleigh scattering.")})

	ctx := context.Background()
	client, err := gemini.NewClient(ctx, genai.ClientConfig{
		APIKey:      "fake-key",
		HTTPClient:  srv.Client(),
		HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL()},
	})
	if err != nil {
		panic(err)
	}
	pro, err := gemini.NewTier(gemini.TierConfig[string]{
		Name: "pro", Model: "gemini-2.5-pro", Client: client,
		Prompt: func(q string) ([]*genai.Content, *genai.GenerateContentConfig) {
			return genai.Text("Answer thoroughly, citing sources: " + q), nil
		},
	})
	if err != nil {
		panic(err)
	}
	flash, err := gemini.NewTier(gemini.TierConfig[string]{
		Name: "flash", Model: "gemini-2.5-flash", Client: client,
		Prompt: func(q string) ([]*genai.Content, *genai.GenerateContentConfig) {
			return genai.Text("Answer in one sentence: " + q), nil
		},
	})
	if err != nil {
		panic(err)
	}

	proStage := pro.Stage()
	proStage.TryTimeout = 2 * time.Second
	proStage.Retry = retry.Policy{MaxAttempts: 2, BaseDelay: 10 * time.Millisecond}
	chain, err := fallback.New(fallback.Config[string, gemini.Answer]{
		Stages:     []fallback.Stage[string, gemini.Answer]{proStage, flash.Stage()},
		Total:      10 * time.Second,
		Classifier: gemini.Classifier,
	})
	if err != nil {
		panic(err)
	}

	res, err := chain.Do(ctx, "Why is the sky blue?")
	fmt.Println(res.Value.Text, err)
	fmt.Println("tier:", res.Tier, "degraded:", res.Degraded, "upstream calls:", res.UpstreamCalls)
	for _, a := range res.Attempts() {
		fmt.Println(" ", a.Tier, a.N, a.Verdict)
	}
	// Output:
	// Rayleigh scattering. <nil>
	// tier: flash degraded: true upstream calls: 3
	//   pro 1 transient (503 UNAVAILABLE): server error
	//   pro 2 transient (503 UNAVAILABLE): server error
	//   flash 1 ok
}

// Classifying a call made with the SDK directly: the Capture brings the
// Retry-After header, which genai.APIError drops, to the classifier.
func ExampleCapture() {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript("gemini-2.5-flash", fakegemini.Script{Rules: []fakegemini.Rule{{
		Kind: fakegemini.RateLimited, P: fakegemini.Always,
		Params: fakegemini.Params{RetryDelay: 2 * time.Second, RetryAfter: "20"},
	}}})
	client, err := gemini.NewClient(context.Background(), genai.ClientConfig{
		APIKey: "fake-key", HTTPClient: srv.Client(), HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL()},
	})
	if err != nil {
		panic(err)
	}

	ctx, capture := gemini.WithCapture(context.Background())
	_, err = client.Models.GenerateContent(ctx, "gemini-2.5-flash", genai.Text("hello"), nil)
	fmt.Println(gemini.Classifier.Classify(err))
	fmt.Println(gemini.Classifier.Classify(capture.Wrap(err)))
	fmt.Println("requests:", capture.Requests())
	// Output:
	// rate_limited (429 RESOURCE_EXHAUSTED, retry after 2s): rate limited
	// rate_limited (429 RESOURCE_EXHAUSTED, retry after 20s): rate limited
	// requests: 1
}

// An Embedder gives a cache its semantic layer over the Gemini API's
// embeddings; the fake server stands in for the API.
func ExampleNewEmbedder() {
	srv := fakegemini.New()
	defer srv.Close()
	client, err := gemini.NewClient(context.Background(), genai.ClientConfig{
		APIKey: "fake-key", HTTPClient: srv.Client(), HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL()},
	})
	if err != nil {
		panic(err)
	}
	emb, err := gemini.NewEmbedder(gemini.EmbedderConfig{Client: client, Dimensions: 768})
	if err != nil {
		panic(err)
	}
	c, err := cache.New(cache.Config[string, string]{
		Prompt: func(q string) string { return q },
		// The default 300 ms bound on a lookup's embedding suits a service;
		// this example must print the same on a loaded test machine.
		Semantic: cache.SemanticConfig{Embedder: emb, Timeout: 10 * time.Second},
	})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	c.Put(context.Background(), "what is your refund policy for items damaged during shipping", "Refunds within 30 days.")
	for c.Stats().Embedded == 0 {
		time.Sleep(time.Millisecond)
	}
	out, hit, ok := c.Get(context.Background(), "so what is your refund policy for items damaged during shipping")
	fmt.Println(out, hit, ok)
	// Output: Refunds within 30 days. semantic true
}
