package gemini

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/genai"

	"github.com/tierguard/tierguard/fallback/catalog"
)

// maxPages bounds a listing, so that a server that keeps returning page
// tokens cannot hold a refresh forever. At the default page size of 50
// that is 50,000 models.
const maxPages = 1000

// ListModels returns the ids ("models/gemini-2.5-pro") of the models that
// can serve generateContent, reading every page of client.Models.List.
// config may be nil; its PageSize is passed on. A model whose
// supportedActions list is empty (Vertex AI does not report them) is kept:
// nothing says it cannot serve.
func ListModels(ctx context.Context, client *genai.Client, config *genai.ListModelsConfig) ([]string, error) {
	page, err := client.Models.List(ctx, config)
	if err != nil {
		return nil, err
	}
	var ids []string
	seen := map[string]bool{}
	for n := 1; ; n++ {
		for _, m := range page.Items {
			if m == nil || m.Name == "" {
				continue
			}
			if len(m.SupportedActions) == 0 || slices.Contains(m.SupportedActions, "generateContent") {
				ids = append(ids, m.Name)
			}
		}
		if page.NextPageToken == "" {
			return ids, nil
		}
		if seen[page.NextPageToken] || n == maxPages {
			return nil, errors.New("gemini: model listing does not end")
		}
		seen[page.NextPageToken] = true
		page, err = page.Next(ctx)
		if errors.Is(err, genai.ErrPageDone) {
			return ids, nil
		}
		if err != nil {
			return nil, fmt.Errorf("gemini: listing models, page %d: %w", n+1, err)
		}
	}
}

// NewCatalog returns a catalog.Catalog fed by ListModels, for preflight: a
// chain with Config.Catalog set skips, without an upstream call, every tier
// whose Stage.Model the API no longer lists. Call Refresh once before
// serving (a failed refresh leaves every model presumed available), and
// Start to refresh every opts.TTL.
func NewCatalog(client *genai.Client, opts catalog.Options) (*catalog.Catalog, error) {
	return catalog.New(func(ctx context.Context) ([]string, error) {
		return ListModels(ctx, client, nil)
	}, opts)
}
