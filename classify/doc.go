// Package classify turns the errors of LLM API calls into verdicts, and
// verdicts into actions.
//
// A Verdict names the failure's Class (Transient, RateLimited,
// QuotaExhausted, Retired, ContextTooLong, InvalidRequest, Auth, Safety,
// InvalidOutput, Canceled, DeadlineExhausted, Rejected, Unknown), the HTTP
// status, the canonical Google status, the delay the server asked for, and a
// short fixed reason. A Table maps each class to an Action: retry the same
// tier, count toward the circuit breaker, and where to go next (next tier,
// cache/default only, or fail closed). DefaultTable is the table in the README;
// override single classes with Table.With.
//
// The Standard classifier understands, without importing any SDK, in order:
//
//  1. errors that carry their own verdict (Classified, e.g. *Error);
//  2. context.Canceled and context.DeadlineExceeded (see InContext to tell
//     a per-try timeout from the end of the budget);
//  3. the Rules it was built with (SDK adapters add theirs with New);
//  4. *HTTPError (see ReadResponse and ParseErrorBody) and any error with
//     a StatusCode() int method (and optionally RetryAfter() time.Duration);
//  5. connection failures: resets, refusals, unexpected EOF, net.Error.
//
// An error never classifies as OK: a verdict of class OK from a
// Classified error or a rule becomes Unknown.
//
// HTTP-shaped failures go through FromFacts: the status code, else the
// canonical status string ("UNAVAILABLE", or "502 Bad Gateway" from a
// non-JSON body); google.rpc details (RetryInfo.retryDelay, a QuotaFailure
// whose quotaId names a PerDay quota, ErrorInfo reasons such as
// API_KEY_INVALID, which mean Auth even on a 400); Retry-After as
// delta-seconds or HTTP-date; the "Please retry in 25.46s." message tail as
// a last resort; the providers' context-overflow wordings for
// ContextTooLong and their retired-model wordings for Retired. An error
// without an HTTP status — an error event inside a stream — is classified
// by its canonical status or, failing that, by the status its string code
// stands for ("server_error" is a 500, "rate_limit_exceeded" a 429,
// Anthropic's "overloaded_error" a 529). A 429's delay is also read from
// Anthropic's anthropic-ratelimit-*-reset headers (RateLimitReset).
//
// Every input is bounded: server delays are capped at MaxRetryAfter, bodies
// at MaxErrorBody, and only a prefix of messages and details is examined.
// Verdicts never carry upstream text: Status is interned from a fixed set and
// Reason is a fixed phrase, so a verdict is safe to log and to export as a
// metric attribute.
//
// # The bodies it reads
//
// Error bodies come in every form real APIs send: Google's error object
// and the JSON array [{"error":{...}}] (Gemini's OpenAI-compatible
// endpoint, Code Assist, non-SSE streaming), OpenAI's string codes, Azure's
// numeric status, Anthropic's {"type":"error","error":{"type":...}} (its
// type decides where it is more precise than the status: a not_found_error
// naming "model: x" is Retired for x on any status), bare strings and
// vLLM's top-level form; an error object
// inside a 200 is judged by its code, as if it had been the status. A 200
// without an error is judged by FinishReason and BlockReason: the SDK
// adapters never return a successful empty answer. SDK adapters add their
// error types with a Rule (fallback/gemini, fallback/oaicompat,
// fallback/anthropic), without this package importing any SDK.
//
// The rules are tested against 152 real responses quoted from public issue
// trackers and documentation (internal/testbed/corpus), once without an
// SDK and once through genai, openai-go and anthropic-sdk-go over
// httptest.
//
// Fail-closed classes (InvalidRequest, Auth, Safety, Canceled) make a
// chain return at once with their cause, which errors.Is reaches:
// switching models must not hide a configuration error or route around a
// policy decision.
package classify
