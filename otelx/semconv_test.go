package otelx_test

import (
	"context"
	"iter"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/otelx"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// The GenAI semantic conventions at their development schema 1.42.0-dev,
// as far as a client inference instrumentation goes, transcribed from the
// documents of github.com/open-telemetry/semantic-conventions-genai (which
// has cut no release):
//
//	docs/gen-ai/client-inference.md
//	docs/gen-ai/gen-ai-token-metrics.md
//
// (model: model/gen-ai/metrics.yaml, token-metrics.yaml, spans.yaml). When
// otelx moves to another revision, SemConvVersion changes and this table
// with it.
const specVersion = "1.42.0-dev"

// noProvider is the tier of specRun whose stage names no provider and
// which reports none: the conventions require gen_ai.provider.name but
// define no value for an unknown provider, so otelx leaves it out there.
const noProvider = "lite"

type specMetric struct {
	histogram bool // histogram, else counter
	integer   bool // metric_value_type int
	unit      string
	buckets   []float64
	required  []string
	optional  []string // conditionally required, recommended
}

var (
	specDurationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	specTokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	// metric_attributes.gen_ai: required operation and provider;
	// conditionally the request model and server.port; recommended the
	// response model and server.address.
	specRequired = []string{"gen_ai.operation.name", "gen_ai.provider.name"}
	specCommon   = []string{"gen_ai.request.model", "server.port", "gen_ai.response.model", "server.address"}
	withError    = append(slices.Clip(specCommon), "error.type")
	usageCounter = specMetric{integer: true, unit: "{token}", required: append(slices.Clip(specRequired), "gen_ai.token.modality"), optional: specCommon}
	opHistogram  = specMetric{histogram: true, integer: true, unit: "{token}", buckets: specTokenBuckets, required: specRequired, optional: withError}
	timing       = specMetric{histogram: true, unit: "s", buckets: specDurationBuckets, required: specRequired, optional: specCommon}
)

var specMetrics = map[string]specMetric{
	"gen_ai.client.inference.duration":                       {histogram: true, unit: "s", buckets: specDurationBuckets, required: specRequired, optional: withError},
	"gen_ai.client.inference.time_to_first_chunk":            timing,
	"gen_ai.client.inference.time_per_output_chunk":          timing,
	"gen_ai.client.inference.usage.input_tokens":             usageCounter,
	"gen_ai.client.inference.usage.output_tokens":            usageCounter,
	"gen_ai.client.inference.usage.cache_read.input_tokens":  usageCounter,
	"gen_ai.client.inference.usage.cache_write.input_tokens": usageCounter,
	"gen_ai.client.inference.usage.reasoning.output_tokens":  usageCounter,
	"gen_ai.client.inference.operation.input_tokens":         opHistogram,
	"gen_ai.client.inference.operation.output_tokens":        opHistogram,
}

// specSpanAttributes are the attributes of the gen_ai.client.inference span
// (client kind, named "{gen_ai.operation.name} {gen_ai.request.model}").
var specSpanAttributes = []string{
	"gen_ai.operation.name", "gen_ai.provider.name", "error.type", "gen_ai.conversation.id", "gen_ai.output.type",
	"gen_ai.prompt.name", "gen_ai.prompt.version", "gen_ai.request.choice.count", "gen_ai.request.model", "gen_ai.request.seed",
	"gen_ai.request.stream", "gen_ai.request.top_k", "server.port", "gen_ai.conversation.compacted",
	"gen_ai.request.frequency_penalty", "gen_ai.request.max_tokens", "gen_ai.request.presence_penalty",
	"gen_ai.request.previous_response.id", "gen_ai.request.reasoning.level", "gen_ai.request.stop_sequences",
	"gen_ai.request.temperature", "gen_ai.request.top_p", "gen_ai.response.finish_reasons", "gen_ai.response.id",
	"gen_ai.response.model", "gen_ai.response.time_to_first_chunk",
	"gen_ai.usage.audio.cache_read.input_tokens", "gen_ai.usage.audio.input_tokens", "gen_ai.usage.audio.output_tokens",
	"gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_write.input_tokens",
	"gen_ai.usage.image.cache_read.input_tokens", "gen_ai.usage.image.input_tokens", "gen_ai.usage.image.output_tokens",
	"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.usage.reasoning.output_tokens",
	"gen_ai.usage.text.cache_read.input_tokens", "gen_ai.usage.text.input_tokens", "gen_ai.usage.text.output_tokens",
	"server.address", "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions", "gen_ai.tool.definitions",
}

// fromOtherConventions are the attributes of other OpenTelemetry
// conventions otelx adds to an inference span, with the convention that
// defines them.
var fromOtherConventions = map[string]string{
	"http.response.status_code": "HTTP semantic conventions (stable): the status of the call's response",
}

// ownNamespace reports whether a name is tierguard's own.
func ownNamespace(name string) bool { return strings.HasPrefix(name, "tierguard.") }

// specTier reports everything an SDK adapter's tier reports.
type specTier struct {
	*tier
}

func (specTier) Endpoint() fallback.Endpoint {
	return fallback.Endpoint{Provider: "gcp.gemini", Address: "generativelanguage.googleapis.com", Port: 443}
}

func (t specTier) Call(ctx context.Context, in string) (string, error) {
	out, err := t.tier.Call(context.Background(), in)
	fallback.Report(ctx, fallback.Reply{
		Usage:    fallback.Usage{InputTokens: 100, OutputTokens: int64(len(out)), CacheReadInputTokens: 40, CacheWriteInputTokens: 5, ReasoningOutputTokens: 2},
		HasUsage: true,
		Response: fallback.ResponseInfo{ID: "resp-1", Model: "gemini-2.5-flash-001", FinishReason: "STOP"},
	})
	return out, err
}

// specRun drives every path that emits a GenAI signal: a failure that is
// retried, one the next tier absorbs, a validator's rejection (tokens
// spent), a success with usage and a response, a tier that names no
// provider, a stream with several chunks, and one that breaks.
func specRun(t *testing.T, opts otelx.Options) {
	t.Helper()
	pro := specTier{newTier("pro", step{err: http503(), take: 20 * time.Millisecond})}
	flash := specTier{newTier("flash", ok("answer"), ok("not json"))}
	unknown := fallback.Tier("lite", func(context.Context, string) (string, error) { return "", http503() })
	c := newChain(t, fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
		{Tier: pro, Model: "gemini-2.5-pro", Retry: retry.Policy{MaxAttempts: 2, BaseDelay: 10 * time.Millisecond, Jitter: retry.NoJitter}},
		{Tier: flash, Model: "gemini-2.5-flash", Validate: validate.Func[string](func(s string) error {
			if s == "not json" {
				return validate.Errorf("json", "not JSON")
			}
			return nil
		})},
	}})
	other := newChain(t, fallback.Config[string, string]{Operation: "chat", Stages: []fallback.Stage[string, string]{
		{Tier: unknown, Model: "local-model", Retry: retry.Policy{MaxAttempts: 1}},
	}, Default: func(context.Context, string) (string, bool) { return "busy", true }})
	answer := []chunk{{text: "a"}, {text: "b"}, {text: "c", finish: "STOP"}}
	streams, err := fallback.NewStream(fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{
		{Tier: streamTier("pro", 0, nil, http503()), Model: "gemini-2.5-pro", Provider: "gcp.gemini", Retry: retry.Policy{MaxAttempts: 1}},
		{Tier: streamTier("flash", 30*time.Millisecond, answer, nil), Model: "gemini-2.5-flash", Provider: "gcp.gemini"},
	}})
	require.NoError(t, err)
	broken, err := fallback.NewStream(fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{
		{Tier: streamTier("flash", 10*time.Millisecond, answer[:2], http503()), Model: "gemini-2.5-flash", Provider: "gcp.gemini"},
	}})
	require.NoError(t, err)

	inst, err := otelx.New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, inst.Close()) })
	for _, ch := range []otelx.Chain{c, other, streams, broken} {
		inst.Attach(ch)
	}
	ctx := context.Background()
	_, err = c.Do(ctx, "q")
	require.Error(t, err, "the rejected answer was the last tier's")
	_, err = c.Do(ctx, "q")
	require.NoError(t, err)
	_, err = other.Do(ctx, "q")
	require.NoError(t, err)
	drainAll := func(s iter.Seq2[chunk, error]) {
		for range s {
		}
	}
	drainAll(streams.Stream(ctx, "q").Chunks())
	drainAll(broken.Stream(ctx, "q").Chunks())
}

