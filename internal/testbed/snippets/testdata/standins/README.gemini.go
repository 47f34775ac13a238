// Stand-ins for README.md's Gemini snippet.
package snippet

import (
	"context"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/gemini"
)

var ctx = context.Background()

var (
	proBreaker *breaker.Breaker
	flashStage fallback.Stage[string, gemini.Answer]
)
