package spend_test

import (
	"encoding/json"
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/spend"
)

// FuzzParseAmount holds ParseAmount to math/big's reading of the same
// text: an amount it accepts is the exact decimal math/big reads, in
// nano-units, never negative; and every amount it formats reads back as
// itself, in JSON too.
func FuzzParseAmount(f *testing.F) {
	for _, s := range []string{"1.25", "0.000075", "3", "1e-6", "2.5E+3", "+7", ".5", "5.", "0.0000000001", "9223372036.854775807", "9223372036.854775808", "-1", "1e31", "00012.3400", "1/3", "0x10", "NaN", "Inf", " 1", "1_000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := spend.ParseAmount(s)
		if err != nil {
			assert.Less(t, len(err.Error()), 256, "an error quotes at most the start of the text")
			return
		}
		require.GreaterOrEqual(t, a, spend.Amount(0), "%q", s)
		want, ok := new(big.Rat).SetString(s)
		require.True(t, ok, "%q accepted, but it is no number to math/big", s)
		got := new(big.Rat).SetFrac(big.NewInt(int64(a)), big.NewInt(int64(spend.Unit)))
		require.Zero(t, want.Cmp(got), "%q read as %v, math/big reads %v", s, got.FloatString(9), want.FloatString(12))

		back, err := spend.ParseAmount(a.String())
		require.NoError(t, err, "%q formatted as %q", s, a.String())
		require.Equal(t, a, back)
		js, err := a.MarshalJSON()
		require.NoError(t, err)
		var fromJSON spend.Amount
		require.NoError(t, fromJSON.UnmarshalJSON(js))
		require.Equal(t, a, fromJSON)
	})
}

// FuzzParsePrices feeds ParsePrices hostile tables: it never panics, and a
// table it accepts prices every model it lists in its group, never below
// zero.
func FuzzParsePrices(f *testing.F) {
	f.Add([]byte(`{"currency":"USD","prices":[{"model":"gemini-2.5-pro","input":"1.25","output":"10","long_context_above":200000,"long_context":{"input":"2.5","output":"15"}}]}`))
	f.Add([]byte(`{"currency":"USD","prices":[{"model":"x","input":1e-6,"output":0,"per_request":"0.001","cost_group":"batch"}],"cost_groups":{"batch":0.5}}`))
	f.Add([]byte(`{"currency":"USD","prices":[]} {}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := spend.ParsePrices(data)
		if err != nil {
			return
		}
		var table struct {
			Prices []struct {
				Model     string `json:"model"`
				CostGroup string `json:"cost_group"`
			} `json:"prices"`
		}
		require.NoError(t, json.Unmarshal(data, &table))
		for _, m := range table.Prices {
			cost, ok := p.Cost(m.Model, m.CostGroup, fallback.Usage{InputTokens: 1 << 40, OutputTokens: 1 << 40, ReasoningOutputTokens: 1 << 20})
			require.True(t, ok, "a listed model %q is priced in its group %q", m.Model, m.CostGroup)
			require.GreaterOrEqual(t, cost, spend.Amount(0))
		}
	})
}
