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

// ModelSelector is implemented by tiers that choose their model per input
// — a batch job that names its model, a tier over several model versions.
// The chain asks it for the model a call will use, so that a 404 marks
// that model retired (not the whole tier), and a later input for the same
// model is skipped without an upstream call while other models on the tier
// are still called.
type ModelSelector[In any] interface {
	// ModelFor returns the model id a call for in will use; "" means the
	// stage's Model.
	ModelFor(in In) string
}

// Usage is the token usage an answer reports.
type Usage struct {
	// InputTokens counts the prompt's tokens, cached ones included.
	InputTokens int64
	// OutputTokens counts the answer's tokens, reasoning (thinking) tokens
	// included.
	OutputTokens int64
	// CachedInputTokens is the part of InputTokens served from a prompt
	// cache (Gemini's cachedContentTokenCount, OpenAI's
	// prompt_tokens_details.cached_tokens), which providers bill at a
	// lower rate; 0 when unknown.
	CachedInputTokens int64
	// ReasoningTokens is the part of OutputTokens spent thinking (Gemini's
	// thoughtsTokenCount, OpenAI's completion_tokens_details.reasoning_tokens);
	// 0 when unknown.
	ReasoningTokens int64
}

// UsageReporter is implemented by tiers that can read the token usage of
// their answers (the SDK adapters do). The chain passes it to observers,
// which export gen_ai.client.token.usage. A failed attempt reports usage
// too when the tier returned an answer with its error: an answer a
// validator rejected, or a partial answer whose tokens were billed.
type UsageReporter[Out any] interface {
	// Usage returns out's token usage, and false when it carries none.
	Usage(out Out) (Usage, bool)
}

// Cache answers a request locally after every tier has failed. It must be
// fast: it runs inside the request's deadline, after the tiers.
type Cache[In, Out any] interface {
	// Get returns a cached answer for in.
	Get(ctx context.Context, in In) (Out, bool)
}

// CacheWriter is implemented by caches that accept write-back. The chain
// writes only answers that came from a tier and passed validation.
type CacheWriter[In, Out any] interface {
	// Put stores a validated answer for in.
	Put(ctx context.Context, in In, out Out)
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

// ChunkUsageReporter is implemented by stream tiers whose chunks carry token
// usage (Gemini sends it on the last chunk). The chain reports the last
// usage a stream carried to observers, which export
// gen_ai.client.token.usage.
type ChunkUsageReporter[Chunk any] interface {
	// ChunkUsage returns the usage c carries, and false when it carries
	// none.
	ChunkUsage(c Chunk) (Usage, bool)
}
