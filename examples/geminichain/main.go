// Command geminichain runs a Gemini chain — pro → flash → cache → default —
// over the genai SDK.
//
// By default it needs no setup: it starts tierguard's in-process fake
// Gemini server and tells a short story against it (a healthy primary, an
// outage with a rate-limited fallback whose 30 s delay the chain keeps to,
// a retired model skipped by preflight). With -real it sends the questions to the Gemini API instead,
// with the key in GEMINI_API_KEY:
//
//	go run ./cmd/geminichain
//	GEMINI_API_KEY=... go run ./cmd/geminichain -real -q "Why is the sky blue?"
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/genai"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/catalog"
	"github.com/tierguard/tierguard/fallback/gemini"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// out is where the story goes; tests capture it.
var out io.Writer = os.Stdout

func main() {
	useReal := flag.Bool("real", false, "call the Gemini API (needs GEMINI_API_KEY) instead of the in-process fake")
	proModel := flag.String("pro", "gemini-2.5-pro", "primary model id")
	flashModel := flag.String("flash", "gemini-2.5-flash", "fallback model id")
	question := flag.String("q", "Why is the sky blue?", "question to ask (with -real)")
	flag.Parse()
	log.SetFlags(0)

	ctx := context.Background()
	cc := genai.ClientConfig{APIKey: os.Getenv("GEMINI_API_KEY")}
	var srv *fakegemini.Server
	if !*useReal {
		srv = fakegemini.New()
		defer srv.Close()
		cc = genai.ClientConfig{APIKey: "fake-key", HTTPClient: srv.Client(), HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL()}}
	} else if cc.APIKey == "" {
		log.Fatal("-real needs GEMINI_API_KEY")
	}

	// One client for every tier; NewClient installs the Transport that
	// brings Retry-After headers to the classifier.
	client, err := gemini.NewClient(ctx, cc)
	if err != nil {
		log.Fatal(err)
	}
	models, err := gemini.NewCatalog(client, catalog.Options{TTL: 10 * time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	if err := models.Refresh(ctx); err != nil {
		log.Printf("catalog: %v (every model presumed available)", err)
	}
	chain, err := newChain(client, models, *proModel, *flashModel)
	if err != nil {
		log.Fatal(err)
	}

	if *useReal {
		ask(ctx, chain, *question)
		return
	}
	story(ctx, srv, models, chain, *proModel, *flashModel)
}

// newChain builds pro → flash → cache → default.
func newChain(client *genai.Client, models *catalog.Catalog, proModel, flashModel string) (*fallback.Chain[string, gemini.Answer], error) {
	// Each tier builds its own prompt from the same question.
	pro, err := gemini.NewTier(gemini.TierConfig[string]{
		Name: "pro", Model: proModel, Client: client,
		Prompt: func(q string) ([]*genai.Content, *genai.GenerateContentConfig) {
			return genai.Text(q), &genai.GenerateContentConfig{
				SystemInstruction: genai.NewContentFromText("Answer carefully and completely.", genai.RoleUser),
			}
		},
	})
	if err != nil {
		return nil, err
	}
	flash, err := gemini.NewTier(gemini.TierConfig[string]{
		Name: "flash", Model: flashModel, Client: client,
		Prompt: func(q string) ([]*genai.Content, *genai.GenerateContentConfig) {
			return genai.Text(q), &genai.GenerateContentConfig{
				SystemInstruction: genai.NewContentFromText("Answer in two sentences at most.", genai.RoleUser),
				MaxOutputTokens:   256,
			}
		},
	})
	if err != nil {
		return nil, err
	}
	proBreaker, err := breaker.New(breaker.Config{Name: "pro", ConsecutiveFailures: 3, Cooldown: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	nonEmpty := validate.Field(func(a gemini.Answer) string { return a.Text }, validate.NonEmpty())

	proStage := pro.Stage()
	proStage.Breaker = proBreaker
	proStage.TryTimeout = 8 * time.Second
	proStage.Retry = retry.Policy{MaxAttempts: 2, BaseDelay: 100 * time.Millisecond}
	proStage.Validate = nonEmpty

	flashStage := flash.Stage()
	flashStage.TryTimeout = 4 * time.Second
	flashStage.Retry = retry.Policy{MaxAttempts: 2, BaseDelay: 100 * time.Millisecond}
	flashStage.Validate = nonEmpty

	return fallback.New(fallback.Config[string, gemini.Answer]{
		Stages:     []fallback.Stage[string, gemini.Answer]{proStage, flashStage},
		Total:      15 * time.Second,
		Classifier: gemini.Classifier,
		Catalog:    models,
		Cache:      &memoryCache{m: map[string]gemini.Answer{}},
		Default: func(context.Context, string) (gemini.Answer, bool) {
			return gemini.Answer{Text: "We are busy right now; please try again in a minute."}, true
		},
	})
}

// story plays four requests against the fake server.
func story(ctx context.Context, srv *fakegemini.Server, models *catalog.Catalog, chain *fallback.Chain[string, gemini.Answer], proModel, flashModel string) {
	const q1, q2 = "Why is the sky blue?", "Why are sunsets red?"

	// The fake answers like a model would, in a few words.
	reply := fakegemini.Reply(func(r fakegemini.Request) string {
		if strings.Contains(r.Prompt, "sunsets") {
			return "Near the horizon sunlight crosses more air, which scatters the blue away and leaves the reds."
		}
		return "Air molecules scatter short, blue wavelengths of sunlight far more than red ones (Rayleigh scattering)."
	})
	srv.SetScript(proModel, fakegemini.Script{Reply: reply})
	srv.SetScript(flashModel, fakegemini.Script{Reply: reply})

	fmt.Fprintln(out, "1. Everything is healthy: pro answers, and the answer is cached.")
	ask(ctx, chain, q1)

	fmt.Fprintln(out, "\n2. Pro is overloaded (503) and flash is rate-limited for 30 s,")
	fmt.Fprintln(out, "   longer than the request's budget: the cache answers.")
	srv.SetScript(proModel, fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.Unavailable, P: fakegemini.Always}}})
	srv.SetScript(flashModel, fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.RateLimited, P: fakegemini.Always,
		Params: fakegemini.Params{RetryDelay: 30 * time.Second}}}})
	ask(ctx, chain, q1)

	fmt.Fprintln(out, "\n3. Same outage, a question nobody asked before: flash asked for 30 s,")
	fmt.Fprintln(out, "   so it is skipped without a call until then, and the default answers.")
	ask(ctx, chain, q2)

	fmt.Fprintln(out, "\n4. Pro is retired; the catalog no longer lists it, and flash is back,")
	fmt.Fprintln(out, "   inside the 30 s it asked for: neither is called, the default answers.")
	srv.Retire(proModel)
	srv.SetScript(flashModel, fakegemini.Script{Reply: reply})
	if err := models.Refresh(ctx); err != nil {
		log.Printf("catalog: %v", err)
	}
	ask(ctx, chain, q2)
}

