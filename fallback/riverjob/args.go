package riverjob

import "github.com/riverqueue/river"

// Args are what a job carries for the chain: who asked, for which
// scenario, under which idempotency key, and the chain's input. Embed them
// in your own job args type, which names the job's kind:
//
//	type ExtractArgs struct {
//		riverjob.Args[Contract]
//	}
//
//	func (ExtractArgs) Kind() string { return "extract_contract" }
//
// The embedded fields are encoded at the top level of the job's JSON
// ("tenant", "scenario", "idempotency_key", "input").
type Args[In any] struct {
	// Tenant names who the job is for. The worker's per-tenant bulkhead
	// is keyed by it, and it is the tenant of the attempt's
	// fallback.Request; it reaches spans and log events only when otelx's
	// Options.TenantLabels is set.
	Tenant string `json:"tenant,omitempty"`
	// Scenario names the kind of work ("contract_extraction"); it goes
	// on the attempt's spans and log events.
	Scenario string `json:"scenario,omitempty"`
	// Key is the idempotency key. Jobs of one kind with the same non-empty
	// key are one job: a second insert is skipped while the first is
	// pending, running, waiting for a retry or completed (River's unique
	// jobs), and the result is stored under the key. Keys are per kind, not
	// per tenant: put the tenant in the key when two tenants may use the
	// same one. Empty means every insert is a job of its own, stored under
	// a key made of its River id and creation time.
	Key string `json:"idempotency_key,omitempty" river:"unique"`
	// Input is what the chain answers.
	Input In `json:"input"`
}

// Request returns the arguments themselves. It is how the worker reads
// them from your job args type, which gets it by embedding Args.
func (a Args[In]) Request() Args[In] { return a }

// InsertOpts makes a job with a key unique by it: by its kind and key
// alone (the `river:"unique"` tag), in River's default unique states —
// pending, scheduled, available, running, retryable and completed. A
// discarded or cancelled job does not block a new insert with its key,
// and can itself be replayed (Client.JobRetry). Options given to Insert
// override these field by field; a job args type that defines its own
// InsertOpts must copy UniqueOpts from Args.InsertOpts.
func (a Args[In]) InsertOpts() river.InsertOpts {
	if a.Key == "" {
		return river.InsertOpts{}
	}
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// JobArgs is a River job args type that carries Args: any struct that
// embeds Args[In] and has a Kind method.
type JobArgs[In any] interface {
	river.JobArgs
	// Request returns the job's Args.
	Request() Args[In]
}
