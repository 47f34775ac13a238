package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback/spend"
)

// tenants are the demo's customers: client i belongs to tenants[i %
// len(tenants)]. The ledger answers what each paid, and what the outage
// and the 429s cost them in fallbacks.
var tenants = []string{"acme", "globex", "initech"}

// newLedger is the demo's cost ledger. Its prices are an example: Gemini
// API list prices per million text tokens on the paid tier, as published
// on the date below — the fake server's answers are priced as if they were
// real. Build your own table from your invoices.
func newLedger() (*spend.Ledger, error) {
	prices, err := spend.NewPrices(spend.PriceTable{
		Currency: "USD",
		AsOf:     "2026-12-01",
		Sources:  []string{"https://ai.google.dev/gemini-api/docs/pricing"},
		Note:     "example only, not authoritative",
		Prices: []spend.Price{
			{Model: proModel, Rates: spend.Rates{Input: spend.MustParseAmount("1.25"), Output: spend.MustParseAmount("10")}},
			{Model: flashModel, Rates: spend.Rates{Input: spend.MustParseAmount("0.30"), Output: spend.MustParseAmount("2.50")}},
		},
	})
	if err != nil {
		return nil, err
	}
	return spend.New(spend.Config{Prices: prices})
}

// ticket opens client id's request in the ledger: the chain records it
// when the ticket is the request's context.
func ticket(l *spend.Ledger, id int) *spend.Ticket {
	return l.Begin(context.Background(), spend.Request{Tenant: tenants[id%len(tenants)], Scenario: "support"})
}

// spendRow is one tenant's figures at the end of the run.
type spendRow struct {
	tenant string
	spend.Totals
}

// spendSummary reads the ledger's figures per tenant.
func spendSummary(l *spend.Ledger) []spendRow {
	rows := make([]spendRow, 0, len(tenants))
	for _, t := range tenants {
		rows = append(rows, spendRow{tenant: t, Totals: l.Totals(t)})
	}
	return rows
}

// printSpend prints what each tenant paid, per valid answer, and what
// fallbacks and 429s added.
func printSpend(w io.Writer, rows []spendRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\nspend by tenant (unary requests; example prices in USD from examples/outage/spend.go)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  tenant\trequests\tvalid\tcost\tper valid answer\tfallbacks\tfallback cost\tvs pro's price\tfallbacks by cause\t")
	for _, r := range rows {
		var causes []string
		for _, c := range classify.Classes() {
			if n := r.ByClass[c].Fallbacks; n > 0 {
				causes = append(causes, fmt.Sprintf("%s %d", c, n))
			}
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%.4f\t%.6f\t%d\t%.4f\t%+.4f\t%s\t\n", r.tenant, r.Requests, r.Valid, r.Cost.Float(), r.CostPerValid().Float(),
			r.Fallbacks, r.FallbackCost.Float(), r.FallbackExtra.Float(), strings.Join(causes, ", "))
	}
	tw.Flush()
}
