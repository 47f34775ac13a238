package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/riverjob"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	"github.com/tierguard/tierguard/internal/testbed/gemrest"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// The models of the story.
const (
	proModel   = "gemini-2.5-pro"
	flashModel = "gemini-2.5-flash"
	// tokenLimit is both models' input window in the story: small, so that
	// a long contract can be too long for every model.
	tokenLimit = 4000
)

// jobKind is the River kind of the demo's jobs.
const jobKind = "extract_contract"

// contract is a job's input: a document to extract an invoice from.
type contract struct {
	ID   int    `json:"id"`
	Text string `json:"text"`
}

// extractArgs are the River job args: tenant, scenario, idempotency key
// and the contract.
type extractArgs struct {
	riverjob.Args[contract]
}

func (extractArgs) Kind() string { return jobKind }

// invoice is what a valid answer decodes to.
type invoice struct {
	Total    float64 `json:"total"`
	Currency string  `json:"currency"`
}

// validInvoice accepts the JSON of an invoice with a positive total (a
// number: "1,234.50" as a string fails) and a currency code. Only answers
// that pass it are stored.
var validInvoice = validate.Field(func(r gemrest.Response) string { return r.Text }, validate.Decode(func(inv invoice) error {
	if inv.Total <= 0 {
		return validate.Errorf("invoice", "total is not positive")
	}
	if len(inv.Currency) != 3 {
		return validate.Errorf("invoice", "currency is not a 3-letter code")
	}
	return nil
}))

// story is the fake upstream and what it does when: an outage on both
// models, then pro's daily quota running out, then flash's too. Some
// contracts are misread by every model (their amount comes back as a
// string) and some are too long for either.
type story struct {
	cfg   config
	srv   *fakegemini.Server
	start time.Time

	unreadable map[int]bool
	tooLong    map[int]bool
	// fixed makes the misread contracts read correctly (a better OCR
	// pass), before their dead letters are replayed.
	fixed atomic.Bool
	// pacing moves a story paced by the workers (cfg.Steps) on.
	pacing pacing
	// calls counts the tiers' requests on their way to srv.
	calls *callCounter
}

func newStory(cfg config, start time.Time) *story {
	st := &story{cfg: cfg, start: start, unreadable: map[int]bool{}, tooLong: map[int]bool{}, pacing: pacing{fails: map[int64]int{}}}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0xba7c4))
	for i := range cfg.Jobs {
		switch u := rng.Float64(); {
		case u < cfg.Unreadable:
			st.unreadable[i] = true
		case u < cfg.Unreadable+cfg.TooLong:
			st.tooLong[i] = true
		}
	}
	st.srv = fakegemini.New(fakegemini.WithSeed(cfg.Seed), fakegemini.WithModels(
		fakegemini.Model{ID: proModel, InputTokenLimit: tokenLimit},
		fakegemini.Model{ID: flashModel, InputTokenLimit: tokenLimit},
	))
	st.calls = newCallCounter(st.srv.Client().Transport)
	if cfg.Steps > 0 {
		st.setPacedScripts(phHealthy)
		return st
	}
	at := func(d time.Duration) time.Time { return start.Add(d) }
	outage := fakegemini.Rule{Kind: fakegemini.Unavailable, P: fakegemini.Always, From: at(cfg.OutageStart), Until: at(cfg.OutageStart + cfg.OutageLen)}
	// A daily quota's 429 carries a short RetryInfo, as the real API's
	// does; the chain parks the tier for its quota cooldown.
	quota := fakegemini.Params{RetryDelay: cfg.QuotaCooldown / 2}
	flashFrom := cfg.QuotaStart + cfg.FlashQuotaDelay
	st.setScripts(
		[]fakegemini.Rule{outage, {Kind: fakegemini.QuotaExhausted, P: fakegemini.Always, Params: quota,
			From: at(cfg.QuotaStart), Until: at(cfg.QuotaStart + cfg.QuotaLen)}},
		[]fakegemini.Rule{outage, {Kind: fakegemini.QuotaExhausted, P: fakegemini.Always, Params: quota,
			From: at(flashFrom), Until: at(flashFrom + cfg.FlashQuotaLen)}})
	return st
}

