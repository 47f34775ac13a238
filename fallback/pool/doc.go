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
// tokens of the stage's estimate (fallback.Stage.Tokens). Put a member's
// own rate limit in Member.Limiter, which the pool asks before it calls.
// A rate limit wrapped around a member's tier instead refuses a call only
// once the pool has made it: the pool takes it back (Record.NoCall) and
// tries the next member, so nothing is counted — except when the refused
// member was the one a rotation had just moved to and no other member is
// left: the rotation already told observers that an attempt started, and
// that attempt ends with the refusal, told as an upstream call.
//
// Called outside a chain, a pool picks and rotates the same way, with the
// default classifier and class table.
//
// # Streams
//
// A StreamPool is the stream side: a fallback.StreamTier for a stage of a
// fallback.StreamChain. Streams builds it over a Pool's members, matched
// by Key, so that each key has one state for both sides — its cool-down,
// its parking, its Auth refusal, its breaker, its limiter, its streams and
// calls in flight, the evidence of its 429s — and Observe on either side
// tells of both; NewStream builds one that serves streams only.
//
//	streams, _ := pool.Streams(keys, []pool.StreamMember[string, *genai.GenerateContentResponse]{
//		{Key: os.Getenv("KEY_A"), Tier: proStreamWith(keyA)},
//		{Key: os.Getenv("KEY_B"), Tier: proStreamWith(keyB)},
//	})
//
// A stream picks its member as a call does, and rotates only while nothing
// has been shown: a 429, an exhausted quota or an Auth failure before the
// member's first chunk with content (the chain's commit point) moves the
// stream to the next member, on the trail as an upstream call of its own,
// and the member's chunks without content are dropped with it. After that
// chunk a stream never changes members: a failure reaches the chain as it
// came, which reports the stream incomplete. A hedged first chunk
// (fallback.StreamStage.Hedge) goes to another member, as a unary hedge
// does. A member is held — in flight,
// its breaker's token — until its stream ends; a stream its consumer
// stopped says nothing of the member, and LatencyAware weighs a member by
// its time to the first chunk with content.
//
// # Across pods
//
// A pool's own state — which member is cooling, parked or refused, its
// calls in flight, the evidence of its 429s, where Sticky sends a key —
// lives in the process. Pods sharing a key each find its cool-down on
// their own: a key cooled by a per-minute 429 is called about once per
// delay by each pod, not once by the fleet. What a member shares with
// other pods is what its own guards share: a Member.Breaker whose state
// is in Redis (breaker/redisstore), a Member.Limiter that takes its turns
// from Redis (ratelimit/redislimit).
//
// # Observe
//
// Observe tells of every change of a member's rotation a user can act on:
// MemberQuota (its quota exhausted: parked for the longer of the chain's
// QuotaCooldown and the time the server named), MemberCooling (its 429s said its key is
// spent for everyone: out until the server's time), MemberAuth (its
// credentials refused: out for AuthCooldown — fix the key, then Restore)
// and MemberIn (back by Restore). A member comes back on its own when its
// time has passed, without an event; Members says where each stands. A
// member's breaker tells of its own transitions (breaker.Breaker.Observe;
// MemberBreakers lists them).
package pool
