package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/cache"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	"github.com/tierguard/tierguard/internal/testbed/gemrest"
	"github.com/tierguard/tierguard/retry"
)

// The last act, after the story: both models down. The answers the models
// gave while healthy are all that is left, and a tierguard cache serves
// them — to the same question (exact), to a question of the same template
// with other values (template), to a paraphrase (semantic) and, labelled as
// approximate, to a looser one (simplified) — before the default answer.
var (
	bothDownLen = flag.Duration("both-down", 2*time.Second, "after the story: how long pro and flash both answer 503 while the cache answers (0: skip)")
)

// faq is a question the service is asked often, as its users word it.
type faq struct {
	canonical  string   // how it was asked while the models were up
	paraphrase []string // the same question, other words
	loose      []string // a similar question, with words of its own
}

var faqs = []faq{
	{"How do I reset my password?", []string{"I forgot my password", "how can I recover my password"}, []string{"I forgot my password again, what now?"}},
	{"What are your opening hours?", []string{"When are you open?", "what time do you open"}, []string{"opening hours on public holidays"}},
	{"How can I cancel my subscription?", []string{"I want to end my subscription", "how do I stop my plan"}, []string{"cancel my subscription before renewal"}},
	{"Do you ship internationally?", []string{"Can you deliver abroad?", "do you ship overseas"}, []string{"do you ship abroad to Norway by express"}},
	{"What is your refund policy?", []string{"How do refunds work?", "how does your refund policy work"}, []string{"refund policy for sale items"}},
}

// unknown are questions nobody asked before the outage.
var unknown = []string{"Do you sell gift cards?", "Is there a student discount?", "Can I change my username?"}

// concepts maps the words of the FAQ to the concepts they name: a
// deterministic stand-in for an embedding model, which places synonyms
// close together. Words outside it count a little each, in dimensions of
// their own; common words not at all.
var concepts = map[string]string{
	"reset": "reset", "forgot": "reset", "recover": "reset", "password": "password",
	"opening": "open", "open": "open", "hours": "hours", "time": "hours", "when": "hours",
	"cancel": "cancel", "end": "cancel", "stop": "cancel", "subscription": "subscription", "plan": "subscription",
	"ship": "ship", "deliver": "ship", "internationally": "abroad", "abroad": "abroad", "overseas": "abroad",
	"refund": "refund", "refunds": "refund", "policy": "refund-policy", "work": "refund-policy",
}

var stopwords = map[string]bool{
	"i": true, "my": true, "how": true, "do": true, "can": true, "the": true, "a": true, "is": true, "are": true,
	"your": true, "you": true, "what": true, "it": true, "to": true, "want": true, "get": true, "there": true,
	"on": true, "by": true, "does": true,
}

const conceptDims = 64

// conceptEmbedder embeds a text as the sum of its concepts (weight 1, once
// each) and of its other words (weight 0.4, hashed).
var conceptEmbedder = cache.EmbedderFunc(func(_ context.Context, text string) (cache.Embedding, error) {
	v := make([]float32, conceptDims)
	seen := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) }) {
		key, weight := "word:"+w, float32(0.4)
		if c, ok := concepts[w]; ok {
			key, weight = "concept:"+c, 1
		} else if stopwords[w] {
			continue
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		h := fnv.New32a()
		_, _ = h.Write([]byte(key))
		v[h.Sum32()%conceptDims] += weight
	}
	return cache.Embedding{Vector: v, Model: "demo-concepts"}, nil
})

// bothDownSummary counts the last act's answers by how they came.
type bothDownSummary struct {
	duration time.Duration
	requests int
	byKind   map[string]int
	// example is one simplified answer, to show how it reads.
	example      [2]string
	upstream     int64
	cacheEntries int
	// answers are the requests by when they started (since the act's
	// start) and their kind (an index into kinds), for the report.
	answers []bothDownAnswer
}

// bothDownAnswer is one request of the last act.
type bothDownAnswer struct {
	at   time.Duration
	kind int
}

// kinds are the rows of the last act's table, in order.
var kinds = []string{"exact", "template", "semantic", "simplified", "default", "tier", "error"}

func kindOf(res *fallback.Result[gemrest.Response], err error) string {
	switch {
	case err != nil:
		return "error"
	case res.Source == fallback.SourceCache:
		return cmp.Or(res.CacheHit, "unknown")
	case res.Source == fallback.SourceDefault:
		return "default"
	}
	return "tier"
}

