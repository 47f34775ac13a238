package spend

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/internal/modelid"
)

// Rates are prices per million tokens.
type Rates struct {
	// Input is the price of a million prompt tokens.
	Input Amount `json:"input"`
	// CachedInput is the price of a million prompt tokens served from a
	// prompt cache (fallback.Usage.CacheReadInputTokens); 0 means Input.
	CachedInput Amount `json:"cached_input,omitempty"`
	// CacheWriteInput is the price of a million prompt tokens written to a
	// prompt cache (fallback.Usage.CacheWriteInputTokens), where the
	// provider bills writes apart (Anthropic: 1.25 times the input price
	// for its 5-minute cache, twice it for the 1-hour one); 0 means Input.
	// A Usage does not say which lifetime a write had: price a model whose
	// calls write 1-hour entries at that rate, in a cost group of its own
	// if it also writes 5-minute ones.
	CacheWriteInput Amount `json:"cache_write_input,omitempty"`
	// Output is the price of a million answer tokens.
	Output Amount `json:"output"`
	// Reasoning is the price of a million thinking tokens
	// (fallback.Usage.ReasoningOutputTokens); 0 means Output, as the providers
	// that bill thinking bill it.
	Reasoning Amount `json:"reasoning,omitempty"`
}

// Price is what one model costs in one cost group.
type Price struct {
	// Model is the model id as a tier reports it ("gemini-2.5-flash"). An
	// id ending in "*" is a prefix: "gemini-2.5-flash-preview-*" prices
	// every preview; the longest matching prefix wins, and an exact id
	// wins over any prefix. Ids are compared in one normal form, on both
	// sides: surrounding white space removed, lower-cased, a resource path
	// cut after its last "models/" segment ("models/x",
	// "publishers/google/models/x" and " X" are all "x"). A version
	// suffix is part of the id ("gemini-2.0-flash-001" is not
	// "gemini-2.0-flash"): list the versions, or use a prefix.
	Model string `json:"model"`
	// CostGroup is the group this price applies to ("" for the list
	// price). A gateway often sells one model in several groups (a batch
	// discount, a cheaper but less stable pool).
	CostGroup string `json:"cost_group,omitempty"`
	Rates
	// PerRequest is a fee per billed call (one that reported usage), where
	// the provider charges one.
	PerRequest Amount `json:"per_request,omitempty"`
	// LongContextAbove, when positive, is the prompt size in tokens above
	// which LongContext's rates apply to the whole call (Gemini 2.5 Pro
	// bills prompts over 200k tokens at higher rates).
	LongContextAbove int64 `json:"long_context_above,omitempty"`
	// LongContext are the rates for prompts over LongContextAbove.
	LongContext *Rates `json:"long_context,omitempty"`
}

// PriceTable is a price list as a document: what NewPrices compiles and
// ParsePrices reads from JSON.
type PriceTable struct {
	// Currency names the currency of every amount ("USD"). Required.
	Currency string `json:"currency"`
	// AsOf and Sources say when and where the prices were read; Note says
	// anything else. They are not used; they keep a table honest.
	AsOf    string   `json:"as_of,omitempty"`
	Sources []string `json:"sources,omitempty"`
	Note    string   `json:"note,omitempty"`
	// CostGroups are multipliers of the list price (CostGroup "") per
	// group: {"batch": 0.5}. A model with a price of its own in a group
	// keeps it. A group not listed here and without prices of its own is
	// billed at the list price.
	CostGroups map[string]float64 `json:"cost_groups,omitempty"`
	// Prices are the models' prices. At least one.
	Prices []Price `json:"prices"`
}

// Prices is a compiled price table; it is immutable and safe for
// concurrent use.
type Prices struct {
	currency string
	entries  []priceEntry
	// exact maps (model, group) to an entry; a prefix entry's model keeps
	// its "*".
	exact map[priceKey]int
	// patterns are the distinct prefix models (without "*"), longest
	// first.
	patterns []string
}

type priceKey struct{ model, group string }

type priceEntry struct {
	model, group string // model as keyed: a prefix keeps its "*"
	rates        Rates
	perRequest   Amount
	longAbove    int64
	long         Rates
}

