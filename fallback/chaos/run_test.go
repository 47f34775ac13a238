package chaos_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/chaos"
	"github.com/tierguard/tierguard/otelx"
	"github.com/tierguard/tierguard/retry"
)

// evenCache answers inputs whose number is even.
type evenCache struct{}

func (evenCache) Get(_ context.Context, in string) (string, string, bool) {
	n, _ := strconv.Atoi(strings.TrimPrefix(in, "q"))
	return "cached", "", n%2 == 0
}

func (evenCache) Put(context.Context, string, string) {}

// busyChain has every signal move under a drill: pro trips its breaker,
// its small bulkhead rejects, flash fails often, the cache answers half of
// what is left and the default a third of the rest.
func busyChain(t *testing.T, sw *chaos.Switch) *fallback.Chain[string, string] {
	t.Helper()
	proBreaker, err := breaker.New(breaker.Config{Name: "pro", ConsecutiveFailures: 5, Cooldown: 5 * time.Second})
	require.NoError(t, err)
	proSlots, err := bulkhead.New(bulkhead.Config{Name: "pro", Max: 4})
	require.NoError(t, err)
	chain, err := fallback.New(fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{
			{Tier: chaos.Tier(&upstream{name: "pro", take: 400 * time.Millisecond}, sw), Breaker: proBreaker, Bulkhead: proSlots,
				Retry: retry.Policy{MaxAttempts: 1}},
			{Tier: chaos.Tier(&upstream{name: "flash", take: 100 * time.Millisecond}, sw), Retry: retry.Policy{MaxAttempts: 1}},
		},
		Total: 2 * time.Second,
		Cache: evenCache{},
		Default: func(_ context.Context, in string) (string, bool) {
			n, _ := strconv.Atoi(strings.TrimPrefix(in, "q"))
			return "default", n%3 == 0
		},
	})
	require.NoError(t, err)
	return chain
}

func busyRun(sw *chaos.Switch) chaos.RunConfig[string] {
	return chaos.RunConfig[string]{
		Name:   "busy",
		Load:   chaos.Load{RPS: 20, Duration: 4 * time.Minute, Concurrency: 100},
		Input:  func(n int) string { return "q" + strconv.Itoa(n) },
		Switch: sw,
		Drill: chaos.Drill{Seed: 3,
			Rules: []chaos.Rule{
				{Tier: "pro", Rate: 1, Fault: chaos.Fail(chaos.GeminiOverloaded), After: time.Minute, For: time.Minute},
				{Tier: "flash", Rate: 0.3, Fault: chaos.Fail(chaos.OpenAIServerError)},
			},
			Open: []chaos.Open{{Tier: "pro", After: 3 * time.Minute, For: 30 * time.Second}},
		},
	}
}

