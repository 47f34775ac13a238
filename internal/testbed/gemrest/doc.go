// Package gemrest is a minimal Gemini REST client that plugs into a
// fallback chain as a model tier, without google.golang.org/genai.
//
// The root module must not depend on a vendor SDK, yet the demo,
// the scenario benchmarks and the tests need tiers that make real HTTP calls
// against internal/testbed/fakegemini. A [Client] is such a tier: one model, one
// POST {BaseURL}/{APIVersion}/models/{model}:generateContent per Call, the
// API key in the x-goog-api-key header; and a streaming tier, one
// streamGenerateContent request per stream (see Streaming).
//
//	pro, err := gemrest.New(gemrest.Config{BaseURL: url, APIKey: key, Model: "gemini-2.5-pro", Name: "pro"})
//	// pro is a fallback.ModelTier[gemrest.Request, gemrest.Response]
//	// and a fallback.StreamTier[gemrest.Request, gemrest.Chunk]
//
// Each tier may build its own request from the chain's input (a
// Flash prompt is not the Pro prompt): [NewTier] adapts a Client to any
// input type with a function that builds the [Request].
//
// # Errors
//
// Every error classifies correctly with classify.Classify:
//
//   - a non-2xx answer is read with classify.ReadResponse (at most
//     classify.MaxErrorBody bytes), so 503 is Transient, 429 RateLimited or
//     QuotaExhausted with the RetryInfo delay, 404 Retired, a 400 over the
//     token limit ContextTooLong, API_KEY_INVALID Auth, an HTML 502 page
//     from a proxy Transient;
//   - a 200 whose prompt was blocked (promptFeedback.blockReason), or whose
//     candidate stopped for SAFETY, PROHIBITED_CONTENT, BLOCKLIST, SPII or
//     IMAGE_SAFETY, is Safety: never route around a policy decision. The
//     error matches [ErrPromptBlocked] or [ErrAnswerBlocked];
//   - a 200 without candidates, or whose candidate has no finish reason (the
//     answer may be cut short), is InvalidOutput (a *validate.Error), as is a
//     body larger than Config.MaxResponseBytes ([ErrResponseTooLarge]): the
//     transport was healthy, the next tier may answer;
//   - a 200 whose body is not the JSON of a GenerateContentResponse is
//     Transient: a model does not produce a broken envelope, a proxy or a
//     half-dead connection does, and the same request usually succeeds on
//     the next attempt. It counts against the breaker, as it should;
//   - a body cut short by a dropped connection (io.ErrUnexpectedEOF), a
//     reset, or a connection closed before any answer is Transient; the
//     attempt's context ending is a context error, which the chain tells
//     apart as a per-try timeout or the end of the request's budget.
//
// Error strings name the model, the operation and the class of failure.
// They never contain the prompt, the answer or the API key; upstream error
// messages stay inside *classify.HTTPError's Facts for callers who choose
// to log them.
//
// The answer's text is not validated here beyond the checks above: attach a
// validator (validate.NonEmpty, validate.JSON, validate.Decode) to the
// stage, with validate.Field and [Response.Text].
//
// # Streaming
//
// [Client.Stream] (and [Tier.Stream]) make one POST
// {BaseURL}/{APIVersion}/models/{model}:streamGenerateContent?alt=sse per
// range over the returned sequence and yield its [Chunk] values, so a
// Client or a Tier is also a fallback.StreamTier for a
// fallback.StreamChain. The body is read as server-sent events: "data:"
// lines (several in one event are joined), events separated by a blank
// line, lines ending in "\n" or "\r\n". Comment lines such as
// ": keepalive" and other fields are skipped, as the SSE specification
// says (the genai SDK, by contrast, fails on a comment). A line or an
// event larger than Config.MaxResponseBytes ends the stream with
// [ErrResponseTooLarge] (InvalidOutput). Each event is one
// GenerateContentResponse; a chunk without candidates before the first
// one with is skipped, so that the chain does not commit to a stream that
// has said nothing. Errors:
//
//   - before the first byte of the body, as for Call: a non-2xx answer
//     through classify.ReadResponse, a connection refused, dropped or
//     stalled past the attempt's context as a transport or context error;
//     a 200 that is not text/event-stream is Transient
//     ([ErrNotEventStream]);
//   - an event {"error":{...}} after the 200 header is classified from its
//     JSON like an error response (a *classify.HTTPError): 503 Transient,
//     429 RateLimited with its RetryInfo, and so on;
//   - a body cut mid-stream is io.ErrUnexpectedEOF (Transient); an event
//     that is not JSON is Transient, like a malformed unary body;
//   - a blocked prompt or a safety finish reason is Safety, as for Call;
//   - a clean end of the body ends the sequence without an error, with or
//     without a finish reason: fallback.StreamChain reports a stream
//     without one as incomplete (fallback.ErrNoFinishReason).
//
// The request runs under ctx. When ctx ends, or when the consumer stops
// ranging, the body is closed and the connection with it, so the server
// sees the request cancelled; an error read after ctx ended wraps ctx's
// error.
//
// # Catalog
//
// [Client.ListModels] lists the models that support generateContent,
// following nextPageToken; pass it to catalog.New so the chain skips
// a retired model without calling it.
package gemrest
