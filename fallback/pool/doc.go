// Package pool spreads one tier's calls over several deployments of the
// same model — API keys, projects, regions — each with its own breaker and
// rate limit.
//
//	keys, _ := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
//		{Key: os.Getenv("KEY_A"), Tier: proWith(keyA), Limiter: limitA},
//		{Key: os.Getenv("KEY_B"), Tier: proWith(keyB), Limiter: limitB},
//	}, Sticky: func(q string) string { return conversationOf(q) }})
//	defer keys.Observe(func(e pool.MemberEvent) { if e.Out == pool.MemberAuth { alert(e.Member) } })()
//	chain, _ := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: keys}, {Tier: flash}}})
//
// A Pool is a fallback.ModelTier: put it in a stage like any tier. Each
// call picks a healthy member (breaker not open, not parked, within its
// limit): least in flight by default, Weighted, optionally LatencyAware,
// or the same member for the same Sticky key while it is healthy
// (rendezvous hashing, so a member leaving moves only its own keys).
//
// A 429 or an exhausted quota on one member moves the call to the next
// member at once, before the chain's next tier and outside the retry
// policy. A 429 that says when to come back (RetryInfo, Retry-After) cools
// that member down alone until then (MemberCooling, told to Observe with
// its rule) when the evidence says its key's quota is spent — a per-minute
// quota named, a storm of 429s, a failed probe (fallback.CoolDown: the
// stage's, or Member.CoolDown) — and its limiter slows down for the wait
// either way; an exhausted quota parks it (MemberQuota). Refused credentials
// take a member out for AuthCooldown (MemberAuth, reported once to
// Observe and logged at Error by otelx) while the others serve; Auth on
// every member still fails the request closed.
//
// The pool tells the chain what it did through the call's record
// (fallback.RecordOf): the member of each call — named "#" and a short
// hash of its key, never the key, in the trail (Attempt.Member), the
// events and the tierguard.attempts metric — each rotation as an upstream
// call of its own, a failure that is one member's alone. Trails, events,
// UpstreamCalls and billing therefore come out the same however the pool
// is wrapped (chaos faults, fallback.MapTier, ratelimit.Tier, a route), as
// long as each wrapper passes its context on. A hedge on the stage
// (fallback.Stage.Hedge) goes to another member. A rate limit wrapped
// around the pool (ratelimit.Tier) takes one turn per attempt, whatever
// rotation happens inside; each member's Limiter takes its own, for the
// tokens of the stage's estimate (fallback.Stage.Tokens).
//
// Called outside a chain, a pool picks and rotates the same way, with the
// default classifier and class table. Pools serve unary chains.
package pool
