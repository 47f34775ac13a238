// Stand-ins for README.md's streaming snippet: the reader's tiers.
package snippet

import (
	"context"

	"github.com/tierguard/tierguard/fallback/gemini"
	"github.com/tierguard/tierguard/fallback/oaicompat"
)

var ctx = context.Background()

// flashWith is the reader's Gemini tier on one API key; gpt is their
// OpenAI-compatible tier.
func flashWith(key string) *gemini.Tier[string] { panic("stand-in") }

var gpt *oaicompat.Tier[string]
