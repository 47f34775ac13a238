package gemini

import (
	"context"
	"net/http"

	"google.golang.org/genai"
)

// NewClient is genai.NewClient with a Transport installed in the client's
// HTTP client, so that tiers and Capture see the headers of error
// responses.
//
// A caller's cc.HTTPClient is copied, never changed. With a nil HTTPClient
// the SDK builds its own first (for Vertex AI, one that carries the
// credentials), and the Transport is installed around that one's.
//
// It leaves HTTPOptions.RetryOptions as given: nil, the default, means no
// SDK retries (genai v1.77.0 retries only when RetryOptions is set), and
// Tier turns them off for its own requests in any case.
func NewClient(ctx context.Context, cc genai.ClientConfig) (*genai.Client, error) {
	if cc.HTTPClient != nil {
		copied := *cc.HTTPClient
		cc.HTTPClient = &copied
	}
	client, err := genai.NewClient(ctx, &cc)
	if err != nil {
		return nil, err
	}
	if hc := client.ClientConfig().HTTPClient; hc != nil {
		install(hc)
	}
	return client, nil
}

// install wraps hc's transport in a Transport, once.
func install(hc *http.Client) {
	if _, ok := hc.Transport.(*Transport); !ok {
		hc.Transport = &Transport{Base: hc.Transport}
	}
}
