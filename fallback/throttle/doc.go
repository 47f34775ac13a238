// Package throttle sheds a tier's load on the client before the tier has
// to: Throttle is client-side adaptive throttling, which turns away a
// share of calls locally as the tier refuses calls for overload, and Feed
// is the observer that teaches an adaptive bulkhead (bulkhead.Adaptive)
// its limit from the calls a chain makes.
//
// Both plug into a chain from outside: Tier and StreamTier decorate a
// tier, Feed is one of the chain's observers. A throttled call makes no
// upstream call; the chain skips the tier (fallback.SkipThrottled, on the
// trail and for observers) and moves on to the next tier, the cache or
// the default, as it does for a full bulkhead.
//
// # Differences from failsafe-go's adaptivethrottler
//
//   - What counts as a refusal is the class table's: overload signals
//     (Transient, a 529, timeouts) and 429s; a 400 or a rejected answer is
//     the tier working, and counts as accepted.
//   - A throttled call is a skip on the trail, with a reason of its own,
//     not an error of the call.
//   - The rule alone, with K: no success-rate threshold, no minimum of
//     calls before it acts, no cap on the rate. The rate nears 1 only as
//     refusals pile up, and since throttled calls count as requests a
//     trickle of calls still reaches the tier, which is how it is seen to
//     recover.
//
// Throttles and adaptive limits are per process: pods sharing Redis each
// learn from their own calls.
package throttle
