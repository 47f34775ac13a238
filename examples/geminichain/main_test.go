package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/genai"

	"github.com/tierguard/tierguard/fallback/catalog"
	"github.com/tierguard/tierguard/fallback/gemini"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// The story the program tells against the fake server.
func TestStory(t *testing.T) {
	var buf bytes.Buffer
	out = &buf
	srv := fakegemini.New()
	defer srv.Close()
	ctx := context.Background()
	client, err := gemini.NewClient(ctx, genai.ClientConfig{APIKey: "k", HTTPClient: srv.Client(), HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL()}})
	require.NoError(t, err)
	models, err := gemini.NewCatalog(client, catalog.Options{})
	require.NoError(t, err)
	require.NoError(t, models.Refresh(ctx))
	chain, err := newChain(client, models, "gemini-2.5-pro", "gemini-2.5-flash")
	require.NoError(t, err)

	story(ctx, srv, models, chain, "gemini-2.5-pro", "gemini-2.5-flash")
	s := buf.String()
	assert.Contains(t, s, `source=tier tier="pro" degraded=false upstream calls=1`)
	assert.Contains(t, s, `source=cache tier="" degraded=true upstream calls=3`)
	assert.Contains(t, s, `source=default tier="" degraded=true upstream calls=2`, "flash cools down: no call in its 30 s")
	assert.Contains(t, s, "flash skipped (rate_limited)")
	assert.Contains(t, s, "pro   skipped (retired)")
	assert.Contains(t, s, `source=default tier="" degraded=true upstream calls=0`)
	assert.EqualValues(t, 0, srv.Count("gemini-2.5-pro", fakegemini.Canceled))
}
