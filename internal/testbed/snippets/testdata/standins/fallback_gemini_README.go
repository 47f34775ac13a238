// Stand-ins for fallback/gemini/README.md's snippets.
package snippet

import (
	"context"

	"google.golang.org/genai"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/gemini"
)

var ctx = context.Background()

var (
	myCache    fallback.Cache[string, gemini.Answer]
	client     *genai.Client
	model      string
	contents   []*genai.Content
	config     *genai.GenerateContentConfig
	pro, flash *gemini.Tier[string]
	proBreaker *breaker.Breaker
)

func show(text string) { panic("stand-in") }
