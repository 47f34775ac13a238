package spend_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/spend"
)

func TestAmount(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want spend.Amount
		out  string
	}{
		{"1.25", 1_250_000_000, "1.25"},
		{"0.000075", 75_000, "0.000075"},
		{"3", 3 * spend.Unit, "3"},
		{"0.000000001", 1, "0.000000001"},
		{"1e-6", 1000, "0.000001"},
		{"2.5E+3", 2500 * spend.Unit, "2500"},
		{".5", spend.Unit / 2, "0.5"},
		{"0.10000000000", spend.Unit / 10, "0.1"},
		{"0", 0, "0"},
	} {
		got, err := spend.ParseAmount(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
		assert.Equal(t, tc.out, got.String(), tc.in)
	}
	for _, bad := range []string{"", "-1", "1.0000000001", "abc", "1.2.3", "1e40", "99999999999", "0x10", strings.Repeat("1", 80)} {
		_, err := spend.ParseAmount(bad)
		assert.Error(t, err, bad)
	}
	assert.Equal(t, "-0.5", (-spend.Unit / 2).String())

	var v struct{ A, B spend.Amount }
	require.NoError(t, json.Unmarshal([]byte(`{"A": 0.30, "B": "2.50"}`), &v))
	assert.Equal(t, spend.MustParseAmount("0.3"), v.A)
	assert.Equal(t, spend.MustParseAmount("2.5"), v.B)
	b, err := json.Marshal(v)
	require.NoError(t, err)
	assert.JSONEq(t, `{"A":0.3,"B":2.5}`, string(b))
	assert.Error(t, json.Unmarshal([]byte(`{"A": -1}`), &v))
}

func amt(s string) spend.Amount { return spend.MustParseAmount(s) }

func testPrices(t testing.TB) *spend.Prices {
	t.Helper()
	p, err := spend.NewPrices(spend.PriceTable{
		Currency:   "USD",
		CostGroups: map[string]float64{"batch": 0.5},
		Prices: []spend.Price{
			{Model: "pro", Rates: spend.Rates{Input: amt("1.25"), CachedInput: amt("0.125"), Output: amt("10")},
				LongContextAbove: 200_000, LongContext: &spend.Rates{Input: amt("2.5"), CachedInput: amt("0.25"), Output: amt("15")}},
			{Model: "flash", Rates: spend.Rates{Input: amt("0.3"), CachedInput: amt("0.03"), Output: amt("2.5")}},
			{Model: "flash", CostGroup: "batch", Rates: spend.Rates{Input: amt("0.1"), Output: amt("1")}},
			{Model: "gpt-*", Rates: spend.Rates{Input: amt("1"), Output: amt("4")}, PerRequest: amt("0.001")},
			{Model: "gpt-mini*", Rates: spend.Rates{Input: amt("0.4"), Output: amt("1.6"), Reasoning: amt("2")}},
		},
	})
	require.NoError(t, err)
	return p
}

