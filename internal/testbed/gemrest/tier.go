package gemrest

import (
	"context"
	"iter"
	"net/url"
	"strconv"

	"github.com/tierguard/tierguard/fallback"
)

// Tier is a Client that builds its own Request from the chain's input: a
// fallback.ModelTier[In, Response] for a fallback.Chain, and a
// fallback.StreamTier[In, Chunk] for a fallback.StreamChain. Its
// responses report their usage with fallback.Report.
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
	_ fallback.EndpointReporter            = (*Tier[string])(nil)
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

// Endpoint reports the Gemini API and the server the client calls, as the
// SDK adapters' tiers do (fallback.EndpointReporter).
func (t *Tier[In]) Endpoint() fallback.Endpoint {
	ep := fallback.Endpoint{Provider: "gcp.gemini"}
	if u, err := url.Parse(t.client.genURL); err == nil {
		ep.Address = u.Hostname()
		switch p := u.Port(); {
		case p != "":
			ep.Port, _ = strconv.Atoi(p)
		case u.Scheme == "https":
			ep.Port = 443
		default:
			ep.Port = 80
		}
	}
	return ep
}

// Stream builds the request for in and streams one answer; see
// Client.Stream.
func (t *Tier[In]) Stream(ctx context.Context, in In) iter.Seq2[Chunk, error] {
	return t.client.Stream(ctx, t.build(in))
}

// Inspect describes a chunk to a fallback.StreamChain.
func (t *Tier[In]) Inspect(ch Chunk) fallback.ChunkInfo { return t.client.Inspect(ch) }