// maxPrices bounds a table, so that a hostile document costs little.
const maxPrices = 10_000

// NewPrices compiles t, or returns an error naming every invalid entry.
func NewPrices(t PriceTable) (*Prices, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if t.Currency == "" {
		bad("currency is required")
	}
	if len(t.Prices) == 0 {
		bad("prices: at least one price is required (a table that prices nothing leaves every call unpriced)")
	}
	if len(t.Prices) > maxPrices {
		bad("%d prices, at most %d", len(t.Prices), maxPrices)
		t.Prices = t.Prices[:maxPrices]
	}
	p := &Prices{currency: t.Currency, exact: map[priceKey]int{}}
	add := func(e priceEntry) {
		k := priceKey{e.model, e.group}
		if _, dup := p.exact[k]; dup {
			if e.group == "" {
				bad("prices: model %q listed twice", e.model)
			} else {
				bad("prices: model %q listed twice in cost group %q", e.model, e.group)
			}
			return
		}
		p.exact[k] = len(p.entries)
		p.entries = append(p.entries, e)
	}
	for i, pr := range t.Prices {
		model := modelid.Normalize(pr.Model)
		e := priceEntry{model: model, group: pr.CostGroup, rates: pr.Rates.filled(), perRequest: pr.PerRequest, longAbove: pr.LongContextAbove}
		switch {
		case strings.TrimSuffix(model, "*") == "":
			bad("prices[%d]: model is required", i)
			continue
		case strings.Count(model, "*") > 1 || strings.Contains(strings.TrimSuffix(model, "*"), "*"):
			bad("prices[%d] (%s): \"*\" may only end a model", i, pr.Model)
			continue
		case pr.Input < 0 || pr.Output < 0 || pr.CachedInput < 0 || pr.CacheWriteInput < 0 || pr.Reasoning < 0 || pr.PerRequest < 0:
			bad("prices[%d] (%s): negative price", i, pr.Model)
			continue
		case pr.LongContextAbove < 0 || (pr.LongContextAbove > 0) != (pr.LongContext != nil):
			bad("prices[%d] (%s): long_context_above and long_context go together", i, pr.Model)
			continue
		}
		if pr.LongContext != nil {
			e.long = pr.LongContext.filled()
		}
		add(e)
	}
	groups := make([]string, 0, len(t.CostGroups))
	for g, m := range t.CostGroups {
		if g == "" || math.IsNaN(m) || m <= 0 || m > 100 {
			bad("cost_groups[%q]: a multiplier in (0, 100] for a named group, got %v", g, m)
			continue
		}
		groups = append(groups, g)
	}
	sort.Strings(groups)
	list := len(p.entries)
	for _, g := range groups {
		m := t.CostGroups[g]
		for i := range list {
			e := p.entries[i]
			if e.group != "" {
				continue
			}
			if _, own := p.exact[priceKey{e.model, g}]; own {
				continue
			}
			e.group, e.rates, e.long = g, e.rates.scaled(m), e.long.scaled(m)
			e.perRequest = scale(e.perRequest, m)
			add(e)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("spend: invalid price table: %w", err)
	}
	seen := map[string]bool{}
	for _, e := range p.entries {
		if pat, ok := strings.CutSuffix(e.model, "*"); ok && !seen[pat] {
			seen[pat] = true
			p.patterns = append(p.patterns, pat)
		}
	}
	sort.SliceStable(p.patterns, func(a, b int) bool { return len(p.patterns[a]) > len(p.patterns[b]) })
	return p, nil
}

// maxTableBytes bounds a JSON price table.
const maxTableBytes = 4 << 20

// ParsePrices reads a JSON price table (see PriceTable for its fields;
// amounts are decimal numbers or strings of currency units per million
// tokens) and compiles it. Unknown fields are refused, so that a typo does
// not silently price a model at zero, and so is anything but white space
// after the table (a second document, a stray brace), so that half a file
// is not taken for all of it.
func ParsePrices(data []byte) (*Prices, error) {
	if len(data) > maxTableBytes {
		return nil, fmt.Errorf("spend: price table of %d bytes, at most %d", len(data), maxTableBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var t PriceTable
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("spend: reading the price table: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("spend: reading the price table: data after the price table at byte %d (one JSON document only)", dec.InputOffset())
	}
	return NewPrices(t)
}

// LoadPrices reads a JSON price table from r, as ParsePrices.
func LoadPrices(r io.Reader) (*Prices, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxTableBytes+1))
	if err != nil {
		return nil, fmt.Errorf("spend: reading the price table: %w", err)
	}
	return ParsePrices(data)
}

// Currency returns the table's currency.
func (p *Prices) Currency() string { return p.currency }

// Cost returns what a call to model in group that used u costs, and false
// when the table has no price for the model. An unknown group is billed at
// the list price.
func (p *Prices) Cost(model, group string, u fallback.Usage) (Amount, bool) {
	i := p.find(model, group)
	if i < 0 {
		return 0, false
	}
	return p.entries[i].cost(u), true
}

// Estimate returns the estimate of a request expected to use u on model
// in group: its tokens and, if the model is priced, its cost. If it is
// not, the cost is UnknownCost, and a tenant with a cost limit is
// refused the request (see UnpricedPolicy).
func (p *Prices) Estimate(model, group string, u fallback.Usage) Estimate {
	c, ok := p.Cost(model, group, u)
	if !ok {
		c = UnknownCost
	}
	return Estimate{Tokens: tokensOf(u), Cost: c}
}

// find returns the index of the price of model in group, or -1: the
// model's own price in the group, else its list price, else the same for
// the longest prefix that matches.
func (p *Prices) find(model, group string) int {
	if p == nil {
		return -1
	}
	model = modelid.Normalize(model)
	if i, ok := p.lookup(model, group); ok {
		return i
	}
	for _, pat := range p.patterns {
		if strings.HasPrefix(model, pat) {
			if i, ok := p.lookup(pat+"*", group); ok {
				return i
			}
		}
	}
	return -1
}

func (p *Prices) lookup(model, group string) (int, bool) {
	if i, ok := p.exact[priceKey{model, group}]; ok {
		return i, true
	}
	if group != "" {
		i, ok := p.exact[priceKey{model, ""}]
		return i, ok
	}
	return 0, false
}

func (e *priceEntry) cost(u fallback.Usage) Amount {
	r := e.rates
	if e.longAbove > 0 && u.InputTokens > e.longAbove {
		r = e.long
	}
	cached := min(max(u.CacheReadInputTokens, 0), max(u.InputTokens, 0))
	written := min(max(u.CacheWriteInputTokens, 0), max(u.InputTokens, 0)-cached)
	reasoning := min(max(u.ReasoningOutputTokens, 0), max(u.OutputTokens, 0))
	var a acc
	a.add(u.InputTokens-cached-written, r.Input)
	a.add(cached, r.CachedInput)
	a.add(written, r.CacheWriteInput)
	a.add(u.OutputTokens-reasoning, r.Output)
	a.add(reasoning, r.Reasoning)
	return addSat(a.perMillion(), e.perRequest)
}

// filled returns r with its defaults: cached input and cache writes at
// the input rate and reasoning at the output rate, unless set.
func (r Rates) filled() Rates {
	if r.CachedInput == 0 {
		r.CachedInput = r.Input
	}
	if r.CacheWriteInput == 0 {
		r.CacheWriteInput = r.Input
	}
	if r.Reasoning == 0 {
		r.Reasoning = r.Output
	}
	return r
}

func (r Rates) scaled(m float64) Rates {
	return Rates{Input: scale(r.Input, m), CachedInput: scale(r.CachedInput, m), CacheWriteInput: scale(r.CacheWriteInput, m), Output: scale(r.Output, m), Reasoning: scale(r.Reasoning, m)}
}

// scale multiplies a rate by a group's multiplier, once, when the table is
// compiled; the rounding error is below a nano-unit per million tokens.
func scale(a Amount, m float64) Amount {
	v := math.Round(float64(a) * m)
	if v >= math.MaxInt64 {
		return math.MaxInt64
	}
	return Amount(v)
}

// tokensOf is what a usage counts against a token limit: every billed
// token, in and out.
func tokensOf(u fallback.Usage) int64 {
	return max(u.InputTokens, 0) + max(u.OutputTokens, 0)
}
