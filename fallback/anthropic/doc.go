// Package anthropic connects tierguard to Claude through Anthropic's
// official Go SDK, github.com/anthropics/anthropic-sdk-go/v2 (written
// against v2.17.0).
//
// It lives in its own module, so that importing tierguard's guards never
// pulls the SDK into a build that does not use it. The package shares its
// name with the SDK's; import the SDK under another name:
//
//	import (
//		sdk "github.com/anthropics/anthropic-sdk-go/v2"
//		"github.com/tierguard/tierguard/fallback/anthropic"
//	)
//
// # What it provides
//
//   - Tier: a fallback.ModelTier and fallback.StreamTier over the Messages
//     API for one model; each tier builds its own request from the chain's
//     input (PromptFunc) and reports each message's usage to the chain
//     (fallback.Report) — the whole prompt as InputTokens, the tokens
//     written to the prompt cache (cache_creation_input_tokens) and read
//     from it (cache_read_input_tokens) as CacheWriteInputTokens and
//     CacheReadInputTokens, thinking as ReasoningOutputTokens — and,
//     before the call, the request's max_tokens. Stage, StreamStage and
//     TextStreamStage name the provider "anthropic".
//   - Rule and Classifier: the classify extension for *anthropic.Error:
//     the status, retry-after, the anthropic-ratelimit-*-reset headers of
//     a 429 and Anthropic's error types (see Rule).
//   - NewClient: anthropic.NewClient with the SDK's retries off.
//
// # One retry owner
//
// anthropic-sdk-go retries twice by default (408, 409, 429, 5xx and
// connection errors), honouring retry-after. Under a chain that would
// multiply upstream load behind the breaker's back and sleep past the
// request's deadline, so Tier passes option.WithMaxRetries(0) on every
// request: one chain attempt is one HTTP request, which the tests prove by
// counting at the server.
//
// # A 200 that is not an answer
//
// Anthropic's stop reasons map onto the class table: end_turn,
// stop_sequence and tool_use are answers; max_tokens is an answer when it
// carries something usable (a cut answer: validate it) and InvalidOutput
// when it does not; refusal is Safety, which the default table fails
// closed; pause_turn — a server-tool turn the API paused, to be sent back
// by the caller — is InvalidOutput, since the tier does not continue it.
//
// # Streams
//
// message_stop is a stream's only clean end. An event: error before the
// first text delta (overloaded_error, the 529 of a stream) falls back like
// any failure before content; after it the chain ends the stream with a
// *fallback.IncompleteError holding the text so far.
//
// # Errors and secrets
//
// Error responses come back as a *ResponseError around the SDK's error,
// whose text names only the status and the error type: never the API key,
// the request's URL, the prompt or the upstream message. The SDK's
// OpenTelemetry spans are kept metadata-only on the tier's requests.
package anthropic
