package benchcmp

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tierguard/tierguard/fallback/spend"
)

// prodContender is one side of BenchmarkProduction: one request.
type prodContender struct {
	name  string
	do    func(ctx context.Context) (string, error)
	close func() error
}

func prodContenders(tb testing.TB, labels bool) []prodContender {
	p, err := NewProduction(ProdOptions{TenantLabels: labels})
	if err != nil {
		tb.Fatal(err)
	}
	req := spend.Request{Tenant: ProdTenant, Scenario: ProdScenario}
	out := []prodContender{{"tierguard", func(ctx context.Context) (string, error) { return p.Do(ctx, req, ProdPrompt) }, p.Close}}
	for _, fs := range []bool{false, true} {
		f, err := NewProdFloor(ProdFloorOptions{ProdOptions: ProdOptions{TenantLabels: labels}, Failsafe: fs})
		if err != nil {
			tb.Fatal(err)
		}
		name := "floor"
		if fs {
			name = "failsafe"
		}
		out = append(out, prodContender{name, func(ctx context.Context) (string, error) { return f.Do(ctx, ProdTenant, ProdScenario, ProdPrompt) }, f.Close})
	}
	return out
}

// BenchmarkProduction is one request through the production stack
// (Production), its hand-written floor (ProdFloor) and the floor with
// failsafe-go's policies for guards, with and without tenant labels.
func BenchmarkProduction(b *testing.B) {
	for _, labels := range []struct {
		name string
		on   bool
	}{{"none", false}, {"tenant", true}} {
		cs := prodContenders(b, labels.on)
		for _, mode := range []string{"serial", "parallel"} {
			for _, c := range cs {
				b.Run("labels="+labels.name+"/mode="+mode+"/impl="+c.name, func(b *testing.B) {
					ctx := context.Background()
					b.ReportAllocs()
					if mode == "serial" {
						for b.Loop() {
							if v, err := c.do(ctx); err != nil || v != Answer {
								b.Fatal(v, err)
							}
						}
						return
					}
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if v, err := c.do(ctx); err != nil || v != Answer {
								b.Fatal(v, err)
							}
						}
					})
				})
			}
		}
		for _, c := range cs {
			if err := c.close(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// metricCounts returns, per metric name, the count of measurements its
// points hold (a sum's value, a histogram's count).
func metricCounts(t *testing.T, r *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					out[m.Name] += dp.Value
				}
			case metricdata.Sum[float64]:
				for _, dp := range d.DataPoints {
					if dp.Value != 0 {
						out[m.Name]++
					}
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					out[m.Name] += int64(dp.Count)
				}
			case metricdata.Histogram[int64]:
				for _, dp := range d.DataPoints {
					out[m.Name] += int64(dp.Count)
				}
			}
		}
	}
	return out
}

// The floor does the work the stack does for a request answered on its
// first try: the same answer, spans, measurements and budget charge.
func TestProductionFloorDoesTheStacksWork(t *testing.T) {
	const n = 5
	for _, labels := range []bool{false, true} {
		p, err := NewProduction(ProdOptions{TenantLabels: labels})
		require.NoError(t, err)
		f, err := NewProdFloor(ProdFloorOptions{ProdOptions: ProdOptions{TenantLabels: labels}})
		require.NoError(t, err)
		for range n {
			v, err := p.Do(context.Background(), spend.Request{Tenant: ProdTenant, Scenario: ProdScenario}, ProdPrompt)
			require.NoError(t, err)
			require.Equal(t, Answer, v)
			v, err = f.Do(context.Background(), ProdTenant, ProdScenario, ProdPrompt)
			require.NoError(t, err)
			require.Equal(t, Answer, v)
		}
		stack, floor := metricCounts(t, p.Reader), metricCounts(t, f.reader)
		for name, c := range floor {
			want := c
			if name == "tierguard.cost" {
				want = 1 // one series, counted once above
			}
			assert.Equal(t, want, stack[name], "%s (labels %v)", name, labels)
		}
		assert.Len(t, floor, 12, "the floor's measurements, the gauge of requests in flight included")
		require.NoError(t, p.Close())
		require.NoError(t, f.Close())
		assert.Equal(t, int64(2*n), p.Spans.Count(), "the stack's spans, flushed at Close")
		assert.Equal(t, int64(2*n), f.spans.Count(), "the floor's")
		tot := p.Ledger.Totals(ProdTenant)
		tokens, _ := f.budget.Used()
		assert.Equal(t, tot.Usage.InputTokens+tot.Usage.OutputTokens, tokens)
	}
}

// With failsafe-go's policies the floor answers as the stack does.
func TestProductionFailsafeAnswers(t *testing.T) {
	f, err := NewProdFloor(ProdFloorOptions{Failsafe: true})
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	v, err := f.Do(context.Background(), ProdTenant, ProdScenario, ProdPrompt)
	require.NoError(t, err)
	require.Equal(t, Answer, v)
	assert.Equal(t, int64(1), metricCounts(t, f.reader)["tierguard.attempts"])
}

// BenchmarkProductionPieces is the production stack serially, whole and
// with one piece or several left out (ProdOptions.Without): what each
// piece costs a request.
func BenchmarkProductionPieces(b *testing.B) {
	req := spend.Request{Tenant: ProdTenant, Scenario: ProdScenario}
	for _, w := range []struct {
		name    string
		without ProdPieces
	}{
		{"whole", 0},
		{"no-cache", ProdCache},
		{"no-ledger", ProdLedger},
		{"no-traces", ProdTraces},
		{"no-otelx", ProdOtel},
		{"guards-only", ProdCache | ProdLedger | ProdOtel},
	} {
		p, err := NewProduction(ProdOptions{Without: w.without})
		if err != nil {
			b.Fatal(err)
		}
		b.Run("without="+w.name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				if v, err := p.Do(ctx, req, ProdPrompt); err != nil || v != Answer {
					b.Fatal(v, err)
				}
			}
		})
		if err := p.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// Each piece left out still leaves a stack that answers.
func TestProductionWithoutPiecesAnswers(t *testing.T) {
	for _, w := range []ProdPieces{ProdCache, ProdLedger, ProdTraces, ProdOtel, ProdCache | ProdLedger | ProdOtel} {
		p, err := NewProduction(ProdOptions{Without: w})
		require.NoError(t, err)
		v, err := p.Do(context.Background(), spend.Request{Tenant: ProdTenant, Scenario: ProdScenario}, ProdPrompt)
		require.NoError(t, err, "without %b", w)
		assert.Equal(t, Answer, v)
		assert.Equal(t, w&ProdCache == 0, p.Cache.Stats().Writes == 1, "write-back without %b", w)
		require.NoError(t, p.Close())
	}
}
