// Package ratelimit keeps calls under the quotas a model API publishes —
// requests per minute, tokens per minute — on the client side, so that a
// service stays under its quota instead of discovering it by 429.
//
// A Limiter admits a call when both its limits have room: one request, and
// the call's estimated tokens. The estimate is corrected once the answer's
// real usage is known (Adjust). When the upstream answers 429 anyway — the
// quota is shared with another service, or was lowered — Throttle holds
// every call for the wait the server asked for and halves the rate, down
// to Config.MinShare; each call that passes afterwards (Passed) brings it
// back by an eighth of the slowdown. Tier (and StreamTier) puts a tier
// behind its limiters and does all of this itself: in a chain, a call the
// limiters refuse returns a *fallback.SkipError, and the chain skips the
// tier without an upstream call (SkipRateLimited) — or the call waits,
// when TierConfig.MaxWait allows it and the wait leaves a useful attempt
// before the deadline. The token estimate is the stage's
// (fallback.Stage.Tokens), read from the call's record; the correction is
// the usage the tier's responses report (fallback.Report).
//
// Each limit is a token bucket whose burst is a tenth of the quota
// (Config.Burst; a quarter for tokens) and whose rate is what is left of
// the quota after the burst, so that no window of Config.Per ever holds
// more than the quota: an upstream that counts over a sliding minute never
// sees it exceeded.
//
// A bucket is one atomic number (the generic cell rate algorithm's
// theoretical arrival time): admitting a call is a compare-and-swap per
// limit, with no lock and no allocation. It behaves as
// golang.org/x/time/rate's Limiter of the same rate and burst — the tests
// run both through the same random sequences of AllowN, ReserveN and
// Cancel — with two deliberate differences: costs are whole nanoseconds,
// rounded up (never more generous than the configured rate), and a
// cancellation made after a later reservation was partly cancelled gives
// back what the later ones no longer hold, where x/time/rate gives back
// nothing (TestCancelAfterAPartialCancel). The root module does not depend
// on x/time: only its tests do.
//
// A caller that will not wait, or only so long, asks with Take or
// TakeWithin: the turn is taken if it comes in time, and otherwise nothing
// is taken (Reservation.Retry) — the check and the take are the same
// compare-and-swap. Reserving and cancelling instead loses quota under
// contention: a cancelled reservation gives back only what no reservation
// placed behind it holds, so callers that reserve and cancel together
// keep pushing the bucket's next turn away while its quota goes unused. A
// turn taken at once and given back (Cancel, or a later limit or the
// fleet refusing the call) comes back whole — the calls admitted behind
// it were admitted with it counted — unless a reservation to act later
// was placed behind it. Tier takes its limiters' turns this way.
//
// A Group gives each key (tenant, API key) its own limiter, named by a hash
// of the key. A Store shares a limiter's quota across processes; the
// redislimit module provides one over Redis, local-first and failing open.
package ratelimit
