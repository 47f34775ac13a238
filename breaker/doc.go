// Package breaker is a circuit breaker for calls to a model API.
//
// A Breaker is Closed while calls succeed. It trips Open after
// ConsecutiveFailures counted failures in a row, or when the failure ratio
// (or, optionally, the slow-call ratio) over a rolling window of at least
// MinCalls calls reaches its threshold; the ratios are checked after every
// counted outcome. Open rejects every call with an *OpenError
// (errors.Is(err, ErrOpen)) that says when the next probe may pass. When the
// cooldown ends, a timer moves the breaker to HalfOpen — the reject path
// stays an atomic load and a counter, and hooks and metrics see the change
// when it happens rather than on the next call. HalfOpen admits at most
// HalfOpenProbes probes in flight; ProbeSuccesses successes in a row close
// it (unless too many of them were slow), a counted failure reopens it, with
// a cooldown that may double on each repeated trip up to MaxCooldown, with
// optional jitter. A probe holds its slot until it reports, even past the
// half-open period that admitted it, and one that has not reported after
// MaxHalfOpenWait is written off and reopens the breaker.
//
// Only counted outcomes decide: by default (OutcomeOf) a Transient,
// RateLimited or Unknown error is a failure, while a 4xx, a safety block, a
// rejected output or the caller's cancel is Ignored — it frees a probe slot
// and decides nothing. Each state is a generation: a call reports its
// outcome to the state that admitted it, so a slow call admitted while
// closed can neither close nor reopen a later half-open breaker.
//
// Use Allow and Token.Done directly (what the fallback chain does), or
// Do around a function. Counts is a snapshot of the current state's
// figures; Observe follows the transitions as they happen. ForceOpen,
// ForceClosed and Reset serve drills. A Group keeps one breaker per key
// (model × endpoint), its members named with a hash of their key, so that
// a tenant key never reaches a log or a metric in clear (Config.KeysInNames
// names them by the key itself, for keys that are not secret). A Store shares state across
// processes (see the nested module breaker/redisstore); it is local-first
// and fails open to local state.
//
// # Differences from gobreaker, failsafe-go, resilience4j and Polly
//
// These are deliberate; the conformance tests assert them.
//
//   - Half-open decides by runs: ProbeSuccesses successes in a row close
//     the breaker and one counted failure reopens it. failsafe-go and
//     resilience4j count failures (or ratios) over the half-open calls;
//     gobreaker closes after MaxRequests successes and also reopens on one
//     failure; Polly lets one probe decide.
//   - HalfOpenProbes bounds the probes in flight, not the requests of a
//     half-open period (gobreaker's MaxRequests, resilience4j's
//     permittedNumberOfCallsInHalfOpenState), and the bound holds across
//     periods: a probe of an earlier period that has not reported keeps its
//     slot. The peers give each half-open period fresh permits, and Polly
//     lets another probe through after each break duration.
//   - MaxHalfOpenWait is on by default (5m) and runs
//     per probe: a probe that has not reported by then is written off and,
//     if it belongs to the current period, reopens the breaker. An idle
//     half-open breaker stays half-open. resilience4j's
//     maxWaitDurationInHalfOpenState is off by default and reopens after the
//     wait whether or not a call is in flight.
//   - The failure and slow-call ratios are checked after every counted
//     outcome, a success included, as resilience4j does: f f f s s with
//     MinCalls 5 and 0.5 opens on the last s. Polly, and gobreaker's
//     ReadyToTrip, look only after a failure. The window is a rolling time
//     window of ten buckets, never count-based (failsafe-go and
//     resilience4j offer both) and never cleared at once (gobreaker clears
//     its counts every Interval).
//   - Thresholds are inclusive and the default is five failures in a row:
//     ConsecutiveFailures n trips on the nth. gobreaker's default trips on
//     the sixth, failsafe-go's on the first; resilience4j and Polly trip on
//     ratios by default.
//   - Slow calls count in half-open: when ProbeSuccesses probes have
//     succeeded, the breaker reopens if the slow ones reach SlowCallRatio
//     (as resilience4j evaluates the half-open calls), instead of closing.
//   - A panic counts as nothing: Do frees the probe slot and lets the
//     panic go on. gobreaker counts it as a failure.
//   - Errors are classified: 4xx, safety blocks, rejected outputs and the
//     caller's cancel are Ignored rather than failures. The peers count
//     every error unless told otherwise.
//   - A rejection (ErrOpen) classifies as Rejected, which the retry package
//     and the fallback chain do not retry on the same tier. failsafe-go
//     retries it when the retry policy wraps the breaker.
//   - Outcomes report to the state that admitted them (gobreaker has
//     generations too); resilience4j and failsafe-go record a late result
//     in the current state.
//   - A timer moves open to half-open when the cooldown ends; gobreaker and
//     failsafe-go move on the next call, resilience4j only with
//     automaticTransitionFromOpenToHalfOpenEnabled.
//   - Only real changes are transitions: forcing a breaker into the state
//     it is already forced into announces nothing (as resilience4j), while
//     forcing a tripped breaker open, or a closed one closed, is announced
//     as open→open or closed→closed.
//   - There is no disabled or metrics-only state: ForceClosed keeps the
//     breaker closed and counts nothing. ForceOpen's rejection has no
//     retry-after, like Polly's isolated circuit.
//   - Counts belong to the current state: Rejected counts the refusals
//     since the state began, and a closed breaker without a window keeps
//     only its run of failures (gobreaker counts every request).
//   - State strings are "closed", "half_open" and "open" (gobreaker:
//     "half-open").
package breaker
