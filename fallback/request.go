package fallback

import "context"

// Request is who a request is for and what for. Set it once, where the
// request enters the service (WithRequest); every part of tierguard that
// needs to know reads it from the context: the cache's scope, otelx's
// labels, chaos rules, routes. A spend.Ticket carries its own request.
//
// Tenant, Scenario and ID never appear in errors; otelx puts them on spans
// and log events, and on metrics only when its options ask for them.
type Request struct {
	// ID correlates the request with the service's own logs.
	ID string
	// Tenant is who the request is for: the customer, account or user
	// whose cache entries, budget and limits it uses.
	Tenant string
	// Scenario is what the request is for: a feature, a prompt family, a
	// job kind ("support", "summary", "batch_seo").
	Scenario string
}

// RequestKey is the key under which a context holds its *Request. A
// context type of your own may answer Value(RequestKey{}) with one, as
// spend.Ticket does, instead of being wrapped by WithRequest.
type RequestKey struct{}

// WithRequest returns a context carrying r.
func WithRequest(ctx context.Context, r Request) context.Context {
	return context.WithValue(ctx, RequestKey{}, &r)
}

// RequestFrom returns the Request ctx carries, or the zero Request.
func RequestFrom(ctx context.Context) Request {
	if r, ok := ctx.Value(RequestKey{}).(*Request); ok && r != nil {
		return *r
	}
	return Request{}
}
