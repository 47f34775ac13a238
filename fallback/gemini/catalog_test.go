package gemini_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/catalog"
	"github.com/tierguard/tierguard/fallback/gemini"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
)

func catalogEnv(t *testing.T) *env {
	models := append(fakegemini.DefaultModels(), fakegemini.Model{ID: "text-embedding-004", Methods: []string{"embedContent"}})
	return newEnv(t, genai.ClientConfig{}, fakegemini.WithModels(models...), fakegemini.WithRetired(proModel))
}

// ListModels reads every page and keeps the models that serve
// generateContent.
func TestListModels(t *testing.T) {
	e := catalogEnv(t)
	ids, err := gemini.ListModels(context.Background(), e.client, &genai.ListModelsConfig{PageSize: 1})
	require.NoError(t, err)
	assert.Equal(t, []string{"models/gemini-2.5-flash", "models/gemini-2.5-flash-lite", "models/gemini-2.0-flash"}, ids)
	assert.EqualValues(t, 4, e.sent.n.Load(), "four live models, one per page")

	ids, err = gemini.ListModels(context.Background(), e.client, nil)
	require.NoError(t, err)
	assert.Len(t, ids, 3)
}

// A chain with the catalog skips the retired primary without calling it.
func TestCatalogPreflight(t *testing.T) {
	e := catalogEnv(t)
	cat, err := gemini.NewCatalog(e.client, catalog.Options{})
	require.NoError(t, err)
	require.NoError(t, cat.Refresh(context.Background()))
	assert.False(t, cat.Available(proModel))
	assert.True(t, cat.Available(flashModel))

	chain := e.chain(t, nil, func(cfg *fallback.Config[question, gemini.Answer]) { cfg.Catalog = cat })
	res, err := chain.Do(context.Background(), question{Text: "hello"})
	require.NoError(t, err)
	assert.Equal(t, "flash", res.Tier)
	assert.Equal(t, fallback.SkipRetired, res.Attempts()[0].Skip)
	assert.Equal(t, 1, res.UpstreamCalls)
	assert.EqualValues(t, 0, e.srv.Requests(proModel), "no call to a retired model")
}

// A failed listing keeps the catalog's last good list and reports the
// SDK's error.
func TestCatalogRefreshError(t *testing.T) {
	srv := fakegemini.New(fakegemini.WithAPIKeys("another-key"))
	t.Cleanup(srv.Close)
	client, err := gemini.NewClient(context.Background(), genai.ClientConfig{APIKey: "test-key", HTTPClient: srv.Client(), HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL()}})
	require.NoError(t, err)
	cat, err := gemini.NewCatalog(client, catalog.Options{})
	require.NoError(t, err)
	err = cat.Refresh(context.Background())
	require.Error(t, err)
	v, ok := gemini.Rule(err)
	require.True(t, ok)
	assert.Equal(t, "auth", v.Class.String())
	assert.True(t, cat.Available(proModel), "no list yet: every model is presumed available")
}
