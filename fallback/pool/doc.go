// Package pool spreads one tier's calls over several deployments of the
// same model — API keys, projects, regions — each with its own breaker and
// rate limit.
//
// A Pool is a fallback.ModelTier: put it in a stage like any tier. Each
// call picks a healthy member and, on a 429, an exhausted quota or refused
// credentials, moves to the next member at once, before the chain's next
// tier. A 429 that says when to come back (RetryInfo, Retry-After) cools
// that member down alone; an exhausted quota parks it; refused credentials
// take it out (alert on MemberAuth) while the others serve.
//
// The pool tells the chain what it did through the call's record
// (fallback.RecordOf): the member of each call, each rotation as an
// upstream call of its own, a failure that is one member's alone. Trails,
// events, UpstreamCalls and billing therefore come out the same however
// the pool is wrapped (chaos faults, fallback.MapTier, a route), as long
// as each wrapper passes its context on.
package pool
