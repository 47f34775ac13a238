package spend

import (
	"context"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/cache"
)

// The cache's semantic layer reports its embedding calls to a
// cache.UsageRecorder; the ledger is one, so that embeddings are billed
// where the requests that caused them are.
var _ cache.UsageRecorder = (*Ledger)(nil)

// charsPerToken is how many characters an embedding call without reported
// usage is billed per token: the rule of thumb the providers give for
// English text, rounded in the provider's favour (a partial token counts).
const charsPerToken = 4

// EmbeddingTotals are a tenant's embedding calls (see
// Ledger.RecordEmbedding). Their usage and cost are part of the tenant's
// Totals.Usage and Totals.Cost too, and their unpriced calls of
// Totals.Unpriced; they are not upstream calls (Totals.Calls) and belong
// to no request's Record.
type EmbeddingTotals struct {
	// Calls counts the embedding calls billed; Estimated those of them
	// that reported no usage, billed on an estimate from the text's
	// length.
	Calls, Estimated int64
	// Usage sums their tokens (input tokens), Cost their cost.
	Usage fallback.Usage
	Cost  Amount
	// Unpriced counts the calls to an embedding model the price table has
	// no price for; their tokens count, their cost is 0.
	Unpriced int64
}

// Embedding is one embedding call as the ledger billed it, for
// ObserveEmbeddings.
type Embedding struct {
	// Request is the identity of the request the call was made for: its
	// Ticket's, or the fallback.Request of its context (the tenant then
	// alone is billed, the rest is carried).
	Request Request
	// Model is the embedding model; Lookup is set for the embedding of a
	// looked-up prompt, unset for that of a written answer's prompt.
	Model  string
	Lookup bool
	// Usage is what the call was billed; Estimated is set when the API
	// reported no usage and its input tokens were estimated from the
	// text's length (a token per four characters, rounded up).
	Usage     fallback.Usage
	Estimated bool
	// Cost is its price, when Priced.
	Cost   Amount
	Priced bool
}

// RecordEmbedding bills one embedding call to the tenant of the request
// ctx belongs to, at the input-token price of the embedding model (list
// price: embeddings have no cost group; price an embedding model with its
// input rate, and its output rate 0). It makes *Ledger a
// cache.UsageRecorder: give the ledger as the cache's
// SemanticConfig.Usage, and every embedding call the semantic layer makes
// — a lookup's, on the request's goroutine, or a written answer's, on the
// cache's own — counts once against the tenant's limits and in its
// Totals (Totals.Embeddings), and reaches ObserveEmbeddings.
//
// The tenant is that of ctx's Ticket, else that of its fallback.Request
// (fallback.WithRequest); a context with neither bills tenant "", as the
// cache shares the empty tenant's scope. A call that reported no usage
// (the Gemini API's embedContent reports none) is billed on an estimate of
// its input tokens from the text's length (EmbeddingTotals.Estimated). A
// model without a price counts as unpriced (Totals.Unpriced), as an
// attempt does, with the same consequences for a tenant with a cost limit
// (see UnpricedPolicy). The call's cost is not in the request's Record,
// which holds its upstream attempts: the embedding of a written answer
// comes after the request ended.
func (l *Ledger) RecordEmbedding(ctx context.Context, u cache.EmbeddingUsage) {
	var (
		a   *account
		req Request
	)
	if t := TicketFrom(ctx); t != nil && t.l == l {
		a, req = t.acct, t.Request()
	} else {
		if t != nil {
			req = t.Request()
		} else {
			fr := fallback.RequestFrom(ctx)
			req = Request{ID: fr.ID, Tenant: fr.Tenant, Scenario: fr.Scenario}
		}
		if a = l.account(req.Tenant); a == nil {
			a = l.overflow // an unknown tenant refused: billed all the same
		}
	}
	e := Embedding{Request: req, Model: u.Model, Lookup: u.Lookup, Usage: u.Usage}
	if !u.HasUsage {
		e.Usage = fallback.Usage{InputTokens: int64((max(u.Characters, 0) + charsPerToken - 1) / charsPerToken)}
		e.Estimated = true
	}
	idx := l.prices.find(u.Model, "")
	if idx >= 0 {
		e.Cost, e.Priced = l.prices.entries[idx].cost(e.Usage), true
	}
	l.billEmbedding(a, &e, idx)
	for _, fn := range l.embeddings.Load() {
		fn(&e)
	}
}

// billEmbedding adds an embedding call to a's meters and totals, under its
// lock, and emits the thresholds it made a meter cross.
func (l *Ledger) billEmbedding(a *account, e *Embedding, idx int) {
	tokens, cost := tokensOf(e.Usage), int64(e.Cost)
	cal := l.clock.calendar()
	var cross crossings
	a.mu.Lock()
	a.roll(cal)
	for m := range numMeters {
		if m.Cost() {
			a.mine[m] += cost
		} else {
			a.mine[m] += tokens
		}
	}
	a.dirty = true
	s := &a.totals
	addUsage(&s.Usage, e.Usage)
	s.Cost = addSat(s.Cost, e.Cost)
	em := &s.Embeddings
	em.Calls++
	addUsage(&em.Usage, e.Usage)
	em.Cost = addSat(em.Cost, e.Cost)
	if e.Estimated {
		em.Estimated++
	}
	if !e.Priced {
		s.Unpriced++
		em.Unpriced++
	}
	unpriced := len(a.models) - 1
	if idx < 0 || idx >= unpriced {
		idx = unpriced
	}
	mt := &a.models[idx]
	mt.calls++
	addUsage(&mt.usage, e.Usage)
	mt.cost = addSat(mt.cost, e.Cost)
	if a.allow.limited() {
		a.levels(l, cal, &cross)
	}
	a.mu.Unlock()
	l.emit(&cross)
}

// ObserveEmbeddings calls fn with every embedding call RecordEmbedding
// bills, on the goroutine that reported it (a lookup's, or the cache's
// own for a written answer): keep fn fast, and copy what you keep — the
// Embedding is not yours after fn returns. The returned function removes
// it.
func (l *Ledger) ObserveEmbeddings(fn func(*Embedding)) (remove func()) {
	return l.embeddings.Add(fn)
}
