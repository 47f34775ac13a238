// Command mixedchain runs a chain across three providers: Gemini through
// the genai SDK first, Claude through Anthropic's Go SDK second, an
// OpenAI-compatible gateway through openai-go third, then a default answer.
//
// By default it needs no setup: tierguard's in-process fake server answers
// the Gemini and OpenAI APIs, a small fake answers Anthropic's, and the
// program tells a short story (a healthy primary, a safety block that must
// not be routed around, an exhausted quota that is, an overloaded Claude).
// With -real it asks the real APIs, with the keys in GEMINI_API_KEY,
// ANTHROPIC_API_KEY and OPENAI_API_KEY:
//
//	go run ./mixedchain
//	GEMINI_API_KEY=... ANTHROPIC_API_KEY=... OPENAI_API_KEY=... go run ./mixedchain -real -q "Why is the sky blue?"
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/anthropic"
	"github.com/tierguard/tierguard/fallback/gemini"
	"github.com/tierguard/tierguard/fallback/oaicompat"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// out is where the story goes; tests capture it.
var out io.Writer = os.Stdout

// config names the three providers' endpoints and models.
type config struct {
	geminiKey, geminiBaseURL, geminiModel string
	claudeKey, claudeBaseURL, claudeModel string
	openaiKey, openaiBaseURL, openaiModel string
	// httpClient is used for Gemini and the gateway when set (the fake's),
	// claudeClient for Claude.
	httpClient, claudeClient *http.Client
}

func main() {
	useReal := flag.Bool("real", false, "call the real APIs (GEMINI_API_KEY, OPENAI_API_KEY) instead of the in-process fake")
	geminiModel := flag.String("gemini-model", "gemini-2.5-flash", "Gemini model id (first tier)")
	claudeModel := flag.String("claude-model", "claude-sonnet-5-5", "Claude model id (second tier)")
	openaiBaseURL := flag.String("openai-base-url", "https://api.openai.com/v1", "base URL of the OpenAI-compatible gateway")
	openaiModel := flag.String("openai-model", "gpt-4o-mini", "model id at the gateway (third tier)")
	question := flag.String("q", "Why is the sky blue?", "question to ask (with -real)")
	flag.Parse()
	log.SetFlags(0)
	ctx := context.Background()

	if *useReal {
		cfg := config{
			geminiKey: os.Getenv("GEMINI_API_KEY"), geminiModel: *geminiModel,
			claudeKey: os.Getenv("ANTHROPIC_API_KEY"), claudeModel: *claudeModel,
			openaiKey: os.Getenv("OPENAI_API_KEY"), openaiBaseURL: *openaiBaseURL, openaiModel: *openaiModel,
		}
		if cfg.geminiKey == "" || cfg.claudeKey == "" || cfg.openaiKey == "" {
			log.Fatal("-real needs GEMINI_API_KEY, ANTHROPIC_API_KEY and OPENAI_API_KEY")
		}
		chain, err := newChain(ctx, cfg)
		if err != nil {
			log.Fatal(err)
		}
		ask(ctx, chain, *question)
		return
	}

	srv := fakegemini.New()
	defer srv.Close()
	claude := newFakeClaude(answer)
	defer claude.Close()
	chain, err := newChain(ctx, config{
		geminiKey: "fake-key", geminiBaseURL: srv.URL(), geminiModel: *geminiModel,
		claudeKey: "fake-key", claudeBaseURL: claude.URL(), claudeModel: *claudeModel,
		openaiKey: "fake-key", openaiBaseURL: srv.OpenAIURL(), openaiModel: *openaiModel,
		httpClient: srv.Client(), claudeClient: claude.Client(),
	})
	if err != nil {
		log.Fatal(err)
	}
	story(ctx, srv, claude, chain, *geminiModel, *openaiModel)
}

// reply is what the mixed chain answers, whichever provider wrote it. A
// chain has one output type, so each provider's tier is adapted to it.
type reply struct {
	Text     string
	Provider string
	Usage    fallback.Usage
	HasUsage bool
}

