// Stand-ins for README.md's snippets: the reader's own code they use.
package snippet

import (
	"context"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/genai"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/cache"
	"github.com/tierguard/tierguard/fallback/gemini"
	"github.com/tierguard/tierguard/fallback/spend"
)

var ctx = context.Background()

// The reader's model call (the quick start).
func callGemini(ctx context.Context, model, prompt string) (string, error) { panic("stand-in") }

// The reader's chain and its OpenTelemetry SDK.
var (
	chain *fallback.Chain[string, string]
	mp    metric.MeterProvider
	tp    trace.TracerProvider
)

// The request's identity.
var reqID, tenantID string

// The reader's Redis client.
var rdb *redis.Client

// The tier a drill injects faults into.
var proTier fallback.ModelTier[string, string]

// The cache's snippet: the reader's question type, client, tiers and
// default answer.
type Question struct{ Text string }

var (
	client *genai.Client
	stages []fallback.Stage[Question, gemini.Answer]
	q      Question
)

func canned(context.Context, Question) (gemini.Answer, bool) { panic("stand-in") }

// The reader's cost ledger, which the cache's snippet bills embeddings to.
var ledger *spend.Ledger

var _ cache.UsageRecorder = ledger
