// Package ratelimit keeps calls under the quotas a model API publishes —
// requests per minute, tokens per minute — on the client side, so that a
// service stays under its quota instead of discovering it by 429.
//
// A tier behind its quota, in a chain:
//
//	proLimit, _ := ratelimit.New(ratelimit.Config{Name: "gemini-2.5-pro", Requests: 150, Tokens: 2_000_000})
//	stage := fallback.Stage[string, string]{
//		Tier:   ratelimit.Tier(pro, ratelimit.TierConfig[string]{Limiter: proLimit, MaxWait: 2 * time.Second}),
//		Tokens: func(q string) int64 { return int64(len(q))/4 + 800 }, // your estimate: prompt + answer
//	}
//
// Every attempt (retries included: each is an upstream call) takes its
// turn just before its call. Per tenant, TierConfig.PerRequest returns the
// request's limiter on the tier, usually a Group's Get of the request's
// tenant, so one tenant cannot spend another's share of the tier's quota;
// it composes with a per-tenant bulkhead.Group around the chain.
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
// A call whose estimate exceeds a limiter's TokenBurst can never be
// admitted, however long it waits: Tier skips it as fallback.SkipTooLarge
// rather than SkipRateLimited, its *LimitedError has TooLarge set and
// matches ErrTooLarge (which is fallback.ErrTooLarge; ErrLimited too, so
// test for ErrTooLarge first), and a chain whose every tier skips a
// request as too large fails closed with that error rather than answer
// from the cache or the default — "retry in a minute" would be wrong
// forever; a gateway answers 413. Limiter.Admissible tells ahead.
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
// rounded up from the exact rate (never more generous than the configured
// rate, whatever it is: a burst of one that takes centuries to come back
// admits one call, and many tokens a nanosecond never more than the
// burst at once), and a
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
// of the key; its limiters share one configuration. Limiter.Wait, Allow,
// Reserve and Do work on their own; Observe sees refusals, throttles and
// recoveries.
//
// A Store shares a limiter's quota across processes: the redislimit
// module gives every process's limiter of the same name one fleet-wide
// bucket in Redis (the same algorithm in Lua, on Redis's clock),
// local-first and failing open like the breaker store — a call is
// admitted by the process's own limiter, then takes a fleet turn it
// already holds; only a call that holds none waits on Redis, briefly, and
// while Redis is out each process keeps to its share of the quota.
package ratelimit
