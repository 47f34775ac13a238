// Package route is the policy router: it picks, by tenant and scenario,
// which compiled chain a request runs through.
//
// A Route declares, for one scenario (and optionally one tenant), the
// candidate tiers in order with the cost group each is billed in, the
// total deadline, the most upstream calls a request may make over every
// candidate (checked when the router is built, so the worst case is
// known), and what a fallback may do: answer at all (FailClosed lets only
// the first candidate answer — risk decisions, medical advice), be shown
// to the user as degraded (MarkDegraded), and write or call tools
// (ReadOnlyFallback: fallback tiers see WritesAllowed false). A batch
// scenario routes to the cheap cost group; a paid customer-facing one to
// the stable group with a tested fallback.
//
// New compiles every route's chain once; Lookup is a map access that
// allocates nothing. A scenario no route declares is an error
// (ErrUnknownScenario), never a silent default: a typo must not send
// medical questions down the chat route. With Config.Ledger every chain
// reports to the spend ledger with its candidates' cost groups, and Do
// reads the tenant and the scenario from the request's spend.Ticket.
//
// A route never changes because its tenant's budget runs low: the
// ledger's Admit refuses the request (spend.ErrLimitReached) or sheds it
// (spend.ErrShed) before it reaches the router. Routing a core scenario to
// a cheaper, unvalidated model when money runs out is a decision to
// declare as its own scenario, not one the library makes for you.
package route
