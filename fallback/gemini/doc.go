// Package gemini connects tierguard to the Gemini API through the official
// Go SDK, google.golang.org/genai (written against v1.77.0).
//
// It lives in its own module, so that importing tierguard's guards never
// pulls the SDK (and gRPC) into a build that does not use it.
//
// # What it provides
//
//   - Tier: a fallback.ModelTier over client.Models.GenerateContent for one
//     model id. Each tier builds its own request from the chain's input
//     (PromptFunc), and reports each response's token usage to the chain
//     (fallback.Report), broken down by modality as usageMetadata's
//     promptTokensDetails, toolUsePromptTokensDetails and
//     candidatesTokensDetails say (the thoughts, which the API does not
//     break down, stay of no known modality), and, before the call, the
//     config's maxOutputTokens, temperature and topP.
//   - Rule and Classifier: the classify extension for genai.APIError, a
//     value type that errors.As finds with a genai.APIError target. It reads
//     the status code (falling back to the status string when the body had
//     no "code", and to Go's "502 Bad Gateway" form for non-JSON bodies)
//     and the google.rpc details: RetryInfo, QuotaFailure, ErrorInfo.
//   - Transport and Capture: genai.APIError drops the response headers, so
//     a Retry-After would be lost. Transport, installed by NewClient, records
//     the status and Retry-After / Retry-After-Ms of error responses into a
//     Capture carried by the request's context: one per call, so concurrent
//     calls never mix up their headers. It also caps error bodies, which the
//     SDK reads whole.
//   - ListModels and NewCatalog: a preflight catalog from models.list, every
//     page, keeping the models that support generateContent.
//   - Tier.Stream and Tier.StreamStage: the same tier as a
//     fallback.StreamTier over client.Models.GenerateContentStream, for a
//     fallback.StreamChain. The SDK fails a stream on an SSE comment line
//     (": keepalive") and returns mid-stream failures unwrapped; Tier.Stream
//     documents how each classifies (ErrStreamComment, ErrMalformedChunk).
//
// # One retry owner
//
// The chain retries; the SDK must not. genai v1.77.0 retries only when
// HTTPOptions.RetryOptions is set (nil, its default, makes exactly one
// attempt), but a client may have been built with retries, so Tier sets
// per-request RetryOptions with Attempts 1, which replaces the client's.
// Two other SDK features make extra requests inside one call, and Tier
// decides them deliberately:
//
//   - Automatic continuation (GenerateContentConfig.AutomaticContinuation,
//     on by default in the SDK): when a response stops with finish reason
//     CONTINUATION the SDK sends the request again with the continuation
//     token. Tier turns it off unless TierConfig.Continuation is set: every
//     hop is billed, and the chain could neither count, time nor retry the
//     hops one by one. With it off, a CONTINUATION answer is InvalidOutput.
//   - Automatic function calling: the Go SDK has none for GenerateContent
//     (unlike the Python SDK), so a function call is returned as the
//     answer (Answer.Response) for the caller to execute.
//
// So a tier call is one HTTP request, which the tests prove by counting at
// the fake server and on the wire.
//
// # A 200 that is not an answer
//
// A response whose promptFeedback.blockReason is set, or whose candidate
// finished with SAFETY, PROHIBITED_CONTENT, BLOCKLIST, SPII, IMAGE_SAFETY or
// IMAGE_PROHIBITED_CONTENT, is a Safety failure (a *BlockedError wrapped by
// classify.Wrap with a fixed reason): the default class table fails closed
// rather than asking another model. A response without candidates, or
// whose candidate has no finish reason, is InvalidOutput: the chain moves
// to the next tier. Give a stage a validator (validate.Field over
// Answer.Text) to reject well-formed responses with unusable text.
//
// # Errors
//
// Error responses come back as a *ResponseError around the genai.APIError.
// It classifies itself with Rule (it implements classify.Classified), so a
// chain classifies it correctly even without Classifier; set
// fallback.Config.Classifier to Classifier anyway, so that SDK errors from
// elsewhere (a catalog refresh, your own calls) are understood too. Its
// text names only the status; the upstream message, which may echo the
// prompt, stays in the wrapped genai.APIError.
package gemini