func ask(ctx context.Context, chain *fallback.Chain[string, gemini.Answer], q string) {
	res, err := chain.Do(ctx, q)
	if err != nil {
		// The error names each tier's fate by class and status only.
		fmt.Fprintln(out, "   error:", err)
		var fe *fallback.Error
		if errors.As(err, &fe) && fe.FailedClosed {
			fmt.Fprintln(out, "   (failed closed: fix the request or the configuration)")
		}
		return
	}
	fmt.Fprintf(out, "   answer: %q\n", strings.TrimSpace(res.Value.Text))
	fmt.Fprintf(out, "   source=%s tier=%q degraded=%v upstream calls=%d\n", res.Source, res.Tier, res.Degraded, res.UpstreamCalls)
	for _, a := range res.Attempts() {
		if a.Skip != fallback.NotSkipped {
			fmt.Fprintf(out, "     %-5s skipped (%s)\n", a.Tier, a.Skip)
			continue
		}
		fmt.Fprintf(out, "     %-5s attempt %d: %s\n", a.Tier, a.N, a.Verdict)
	}
}

// memoryCache is a minimal fallback.Cache with write-back: the chain stores
// only validated tier answers in it.
type memoryCache struct {
	mu sync.Mutex
	m  map[string]gemini.Answer
}

func (c *memoryCache) Get(_ context.Context, q string) (gemini.Answer, string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.m[q]
	return a, "", ok
}

func (c *memoryCache) Put(_ context.Context, q string, a gemini.Answer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a.Response = nil // keep the text, not the whole response
	c.m[q] = a
}
