package otelx_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tierguard/tierguard/deadline"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/otelx"
)

// memberAttempt is one request answered by a pool member's call.
func memberAttempt(ctx context.Context, inst *otelx.Instrumentation, chain *fallback.ChainInfo, member string) {
	st := &chain.Stages[0]
	rep := fallback.Reply{Usage: fallback.Usage{InputTokens: 10, OutputTokens: 2}, HasUsage: true}
	ctx = inst.RequestStarted(ctx, fallback.RequestStart{Chain: chain})
	actx := inst.AttemptStarted(ctx, fallback.AttemptStart{Stage: st, Model: st.Model, Attempt: 1, Remaining: deadline.Unlimited})
	inst.AttemptEnded(actx, fallback.AttemptEnd{Stage: st, Model: st.Model, Attempt: 1, Member: member, Latency: time.Millisecond, Reply: &rep, Remaining: deadline.Unlimited})
	inst.RequestEnded(ctx, fallback.RequestEnd{Chain: chain, Stage: st, Answered: true, Source: fallback.SourceTier, Latency: time.Millisecond, Remaining: deadline.Unlimited})
}

// tenantLabelled is an Instrumentation whose metrics carry the tenant,
// on an SDK MeterProvider read by the returned reader.
func tenantLabelled(t *testing.T) (*otelx.Instrumentation, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	inst, err := otelx.New(otelx.Options{MeterProvider: mp, MetricAttributes: []attribute.Key{otelx.KeyTenant}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, inst.Close()) })
	return inst, reader
}

// attemptsBy returns tierguard.attempts by its tenant and member labels.
func attemptsBy(t *testing.T, reader *sdkmetric.ManualReader) map[[2]string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := map[[2]string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != otelx.MetricAttempts {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				tenant, _ := dp.Attributes.Value(otelx.KeyTenant)
				member, _ := dp.Attributes.Value("tierguard.pool.member")
				out[[2]string{tenant.AsString(), member.AsString()}] += dp.Value
			}
		}
	}
	return out
}

// Requests of several tenants through several pool members count each
// attempt under its own tenant and member, requests of one tenant sharing
// the sets the first of them built: after the first request of a tenant
// on a member, a labelled attempt builds no attribute set.
func TestLabelledAttemptsShareTheirSets(t *testing.T) {
	inst, reader := tenantLabelled(t)
	chain := chainInfo("gcp.gemini")
	want := map[[2]string]int64{}
	for i, tenant := range []string{"acme", "globex", "acme", "initech", "globex", "acme"} {
		member := []string{"#aaaaaaaaaaaa", "#bbbbbbbbbbbb"}[i%2]
		ctx := fallback.WithRequest(context.Background(), fallback.Request{Tenant: tenant})
		memberAttempt(ctx, inst, chain, member)
		want[[2]string{tenant, member}]++
	}
	memberAttempt(context.Background(), inst, chain, "#aaaaaaaaaaaa")
	want[[2]string{"", "#aaaaaaaaaaaa"}]++
	assert.Equal(t, want, attemptsBy(t, reader))

	ctx := fallback.WithRequest(context.Background(), fallback.Request{Tenant: "acme"})
	unlabelled := testing.AllocsPerRun(50, func() { memberAttempt(context.Background(), inst, chain, "#aaaaaaaaaaaa") })
	labelled := testing.AllocsPerRun(50, func() { memberAttempt(ctx, inst, chain, "#aaaaaaaaaaaa") })
	// The request's context (fallback.WithRequest is made once, outside)
	// and its state are the only allocations the tenant may add.
	assert.LessOrEqual(t, labelled-unlabelled, 1.0, "labelled %v, unlabelled %v", labelled, unlabelled)
}

// 64 callers of 8 tenants through 2 members, building and reading the
// caches at once: every attempt counts under its own tenant and member.
func TestLabelledAttemptsUnderConcurrency(t *testing.T) {
	inst, reader := tenantLabelled(t)
	chain := chainInfo("gcp.gemini")
	const callers, each = 64, 20
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			ctx := fallback.WithRequest(context.Background(), fallback.Request{Tenant: "t" + strconv.Itoa(c%8)})
			for range each {
				memberAttempt(ctx, inst, chain, []string{"#aaaaaaaaaaaa", "#bbbbbbbbbbbb"}[c%2])
			}
		})
	}
	wg.Wait()
	want := map[[2]string]int64{}
	for c := range callers {
		want[[2]string{"t" + strconv.Itoa(c%8), []string{"#aaaaaaaaaaaa", "#bbbbbbbbbbbb"}[c%2]}] += each
	}
	assert.Equal(t, want, attemptsBy(t, reader))
}
