//go:build snippetdeps

package snippets

// The packages the snippets may import, so that go.mod requires their
// modules (go mod tidy reads every build tag; no build uses this one).
import (
	_ "github.com/anthropics/anthropic-sdk-go/v2"
	_ "github.com/anthropics/anthropic-sdk-go/v2/option"
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/openai/openai-go/v3"
	_ "github.com/openai/openai-go/v3/option"
	_ "github.com/redis/go-redis/v9"
	_ "github.com/riverqueue/river"
	_ "github.com/riverqueue/river/riverdriver/riverpgxv5"
	_ "github.com/riverqueue/river/riverdriver/riversqlite"
	_ "github.com/riverqueue/river/rivermigrate"
	_ "github.com/tierguard/tierguard/breaker/redisstore"
	_ "github.com/tierguard/tierguard/fallback/anthropic"
	_ "github.com/tierguard/tierguard/fallback/cache/redisstore"
	_ "github.com/tierguard/tierguard/fallback/gemini"
	_ "github.com/tierguard/tierguard/fallback/oaicompat"
	_ "github.com/tierguard/tierguard/fallback/ratelimit/redislimit"
	_ "github.com/tierguard/tierguard/fallback/riverjob"
	_ "github.com/tierguard/tierguard/fallback/spend/redisspend"
	_ "go.opentelemetry.io/otel/sdk/metric"
	_ "go.opentelemetry.io/otel/sdk/trace"
	_ "google.golang.org/genai"
	_ "modernc.org/sqlite"
)