// The report's five signals are what otelx exports for the same run: its
// tierguard.requests by source and degraded flag, tierguard.breaker.
// transitions and tierguard.bulkhead.accepted / rejected, read from the
// OpenTelemetry SDK.
func TestReportAgreesWithOtelx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer func() { _ = mp.Shutdown(context.Background()) }()
		var sw chaos.Switch
		chain := busyChain(t, &sw)
		inst, err := otelx.Instrument(chain, otelx.Options{MeterProvider: mp, TracerProvider: tracenoop.NewTracerProvider()})
		require.NoError(t, err)
		defer func() { _ = inst.Close() }()

		rep, err := chaos.Run(context.Background(), chain, busyRun(&sw))
		require.NoError(t, err)
		t.Log(rep)

		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(context.Background(), &rm))
		requests := func(source string, degraded ...bool) int {
			return int(sumInt(t, rm, "tierguard.requests", func(a attribute.Set) bool {
				s, _ := a.Value("tierguard.source")
				d, _ := a.Value("tierguard.degraded")
				return s.AsString() == source && (len(degraded) == 0 || d.AsBool() == degraded[0])
			}))
		}
		all := int(sumInt(t, rm, "tierguard.requests", func(attribute.Set) bool { return true }))
		// otelx counts transitions by states only (a reason is not a
		// metric attribute): forced opens and trips together.
		opens := int(sumInt(t, rm, "tierguard.breaker.transitions", func(a attribute.Set) bool {
			from, _ := a.Value("tierguard.breaker.from")
			to, _ := a.Value("tierguard.breaker.to")
			return from.AsString() == "closed" && to.AsString() == "open"
		}))
		accepted := sumInt(t, rm, "tierguard.bulkhead.accepted", func(attribute.Set) bool { return true })
		rejected := sumInt(t, rm, "tierguard.bulkhead.rejected", func(attribute.Set) bool { return true })

		// The counts behind the signals.
		assert.Equal(t, all, rep.Requests)
		assert.Equal(t, requests("tier", false), rep.Primary)
		assert.Equal(t, requests("tier", true), rep.Fallback)
		assert.Equal(t, requests("cache"), rep.Cache)
		assert.Equal(t, requests("default"), rep.Default)
		assert.Equal(t, requests("error"), rep.Failed)
		assert.Equal(t, opens, rep.BreakerTrips+rep.ForcedOpens)
		assert.Positive(t, rep.ForcedOpens)
		assert.Equal(t, accepted, int64(rep.Bulkheads[0].Accepted))
		assert.Equal(t, rejected, int64(rep.Bulkheads[0].Rejected))

		// The five signals, computed from otelx as the README's queries do.
		answered := all - requests("error")
		assert.Equal(t, float64(answered)/float64(all), rep.Success)
		assert.Equal(t, float64(requests("tier", true))/float64(answered), rep.FallbackRate)
		assert.Equal(t, float64(requests("cache"))/float64(all), rep.CacheHitRatio)
		assert.Equal(t, float64(rejected)/float64(rejected+accepted), rep.BulkheadRejectionRate)

		// And every one of them moved.
		assert.Positive(t, rep.BreakerTrips)
		assert.Equal(t, 1, rep.ForcedOpens)
		assert.Positive(t, rep.BulkheadRejectionRate)
		assert.Positive(t, rep.FallbackRate)
		assert.Positive(t, rep.CacheHitRatio)
		assert.Positive(t, rep.DefaultRatio)
		assert.Less(t, rep.Success, 1.0)
	})
}

// sumInt sums the points of an integer counter whose attributes match.
func sumInt(t *testing.T, rm metricdata.ResourceMetrics, name string, match func(attribute.Set) bool) int64 {
	t.Helper()
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			require.True(t, ok, "%s is a %T", name, m.Data)
			var n int64
			for _, p := range sum.DataPoints {
				if match(p.Attributes) {
					n += p.Value
				}
			}
			return n
		}
	}
	t.Fatalf("metric %s not exported", name)
	return 0
}

// Run refuses a configuration it cannot run, naming every field.
func TestRunChecksItsConfig(t *testing.T) {
	var sw chaos.Switch
	chain := busyChain(t, &sw)
	_, err := chaos.Run(context.Background(), chain, chaos.RunConfig[string]{
		Load:  chaos.Load{RPS: -1, Timeout: -1},
		Drill: chaos.Drill{Rules: []chaos.Rule{{Fault: boom, Rate: 1}}},
	})
	for _, want := range []string{"Load.Duration must be positive", "Load.RPS -1", "Load.Timeout", "Switch is required"} {
		assert.ErrorContains(t, err, want)
	}
	_, err = chaos.Run(context.Background(), chain, chaos.RunConfig[string]{Load: chaos.Load{RPS: 1, Duration: time.Second}})
	assert.ErrorContains(t, err, "Load.Concurrency")
	assert.ErrorContains(t, err, "an Input function is required")
	_, err = chaos.Run(context.Background(), chain, chaos.RunConfig[string]{Load: chaos.Load{Duration: 25 * time.Hour}})
	assert.ErrorContains(t, err, "exceeds MaxDrill")
	_, err = chaos.Run(context.Background(), chain, chaos.RunConfig[string]{Load: chaos.Load{Duration: time.Second},
		Drill: chaos.Drill{Open: []chaos.Open{{Tier: "flash"}, {Tier: "nope"}}}})
	assert.ErrorContains(t, err, `Drill.Open[0]: stage "flash" has no breaker`)
	assert.ErrorContains(t, err, `Drill.Open[1]: stage "nope" has no breaker`)
}

