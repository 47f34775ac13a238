package gemrest

import (
	"context"

	"github.com/tierguard/tierguard/fallback"
)

// Tier is a Client that builds its own Request from the chain's input: a
// fallback.ModelTier[In, Response] and a fallback.UsageReporter[Response].
// Each tier of a chain receives the same In and may phrase its prompt
// differently (a shorter one for a Flash model, say).
type Tier[In any] struct {
	client *Client
	build  func(In) Request
}

// NewTier returns a tier that calls c with the Request that build makes
// from each input. build must be safe for concurrent use.
func NewTier[In any](c *Client, build func(In) Request) *Tier[In] {
	return &Tier[In]{client: c, build: build}
}

var (
	_ fallback.ModelTier[string, Response] = (*Tier[string])(nil)
	_ fallback.UsageReporter[Response]     = (*Tier[string])(nil)
)

// Name returns the client's name.
func (t *Tier[In]) Name() string { return t.client.Name() }

// Model returns the client's model id.
func (t *Tier[In]) Model() string { return t.client.Model() }

// Client returns the client the tier calls.
func (t *Tier[In]) Client() *Client { return t.client }

// Call builds the request for in and makes exactly one upstream call.
func (t *Tier[In]) Call(ctx context.Context, in In) (Response, error) {
	return t.client.Call(ctx, t.build(in))
}

// Usage returns the answer's token usage.
func (t *Tier[In]) Usage(r Response) (fallback.Usage, bool) { return t.client.Usage(r) }
