// Package chaos injects faults into a service's model calls, on purpose and
// under control, and runs drills that say whether the fallback chain,
// cache, breakers and bulkheads really keep the service answering. A
// resilience pattern nobody has seen fail over is a hope; a drill turns it
// into a measurement, and the first one usually finds something — a
// timeout nested the wrong way, a breaker that never trips, a fallback
// whose prompt does not fit its model.
//
// # Faults
//
// A Fault is what one call does: Latency, RandomLatency and Stall (which
// holds the call until its context ends); Fail with a Response — the
// predefined ones are real error bodies of the Gemini API (503 overloaded,
// 429 per-minute with RetryInfo, 429 per-day quota, 404 retired model, 499
// cancelled, invalid API key) and of OpenAI-compatible APIs (500, 429 with
// "try again in", per-day and insufficient quota, 404 model_not_found, 401),
// quoted byte for byte from public reports, so an injected fault
// classifies exactly as the real response did; answers a validator should
// reject (MalformedJSON, EmptyText, Answer); a FinishReason that makes an
// answer unusable, or NoFinishReason; and stream faults: CutAfter k chunks,
// IdleGap after k chunks, Keepalive comments.
//
// Faults enter at one of three places. Tier wraps a fallback.ModelTier,
// StreamTier a fallback.StreamTier: the call returns what a real tier
// returns for that failure — an *InjectedError wrapping a
// *classify.HTTPError, io.ErrUnexpectedEOF or the context's error — and
// errors.Is(err, ErrInjected) tells it from a real one. Transport wraps an
// http.RoundTripper below an SDK, which then meets the real bytes.
//
// # Switches
//
// Wrappers read a Switch. Its zero value is off, and off costs one atomic
// load per call and no allocation (BenchmarkTier, TestOffAllocatesNothing).
// Switch.Start turns on a Drill: rules, each injecting its fault into a
// Rate of the calls it matches — scoped to a tier, to a tenant or scenario
// (the request's fallback.Request), to the requests a service Enrolls, and to a
// window inside the drill — and breakers forced open (Open). A drill
// always ends: End or For is required, at most MaxDrill, its Start at most
// MaxLead ahead (a scheduled drill holds its switch), and at its end
// the rules stop and the breakers are given back, with nobody having to
// remember. Rates are exact over every 64 matched calls, and which calls
// are hit follows from the drill's Seed, so a drill is repeatable.
//
// # Drills
//
// Run sends a Load (requests per second, duration, concurrency) through a
// chain while a drill runs, and reports the five signals a resilient chain
// is watched by — breaker trips, bulkhead rejection rate, fallback rate,
// cache-hit ratio and end-to-end success — with latency percentiles, the
// worst deadline overrun and what each rule injected, judged against
// Checks. The report's signals are those otelx exports for the same
// requests (tierguard.breaker.transitions, tierguard.bulkhead.*,
// tierguard.requests by source and degraded). Without a load, Run watches
// the chain's own traffic: a drill in production.
//
// Under testing/synctest a drill runs in fake time: the ten-minute
// "primary forced open" drill of drill_test.go takes a tenth of a second.
// Copy those tests into your service's and run them in CI.
//
// From a shell, go run ./examples/drill -fault 503 -rate 0.2 (or -fault
// none -open 15s) drills a chain over the in-process fake Gemini server and
// exits 1 when a check fails; go run ./examples/outage -drill-start 4s
// -drill-len 6s adds a forced-open drill to the outage demo's story.
package chaos
