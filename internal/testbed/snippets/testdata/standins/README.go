// Stand-ins for README.md's snippets: the reader's own code they use.
package snippet

import (
	"context"
	"io"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/genai"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/cache"
	"github.com/tierguard/tierguard/fallback/gemini"
	"github.com/tierguard/tierguard/fallback/oaicompat"
	"github.com/tierguard/tierguard/fallback/ratelimit"
)

var ctx = context.Background()

// The reader's model call.
func callGemini(ctx context.Context, model, prompt string) (string, error) { panic("stand-in") }

// The reader's guards and tiers.
var (
	proBreaker *breaker.Breaker
	catalog    *fallback.Catalog
	flashStage fallback.Stage[string, gemini.Answer]
	gem        *gemini.Tier[string]
	gpt        *oaicompat.Tier[string]
	pro        fallback.ModelTier[string, string]
	flash      fallback.ModelTier[string, string]
	proTier    fallback.ModelTier[string, string]
	chain      *fallback.Chain[string, string]
)

// The reader's answer type in a mixed chain.
type reply struct {
	Text     string
	Provider string
	Usage    fallback.Usage
	HasUsage bool
}

// The reader's OpenTelemetry SDK.
var (
	mp metric.MeterProvider
	tp trace.TracerProvider
)

// The request's identity.
var reqID, tenantID, tenant, scenario string

// The reader's Redis client.
var rdb *redis.Client

// A pool of keys.
var (
	keyA, keyB     string
	limitA, limitB *ratelimit.Limiter
)

func proWith(key string) fallback.ModelTier[string, string] { panic("stand-in") }
func conversationOf(q string) string                        { panic("stand-in") }
func alert(member string)                                   { panic("stand-in") }

// The cache's snippet.
type Question struct{ Text string }

var (
	client *genai.Client
	stages []fallback.Stage[Question, gemini.Answer]
	q      Question
	file   io.Reader
)

func canned(context.Context, Question) (gemini.Answer, bool) { panic("stand-in") }

// The reader's bill for embedding calls.
func billEmbedding(ctx context.Context, u cache.EmbeddingUsage) { panic("stand-in") }
