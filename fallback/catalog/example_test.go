package catalog_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/catalog"
)

// A catalog of the models an API serves: a chain skips a tier whose model
// is gone without calling it.
func ExampleNew() {
	models, err := catalog.New(func(context.Context) ([]string, error) {
		return []string{"models/gemini-2.5-flash"}, nil // for Gemini: models.list
	}, catalog.Options{})
	if err != nil {
		panic(err)
	}
	if err := models.Refresh(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println(models.Available("gemini-2.5-pro"), models.Available("gemini-2.5-flash"))

	chain, err := fallback.New(fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{
			{Tier: fallback.Tier("pro", func(context.Context, string) (string, error) { panic("never called") }), Model: "gemini-2.5-pro"},
			{Tier: fallback.Tier("flash", func(context.Context, string) (string, error) { return "ok", nil }), Model: "gemini-2.5-flash"},
		},
		Total:   5 * time.Second,
		Catalog: models,
	})
	if err != nil {
		panic(err)
	}
	res, err := chain.Do(context.Background(), "q")
	fmt.Println(res.Value, res.Tier, err)
	for _, a := range res.Attempts() {
		fmt.Println(" ", a.Tier, a.Skip)
	}
	// Output:
	// false true
	// ok flash <nil>
	//   pro retired
	//   flash not_skipped
}
