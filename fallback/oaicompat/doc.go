// Package openai connects tierguard to OpenAI and to OpenAI-compatible
// gateways (vLLM, LiteLLM, Azure OpenAI, Gemini's OpenAI-compatible
// endpoint, ...) through the official Go SDK, github.com/openai/openai-go/v3
// (written against v3.99.0, which needs Go 1.26).
//
// It lives in its own module, so that importing tierguard's guards never
// pulls the SDK into a build that does not use it. The package shares its
// name with the SDK's; import it under another name:
//
//	import (
//		"github.com/openai/openai-go/v3"
//		"github.com/tierguard/tierguard/fallback/oaicompat"
//	)
//
// # What it provides
//
//   - Tier: a fallback.ModelTier over the chat completions endpoint for one
//     model id; each tier builds its own request from the chain's input
//     (PromptFunc) and reports each completion's token usage to the chain
//     (fallback.Report), by modality where prompt_tokens_details and
//     completion_tokens_details give it, and, before the call, the
//     request's max_completion_tokens (or max_tokens), temperature and
//     top_p.
//   - Rule and Classifier: the classify extension for *openai.Error:
//     StatusCode, the Retry-After and retry-after-ms headers of
//     Error.Response, and OpenAI's error codes — insufficient_quota is
//     QuotaExhausted, context_length_exceeded ContextTooLong, content_filter
//     Safety, model_not_found Retired, invalid_api_key Auth.
//   - NewClient: openai.NewClient with the SDK's retries off.
//
// # One retry owner
//
// openai-go retries twice by default (408, 409, 429, 5xx and connection
// errors), honouring Retry-After and retry-after-ms up to two minutes. Under
// a chain that would multiply upstream load behind the breaker's back and
// sleep past the request's deadline, so Tier passes option.WithMaxRetries(0)
// on every request: one chain attempt is one HTTP request, which the tests
// prove by counting at the fake server and on the wire.
//
// # A 200 that is not an answer
//
// A choice that finished with content_filter, or a refusal without
// content, is a Safety failure, which the default class table fails
// closed. No choice, or no finish_reason, is InvalidOutput: the chain moves
// on. A blocked prompt comes as a 400 with code content_filter, also
// Safety.
//
// # Errors
//
// Error responses come back as a *ResponseError around the SDK's error,
// with the status and retry headers. It classifies itself with Rule (it
// implements classify.Classified), and it keeps the status even when the
// gateway's body was not an OpenAI error object — openai-go then returns a
// bare JSON decoding error without the status. Its text names only the
// status.
package oaicompat
