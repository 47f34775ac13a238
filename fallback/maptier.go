package fallback

import "context"

// MapTier adapts a tier's answer to another type, so that tiers over
// different SDKs can serve one chain (a genai answer and a chat completion
// both becoming your reply type). usage, if not nil, reads the token usage
// of a mapped answer, making the result a UsageReporter; keep the usage in
// your reply type to report it. The result reports the wrapped tier's
// Endpoint when it has one.
func MapTier[In, A, B any](t ModelTier[In, A], mapAnswer func(A) B, usage func(B) (Usage, bool)) ModelTier[In, B] {
	m := mappedTier[In, A, B]{t: t, f: mapAnswer}
	if usage != nil {
		return mappedUsageTier[In, A, B]{mappedTier: m, usage: usage}
	}
	return m
}

type mappedTier[In, A, B any] struct {
	t ModelTier[In, A]
	f func(A) B
}

func (m mappedTier[In, A, B]) Name() string { return m.t.Name() }

// Endpoint reports the wrapped tier's endpoint, if it knows one.
func (m mappedTier[In, A, B]) Endpoint() Endpoint {
	if r, ok := m.t.(EndpointReporter); ok {
		return r.Endpoint()
	}
	return Endpoint{}
}

func (m mappedTier[In, A, B]) Call(ctx context.Context, in In) (B, error) {
	a, err := m.t.Call(ctx, in)
	if err != nil {
		var zero B
		return zero, err
	}
	return m.f(a), nil
}

type mappedUsageTier[In, A, B any] struct {
	mappedTier[In, A, B]
	usage func(B) (Usage, bool)
}

func (m mappedUsageTier[In, A, B]) Usage(out B) (Usage, bool) { return m.usage(out) }