// TestNamesFollowTheConventions lists every instrument and attribute the
// OpenTelemetry SDK's in-memory reader and span recorder saw after a run
// through every path, and checks each against the GenAI conventions: no
// gen_ai.* name otelx emits is missing from the release it implements, each
// has its instrument, unit and buckets, every required attribute, and no
// attribute the release does not list for it; everything else is in
// tierguard's namespace.
func TestNamesFollowTheConventions(t *testing.T) {
	require.Equal(t, specVersion, otelx.SemConvVersion, "the table above transcribes the release otelx implements")
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		specRun(t, h.options())
		rm := h.collect(t)

		seen := map[string]bool{}
		for _, sm := range rm.ScopeMetrics {
			require.Equal(t, otelx.ScopeName, sm.Scope.Name)
			for _, m := range sm.Metrics {
				seen[m.Name] = true
				if ownNamespace(m.Name) {
					for _, set := range pointAttributes(m) {
						for _, kv := range set.ToSlice() {
							k := string(kv.Key)
							assert.True(t, ownNamespace(k) || k == "gen_ai.operation.name" || k == "error.type",
								"%s: %s is neither tierguard's nor the operation or error type", m.Name, k)
						}
					}
					continue
				}
				spec, ok := specMetrics[m.Name]
				if !assert.True(t, ok, "%s is not a metric of the GenAI conventions %s", m.Name, specVersion) {
					continue
				}
				assert.Equal(t, spec.unit, m.Unit, m.Name)
				checkInstrument(t, m, spec)
				points := pointAttributes(m)
				require.NotEmpty(t, points, m.Name)
				allowed := append(slices.Clip(spec.required), spec.optional...)
				for _, set := range points {
					for _, k := range spec.required {
						if tier, _ := set.Value("tierguard.tier.name"); k == "gen_ai.provider.name" && tier.AsString() == noProvider {
							_, has := set.Value(attribute.Key(k))
							assert.False(t, has, "%s: no provider is known for %s", m.Name, noProvider)
							continue
						}
						v, has := set.Value(attribute.Key(k))
						if assert.True(t, has, "%s: required %s missing in %s", m.Name, k, key(set)) {
							assert.NotEmpty(t, v.String(), "%s: %s is empty", m.Name, k)
						}
					}
					if _, hasAddress := set.Value("server.address"); hasAddress {
						_, hasPort := set.Value("server.port")
						assert.True(t, hasPort, "%s: server.port goes with server.address", m.Name)
					}
					for _, kv := range set.ToSlice() {
						k := string(kv.Key)
						assert.True(t, slices.Contains(allowed, k) || ownNamespace(k), "%s: %s is not an attribute of it in %s", m.Name, k, specVersion)
					}
				}
			}
		}
		for name := range specMetrics {
			assert.True(t, seen[name], "%s was not emitted by the run", name)
		}
		for _, prev := range []string{otelx.MetricPrevDuration, otelx.MetricPrevTokenUsage, otelx.MetricPrevFirstChunk} {
			assert.False(t, seen[prev], "%s only with Options.PreviousNames", prev)
		}

		// Spans: each upstream attempt is an inference span; the request
		// that wraps them is tierguard's own and claims no gen_ai.* name.
		var inference, requests int
		for _, s := range h.spans.Ended() {
			a := spanAttrs(s)
			if !s.Parent().IsValid() {
				requests++
				assert.Equal(t, trace.SpanKindInternal, s.SpanKind(), s.Name())
				assert.True(t, strings.HasPrefix(s.Name(), "tierguard "), s.Name())
				for k := range a {
					assert.True(t, ownNamespace(string(k)) || k == "error.type", "request span %s: %s", s.Name(), k)
				}
				continue
			}
			inference++
			assert.Equal(t, trace.SpanKindClient, s.SpanKind(), s.Name())
			assert.Equal(t, a["gen_ai.operation.name"].AsString()+" "+a["gen_ai.request.model"].AsString(), s.Name())
			for _, k := range []attribute.Key{"gen_ai.operation.name", "gen_ai.provider.name"} {
				if k == "gen_ai.provider.name" && a["tierguard.tier.name"].AsString() == noProvider {
					_, has := a[k]
					assert.False(t, has, "%s: no provider is known", s.Name())
					continue
				}
				assert.NotEmpty(t, a[k].AsString(), "%s: required %s", s.Name(), k)
			}
			for k := range a {
				_, other := fromOtherConventions[string(k)]
				assert.True(t, slices.Contains(specSpanAttributes, string(k)) || other || ownNamespace(string(k)),
					"span %s: %s is not an attribute of gen_ai.client.inference in %s", s.Name(), k, specVersion)
			}
			if _, isStream := a["gen_ai.request.stream"]; isStream {
				assert.True(t, a["gen_ai.request.stream"].AsBool(), "set only, and true, for streams")
			}
			if a["error.type"].AsString() != "" {
				assert.Equal(t, "Error", s.Status().Code.String(), "%s: a failed attempt's status", s.Name())
			}
		}
		assert.Equal(t, 5, requests)
		assert.GreaterOrEqual(t, inference, 8)
	})
}