// setScripts gives pro and flash their latencies, answers and faults.
func (st *story) setScripts(pro, flash []fakegemini.Rule) {
	st.srv.SetScript(proModel, fakegemini.Script{
		Latency: fakegemini.Latency{Fixed: st.cfg.Latency / 2, Jitter: st.cfg.Latency},
		Rules:   pro,
		Reply:   st.reply,
	})
	st.srv.SetScript(flashModel, fakegemini.Script{
		Latency: fakegemini.Latency{Fixed: st.cfg.Latency / 4, Jitter: st.cfg.Latency / 2},
		Rules:   flash,
		Reply:   st.reply,
	})
}

// contract returns contract i.
func (st *story) contract(i int) contract {
	text := fmt.Sprintf("Supplier %d invoices the buyer for services rendered in period %d; payment due in 30 days.", i%17, i%12+1)
	if st.tooLong[i] {
		text = strings.Repeat("Annex: terms and conditions. ", 4*tokenLimit/7)
	}
	return contract{ID: i, Text: text}
}

// reply is both models' answer: the invoice of the contract the prompt
// names.
func (st *story) reply(r fakegemini.Request) string {
	_, rest, _ := strings.Cut(r.Prompt, "contract #")
	id, _ := strconv.Atoi(strings.Fields(rest + " -1")[0])
	total := any(100 + float64(id)/4)
	if st.unreadable[id] && !st.fixed.Load() {
		total = fmt.Sprintf("%d,%03d.50", 1+id/1000, id%1000)
	}
	b, _ := json.Marshal(map[string]any{"total": total, "currency": "EUR"})
	return string(b)
}

// prompt is what each tier asks for a contract.
func prompt(c contract) gemrest.Request {
	return gemrest.Request{
		System: "Extract the invoice total and its currency. Answer with JSON: {\"total\": number, \"currency\": \"ISO 4217 code\"}.",
		Prompt: "contract #" + strconv.Itoa(c.ID) + "\n" + c.Text,
		JSON:   true,
	}
}

// attemptLimit is the chain's own limit on upstream calls per request:
// two attempts on each of the two tiers.
const attemptLimit = 4

// buildChain assembles pro → flash, each behind a circuit breaker, with
// two attempts per tier, one deadline per job attempt and the invoice
// validator on every tier. A batch chain has no default answer: a
// placeholder is not a result.
func (st *story) buildChain() (*fallback.Chain[contract, gemrest.Response], []*breaker.Breaker, error) {
	var stages []fallback.Stage[contract, gemrest.Response]
	var breakers []*breaker.Breaker
	hc := *st.srv.Client()
	hc.Transport = st.calls
	for _, t := range []struct{ name, model string }{{"pro", proModel}, {"flash", flashModel}} {
		c, err := gemrest.New(gemrest.Config{BaseURL: st.srv.URL(), APIKey: "demo-key", Model: t.model, Name: t.name, HTTPClient: &hc})
		if err != nil {
			return nil, nil, err
		}
		b, err := breaker.New(breaker.Config{Name: t.name, ConsecutiveFailures: 5, Cooldown: st.cfg.Cooldown})
		if err != nil {
			return nil, nil, err
		}
		if st.cfg.Breakers {
			breakers = append(breakers, b)
			st.calls.breakers[t.model] = b
		}
		// A retry budget per tier (gRPC's retry throttling): once the
		// outage has drained it, an attempt is not retried on the same
		// tier, so the chain's own retries stop multiplying the load.
		budget, err := retry.NewBudget(10, 0.1)
		if err != nil {
			return nil, nil, err
		}
		stage := fallback.Stage[contract, gemrest.Response]{
			Tier:       gemrest.NewTier(c, prompt),
			Model:      t.model,
			Provider:   "gcp.gemini",
			Breaker:    b,
			Retry:      retry.Policy{MaxAttempts: 2, BaseDelay: 50 * time.Millisecond, MaxDelay: 200 * time.Millisecond, Budget: budget},
			TryTimeout: st.cfg.Deadline / 3,
			Validate:   validInvoice,
		}
		if !st.cfg.Breakers {
			stage.Breaker, stage.Retry.Budget = nil, nil
		}
		stages = append(stages, stage)
	}
	chain, err := fallback.New(fallback.Config[contract, gemrest.Response]{
		Stages:        stages,
		Total:         st.cfg.Deadline,
		QuotaCooldown: st.cfg.QuotaCooldown,
	})
	return chain, breakers, err
}
