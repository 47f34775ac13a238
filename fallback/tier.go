package fallback

import (
	"context"
	"iter"
)

// ModelTier is one way of answering a request: a model behind an SDK or an
// HTTP API. Each tier receives the same In and builds its own prompt from
// it: a Flash prompt need not be the Pro prompt.
//
// Call must honour ctx: the chain gives every attempt a context that ends
// at the attempt's share of the request's deadline.
type ModelTier[In, Out any] interface {
	// Name identifies the tier in results, errors, logs and metrics. Keep it
	// short and stable ("pro", "flash"); it is used as a metric attribute.
	Name() string
	// Call makes one upstream call.
	Call(ctx context.Context, in In) (Out, error)
}

// Tier adapts a function to the ModelTier interface.
func Tier[In, Out any](name string, call func(ctx context.Context, in In) (Out, error)) ModelTier[In, Out] {
	return funcTier[In, Out]{name: name, call: call}
}

type funcTier[In, Out any] struct {
	name string
	call func(context.Context, In) (Out, error)
}

func (t funcTier[In, Out]) Name() string { return t.name }

func (t funcTier[In, Out]) Call(ctx context.Context, in In) (Out, error) { return t.call(ctx, in) }

// Usage is the token usage an upstream response reports; a tier hands it
// to the chain with Report.
type Usage struct {
	// InputTokens counts the prompt's tokens, cached ones included.
	InputTokens int64
	// OutputTokens counts the answer's tokens, reasoning included.
	OutputTokens int64
	// CacheReadInputTokens counts the input tokens served from the
	// provider's cache: a part of InputTokens. 0 when not reported.
	CacheReadInputTokens int64
	// CacheWriteInputTokens counts the input tokens written to the
	// provider's cache: a part of InputTokens. 0 when not reported.
	CacheWriteInputTokens int64
	// ReasoningOutputTokens counts the output tokens spent on reasoning
	// (thinking): a part of OutputTokens. 0 when not reported.
	ReasoningOutputTokens int64

	// The input tokens by modality, for a provider that breaks them down
	// (Gemini's promptTokensDetails, OpenAI's prompt_tokens_details):
	// parts of InputTokens, each 0 when not reported. Whatever part of
	// InputTokens they leave uncounted is of no known modality, and all of
	// it when every one is 0. Fixed fields rather than a list, so that a
	// Usage stays a comparable value that is copied, never allocated.
	TextInputTokens     int64
	ImageInputTokens    int64
	AudioInputTokens    int64
	VideoInputTokens    int64
	DocumentInputTokens int64
	// The output tokens by modality, likewise parts of OutputTokens
	// (Gemini's candidatesTokensDetails, OpenAI's completion_tokens_details).
	TextOutputTokens  int64
	ImageOutputTokens int64
	AudioOutputTokens int64
}

// Endpoint says which API a tier calls, for observers: the provider
// (gen_ai.provider.name: "gcp.gemini", "openai") and the server's host and
// port (server.address, server.port). Empty fields are unknown.
type Endpoint struct {
	Provider string
	Address  string
	Port     int
}

// EndpointReporter is implemented by tiers that know the API they call
// (the SDK adapters' tiers do). A stage whose Provider is empty takes the
// tier's, so that telemetry always names the provider; observers see the
// server in StageInfo. A tier decorator (MapTier, ratelimit.Tier,
// chaos.Tier) has an Unwrap() any method that returns the tier it wraps,
// through which the chain finds the endpoint however deep it is.
type EndpointReporter interface {
	// Endpoint describes the API the tier's calls go to.
	Endpoint() Endpoint
}

// Catalog says which models an API serves now, for preflight: a chain
// skips a tier whose model is not available, without an upstream call,
// and tells the catalog of a model that answered 404. Package catalog
// provides one fed by the API's model list (for Gemini, models.list).
type Catalog interface {
	// Available reports whether model may be called now.
	Available(model string) bool
	// MarkRetired records that model answered 404 NOT_FOUND.
	MarkRetired(model string)
}

