package spend

import (
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
)

// numClasses is the number of classify classes, OK included.
const numClasses = int(classify.Unknown) + 1

// Totals are a tenant's figures since the ledger was made (or the sum
// over tenants). Cost figures are in the price table's currency.
type Totals struct {
	// Requests counts the requests that ended; Answered those that got an
	// answer; Valid those answered by a model tier, whose answer passed the
	// tier's validation; Local those answered by the cache or the default;
	// Failed those without an answer.
	Requests, Answered, Valid, Local, Failed int64
	// PrimaryAnswered counts requests answered by their first tier.
	PrimaryAnswered int64
	// Degraded counts answers from anything but the first tier.
	Degraded int64
	// Calls counts upstream calls, every attempt of every tier.
	Calls int64
	// Usage sums the tokens billed, every attempt included, and every
	// embedding call.
	Usage fallback.Usage
	// Cost is what every attempt and embedding call cost.
	Cost Amount
	// FailedCost is what attempts that did not answer cost (answers a
	// validator rejected, partial answers), RetryCost the part of it
	// spent on attempts retried on the same tier.
	FailedCost, RetryCost Amount
	// Fallbacks counts answered requests that left their first tier;
	// FallbackCost is what their answers cost, FallbackExtra that cost less
	// what the same tokens would have cost on the first tier (negative
	// when the fallback is cheaper).
	Fallbacks                   int64
	FallbackCost, FallbackExtra Amount
	// Shed and Refused count the requests Admit turned away: shed at the
	// soft threshold, refused at a limit (or for an unavailable store or
	// an unknown tenant).
	Shed, Refused int64
	// Unpriced counts attempts, and embedding calls, whose usage had no
	// price (their model is not in the price table); their tokens count,
	// their cost is 0.
	Unpriced int64
	// Embeddings are the embedding calls billed to the tenant
	// (Ledger.RecordEmbedding), which Usage, Cost and Unpriced include.
	Embeddings EmbeddingTotals
	// ByClass breaks down the extra cost by error class (index it with a
	// classify.Class): failed attempts of the class and their cost, the
	// part retried, and the fallbacks the class caused — the first tier's
	// last failure, or the reason it was skipped.
	ByClass [numClasses]ClassTotals
	// ByModel breaks the cost down by model and cost group, in price
	// table order, unpriced models last (Model "").
	ByModel []ModelTotals
}

// ClassTotals are the extra costs one error class caused.
type ClassTotals struct {
	// Attempts counts failed attempts of the class; Cost what those that
	// were billed cost; RetryCost the part of it retried on the same tier.
	Attempts        int64
	Cost, RetryCost Amount
	// Fallbacks counts answered requests that left their first tier
	// because of this class; FallbackCost and FallbackExtra are those of
	// Totals, for these requests.
	Fallbacks                   int64
	FallbackCost, FallbackExtra Amount
}

// ModelTotals is the use of one model in one cost group.
type ModelTotals struct {
	// Model and CostGroup name the price (Model "" gathers unpriced
	// models); a prefix price keeps its "*".
	Model, CostGroup string
	// Calls counts billed calls (embedding calls included), Usage their
	// tokens, Cost their cost.
	Calls int64
	Usage fallback.Usage
	Cost  Amount
}

// CostPerValid is the cost of one valid result: every attempt's cost,
// failures, fallbacks and embeddings included, over the requests answered
// by a tier.
// 0 when none was.
func (t Totals) CostPerValid() Amount {
	if t.Valid == 0 {
		return 0
	}
	return Amount((int64(t.Cost) + t.Valid/2) / t.Valid)
}

// PrimarySuccessRate is the share of requests answered by their first
// tier.
func (t Totals) PrimarySuccessRate() float64 { return ratio(t.PrimaryAnswered, t.Requests) }

// SuccessRate is the share of requests answered, from any source.
func (t Totals) SuccessRate() float64 { return ratio(t.Answered, t.Requests) }

// CallsPerSuccess is the average number of upstream calls per answered
// request.
func (t Totals) CallsPerSuccess() float64 { return ratio(t.Calls, t.Answered) }

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// add adds o to t (ByModel aside).
func (t *Totals) add(o *Totals) {
	t.Requests += o.Requests
	t.Answered += o.Answered
	t.Valid += o.Valid
	t.Local += o.Local
	t.Failed += o.Failed
	t.PrimaryAnswered += o.PrimaryAnswered
	t.Degraded += o.Degraded
	t.Calls += o.Calls
	addUsage(&t.Usage, o.Usage)
	t.Cost = addSat(t.Cost, o.Cost)
	t.FailedCost = addSat(t.FailedCost, o.FailedCost)
	t.RetryCost = addSat(t.RetryCost, o.RetryCost)
	t.Fallbacks += o.Fallbacks
	t.FallbackCost = addSat(t.FallbackCost, o.FallbackCost)
	t.FallbackExtra = addSat(t.FallbackExtra, o.FallbackExtra)
	t.Shed += o.Shed
	t.Refused += o.Refused
	t.Unpriced += o.Unpriced
	e, f := &t.Embeddings, &o.Embeddings
	e.Calls += f.Calls
	e.Estimated += f.Estimated
	addUsage(&e.Usage, f.Usage)
	e.Cost = addSat(e.Cost, f.Cost)
	e.Unpriced += f.Unpriced
	for c := range t.ByClass {
		a, b := &t.ByClass[c], &o.ByClass[c]
		a.Attempts += b.Attempts
		a.Cost = addSat(a.Cost, b.Cost)
		a.RetryCost = addSat(a.RetryCost, b.RetryCost)
		a.Fallbacks += b.Fallbacks
		a.FallbackCost = addSat(a.FallbackCost, b.FallbackCost)
		a.FallbackExtra = addSat(a.FallbackExtra, b.FallbackExtra)
	}
}

func addUsage(u *fallback.Usage, o fallback.Usage) {
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.CacheReadInputTokens += o.CacheReadInputTokens
	u.CacheWriteInputTokens += o.CacheWriteInputTokens
	u.ReasoningOutputTokens += o.ReasoningOutputTokens
}
