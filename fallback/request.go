package fallback

import (
	"context"

	"github.com/tierguard/tierguard/bulkhead"
)

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
	// Priority is how much the request matters when a tier's bulkhead is
	// short of slots (see bulkhead.Priority): map your tenants' plans and
	// job kinds onto it here. The zero value is bulkhead.Interactive.
	// Bulkheads read it from the context (bulkhead.PriorityFrom), which
	// WithRequest makes answer for it.
	Priority bulkhead.Priority
}

// RequestKey is the key under which a context holds its *Request. A
// context type of your own may answer Value(RequestKey{}) with one, as
// spend.Ticket does, instead of being wrapped by WithRequest.
type RequestKey struct{}

// WithRequest returns a context carrying r. It answers
// Value(bulkhead.PriorityKey{}) with r.Priority, so that a bulkhead — which
// cannot know of Request, fallback importing it — reads the priority
// where the rest of the request is set.
func WithRequest(ctx context.Context, r Request) context.Context {
	return &requestContext{Context: ctx, r: &r}
}

// requestContext is WithRequest's context: one layer for both keys, so
// that the priority is set once, with the request.
type requestContext struct {
	context.Context
	r *Request
}

// Value answers RequestKey and bulkhead.PriorityKey, and asks the parent
// for any other key. A Priority is one byte: making it an interface
// allocates nothing.
func (c *requestContext) Value(key any) any {
	switch key.(type) {
	case RequestKey:
		return c.r
	case bulkhead.PriorityKey:
		return c.r.Priority
	}
	return c.Context.Value(key)
}

// String names the context as context.WithValue's would, without the
// request's fields: a tenant must not reach a log through a context.
func (c *requestContext) String() string { return contextName(c.Context) + ".WithRequest" }

func contextName(c context.Context) string {
	if s, ok := c.(interface{ String() string }); ok {
		return s.String()
	}
	return "context"
}

// RequestFrom returns the Request ctx carries, or the zero Request.
func RequestFrom(ctx context.Context) Request {
	if r, ok := ctx.Value(RequestKey{}).(*Request); ok && r != nil {
		return *r
	}
	return Request{}
}
