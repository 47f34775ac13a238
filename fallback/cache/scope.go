package cache

// Scope isolates entries: an answer cached for one scope is never served
// to another. By default the tenant and the scenario both count (see
// Config.ShareAcrossTenants and Config.ShareAcrossScenarios), and both
// come from the request's fallback.Request (fallback.WithRequest, or a
// spend.Ticket) unless Config.Scope says otherwise: the tenant the ledger
// bills and otelx labels is the one the cache isolates, with no separate
// scope to forget. Requests that name no tenant share the empty one.
type Scope struct {
	// Tenant is the customer, account or user the answer was made for.
	Tenant string
	// Scenario is the feature or prompt family ("caption", "summary"):
	// the same words asked by two features may need different answers.
	Scenario string
}