// With no load, Run watches the chain's own traffic for the duration: the
// drill runs on production requests, and the report counts them.
func TestRunWatchesTraffic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sw chaos.Switch
		pro := &upstream{name: "pro", take: 10 * time.Millisecond}
		chain, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: chaos.Tier(pro, &sw), Retry: retry.Policy{MaxAttempts: 1}},
			{Tier: &upstream{name: "flash", take: 5 * time.Millisecond}},
		}})
		require.NoError(t, err)
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { // the service's traffic: one request a second, some enrolled
			for n := 0; ctx.Err() == nil; n++ {
				rctx := context.Background()
				if n%2 == 0 {
					rctx = chaos.Enroll(rctx)
				}
				_, _ = chain.Do(rctx, "q")
				time.Sleep(time.Second - 10*time.Millisecond)
			}
		})
		time.Sleep(10500 * time.Millisecond) // traffic before the drill is not counted
		rep, err := chaos.Run(context.Background(), chain, chaos.RunConfig[string]{
			Name: "production", Load: chaos.Load{Duration: time.Minute}, Switch: &sw,
			Drill: chaos.Drill{Rules: []chaos.Rule{{Enrolled: true, Rate: 1, Fault: chaos.Fail(chaos.GeminiOverloaded)}}},
		})
		stop()
		wg.Wait()
		require.NoError(t, err)
		assert.Equal(t, 60, rep.Requests)
		assert.Equal(t, 30, rep.Fallback, "the enrolled half")
		assert.Equal(t, 30, rep.Primary)
		assert.Equal(t, time.Minute, rep.Duration)
		assert.False(t, sw.Status().Active)
	})
}

// Requests due while Concurrency are in flight are not sent but counted;
// a failed check makes Err list it; latencies and the overrun are exact in
// fake time.
func TestRunReport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sw chaos.Switch
		slow := chaos.Tier(&upstream{name: "pro", take: time.Second}, &sw)
		chain, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: slow, Retry: retry.Policy{MaxAttempts: 1}}}})
		require.NoError(t, err)
		rep, err := chaos.Run(context.Background(), chain, chaos.RunConfig[string]{
			Name:   "slow",
			Load:   chaos.Load{RPS: 10, Duration: 10 * time.Second, Concurrency: 5, Timeout: 3 * time.Second},
			Input:  func(n int) string { return fmt.Sprint(n) },
			Switch: &sw,
			Drill:  chaos.Drill{Rules: []chaos.Rule{{Rate: 0.25, Fault: chaos.Stall()}}},
			Checks: []chaos.Check{chaos.MinSuccess(0.9), chaos.MaxLatency(0.5, time.Second), chaos.MaxOverrun(0),
				chaos.MaxFallbackRate(0), chaos.MaxCacheHitRatio(0), chaos.MaxDefaultRatio(0), chaos.MaxBulkheadRejectionRate(0), chaos.MinBreakerTrips(1)},
		})
		require.NoError(t, err)
		t.Log(rep)
		assert.Equal(t, 100, rep.Requests+rep.Dropped)
		assert.Positive(t, rep.Dropped)
		assert.Equal(t, time.Second, rep.Latency.P50)
		assert.Equal(t, 3*time.Second, rep.Latency.Max, "a stall ends at the request's deadline")
		assert.Equal(t, time.Duration(0), rep.WorstOverrun)
		assert.False(t, rep.Passed())
		err = rep.Err()
		require.Error(t, err)
		assert.ErrorContains(t, err, `drill "slow" failed`)
		assert.ErrorContains(t, err, "success ≥ 90.00%: got")
		assert.ErrorContains(t, err, "breaker trips ≥ 1: got 0")
		assert.NotContains(t, err.Error(), "p50 latency")
		assert.Contains(t, rep.String(), "FAIL")
		assert.Equal(t, 8, len(rep.Checks))
	})
}

// A run that ends early still reports, and stops the drill.
func TestRunCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sw chaos.Switch
		chain := busyChain(t, &sw)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second+25*time.Millisecond)
		defer cancel()
		rep, err := chaos.Run(ctx, chain, busyRun(&sw))
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		require.NotNil(t, rep)
		assert.Equal(t, 601, rep.Requests, "sent until the context ended")
		assert.False(t, sw.Status().Active)
	})
}
