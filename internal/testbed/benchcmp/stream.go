package benchcmp

import (
	"context"
	"errors"
	"iter"

	"github.com/failsafe-go/failsafe-go"

	"github.com/tierguard/tierguard/fallback"
)

// ErrNoChunk is what FailsafeStream's start returns for a stream that ends
// before its first chunk.
var ErrNoChunk = errors.New("benchcmp: stream ended before its first chunk")

// FailsafeStream streams a tier through failsafe-go, which has no notion of
// a stream: its executor, built once — bulkhead, circuit breaker and retry
// policy, as TierguardStreamChain's stage — runs the start of the stream up
// to its first chunk, pulled with iter.Pull2, so that a stream that fails
// before it is retried; the later chunks are pulled after the executor has
// returned. Unlike tierguard's bulkhead slot, which is held until the
// stream ends, failsafe-go's permit is released with the first chunk.
type FailsafeStream struct {
	exec failsafe.Executor[string]
	tier fallback.StreamTier[string, string]
}

// NewFailsafeStream guards tier with failsafe-go.
func NewFailsafeStream(tier fallback.StreamTier[string, string]) *FailsafeStream {
	return &FailsafeStream{
		exec: failsafe.With[string](FailsafeBulkhead(), FailsafeBreaker(false), FailsafeRetry()),
		tier: tier,
	}
}

// Stream returns the stream of in's chunks.
func (s *FailsafeStream) Stream(ctx context.Context, in string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		var (
			next func() (string, error, bool)
			stop func()
		)
		defer func() {
			if stop != nil {
				stop()
			}
		}()
		first, err := s.exec.Get(func() (string, error) {
			if stop != nil {
				stop()
			}
			next, stop = iter.Pull2(s.tier.Stream(ctx, in))
			c, err, ok := next()
			if !ok {
				return "", ErrNoChunk
			}
			return c, err
		})
		if err != nil {
			yield("", err)
			return
		}
		if !yield(first, nil) {
			return
		}
		for {
			c, err, ok := next()
			if !ok || !yield(c, err) || err != nil {
				return
			}
		}
	}
}