// TestPreviousNamesAreTheOldConventions: with Options.PreviousNames the
// three names the conventions had before v0.1.0 come back, with their
// units and buckets, and nothing else is added.
func TestPreviousNamesAreTheOldConventions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		opts := h.options()
		opts.PreviousNames = true
		specRun(t, opts)
		rm := h.collect(t)
		var extra []string
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if _, current := specMetrics[m.Name]; current || ownNamespace(m.Name) {
					continue
				}
				extra = append(extra, m.Name)
				switch m.Name {
				case otelx.MetricPrevDuration:
					assert.Equal(t, "s", m.Unit)
					assert.Equal(t, specDurationBuckets, m.Data.(metricdata.Histogram[float64]).DataPoints[0].Bounds)
				case otelx.MetricPrevTokenUsage:
					assert.Equal(t, "{token}", m.Unit)
					for _, p := range m.Data.(metricdata.Histogram[int64]).DataPoints {
						assert.Equal(t, specTokenBuckets, p.Bounds)
						tt, ok := p.Attributes.Value("gen_ai.token.type")
						assert.True(t, ok)
						assert.Contains(t, []string{"input", "output"}, tt.AsString())
					}
				case otelx.MetricPrevFirstChunk:
					assert.Equal(t, "s", m.Unit)
				}
			}
		}
		slices.Sort(extra)
		assert.Equal(t, []string{otelx.MetricPrevDuration, otelx.MetricPrevFirstChunk, otelx.MetricPrevTokenUsage}, extra)
	})
}

// checkInstrument checks a metric's instrument and value type, and a
// histogram's buckets.
func checkInstrument(t *testing.T, m metricdata.Metrics, spec specMetric) {
	t.Helper()
	switch d := m.Data.(type) {
	case metricdata.Histogram[float64]:
		assert.True(t, spec.histogram && !spec.integer, "%s: a float histogram", m.Name)
		for _, p := range d.DataPoints {
			assert.Equal(t, spec.buckets, p.Bounds, m.Name)
		}
	case metricdata.Histogram[int64]:
		assert.True(t, spec.histogram && spec.integer, "%s: an int histogram", m.Name)
		for _, p := range d.DataPoints {
			assert.Equal(t, spec.buckets, p.Bounds, m.Name)
		}
	case metricdata.Sum[int64]:
		assert.True(t, !spec.histogram && spec.integer && d.IsMonotonic, "%s: an int counter", m.Name)
	default:
		t.Errorf("%s: unexpected instrument %T", m.Name, m.Data)
	}
}

// pointAttributes returns the attribute sets of a metric's data points.
func pointAttributes(m metricdata.Metrics) []attribute.Set {
	var out []attribute.Set
	switch d := m.Data.(type) {
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Sum[float64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	}
	return out
}
