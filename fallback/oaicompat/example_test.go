package oaicompat_test

import (
	"context"
	"fmt"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tierguard/tierguard/fallback"
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
