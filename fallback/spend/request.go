package spend

import "context"

// Priority says how a request fares when its tenant nears a limit.
type Priority uint8

const (
	// Normal requests are refused only at the hard limit.
	Normal Priority = iota
	// Low requests (batch work, prefetching, suggestions) are shed once
	// the tenant's use reaches the shed threshold (90% by default).
	Low
)

var priorityNames = [...]string{Normal: "normal", Low: "low"}

// String returns "normal" or "low".
func (p Priority) String() string {
	if int(p) < len(priorityNames) {
		return priorityNames[p]
	}
	return "invalid_priority"
}

// Request identifies a request for the ledger and the limits. None of its
// fields reaches an error string, a metric or a log unless its user opts
// in; none holds a prompt or an answer.
type Request struct {
	// ID is the request's id, carried into its Record (for correlation
	// with the caller's own logs). Optional.
	ID string
	// Tenant is who pays: the key of the limits and of the totals. ""
	// is a tenant like any other.
	Tenant string
	// Scenario is what the request is for ("support", "contract_extraction",
	// "batch_seo"); a route is chosen by tenant and scenario.
	Scenario string
	// Feature is a finer label of the caller's (the screen or job that
	// asked), carried into the Record.
	Feature string
	// Priority decides whether the request is shed near a limit.
	Priority Priority
}

// ticketKey finds a request's Ticket in its context.
type ticketKey struct{}

// TicketFrom returns the Ticket of the request ctx belongs to (the one
// Ledger.Admit or Ledger.Begin made, or a context derived from it), or nil.
func TicketFrom(ctx context.Context) *Ticket {
	t, _ := ctx.Value(ticketKey{}).(*Ticket)
	return t
}

// RequestFrom returns the identity of the request ctx belongs to, and
// false when ctx carries no Ticket. Tiers use it to read the scenario or
// the tenant without another context value.
func RequestFrom(ctx context.Context) (Request, bool) {
	if t := TicketFrom(ctx); t != nil {
		return t.Request(), true
	}
	return Request{}, false
}
