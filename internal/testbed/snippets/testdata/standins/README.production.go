// Stand-ins for README.md's production stack snippet.
package snippet

import (
	"context"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/spend"
)

var ctx = context.Background()

// The reader's price table, tenants, keys and request.
var (
	priceTable         []byte
	allowances         map[string]spend.Allowance
	proKeys, flashKeys []string
	reqID, tenantID    string
	question           string
	usage              fallback.Usage
	mp                 metric.MeterProvider
	tp                 trace.TracerProvider
)

// The reader's Gemini tier for one model and key (gemini.NewTier, mapped
// to its text with fallback.MapTier).
func geminiTier(model, key string) fallback.ModelTier[string, string] { panic("stand-in") }
