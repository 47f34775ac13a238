package fallback

import (
	"context"
	"iter"
)

// MapTier adapts a tier's answer to another type, so that tiers over
// different SDKs can serve one chain (a genai answer and a chat completion
// both becoming your reply type). What the wrapped tier's responses report
// (Report) reaches the chain as before: it travels in the context, not in
// the answer. The wrapped tier's Endpoint is found through Unwrap.
func MapTier[In, A, B any](t ModelTier[In, A], mapAnswer func(A) B) ModelTier[In, B] {
	return mappedTier[In, A, B]{t: t, f: mapAnswer}
}

type mappedTier[In, A, B any] struct {
	t ModelTier[In, A]
	f func(A) B
}

func (m mappedTier[In, A, B]) Name() string { return m.t.Name() }

// Unwrap returns the wrapped tier.
func (m mappedTier[In, A, B]) Unwrap() any { return m.t }

func (m mappedTier[In, A, B]) Call(ctx context.Context, in In) (B, error) {
	a, err := m.t.Call(ctx, in)
	if err != nil {
		var zero B
		return zero, err
	}
	return m.f(a), nil
}

// MapStreamTier adapts a stream tier's chunks to another type, so that
// stream tiers over different SDKs serve one StreamChain (a genai chunk and
// a chat completion delta both becoming your chunk type). inspect
// describes a mapped chunk to the chain: its text, its finish reason and
// whether it carries other content. What the wrapped tier reports
// (Report) reaches the chain as before; its Endpoint is found through
// Unwrap. For a chunk type that holds what the chain needs and nothing
// else, TextStream needs no functions at all.
func MapStreamTier[In, A, B any](t StreamTier[In, A], mapChunk func(A) B, inspect func(B) ChunkInfo) StreamTier[In, B] {
	return mappedStream[In, A, B]{t: t, f: mapChunk, inspect: inspect}
}

type mappedStream[In, A, B any] struct {
	t       StreamTier[In, A]
	f       func(A) B
	inspect func(B) ChunkInfo
}

func (m mappedStream[In, A, B]) Name() string { return m.t.Name() }

// Unwrap returns the wrapped tier.
func (m mappedStream[In, A, B]) Unwrap() any { return m.t }

func (m mappedStream[In, A, B]) Inspect(c B) ChunkInfo { return m.inspect(c) }

func (m mappedStream[In, A, B]) Stream(ctx context.Context, in In) iter.Seq2[B, error] {
	seq := m.t.Stream(ctx, in)
	return func(yield func(B, error) bool) {
		for a, err := range seq {
			var b B
			if err == nil {
				b = m.f(a)
			}
			if !yield(b, err) {
				return
			}
		}
	}
}

// TextChunk is a provider-neutral chunk: what a StreamChain needs of a
// chunk, and the provider's own chunk for the rest. TextStream turns any
// stream tier into one of TextChunks, so that tiers over different SDKs
// share a chain without a chunk type of your own.
type TextChunk struct {
	// Text, FinishReason and NonTextContent are the chunk's ChunkInfo.
	Text           string
	FinishReason   string
	NonTextContent bool
	// Source is the wrapped tier's own chunk (a gemini.Answer, an
	// oaicompat.Answer), for what the text leaves out: tool calls, usage,
	// citations. nil on a chunk a cache or a default answered with.
	Source any
}

// Info returns the chunk's ChunkInfo.
func (c TextChunk) Info() ChunkInfo {
	return ChunkInfo{Text: c.Text, FinishReason: c.FinishReason, NonTextContent: c.NonTextContent}
}

// TextStream is MapStreamTier to TextChunk: each chunk becomes its
// ChunkInfo, as t's Inspect describes it, with the chunk itself in Source.
// Source holds the chunk as an interface: a chunk that is not a pointer
// is boxed, an allocation per chunk that a chunk type of your own with
// MapStreamTier avoids.
func TextStream[In, A any](t StreamTier[In, A]) StreamTier[In, TextChunk] {
	return MapStreamTier(t, func(a A) TextChunk {
		info := t.Inspect(a)
		return TextChunk{Text: info.Text, FinishReason: info.FinishReason, NonTextContent: info.NonTextContent, Source: a}
	}, TextChunk.Info)
}

// TextChunkOf is the TextChunk a cache or a default answers a stream with:
// the whole text, finished with reason (a cached answer ended with one;
// "STOP" is the usual). Use it with cache.ForStream.
func TextChunkOf(text, reason string) TextChunk { return TextChunk{Text: text, FinishReason: reason} }
