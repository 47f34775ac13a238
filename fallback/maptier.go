package fallback

import "context"

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
