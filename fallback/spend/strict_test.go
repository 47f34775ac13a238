package spend_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback/spend"
)

// A price file with something after its table — a second document, a
// stray brace, a paste gone wrong — is refused: the loader read the first
// table and silently ignored the rest before.
func TestPricesRefuseTrailingData(t *testing.T) {
	const table = `{"currency":"USD","prices":[{"model":"x","input":1,"output":2}]}`
	for _, tail := range []string{
		"\n" + `{"currency":"EUR","prices":[{"model":"y","input":1,"output":2}]}`,
		"}",
		" garbage",
		`[]`,
		"0",
	} {
		_, err := spend.ParsePrices([]byte(table + tail))
		require.Error(t, err, "%q", tail)
		assert.ErrorContains(t, err, "after the price table")
		_, err = spend.LoadPrices(strings.NewReader(table + tail))
		assert.ErrorContains(t, err, "after the price table", "%q", tail)
	}
	for _, ok := range []string{"", "\n", " \t\r\n"} {
		_, err := spend.ParsePrices([]byte(table + ok))
		assert.NoError(t, err, "%q", ok)
	}
}

// A table without a price prices nothing: every call is unpriced. It is
// refused, naming the field, whether it comes as JSON or as a value.
func TestPricesRefuseAnEmptyList(t *testing.T) {
	for _, doc := range []string{`{"currency":"USD","prices":[]}`, `{"currency":"USD"}`, `{"currency":"USD","prices":null}`} {
		_, err := spend.ParsePrices([]byte(doc))
		assert.ErrorContains(t, err, "prices: at least one price is required", doc)
	}
	_, err := spend.NewPrices(spend.PriceTable{Currency: "USD"})
	assert.ErrorContains(t, err, "prices: at least one price is required")
}

// A cost limit without a price table could never fill: it is refused at
// construction, naming the fields (not the tenants).
func TestCostLimitsNeedPrices(t *testing.T) {
	_, err := spend.New(spend.Config{Default: spend.Allowance{MonthlyCost: amt("10")}})
	require.Error(t, err)
	assert.ErrorContains(t, err, "Prices is required with a cost limit: Default.MonthlyCost")

	_, err = spend.New(spend.Config{Tenants: map[string]spend.Allowance{
		"acme-secret": {DailyCost: amt("1")}, "globex-secret": {MonthlyCost: amt("1")}, "initech": {DailyTokens: 10},
	}})
	require.Error(t, err)
	assert.ErrorContains(t, err, "Prices is required with a cost limit: Tenants[…].DailyCost or .MonthlyCost (2 tenants)")
	assert.NotContains(t, err.Error(), "secret")

	// Token limits need no prices.
	l, err := spend.New(spend.Config{Tenants: map[string]spend.Allowance{"initech": {DailyTokens: 10}}})
	require.NoError(t, err)
	require.NoError(t, l.Close())
}
