// Package spend counts what model calls cost and keeps each tenant within
// its limits: the ingress guard in front of a fallback chain and the cost
// ledger behind it.
//
// # Prices
//
// A Prices table (a Go value through NewPrices, or JSON through
// ParsePrices) gives, per model and cost group, the price of a million
// input, cached-input (read from a prompt cache), cache-write (written to
// it, which Anthropic bills at 1.25 times input), output and reasoning
// tokens, an optional fee per call, and higher rates above a prompt size
// (Gemini 2.5 Pro's 200k, Claude Haiku 5.5's 100k). A
// cost group is a way of buying the same model (a batch discount, a
// gateway's cheaper pool): its own prices, or a multiplier of the list
// price. Money is an Amount, an integer of nano-units, so that sums are
// exact. testdata/example-prices.json is an example, dated and sourced,
// not a price list to rely on: prices change, bring your own.
//
// Model ids are compared in one normal form, in the table and in every
// lookup: surrounding white space removed, lower-cased, a resource path
// cut after its last "models/" segment ("Gemini-2.5-Flash ",
// "models/gemini-2.5-flash" and "publishers/google/models/gemini-2.5-flash"
// are one model). A version suffix is part of the id: price the versions
// you call, or cover them with a prefix entry ("gemini-2.5-flash-*"). The
// loaders are strict: unknown fields, anything after the JSON document
// and a table without a price are refused.
//
// # The ledger
//
// A Ledger is fed by the chains it is attached to (Attach, or Observer in
// fallback.Config), from the same events as otelx; a chain without one
// pays nothing. It never sees a prompt or an answer. For each request it
// records every attempt's usage — failed attempts that were billed
// included (an answer a validator rejected) — priced by model and cost
// group, with the request's tenant, scenario and feature, whether the
// answer was valid (a tier's, past its validator) and degraded. From
// these, per tenant (Totals):
//
//   - cost per valid result, not per call (CostPerValid);
//   - the extra cost of failures and retries, and of fallbacks (what the
//     fallback's answer cost, and what it cost beyond the same tokens on
//     the first tier), each by the error class that caused it — so "which
//     tenant paid extra fallback cost because of 429s" is
//     Totals(tenant).ByClass[classify.RateLimited];
//   - primary and final success rates, calls per successful request, and
//     cost by model and cost group.
//
// ObserveRecords delivers each request's Record (its attempts, priced) to
// your own sink.
//
// The ledger is also a cache.UsageRecorder (RecordEmbedding): as the
// cache's SemanticConfig.Usage, it bills each embedding call of the
// semantic layer to the request's tenant, priced at the embedding model's
// input rate, against the tenant's limits (Totals.Embeddings,
// ObserveEmbeddings).
//
// # Limits
//
// An Allowance caps a tenant's tokens and cost per day and per month
// (in Config.Location); cost limits need a price table. Admit checks a
// request before it enters the chain with an estimate, which it
// reserves; when the request ends, its real usage replaces the estimate.
// Events report each meter reaching 70% and 90% (Config.Thresholds) and
// its limit (ThresholdReached), and the first request refused at the
// limit (FirstRefusal), which comes first when estimates are reserved;
// from 90%
// (Config.ShedAt) requests marked Low are shed; at the limit every
// request is refused. Refusals are *LimitError values saying which limit,
// the threshold it enforces and when it resets (ErrShed,
// ErrLimitReached); they never name the tenant unless
// Config.TenantInErrors is set. The ledger never switches a request to
// another model because its tenant is near a limit: a request either
// runs on its route or is refused, loudly.
//
// A model without a price would cost nothing against a cost limit, so a
// tenant with one is refused a request whose estimate covers such a
// model (Estimate.Cost is UnknownCost; ErrUnpriced), and by default
// (Config.Unpriced, FailClosedUnpriced) a tenant billed for one anyway
// has its cost limits fail closed until their periods end; either way an
// event says so (Refused, UnpricedUsage).
//
// Admitting reads no clock (a timer moves the periods on at midnight) and
// allocates nothing with AdmitInto, but for a strict store's reservation
// (a Redis round trip); see BENCHMARKS.md for the cost.
//
// # Several processes
//
// With a Store (fallback/spend/redisspend for Redis), the processes of a
// fleet share their limits: each decides locally on the fleet's figures
// as of its last exchange plus its own since, and exchanges cumulative
// figures in the background (see Store); the fleet may pass a limit by
// what the others spend before a process hears of it. A StrictStore
// removes that: Admit reserves the estimate against the fleet's figures
// in one round trip, and the fleet never passes a limit by more than the
// estimates' shortfall. While the store is away, each process spends at
// most its share of what was left when it last saw the store (PodCounter);
// Allowance.FailClosed refuses instead. The figures reconcile exactly
// when the store is back. With a Claimer store, each threshold's event
// is reported by one process of the fleet.
//
// Thresholds: ThresholdReached reports use reaching 70 %, 90 % and the
// limit itself; FirstRefusal the first request refused at a limit, which
// with estimates reserved comes before use reaches it.
//
// # Identity
//
// A request's tenant, scenario, feature, priority and id travel in its
// Ticket, which is the request's context; RequestFrom reads them back (a
// tier that needs the scenario, the router). They reach no metric, log or
// error unless you export them: otelx's ledger metrics add the tenant only
// when Options.MetricAttributes lists otelx.KeyTenant.
//
// # Price files
//
// LoadPrices and ParsePrices read JSON. YAML is left out: it would need a
// YAML library in the root module, which compiles in only the OpenTelemetry
// API and the JSON Schema validator; convert YAML to JSON before loading.
//
// Scenario 8 of internal/testbed/scenarios (go run
// ./internal/testbed/scenarios -s 8) runs three tenants through a 429 storm
// on the primary; its figures and the ledger's cost per request are in
// BENCHMARKS.md.
package spend
