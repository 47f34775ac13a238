package benchcmp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/gemini"
	"github.com/tierguard/tierguard/fallback/spend"
)

// genaiAnswer is a generateContent response of the shape the Gemini API
// documents (https://ai.google.dev/api/generate-content#v1beta.GenerateContentResponse),
// with the usage the production stack's estimate is made for.
const genaiAnswer = `{"candidates":[{"content":{"parts":[{"text":"ok"}],"role":"model"},"finishReason":"STOP","index":0}],` +
	`"usageMetadata":{"promptTokenCount":1000,"candidatesTokenCount":200,"totalTokenCount":1200},` +
	`"modelVersion":"gemini-2.5-pro","responseId":"bench-1"}`

// genaiServer answers every generateContent with genaiAnswer: a server
// that costs as little as one can, so that the request's CPU is the
// client's.
func genaiServer(tb testing.TB) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(genaiAnswer))
	}))
	tb.Cleanup(srv.Close)
	return srv
}

func genaiClient(tb testing.TB, srv *httptest.Server, key string) *genai.Client {
	c, err := gemini.NewClient(context.Background(), genai.ClientConfig{APIKey: key, Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL}})
	require.NoError(tb, err)
	return c
}

func genaiPrompt(q string) ([]*genai.Content, *genai.GenerateContentConfig) {
	return genai.Text(q), nil
}

// genaiProduction is the production stack whose keys are Gemini tiers
// (gemini.NewTier) over the genai SDK, on srv.
func genaiProduction(tb testing.TB, srv *httptest.Server, without ProdPieces) *Production {
	p, err := NewProduction(ProdOptions{Without: without, Member: func(model, name, key string) (fallback.ModelTier[string, string], error) {
		t, err := gemini.NewTier(gemini.TierConfig[string]{Name: name, Model: model, Client: genaiClient(tb, srv, key), Prompt: genaiPrompt})
		if err != nil {
			return nil, err
		}
		return fallback.MapTier[string](t, func(a gemini.Answer) string { return a.Text }), nil
	}})
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, p.Close()) })
	return p
}

// The loopback variant answers through the whole stack, and the ledger
// bills what the server reported.
func TestProductionOverGenai(t *testing.T) {
	p := genaiProduction(t, genaiServer(t), 0)
	v, err := p.Do(context.Background(), spend.Request{Tenant: ProdTenant, Scenario: ProdScenario}, ProdPrompt)
	require.NoError(t, err)
	require.Equal(t, Answer, v)
	tot := p.Ledger.Totals(ProdTenant)
	require.Equal(t, int64(ProdInputTokens), tot.Usage.InputTokens, "the server's promptTokenCount")
	require.Equal(t, int64(ProdOutputTokens), tot.Usage.OutputTokens, "the server's candidatesTokenCount")
	require.Equal(t, int64(1), tot.Calls)
	// gemini-2.5-pro at $1.25 and $10 per million tokens.
	require.Equal(t, spend.MustParseAmount("0.00325"), tot.Cost)
}

// BenchmarkProductionGenai is one request over a loopback HTTP server
// through the genai SDK: the SDK's call alone (impl=direct, the same
// client, prompt and model) and through the production stack with Gemini
// tiers (impl=tierguard), and the hand-written floor around the same
// call (impl=floor). cpu-ns/op is the process's CPU time per request, the
// server's handler included; tierguard's share of a request's CPU is
// 1 − direct/tierguard, the floor's 1 − direct/floor.
func BenchmarkProductionGenai(b *testing.B) {
	srv := genaiServer(b)
	client := genaiClient(b, srv, "key-direct")
	p := genaiProduction(b, srv, 0)
	metricsOnly := genaiProduction(b, srv, ProdTraces)
	floor, err := NewProdFloor(ProdFloorOptions{ProdOptions: ProdOptions{Call: func(ctx context.Context, model, _, q string) (string, error) {
		resp, err := client.Models.GenerateContent(ctx, model, genai.Text(q), nil)
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	}}})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, floor.Close()) })
	req := spend.Request{Tenant: ProdTenant, Scenario: ProdScenario}
	impls := []struct {
		name string
		do   func(ctx context.Context) (string, error)
	}{
		{"direct", func(ctx context.Context) (string, error) {
			resp, err := client.Models.GenerateContent(ctx, "gemini-2.5-pro", genai.Text(ProdPrompt), nil)
			if err != nil {
				return "", err
			}
			return resp.Text(), nil
		}},
		// The same with the route's deadline on the context, as any caller
		// that bounds its wait has: the HTTP transport then watches the
		// context's end.
		{"direct-deadline", func(ctx context.Context) (string, error) {
			ctx, cancel := context.WithTimeout(ctx, ProdTotal)
			defer cancel()
			resp, err := client.Models.GenerateContent(ctx, "gemini-2.5-pro", genai.Text(ProdPrompt), nil)
			if err != nil {
				return "", err
			}
			return resp.Text(), nil
		}},
		{"tierguard", func(ctx context.Context) (string, error) { return p.Do(ctx, req, ProdPrompt) }},
		// The same with otelx's traces off (a no-op TracerProvider).
		{"tierguard-notraces", func(ctx context.Context) (string, error) { return metricsOnly.Do(ctx, req, ProdPrompt) }},
		// The hand-written floor (ProdFloor) around the same SDK call.
		{"floor", func(ctx context.Context) (string, error) { return floor.Do(ctx, ProdTenant, ProdScenario, ProdPrompt) }},
	}
	for _, mode := range []string{"serial", "parallel"} {
		for _, impl := range impls {
			b.Run("mode="+mode+"/impl="+impl.name, func(b *testing.B) {
				ctx := context.Background()
				b.ReportAllocs()
				cpu0 := cpuTime()
				if mode == "serial" {
					for b.Loop() {
						if v, err := impl.do(ctx); err != nil || v != Answer {
							b.Fatal(v, err)
						}
					}
				} else {
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if v, err := impl.do(ctx); err != nil || v != Answer {
								b.Fatal(v, err)
							}
						}
					})
				}
				b.ReportMetric(float64((cpuTime()-cpu0)/time.Nanosecond)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
