// Stand-ins for README.md's mixed-provider snippet: the reader's tiers.
package snippet

import (
	"context"

	"github.com/tierguard/tierguard/fallback/anthropic"
	"github.com/tierguard/tierguard/fallback/gemini"
	"github.com/tierguard/tierguard/fallback/oaicompat"
)

var ctx = context.Background()

// gem, claude and gpt are the reader's Gemini, Claude and
// OpenAI-compatible tiers.
var (
	gem    *gemini.Tier[string]
	claude *anthropic.Tier[string]
	gpt    *oaicompat.Tier[string]
)
