package cache

import (
	"context"

	"github.com/tierguard/tierguard/fallback"
)

// StreamCache adapts a Cache of text answers to a streaming chain: a
// fallback.StreamChain writes back the assembled text of every stream
// that completed and passed validation (a string), and asks for a chunk.
// Put it in fallback.StreamConfig.Cache.
type StreamCache[In, Chunk any] struct {
	c     *Cache[In, string]
	chunk func(text string) Chunk
}

// ForStream returns a StreamCache over c that answers with chunk(text),
// a chunk carrying the whole cached text and a finish reason.
func ForStream[In, Chunk any](c *Cache[In, string], chunk func(text string) Chunk) *StreamCache[In, Chunk] {
	return &StreamCache[In, Chunk]{c: c, chunk: chunk}
}

var _ fallback.StreamCache[string, int] = (*StreamCache[string, int])(nil)

// Get implements fallback.StreamCache: the cached text as one chunk.
func (s *StreamCache[In, Chunk]) Get(ctx context.Context, in In) (Chunk, string, bool) {
	text, hit, ok := s.c.Get(ctx, in)
	if !ok {
		var zero Chunk
		return zero, hit, false
	}
	return s.chunk(text), hit, true
}

// Put implements fallback.StreamCache: it caches the stream's assembled
// text.
func (s *StreamCache[In, Chunk]) Put(ctx context.Context, in In, text string) { s.c.Put(ctx, in, text) }