// Each figure below is worked out by hand from the table's rates per
// million tokens.
func TestPricesCost(t *testing.T) {
	p := testPrices(t)
	cost := func(model, group string, u fallback.Usage) spend.Amount {
		t.Helper()
		c, ok := p.Cost(model, group, u)
		require.True(t, ok, model)
		return c
	}
	// 1000 in at 1.25/M + 500 out at 10/M = 0.00125 + 0.005.
	assert.Equal(t, amt("0.00625"), cost("pro", "", fallback.Usage{InputTokens: 1000, OutputTokens: 500}))
	// Cached tokens are part of the input: 600 fresh at 1.25, 400 cached at 0.125.
	assert.Equal(t, amt("0.00075")+amt("0.00005"), cost("pro", "", fallback.Usage{InputTokens: 1000, CacheReadInputTokens: 400}))
	// Reasoning is billed at the output rate unless it has its own.
	assert.Equal(t, amt("0.0025"), cost("flash", "", fallback.Usage{OutputTokens: 1000, ReasoningOutputTokens: 800}))
	assert.Equal(t, amt("0.00032")+amt("0.0016"), cost("gpt-mini-2025", "", fallback.Usage{OutputTokens: 1000, ReasoningOutputTokens: 800}))
	// Above 200k prompt tokens every token of the call is billed at the long rates.
	assert.Equal(t, amt("0.25"), cost("pro", "", fallback.Usage{InputTokens: 200_000}))
	assert.Equal(t, amt("0.5000025")+amt("0.015"), cost("pro", "", fallback.Usage{InputTokens: 200_001, OutputTokens: 1000}))
	// A group multiplier halves the list price; an own group price wins.
	assert.Equal(t, amt("0.000625"), cost("pro", "batch", fallback.Usage{InputTokens: 1000}))
	assert.Equal(t, amt("0.0001"), cost("flash", "batch", fallback.Usage{InputTokens: 1000}))
	// A group nobody priced is billed at the list price.
	assert.Equal(t, amt("0.0003"), cost("flash", "stable", fallback.Usage{InputTokens: 1000}))
	// Prefixes: the longest wins; the per-request fee is added.
	assert.Equal(t, amt("0.001")+amt("0.001"), cost("gpt-4.1", "", fallback.Usage{InputTokens: 1000}))
	assert.Equal(t, amt("0.0004"), cost("gpt-mini", "", fallback.Usage{InputTokens: 1000}))
	assert.Equal(t, amt("0.0005")+amt("0.0005"), cost("gpt-4.1", "batch", fallback.Usage{InputTokens: 1000}))
	// "models/" is ignored.
	assert.Equal(t, amt("0.0003"), cost("models/flash", "", fallback.Usage{InputTokens: 1000}))
	// Tiny calls are exact: 7 tokens at 0.3/M are 2100 nano-units.
	assert.Equal(t, spend.Amount(2100), cost("flash", "", fallback.Usage{InputTokens: 7}))
	// Below a nano-unit, the sum is rounded once, half up: 300 tokens at
	// 2500 nano-units per million are 0.75 nano-units.
	tiny, err := spend.NewPrices(spend.PriceTable{Currency: "USD", Prices: []spend.Price{{Model: "t", Rates: spend.Rates{Input: 2500, Output: 2500}}}})
	require.NoError(t, err)
	c, _ := tiny.Cost("t", "", fallback.Usage{InputTokens: 300})
	assert.Equal(t, spend.Amount(1), c)
	c, _ = tiny.Cost("t", "", fallback.Usage{InputTokens: 100, OutputTokens: 100})
	assert.Equal(t, spend.Amount(1), c, "0.25 + 0.25 rounds to 1 once summed, not to 0 twice")
	// Huge counts do not overflow.
	assert.Equal(t, amt("12500000"), cost("pro", "", fallback.Usage{OutputTokens: 1_250_000_000_000}))

	_, ok := p.Cost("claude", "", fallback.Usage{InputTokens: 1})
	assert.False(t, ok)
	assert.Equal(t, spend.Estimate{Tokens: 1500, Cost: amt("0.00625")}, p.Estimate("pro", "", fallback.Usage{InputTokens: 1000, OutputTokens: 500}))
}

func TestPricesInvalid(t *testing.T) {
	_, err := spend.NewPrices(spend.PriceTable{
		CostGroups: map[string]float64{"free": 0, "": 0.5},
		Prices: []spend.Price{
			{Model: ""},
			{Model: "a", Rates: spend.Rates{Input: -1}},
			{Model: "b", LongContextAbove: 10},
			{Model: "c"}, {Model: "c"},
			{Model: "d*e*"},
		},
	})
	require.Error(t, err)
	for _, want := range []string{"currency is required", "prices[0]: model is required", "prices[1] (a): negative price",
		"prices[2] (b): long_context_above", `model "c" listed twice`, `cost_groups["free"]`, `cost_groups[""]`, `prices[5] (d*e*)`} {
		assert.Contains(t, err.Error(), want)
	}

	_, err = spend.ParsePrices([]byte(`{"currency":"USD","prices":[{"model":"x","inputs":1}]}`))
	assert.ErrorContains(t, err, `unknown field "inputs"`, "a typo must not price a model at zero")
	_, err = spend.ParsePrices([]byte(`{"currency":"USD","prices":[{"model":"x","input":"1.0000000001"}]}`))
	assert.ErrorContains(t, err, "more than 9 decimals")
	_, err = spend.LoadPrices(strings.NewReader(strings.Repeat(" ", 5<<20)))
	assert.ErrorContains(t, err, "at most")
}

