package cache

import "context"

// Scope isolates entries: an answer cached for one scope is never served
// to another. By default the tenant and the scenario both count (see
// Config.ShareAcrossTenants and Config.ShareAcrossScenarios).
type Scope struct {
	// Tenant is the customer, account or user the answer was made for.
	Tenant string
	// Scenario is the feature or prompt family ("caption", "summary"):
	// the same words asked by two features may need different answers.
	Scenario string
}

type scopeKey struct{}

// WithScope returns a context carrying s, which the cache reads when
// Config.Scope is nil. Set it where the request enters the service, next
// to the tenant the rest of the service sees.
func WithScope(ctx context.Context, s Scope) context.Context {
	return context.WithValue(ctx, scopeKey{}, s)
}

// ScopeFrom returns the scope set by WithScope, or the zero Scope.
func ScopeFrom(ctx context.Context) Scope {
	s, _ := ctx.Value(scopeKey{}).(Scope)
	return s
}
