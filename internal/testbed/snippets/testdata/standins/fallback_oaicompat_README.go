// Stand-ins for fallback/oaicompat/README.md's snippets.
package snippet

import (
	"context"

	"github.com/tierguard/tierguard/fallback/gemini"
	"github.com/tierguard/tierguard/fallback/oaicompat"
)

var ctx = context.Background()

var (
	key string
	gem *gemini.Tier[string]
	// gemOnKeyB is the reader's Gemini tier on a second API key.
	gemOnKeyB *gemini.Tier[string]
	gpt       *oaicompat.Tier[string]
)