// The example table shipped with the package loads, says it is an
// example, and names its date and sources.
func TestExamplePriceTable(t *testing.T) {
	data, err := os.ReadFile("testdata/example-prices.json")
	require.NoError(t, err)
	p, err := spend.ParsePrices(data)
	require.NoError(t, err)
	assert.Equal(t, "USD", p.Currency())
	var doc spend.PriceTable
	require.NoError(t, json.Unmarshal(data, &doc))
	assert.Contains(t, doc.Note, "EXAMPLE")
	assert.NotEmpty(t, doc.AsOf)
	assert.NotEmpty(t, doc.Sources)
	for _, src := range doc.Sources {
		assert.True(t, strings.HasPrefix(src, "https://"), src)
	}
	for _, m := range []string{"gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite", "gpt-4.1-mini", "gpt-4o-mini",
		"claude-opus-5", "claude-opus-4-7", "claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5"} {
		c, ok := p.Cost(m, "", fallback.Usage{InputTokens: 1_000_000})
		assert.True(t, ok, m)
		assert.Positive(t, c, m)
	}
}

// Cache writes have a rate of their own (Anthropic bills them at 1.25 times
// the input price for its 5-minute cache): each kind of input token is
// billed once, at its own rate, and cache writes cost the input price in a
// table that does not price them.
func TestCacheWritesAreBilledApart(t *testing.T) {
	data, err := os.ReadFile("testdata/example-prices.json")
	require.NoError(t, err)
	p, err := spend.ParsePrices(data)
	require.NoError(t, err)
	// Sonnet 5.5: 2 in, 2.50 cache write, 0.10 cache read, 10 out per
	// million. 10 fresh + 1043 written + 2000 read, 25 out.
	u := fallback.Usage{InputTokens: 10 + 1043 + 2000, CacheWriteInputTokens: 1043, CacheReadInputTokens: 2000, OutputTokens: 25}
	c, ok := p.Cost("claude-sonnet-5-5", "", u)
	require.True(t, ok)
	assert.Equal(t, amt("0.00002")+amt("0.0026075")+amt("0.0002")+amt("0.00025"), c)
	// The Batch API's group halves every rate, the cache write's too.
	c, _ = p.Cost("claude-sonnet-5-5", "batch", u)
	assert.Equal(t, amt("0.00001")+amt("0.00130375")+amt("0.0001")+amt("0.000125"), c)
	// Haiku 5.5 above 100k prompt tokens (cache reads and writes count):
	// every token at the long rates.
	c, _ = p.Cost("claude-haiku-5-5", "", fallback.Usage{InputTokens: 100_001, CacheWriteInputTokens: 100_000, OutputTokens: 1000})
	assert.Equal(t, amt("0.0000005")+amt("0.0625")+amt("0.0025"), c)
	// Without a cache_write_input price, a write costs the input price,
	// as before the field existed.
	c, _ = p.Cost("gpt-4o-mini", "", fallback.Usage{InputTokens: 1000, CacheWriteInputTokens: 400})
	assert.Equal(t, amt("0.00015"), c)
	// Counts that do not add up are clamped: never more cached tokens than
	// the prompt has.
	c, _ = p.Cost("claude-sonnet-5-5", "", fallback.Usage{InputTokens: 100, CacheReadInputTokens: 80, CacheWriteInputTokens: 500})
	assert.Equal(t, amt("0.000008")+amt("0.00005"), c)
	_, err = spend.NewPrices(spend.PriceTable{Currency: "USD", Prices: []spend.Price{{Model: "x", Rates: spend.Rates{Input: 1, CacheWriteInput: -1}}}})
	assert.ErrorContains(t, err, "negative price")
}