// runBothDown plays the last act: a warm-up while pro and flash are up,
// then d of traffic while both answer 503.
func runBothDown(ctx context.Context, cfg config, d time.Duration) (*bothDownSummary, error) {
	srv := fakegemini.New(fakegemini.WithSeed(cfg.Seed))
	defer srv.Close()
	c, err := cache.New(cache.Config[question, gemrest.Response]{
		Prompt:   func(q question) string { return q.Text },
		Semantic: cache.SemanticConfig{Embedder: conceptEmbedder, SimplifiedThreshold: 0.86},
		// "Where is order 1042?" answered once serves every order number:
		// the answer quotes the number, which is substituted.
		Template: cache.TemplateConfig[gemrest.Response]{Refill: func(ctx context.Context, r gemrest.Response, stored, query []cache.Var) (gemrest.Response, bool) {
			text, ok := cache.SubstituteVars(ctx, r.Text, stored, query)
			return gemrest.Response{Text: text}, ok
		}},
	})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var stages []fallback.Stage[question, gemrest.Response]
	var breakers []*breaker.Breaker
	for _, m := range []struct{ name, model string }{{"pro", proModel}, {"flash", flashModel}} {
		client, err := gemrest.New(gemrest.Config{BaseURL: srv.URL(), APIKey: "demo-key", Model: m.model, Name: m.name, HTTPClient: srv.Client()})
		if err != nil {
			return nil, err
		}
		br, err := breaker.New(breaker.Config{Name: m.name, ConsecutiveFailures: 3, Cooldown: time.Minute})
		if err != nil {
			return nil, err
		}
		breakers = append(breakers, br)
		stages = append(stages, fallback.Stage[question, gemrest.Response]{
			Tier:    gemrest.NewTier(client, func(q question) gemrest.Request { return gemrest.Request{Prompt: q.Text} }),
			Model:   m.model,
			Breaker: br, Retry: retry.Policy{MaxAttempts: 1},
		})
	}
	defer func() {
		for _, b := range breakers {
			b.Reset()
		}
	}()
	chain, err := fallback.New(fallback.Config[question, gemrest.Response]{
		Stages: stages, Total: cfg.Deadline, Cache: c,
		Default: func(context.Context, question) (gemrest.Response, bool) {
			return gemrest.Response{Text: "We are busy right now; please try again shortly."}, true
		},
	})
	if err != nil {
		return nil, err
	}

	// Warm-up: each FAQ and one order question, asked while the models are up.
	warm := []string{"Where is order 1042?"}
	for _, f := range faqs {
		warm = append(warm, f.canonical)
	}
	for _, q := range warm {
		if _, err := chain.Do(ctx, question{Text: q}); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	for c.Stats().Embedded < uint64(len(warm)) {
		time.Sleep(time.Millisecond)
	}

	down := fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.Unavailable, P: fakegemini.Always}}}
	srv.SetScript(proModel, down)
	srv.SetScript(flashModel, down)
	srv.ResetStats()

	sum := &bothDownSummary{duration: d, byKind: map[string]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for id := range cfg.Clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(id)+1000))
			for ctx.Err() == nil && time.Since(start) < d {
				q := pick(rng)
				at := time.Since(start)
				res, err := chain.Do(context.Background(), question{Text: q})
				k := kindOf(&res, err)
				mu.Lock()
				sum.requests++
				sum.byKind[k]++
				sum.answers = append(sum.answers, bothDownAnswer{at: at, kind: slices.Index(kinds, k)})
				if k == "simplified" && sum.example[0] == "" {
					sum.example = [2]string{q, res.Value.Text}
				}
				mu.Unlock()
				time.Sleep(time.Duration(rng.Int64N(int64(2*cfg.Think) + 1)))
			}
		})
	}
	wg.Wait()
	for _, st := range srv.Stats() {
		sum.upstream += st.Requests
	}
	sum.cacheEntries = c.Stats().Entries
	return sum, nil
}

// pick draws a question: a FAQ as first asked, reworded or loosely
// reworded, an order status, or something new.
func pick(rng *rand.Rand) string {
	f := faqs[rng.IntN(len(faqs))]
	switch r := rng.Float64(); {
	case r < 0.25:
		return f.canonical
	case r < 0.45:
		return fmt.Sprintf("Where is order %d?", 1000+rng.IntN(9000))
	case r < 0.75:
		return f.paraphrase[rng.IntN(len(f.paraphrase))]
	case r < 0.9:
		return f.loose[rng.IntN(len(f.loose))]
	}
	return unknown[rng.IntN(len(unknown))]
}

func (s *bothDownSummary) print(w io.Writer) {
	fmt.Fprintf(w, "\nboth models down: pro and flash answer 503 for %v; the cache answers what it can\n", s.duration)
	answered := s.requests - s.byKind["error"]
	fmt.Fprintf(w, "  requests %d, answered %d (%.1f%%), upstream calls %d (the breakers open at once), cache entries %d\n",
		s.requests, answered, share(answered, s.requests), s.upstream, s.cacheEntries)
	fmt.Fprintf(w, "  %-11s %8s %7s\n", "answer", "requests", "ratio")
	for _, k := range kinds {
		n := s.byKind[k]
		if n == 0 && (k == "tier" || k == "error") {
			continue
		}
		fmt.Fprintf(w, "  %-11s %8d %6.1f%%\n", k, n, share(n, s.requests))
	}
	if s.example[0] != "" {
		fmt.Fprintf(w, "  a simplified answer is labelled for the user: %q → [approximate] %q\n", s.example[0], s.example[1])
	}
}

// share is n/of in percent, to one decimal.
func share(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return math.Round(1000*float64(n)/float64(of)) / 10
}
