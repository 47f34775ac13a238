package oaicompat_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/cache"
	"github.com/tierguard/tierguard/fallback/oaicompat"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
)

// A two-model chain over an OpenAI-compatible gateway. The fake server
// stands in for the gateway: the primary model's quota is spent, so the
// chain moves to the smaller model at once instead of retrying.
func Example() {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript("gpt-4o", fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.QuotaExhausted, P: fakegemini.Always}}})
	srv.SetScript("gpt-4o-mini", fakegemini.Script{Reply: fakegemini.Text("Rayleigh scattering.")})

	client := oaicompat.NewClient(
		option.WithAPIKey("fake-key"),
		option.WithBaseURL(srv.OpenAIURL()),
		option.WithHTTPClient(srv.Client()),
	)
	ask := func(system string) oaicompat.PromptFunc[string] {
		return func(q string) oai.ChatCompletionNewParams {
			return oai.ChatCompletionNewParams{Messages: []oai.ChatCompletionMessageParamUnion{
				oai.SystemMessage(system), oai.UserMessage(q),
			}}
		}
	}
	big, err := oaicompat.NewTier(oaicompat.TierConfig[string]{Name: "big", Model: "gpt-4o", Client: &client, Prompt: ask("Answer thoroughly.")})
	if err != nil {
		panic(err)
	}
	small, err := oaicompat.NewTier(oaicompat.TierConfig[string]{Name: "small", Model: "gpt-4o-mini", Client: &client, Prompt: ask("Answer in one sentence.")})
	if err != nil {
		panic(err)
	}
	chain, err := fallback.New(fallback.Config[string, oaicompat.Answer]{
		Stages:     []fallback.Stage[string, oaicompat.Answer]{big.Stage(), small.Stage()},
		Total:      10 * time.Second,
		Classifier: oaicompat.Classifier,
	})
	if err != nil {
		panic(err)
	}

	res, err := chain.Do(context.Background(), "Why is the sky blue?")
	fmt.Println(res.Value.Text, err)
	fmt.Println("tier:", res.Tier, "degraded:", res.Degraded, "upstream calls:", res.UpstreamCalls)
	for _, a := range res.Attempts() {
		fmt.Println(" ", a.Tier, a.N, a.Verdict)
	}
	// Output:
	// Rayleigh scattering. <nil>
	// tier: small degraded: true upstream calls: 2
	//   big 1 quota_exhausted (429 RESOURCE_EXHAUSTED): insufficient quota
	//   small 1 ok
}

// An Embedder gives a cache its semantic layer over an OpenAI-compatible
// embeddings endpoint, and reports the tokens each call used.
func ExampleNewEmbedder() {
	srv := fakegemini.New()
	defer srv.Close()
	client := oaicompat.NewClient(option.WithAPIKey("fake-key"), option.WithBaseURL(srv.OpenAIURL()), option.WithHTTPClient(srv.Client()))
	emb, err := oaicompat.NewEmbedder(oaicompat.EmbedderConfig{Client: &client, Model: "text-embedding-3-small", Dimensions: 512})
	if err != nil {
		panic(err)
	}
	var tokens atomic.Int64
	c, err := cache.New(cache.Config[string, string]{
		Prompt: func(q string) string { return q },
		Semantic: cache.SemanticConfig{Embedder: emb, Usage: cache.UsageFunc(func(_ context.Context, u cache.EmbeddingUsage) {
			tokens.Add(u.Usage.InputTokens)
		})},
	})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	c.Put(context.Background(), "what is your refund policy for items damaged during shipping", "Refunds within 30 days.")
	for c.Stats().Embedded == 0 {
		time.Sleep(time.Millisecond)
	}
	out, hit, _ := c.Get(context.Background(), "so what is your refund policy for items damaged during shipping")
	fmt.Println(out, hit, tokens.Load())
	// Output: Refunds within 30 days. semantic 31
}
