package otelx_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tierguard/tierguard/deadline"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/otelx"
)

// oneAttempt tells inst of a request answered by stage's first attempt,
// whose reply is rep, through the Observer methods the chain calls.
func oneAttempt(inst *otelx.Instrumentation, chain *fallback.ChainInfo, rep fallback.Reply) {
	oneAttemptIn(context.Background(), inst, chain, rep)
}

// oneAttemptIn is oneAttempt for a request whose context is ctx.
func oneAttemptIn(ctx context.Context, inst *otelx.Instrumentation, chain *fallback.ChainInfo, rep fallback.Reply) {
	st := &chain.Stages[0]
	ctx = inst.RequestStarted(ctx, fallback.RequestStart{Chain: chain})
	actx := inst.AttemptStarted(ctx, fallback.AttemptStart{Stage: st, Model: st.Model, Attempt: 1, Remaining: deadline.Unlimited})
	inst.AttemptEnded(actx, fallback.AttemptEnd{Stage: st, Model: st.Model, Attempt: 1, Latency: 10 * time.Millisecond, Reply: &rep, Remaining: deadline.Unlimited})
	inst.RequestEnded(ctx, fallback.RequestEnd{Chain: chain, Stage: st, Answered: true, Source: fallback.SourceTier, Latency: 10 * time.Millisecond, Remaining: deadline.Unlimited})
}

func chainInfo(provider string) *fallback.ChainInfo {
	return &fallback.ChainInfo{Operation: "generate_content", Stages: []fallback.StageInfo{{Operation: "generate_content", Tier: "pro", Model: "gemini-2.5-pro", Provider: provider}}}
}

// The usage counters are split by the modalities the tier reported; what
// a breakdown leaves uncounted, and a count not broken down, is
// "unknown"; the cache and reasoning counts take their side's modality
// when one modality makes all of it. Each counter's modalities add up to
// the response's count.
func TestUsageByModality(t *testing.T) {
	type counts map[string]int64
	cases := []struct {
		name  string
		usage fallback.Usage
		// want is, per counter, the count by modality.
		want map[string]counts
	}{{
		name:  "totals only",
		usage: fallback.Usage{InputTokens: 100, OutputTokens: 20, CacheReadInputTokens: 64, ReasoningOutputTokens: 4},
		want: map[string]counts{
			otelx.MetricUsageInput: {"unknown": 100}, otelx.MetricUsageOutput: {"unknown": 20},
			otelx.MetricUsageCacheRead: {"unknown": 64}, otelx.MetricUsageCacheWrite: {"unknown": 0}, otelx.MetricUsageReasoning: {"unknown": 4},
		},
	}, {
		// Gemini's shape: a text prompt broken down, the candidates' text
		// broken down but not the thoughts.
		name: "text prompt, thoughts not broken down",
		usage: fallback.Usage{InputTokens: 1200, OutputTokens: 290, CacheReadInputTokens: 1024, ReasoningOutputTokens: 250,
			TextInputTokens: 1200, TextOutputTokens: 40},
		want: map[string]counts{
			otelx.MetricUsageInput: {"text": 1200}, otelx.MetricUsageOutput: {"text": 40, "unknown": 250},
			otelx.MetricUsageCacheRead: {"text": 1024}, otelx.MetricUsageCacheWrite: {"text": 0}, otelx.MetricUsageReasoning: {"unknown": 250},
		},
	}, {
		name: "multimodal",
		usage: fallback.Usage{InputTokens: 1600, OutputTokens: 1300, CacheReadInputTokens: 1000,
			TextInputTokens: 80, ImageInputTokens: 258, DocumentInputTokens: 1200, ImageOutputTokens: 1290, TextOutputTokens: 10},
		want: map[string]counts{
			otelx.MetricUsageInput:     {"text": 80, "image": 258, "document": 1200, "unknown": 62},
			otelx.MetricUsageOutput:    {"image": 1290, "text": 10, "unknown": 0},
			otelx.MetricUsageCacheRead: {"unknown": 1000}, otelx.MetricUsageCacheWrite: {"unknown": 0}, otelx.MetricUsageReasoning: {"unknown": 0},
		},
	}, {
		name:  "audio in and out, video in",
		usage: fallback.Usage{InputTokens: 900, OutputTokens: 300, AudioInputTokens: 600, VideoInputTokens: 300, AudioOutputTokens: 300},
		want: map[string]counts{
			otelx.MetricUsageInput: {"audio": 600, "video": 300, "unknown": 0}, otelx.MetricUsageOutput: {"audio": 300},
			otelx.MetricUsageCacheRead: {"unknown": 0}, otelx.MetricUsageCacheWrite: {"unknown": 0}, otelx.MetricUsageReasoning: {"audio": 0},
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			inst, err := otelx.New(h.options())
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, inst.Close()) })
			oneAttempt(inst, chainInfo("gcp.gemini"), fallback.Reply{Usage: tc.usage, HasUsage: true})
			rm := h.collect(t)
			base := []attribute.KeyValue{otelx.AttrOperation.String("generate_content"), otelx.AttrProvider.String("gcp.gemini"),
				otelx.AttrModel.String("gemini-2.5-pro"), otelx.AttrTier.String("pro")}
			for name, byMod := range tc.want {
				want := map[string]int64{}
				for mod, n := range byMod {
					want[kv(append(base, otelx.AttrTokenModality.String(mod))...)] = n
				}
				assert.Equal(t, want, ints(t, findMetric(t, rm, name)), name)
			}
			var in, out int64
			for _, n := range ints(t, findMetric(t, rm, otelx.MetricUsageInput)) {
				in += n
			}
			for _, n := range ints(t, findMetric(t, rm, otelx.MetricUsageOutput)) {
				out += n
			}
			assert.Equal(t, tc.usage.InputTokens, in, "the modalities add up to the input count")
			assert.Equal(t, tc.usage.OutputTokens, out, "and to the output count")
		})
	}
}

