package cache

import (
	"context"

	"github.com/tierguard/tierguard/fallback"
)

// StreamCache adapts a Cache to a streaming chain: a fallback.StreamChain
// asks it for one chunk when no tier could start a stream, and gives it the
// assembled text of every stream that completed and passed validation.
// Put it in fallback.StreamConfig.Cache.
type StreamCache[In, Out, Chunk any] struct {
	c      *Cache[In, Out]
	chunk  func(Out) Chunk
	answer func(text string) (Out, bool)
}

// ForStream returns a StreamCache over c, whose answers may be of any
// type — the same cache a unary chain of structured answers fills: chunk
// turns a cached answer into the one chunk the stream answers with (its
// whole text and a finish reason), and answer turns a stream's assembled
// text into an answer to cache, or says not to cache it. For a cache of
// text, answer is Text.
func ForStream[In, Out, Chunk any](c *Cache[In, Out], chunk func(Out) Chunk, answer func(text string) (Out, bool)) *StreamCache[In, Out, Chunk] {
	return &StreamCache[In, Out, Chunk]{c: c, chunk: chunk, answer: answer}
}

// Text is ForStream's answer for a cache of text: the text itself.
func Text(text string) (string, bool) { return text, true }

var _ fallback.StreamCache[string, int] = (*StreamCache[string, string, int])(nil)

// Get implements fallback.StreamCache: the cached answer as one chunk.
func (s *StreamCache[In, Out, Chunk]) Get(ctx context.Context, in In) (Chunk, string, bool) {
	out, hit, ok := s.c.Get(ctx, in)
	if !ok {
		var zero Chunk
		return zero, hit, false
	}
	return s.chunk(out), hit, true
}

// Put implements fallback.StreamCache: it caches the answer the stream's
// assembled text makes.
func (s *StreamCache[In, Out, Chunk]) Put(ctx context.Context, in In, text string) {
	if out, ok := s.answer(text); ok {
		s.c.Put(ctx, in, out)
	}
}
