package fallback

import "context"

// ModelTier is one way of answering a request: a model behind an SDK or an
// HTTP API. Each tier receives the same In and builds its own prompt from
// it (seed 000: a Flash prompt is not the Pro prompt).
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

// Usage is the token usage an answer reports.
type Usage struct {
	// InputTokens counts the prompt's tokens.
	InputTokens int64
	// OutputTokens counts the answer's tokens.
	OutputTokens int64
}

// UsageReporter is implemented by tiers that can read the token usage of
// their answers (the SDK adapters do). The chain passes it to observers,
// which export gen_ai.client.token.usage.
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