// The request's sampling numbers a tier reports are on its attempt span,
// and only those it reports: a temperature of 0 is one.
func TestRequestSamplingOnTheAttemptSpan(t *testing.T) {
	h := newHarness(t)
	inst, err := otelx.New(h.options())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, inst.Close()) })
	oneAttempt(inst, chainInfo("gcp.gemini"), fallback.Reply{RequestMaxTokens: 512, HasTemperature: true, RequestTopP: 0.95, HasTopP: true})
	oneAttempt(inst, chainInfo("gcp.gemini"), fallback.Reply{})
	spans := h.spansNamed("generate_content gemini-2.5-pro")
	require.Len(t, spans, 2)
	a := spanAttrs(spans[0])
	assert.Equal(t, int64(512), a["gen_ai.request.max_tokens"].AsInt64())
	temp, has := a["gen_ai.request.temperature"]
	require.True(t, has)
	assert.Zero(t, temp.AsFloat64())
	assert.InDelta(t, 0.95, a["gen_ai.request.top_p"].AsFloat64(), 1e-9)
	for _, k := range []attribute.Key{"gen_ai.request.max_tokens", "gen_ai.request.temperature", "gen_ai.request.top_p"} {
		_, has := spanAttrs(spans[1])[k]
		assert.False(t, has, "%s only when the tier reports it", k)
	}
}