// ResponseInfo describes a response for observers, without any of its
// content: the provider's response id, the model that answered (which may
// be a version of the model asked for) and the finish reason. Empty fields
// are unknown. A tier reports it with Report.
type ResponseInfo struct {
	ID           string
	Model        string
	FinishReason string
}

// Cache answers a request locally after every tier has failed, and
// learns the answers tiers gave. It must be fast: it runs inside the
// request's deadline, after the tiers. Package cache provides one (exact,
// template and semantic matching).
type Cache[In, Out any] interface {
	// Get returns a cached answer for in, and how it matched in the
	// cache's own words ("exact", "semantic"; "" when it does not say),
	// which the chain reports in Summary.CacheHit. A label is a small
	// fixed set of words, never part of the prompt: observers export it.
	Get(ctx context.Context, in In) (out Out, hit string, ok bool)
	// Put stores an answer for in that came from a tier and passed its
	// validator. A cache that only serves does nothing. It runs in the
	// request, before Do returns: ctx ends with the request's budget (the
	// chain's Total included), and work that could outlast it must stop
	// when ctx is done.
	Put(ctx context.Context, in In, out Out)
}

// StreamCache is a Cache for a StreamChain: it answers with one chunk
// and learns the assembled text of every stream that completed and passed
// validation. cache.ForStream adapts a cache of answers of any type.
type StreamCache[In, Chunk any] interface {
	// Get returns a cached answer for in as a chunk, and how it matched,
	// as Cache.Get.
	Get(ctx context.Context, in In) (chunk Chunk, hit string, ok bool)
	// Put stores the assembled text of a validated stream for in, within
	// the request's budget as Cache.Put.
	Put(ctx context.Context, in In, text string)
}

// ChunkInfo is what a streaming chain needs to know about one chunk.
type ChunkInfo struct {
	// Text is the text the chunk adds; its length is accounted, and the
	// assembled text is validated at the end when the stage has a
	// validator. It is never logged or exported.
	Text string
	// FinishReason is set on the chunk that ends the answer ("STOP",
	// "MAX_TOKENS"). A stream that ends without one is incomplete.
	FinishReason string
	// NonTextContent is set when the chunk carries content other than its
	// Text — a function call, an image, code. The first chunk with
	// content, text that is not blank or this, is the stream's commit
	// point.
	NonTextContent bool
}

// StreamTier is a tier that answers with a stream of chunks, the shape the
// genai SDK's GenerateContentStream has.
type StreamTier[In, Chunk any] interface {
	// Name identifies the tier, as for ModelTier.
	Name() string
	// Stream starts one upstream call. It must honour ctx: the chain
	// cancels it when the first chunk or the next one is late, when the
	// deadline passes, and when the consumer stops.
	Stream(ctx context.Context, in In) iter.Seq2[Chunk, error]
	// Inspect describes a chunk.
	Inspect(c Chunk) ChunkInfo
}

// StreamTierFunc adapts functions to the StreamTier interface.
func StreamTierFunc[In, Chunk any](name string, stream func(ctx context.Context, in In) iter.Seq2[Chunk, error], inspect func(Chunk) ChunkInfo) StreamTier[In, Chunk] {
	return funcStreamTier[In, Chunk]{name: name, stream: stream, inspect: inspect}
}

type funcStreamTier[In, Chunk any] struct {
	name    string
	stream  func(context.Context, In) iter.Seq2[Chunk, error]
	inspect func(Chunk) ChunkInfo
}

func (t funcStreamTier[In, Chunk]) Name() string { return t.name }
func (t funcStreamTier[In, Chunk]) Stream(ctx context.Context, in In) iter.Seq2[Chunk, error] {
	return t.stream(ctx, in)
}
func (t funcStreamTier[In, Chunk]) Inspect(c Chunk) ChunkInfo { return t.inspect(c) }