// newChain builds gemini → claude → openai-compatible → default.
func newChain(ctx context.Context, cfg config) (*fallback.Chain[string, reply], error) {
	// Tier 1: Gemini, through the genai SDK.
	gcc := genai.ClientConfig{APIKey: cfg.geminiKey, HTTPClient: cfg.httpClient}
	gcc.HTTPOptions.BaseURL = cfg.geminiBaseURL
	gclient, err := gemini.NewClient(ctx, gcc)
	if err != nil {
		return nil, err
	}
	gem, err := gemini.NewTier(gemini.TierConfig[string]{
		Name: "gemini", Model: cfg.geminiModel, Client: gclient,
		Prompt: func(q string) ([]*genai.Content, *genai.GenerateContentConfig) {
			return genai.Text(q), &genai.GenerateContentConfig{
				SystemInstruction: genai.NewContentFromText("Answer in two sentences at most.", genai.RoleUser),
			}
		},
	})
	if err != nil {
		return nil, err
	}

	// Tier 2: Claude, through Anthropic's Go SDK.
	copts := []aoption.RequestOption{aoption.WithAPIKey(cfg.claudeKey)}
	if cfg.claudeBaseURL != "" {
		copts = append(copts, aoption.WithBaseURL(cfg.claudeBaseURL))
	}
	if cfg.claudeClient != nil {
		copts = append(copts, aoption.WithHTTPClient(cfg.claudeClient))
	}
	cclient := anthropic.NewClient(copts...)
	claude, err := anthropic.NewTier(anthropic.TierConfig[string]{
		Name: "claude", Model: cfg.claudeModel, Client: &cclient,
		Prompt: func(q string) sdk.MessageNewParams {
			return sdk.MessageNewParams{
				MaxTokens: 300,
				System:    []sdk.TextBlockParam{{Text: "Answer in one or two sentences."}},
				Messages:  []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(q))},
			}
		},
	})
	if err != nil {
		return nil, err
	}

	// Tier 3: an OpenAI-compatible gateway, through openai-go.
	opts := []option.RequestOption{option.WithAPIKey(cfg.openaiKey), option.WithBaseURL(cfg.openaiBaseURL)}
	if cfg.httpClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.httpClient))
	}
	oclient := oaicompat.NewClient(opts...)
	gpt, err := oaicompat.NewTier(oaicompat.TierConfig[string]{
		Name: "gateway", Model: cfg.openaiModel, Client: &oclient,
		Prompt: func(q string) oai.ChatCompletionNewParams {
			return oai.ChatCompletionNewParams{
				Messages:            []oai.ChatCompletionMessageParamUnion{oai.SystemMessage("Answer in one sentence."), oai.UserMessage(q)},
				MaxCompletionTokens: oai.Int(200),
			}
		},
	})
	if err != nil {
		return nil, err
	}

	gemBreaker, err := breaker.New(breaker.Config{Name: "gemini", ConsecutiveFailures: 5, Cooldown: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	nonEmpty := validate.Field(func(r reply) string { return r.Text }, validate.NonEmpty())
	stages := []fallback.Stage[string, reply]{
		{
			Tier: fallback.MapTier(gem, func(a gemini.Answer) reply {
				return reply{Text: a.Text, Provider: "gemini", Usage: a.Usage, HasUsage: a.HasUsage}
			}),
			Model: gem.Model(), Provider: gem.Stage().Provider,
			Breaker: gemBreaker, TryTimeout: 6 * time.Second, Validate: nonEmpty,
			Retry: retry.Policy{MaxAttempts: 2, BaseDelay: 100 * time.Millisecond},
		},
		{
			Tier: fallback.MapTier(claude, func(a anthropic.Answer) reply {
				return reply{Text: a.Text, Provider: "anthropic", Usage: a.Usage, HasUsage: a.HasUsage}
			}),
			Model: claude.Model(), Provider: claude.Stage().Provider,
			TryTimeout: 6 * time.Second, Validate: nonEmpty,
			Retry: retry.Policy{MaxAttempts: 2, BaseDelay: 100 * time.Millisecond},
		},
		{
			Tier: fallback.MapTier(gpt, func(a oaicompat.Answer) reply {
				return reply{Text: a.Text, Provider: "openai-compatible", Usage: a.Usage, HasUsage: a.HasUsage}
			}),
			Model: gpt.Model(), Provider: gpt.Stage().Provider,
			TryTimeout: 6 * time.Second, Validate: nonEmpty,
			Retry: retry.Policy{MaxAttempts: 2, BaseDelay: 100 * time.Millisecond},
		},
	}
	return fallback.New(fallback.Config[string, reply]{
		Stages: stages,
		Total:  15 * time.Second,
		// One classifier that knows the three SDKs' errors.
		Classifier: classify.New(gemini.Rule, anthropic.Rule, oaicompat.Rule),
		Default: func(context.Context, string) (reply, bool) {
			return reply{Text: "We are busy right now; please try again in a minute.", Provider: "default"}, true
		},
	})
}

// answers are what the fakes say, like a model would, in a few words.
var answers = map[string]string{
	"sky":    "Air scatters blue sunlight far more than red (Rayleigh scattering).",
	"sunset": "At sunset light crosses more air, which scatters the blue away.",
	"sea":    "Water absorbs red light and scatters blue back.",
	"grass":  "Chlorophyll absorbs red and blue light and reflects green.",
}

// answer is the fakes' answer to a prompt.
func answer(prompt string) string {
	for k, a := range answers {
		if strings.Contains(prompt, k) {
			return a
		}
	}
	return "I don't know."
}

// story plays five requests against the fake servers.
func story(ctx context.Context, srv *fakegemini.Server, claude *fakeClaude, chain *fallback.Chain[string, reply], geminiModel, openaiModel string) {
	reply := fakegemini.Reply(func(r fakegemini.Request) string { return answer(r.Prompt) })
	srv.SetScript(openaiModel, fakegemini.Script{Reply: reply})
	srv.SetScript(geminiModel, fakegemini.Script{Reply: reply})

	fmt.Fprintln(out, "1. Gemini is healthy and answers.")
	ask(ctx, chain, "Why is the sky blue?")

	fmt.Fprintln(out, "\n2. Gemini blocks the prompt for safety: the chain fails closed and")
	fmt.Fprintln(out, "   asks neither Claude nor the gateway to route around the policy decision.")
	srv.SetScript(geminiModel, fakegemini.Script{Reply: reply, Rules: []fakegemini.Rule{{Kind: fakegemini.PromptBlocked, P: fakegemini.Always}}})
	ask(ctx, chain, "Something Gemini will not discuss.")

	fmt.Fprintln(out, "\n3. Gemini's daily quota is spent (429 with a PerDay QuotaFailure):")
	fmt.Fprintln(out, "   no retry, Claude answers at once, and Gemini is parked.")
	srv.SetScript(geminiModel, fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.QuotaExhausted, P: fakegemini.Always}}})
	ask(ctx, chain, "Why are sunsets red?")

	fmt.Fprintln(out, "\n4. While parked, Gemini is skipped without an upstream call.")
	ask(ctx, chain, "Why is the sea blue?")

	fmt.Fprintln(out, "\n5. Claude is overloaded (529 overloaded_error): retried once, then")
	fmt.Fprintln(out, "   the gateway answers.")
	claude.overloaded.Store(true)
	ask(ctx, chain, "Why is grass green?")
}

func ask(ctx context.Context, chain *fallback.Chain[string, reply], q string) {
	res, err := chain.Do(ctx, q)
	if err != nil {
		// The error names each tier's fate by class and status only.
		fmt.Fprintln(out, "   error:", err)
		return
	}
	fmt.Fprintf(out, "   answer (%s): %q\n", res.Value.Provider, strings.TrimSpace(res.Value.Text))
	fmt.Fprintf(out, "   source=%s tier=%q degraded=%v upstream calls=%d\n", res.Source, res.Tier, res.Degraded, res.UpstreamCalls)
	for _, a := range res.Attempts() {
		if a.Skip != fallback.NotSkipped {
			fmt.Fprintf(out, "     %-7s skipped (%s)\n", a.Tier, a.Skip)
			continue
		}
		fmt.Fprintf(out, "     %-7s attempt %d: %s\n", a.Tier, a.N, a.Verdict)
	}
}