// A stage that names no provider, over a tier that reports none, has no
// gen_ai.provider.name: the conventions define no value for an unknown
// provider, and _OTHER is error.type's fallback, not the provider's.
func TestUnknownProviderIsLeftOut(t *testing.T) {
	h := newHarness(t)
	inst, err := otelx.New(h.options())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, inst.Close()) })
	oneAttempt(inst, chainInfo(""), fallback.Reply{Usage: fallback.Usage{InputTokens: 3, OutputTokens: 1}, HasUsage: true})
	rm := h.collect(t)
	for _, name := range []string{otelx.MetricInferenceDuration, otelx.MetricUsageInput, otelx.MetricOperationInput} {
		for _, set := range pointAttributes(findMetric(t, rm, name)) {
			_, has := set.Value(otelx.AttrProvider)
			assert.False(t, has, "%s: %s", name, key(set))
			assert.NotContains(t, key(set), "_OTHER")
		}
	}
	spans := h.spansNamed("generate_content gemini-2.5-pro")
	require.Len(t, spans, 1)
	_, has := spanAttrs(spans[0])[otelx.AttrProvider]
	assert.False(t, has)

	// The stage's own provider, when it names one, is the attribute.
	oneAttempt(inst, chainInfo("openai"), fallback.Reply{})
	for _, set := range pointAttributes(findMetric(t, h.collect(t), otelx.MetricInferenceDuration)) {
		if v, has := set.Value(otelx.AttrProvider); has {
			assert.Equal(t, "openai", v.AsString())
		}
	}
}

// The meter and the tracer carry the schema URL of the conventions the
// names follow.
func TestSchemaURL(t *testing.T) {
	assert.True(t, strings.HasPrefix(otelx.SchemaURL, "https://opentelemetry.io/schemas/"))
	assert.True(t, strings.HasSuffix(otelx.SchemaURL, "/"+otelx.SemConvVersion))
	h := newHarness(t)
	inst, err := otelx.New(h.options())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, inst.Close()) })
	oneAttempt(inst, chainInfo("gcp.gemini"), fallback.Reply{})
	rm := h.collect(t)
	require.NotEmpty(t, rm.ScopeMetrics)
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, otelx.SchemaURL, sm.Scope.SchemaURL)
	}
	require.NotEmpty(t, h.spans.Ended())
	for _, s := range h.spans.Ended() {
		assert.Equal(t, otelx.SchemaURL, s.InstrumentationScope().SchemaURL)
	}
}

// A response that reports no cache or reasoning tokens makes those
// series at 0, and every collection interval in which one reported 0
// has its 0, for a cumulative reader and for a delta one; an interval in
// which none reported has no delta point. (Within an interval, only the
// first 0 of a series is measured.)
func TestZeroTokenCountsInEveryInterval(t *testing.T) {
	deltaReader := sdkmetric.NewManualReader(sdkmetric.WithTemporalitySelector(func(sdkmetric.InstrumentKind) metricdata.Temporality {
		return metricdata.DeltaTemporality
	}))
	cumulativeReader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(deltaReader), sdkmetric.WithReader(cumulativeReader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	inst, err := otelx.New(otelx.Options{MeterProvider: mp})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, inst.Close()) })
	chain := chainInfo("gcp.gemini")
	series := kv(otelx.AttrOperation.String("generate_content"), otelx.AttrProvider.String("gcp.gemini"),
		otelx.AttrModel.String("gemini-2.5-pro"), otelx.AttrTier.String("pro"), otelx.AttrTokenModality.String("unknown"))
	collect := func(r *sdkmetric.ManualReader) map[string]map[string]int64 {
		var rm metricdata.ResourceMetrics
		require.NoError(t, r.Collect(context.Background(), &rm))
		got := map[string]map[string]int64{}
		for _, name := range []string{otelx.MetricUsageCacheRead, otelx.MetricUsageCacheWrite, otelx.MetricUsageReasoning} {
			if m, ok := lookupMetric(rm, name); ok {
				got[name] = ints(t, m)
			}
		}
		return got
	}
	zeros := map[string]map[string]int64{
		otelx.MetricUsageCacheRead: {series: 0}, otelx.MetricUsageCacheWrite: {series: 0}, otelx.MetricUsageReasoning: {series: 0},
	}
	noCache := fallback.Reply{Usage: fallback.Usage{InputTokens: 10, OutputTokens: 2}, HasUsage: true}

	for range 3 {
		oneAttempt(inst, chain, noCache)
	}
	assert.Equal(t, zeros, collect(deltaReader), "the first interval")
	assert.Equal(t, zeros, collect(cumulativeReader))

	assert.NotContains(t, collect(deltaReader)[otelx.MetricUsageCacheRead], series, "an interval with no response")
	for range 2 {
		oneAttempt(inst, chain, noCache)
	}
	assert.Equal(t, zeros, collect(deltaReader), "a later interval has its 0 again")
	assert.Equal(t, zeros, collect(cumulativeReader))

	oneAttempt(inst, chain, fallback.Reply{Usage: fallback.Usage{InputTokens: 100, OutputTokens: 20, CacheReadInputTokens: 64, ReasoningOutputTokens: 4}, HasUsage: true})
	oneAttempt(inst, chain, noCache)
	assert.Equal(t, map[string]map[string]int64{
		otelx.MetricUsageCacheRead: {series: 64}, otelx.MetricUsageCacheWrite: {series: 0}, otelx.MetricUsageReasoning: {series: 4},
	}, collect(deltaReader))
	assert.Equal(t, map[string]map[string]int64{
		otelx.MetricUsageCacheRead: {series: 64}, otelx.MetricUsageCacheWrite: {series: 0}, otelx.MetricUsageReasoning: {series: 4},
	}, collect(cumulativeReader))
}

