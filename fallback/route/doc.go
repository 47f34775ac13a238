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
// Streams are routed the same way. NewStream compiles StreamRoutes —
// the same fields, with streaming candidates, a StreamCache and a
// Default chunk — into fallback.StreamChains, checking and splitting a
// table exactly as New does: the same table of stream routes is refused,
// or split into the same attempts per candidate, as the same table of
// unary routes. A stream falls back only before its first chunk with
// content, so FailClosed, MaxAttempts and the read-only fallback apply
// to that window; StreamRouter.Stream returns a lookup error before
// anything is sent, and the Stream's Result says, from the first chunk
// on, whether to mark the answer degraded. A service that answers both
// ways builds a Router and a StreamRouter from the same scenarios and
// tenants, hands both the same ledger, and instruments both with one
// otelx.Instrumentation (otelx.InstrumentRouter, then
// otelx.AttachRouter).
//
// A route's Estimate is what the ledger's Admit reserves against the
// tenant's limits while the request runs. Route.Reserve chooses it:
// ReserveOne (the default) reserves one call on the route's dearest
// candidate, so that a request that pays for several calls — an answer
// the validator rejected, then a fallback — may take its tenant past the
// limit, by at most k·(n−1)·c for k requests in flight, n calls each
// (Compiled.Calls) and c the dearest call; ReserveWorstCase reserves the
// n calls, and the tenant never passes the limit. Both bounds assume each
// call uses at most the usage the estimate was made for (see Reservation).
//
// A route never changes because its tenant's budget runs low: the
// ledger's Admit refuses the request (spend.ErrLimitReached) or sheds it
// (spend.ErrShed) before it reaches the router. Routing a core scenario to
// a cheaper, unvalidated model when money runs out is a decision to
// declare as its own scenario, not one the library makes for you.
package route