// countingProvider counts the additions to the token counters named in
// counted that reach the SDK.
type countingProvider struct {
	metric.MeterProvider
	adds *atomic.Int64
}

func (p countingProvider) Meter(name string, opts ...metric.MeterOption) metric.Meter {
	return countingMeter{p.MeterProvider.Meter(name, opts...), p.adds}
}

type countingMeter struct {
	metric.Meter
	adds *atomic.Int64
}

func (m countingMeter) Int64Counter(name string, opts ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	c, err := m.Meter.Int64Counter(name, opts...)
	if name == otelx.MetricUsageCacheWrite {
		c = countingCounter{c, m.adds}
	}
	return c, err
}

type countingCounter struct {
	metric.Int64Counter
	adds *atomic.Int64
}

func (c countingCounter) Add(ctx context.Context, n int64, opts ...metric.AddOption) {
	c.adds.Add(1)
	c.Int64Counter.Add(ctx, n, opts...)
}

// Within a collection interval, a series' 0 is measured once; a request
// with labels of its own measures its own.
func TestZeroTokenCountMeasuredOncePerInterval(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	var adds atomic.Int64
	inst, err := otelx.New(otelx.Options{MeterProvider: countingProvider{mp, &adds}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, inst.Close()) })
	chain := chainInfo("gcp.gemini")
	noCache := fallback.Reply{Usage: fallback.Usage{InputTokens: 10, OutputTokens: 2}, HasUsage: true}
	for range 5 {
		oneAttempt(inst, chain, noCache)
	}
	assert.Equal(t, int64(1), adds.Load(), "five zeros, one measurement")
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	oneAttempt(inst, chain, noCache)
	oneAttempt(inst, chain, noCache)
	assert.Equal(t, int64(2), adds.Load(), "one more in the next interval")
	oneAttempt(inst, chain, fallback.Reply{Usage: fallback.Usage{InputTokens: 10, CacheWriteInputTokens: 3}, HasUsage: true})
	assert.Equal(t, int64(3), adds.Load(), "a count that is not 0 is always added")

	labelled, err := otelx.New(otelx.Options{MeterProvider: countingProvider{mp, &adds}, MetricAttributes: []attribute.Key{"team"}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, labelled.Close()) })
	ctx := otelx.WithAttributes(context.Background(), attribute.String("team", "search"))
	for range 2 {
		oneAttemptIn(ctx, labelled, chain, noCache)
	}
	assert.Equal(t, int64(5), adds.Load(), "a request's own labels make its own series")
}
