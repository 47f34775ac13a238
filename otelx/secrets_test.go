package otelx_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/otelx"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// Recognisable secrets, fed through every path a request can take.
const (
	apiKey       = "AIzaSy-SECRET-API-KEY-4242"
	promptSecret = "PROMPT-SECRET-card-4111-1111"
	outputSecret = "OUTPUT-SECRET-diagnosis"
	bodySecret   = "BODY-SECRET-upstream-echo"
)

var secrets = []string{apiKey, promptSecret, outputSecret, bodySecret, "SECRET"}

// secretChain builds a chain whose every tier fails in a way that carries
// the secrets: an API key in a wrapped error, the prompt echoed in an error
// body, an answer (containing a secret) that a validator rejects with an
// error quoting it, a status line made of upstream text.
func secretChain(t *testing.T, cache bool) *fallback.Chain[string, string] {
	t.Helper()
	pro := fallback.Tier("pro", func(_ context.Context, in string) (string, error) {
		upstream := &classify.HTTPError{Facts: classify.Facts{HTTPStatus: 503, Status: "UNAVAILABLE", Message: "echo: " + in + " " + bodySecret}}
		return "", fmt.Errorf("POST /v1beta/models/gemini-2.5-pro:generateContent?key=%s: %w", apiKey, upstream)
	})
	flash := describedTier{ModelTier: fallback.Tier("flash", func(_ context.Context, in string) (string, error) {
		return "answer to " + in + ": " + outputSecret, nil
	})}
	proxy := fallback.Tier("proxy", func(_ context.Context, in string) (string, error) {
		return "", &classify.HTTPError{Facts: classify.Facts{Status: "502 " + bodySecret + " " + in}}
	})
	lite := fallback.Tier("lite", func(_ context.Context, in string) (string, error) {
		return "", errors.New("unexpected failure for " + in + " with key " + apiKey)
	})
	rejectSecrets := validate.Func[string](func(out string) error {
		if strings.Contains(out, "SECRET") {
			return fmt.Errorf("answer %q leaks a secret", out)
		}
		return nil
	})
	cfg := fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
		{Tier: pro, Model: "gemini-2.5-pro", Provider: "gcp.gemini", Retry: retry.Policy{MaxAttempts: 2, BaseDelay: 10 * time.Millisecond, Jitter: retry.NoJitter}},
		{Tier: flash, Model: "gemini-2.5-flash", Validate: rejectSecrets},
		{Tier: proxy, Model: "gemini-2.5-flash-lite", Retry: retry.Policy{MaxAttempts: 1}},
		{Tier: lite, Model: "gemini-2.0-flash", Retry: retry.Policy{MaxAttempts: 1}},
	}}
	if cache {
		cfg.Cache = cacheFunc(func(_ context.Context, in string) (string, bool) { return "cached " + in + " " + outputSecret, true })
	}
	return newChain(t, cfg)
}

// describedTier reports what the SDK adapters' tiers report — an endpoint,
// usage with cache and reasoning details, a response id and model — none of
// which is content.
type describedTier struct {
	fallback.ModelTier[string, string]
}

func (describedTier) Endpoint() fallback.Endpoint {
	return fallback.Endpoint{Provider: "gcp.gemini", Address: "generativelanguage.googleapis.com", Port: 443}
}

func (t describedTier) Call(ctx context.Context, in string) (string, error) {
	out, err := t.ModelTier.Call(ctx, in)
	fallback.Report(ctx, fallback.Reply{
		Usage:    fallback.Usage{InputTokens: 120, OutputTokens: 30, CacheReadInputTokens: 64, CacheWriteInputTokens: 8, ReasoningOutputTokens: 12},
		HasUsage: true,
		Response: fallback.ResponseInfo{ID: "resp-7f3a", Model: "gemini-2.5-flash-001", FinishReason: "STOP"},
	})
	return out, err
}

// secretStream streams an answer made of secrets, then breaks.
func secretStream(t *testing.T) *fallback.StreamChain[string, chunk] {
	t.Helper()
	tier := fallback.StreamTierFunc("pro", func(_ context.Context, in string) iter.Seq2[chunk, error] {
		return func(yield func(chunk, error) bool) {
			for _, text := range []string{"streamed " + in, " " + outputSecret} {
				if !yield(chunk{text: text}, nil) {
					return
				}
			}
			yield(chunk{}, fmt.Errorf("connection reset reading %s: %w", bodySecret, io.ErrUnexpectedEOF))
		}
	}, func(c chunk) fallback.ChunkInfo { return fallback.ChunkInfo{Text: c.text, FinishReason: c.finish} })
	sc, err := fallback.NewStream(fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{
		{Tier: tier, Model: "gemini-2.5-pro", Provider: "gcp.gemini"},
	}})
	require.NoError(t, err)
	return sc
}

func TestNothingSensitiveIsExported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		opts := h.options()
		// The previous names too: every name otelx can emit.
		opts.PreviousNames = true
		inst, err := otelx.New(opts)
		require.NoError(t, err)
		defer func() { require.NoError(t, inst.Close()) }()

		withCache, failing := secretChain(t, true), secretChain(t, false)
		inst.Attach(withCache)
		inst.Attach(failing)
		auth := newChain(t, fallback.Config[string, string]{Operation: "chat", Stages: []fallback.Stage[string, string]{{
			Tier: fallback.Tier("pro", func(_ context.Context, in string) (string, error) {
				return "", fmt.Errorf("key %s rejected: %w", apiKey,
					&classify.HTTPError{Facts: classify.Facts{HTTPStatus: 403, Status: "PERMISSION_DENIED", Message: "API key " + apiKey + " invalid for " + in}})
			}),
			Model: "gemini-2.5-pro",
		}}})
		inst.Attach(auth)
		streams := secretStream(t)
		inst.Attach(streams)

		ctx := fallback.WithRequest(context.Background(), fallback.Request{ID: "req-safe"})
		input := "summarise " + promptSecret
		res, err := withCache.Do(ctx, input)
		require.NoError(t, err)
		require.Equal(t, fallback.SourceCache, res.Source)
		require.Contains(t, res.Value, outputSecret, "the caller gets the answer; the signals do not")
		_, err = failing.Do(ctx, input)
		require.Error(t, err)
		_, err = auth.Do(ctx, input)
		require.Error(t, err)
		var streamed strings.Builder
		for c, err := range streams.Stream(ctx, input).Chunks() {
			if err != nil {
				require.ErrorIs(t, err, fallback.ErrIncomplete)
				break
			}
			streamed.WriteString(c.text)
		}
		require.Contains(t, streamed.String(), outputSecret, "the caller sees the stream; the signals do not")

		// Everything exported, rendered as text.
		var b strings.Builder
		rm := h.collect(t)
		fmt.Fprintf(&b, "%+v\n", rm)
		points := 0
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				fmt.Fprintf(&b, "%s %s %s\n", m.Name, m.Description, m.Unit)
				switch d := m.Data.(type) {
				case metricdata.Sum[int64]:
					for _, p := range d.DataPoints {
						points++
						fmt.Fprintln(&b, key(p.Attributes))
					}
				case metricdata.Histogram[float64]:
					for _, p := range d.DataPoints {
						points++
						fmt.Fprintln(&b, key(p.Attributes))
					}
				case metricdata.Histogram[int64]:
					for _, p := range d.DataPoints {
						points++
						fmt.Fprintln(&b, key(p.Attributes))
					}
				}
			}
		}
		spans := h.spans.Ended()
		for _, s := range spans {
			fmt.Fprintf(&b, "%s %v %q\n", s.Name(), s.Status().Code, s.Status().Description)
			for _, a := range s.Attributes() {
				fmt.Fprintf(&b, "%s=%s\n", a.Key, a.Value.String())
			}
			for _, ev := range s.Events() {
				fmt.Fprintf(&b, "event %s\n", ev.Name)
				for _, a := range ev.Attributes {
					fmt.Fprintf(&b, "%s=%s\n", a.Key, a.Value.String())
				}
			}
			for _, l := range s.Links() {
				fmt.Fprintf(&b, "link %+v\n", l)
			}
		}
		logs := h.logs.String()
		b.WriteString(logs)
		exported := b.String()

		// The signals are there...
		assert.Greater(t, points, 10)
		assert.Greater(t, len(spans), 10)
		assert.Contains(t, logs, `"validation_rule":"custom"`)
		assert.Contains(t, logs, `"class":"invalid_output"`)
		assert.Contains(t, logs, `"http_status":502`)
		assert.Contains(t, logs, `"class":"unknown"`)
		assert.Contains(t, logs, `"class":"auth"`)
		assert.Contains(t, logs, `"request_id":"req-safe"`)
		assert.Contains(t, exported, "Error")
		// ...the new attributes among them.
		for _, want := range []string{"gen_ai.response.id=resp-7f3a", "gen_ai.response.model=gemini-2.5-flash-001", "gen_ai.usage.cache_read.input_tokens=64",
			"gen_ai.usage.reasoning.output_tokens=12", "server.address=generativelanguage.googleapis.com", `gen_ai.response.finish_reasons=["error"]`,
			"gen_ai.request.stream=true", "gen_ai.client.inference.time_per_output_chunk", "gen_ai.client.inference.usage.cache_write.input_tokens",
			"gen_ai.client.operation.duration", "tierguard.stream.incomplete=true"} {
			assert.True(t, strings.Contains(exported, want), "%s not exported", want)
		}
		// ...and no secret is.
		for _, s := range append(secrets, "summarise", "answer to", "streamed") {
			if i := strings.Index(exported, s); i >= 0 {
				t.Errorf("%q exported: ...%s...", s, exported[max(i-200, 0):min(i+100, len(exported))])
			}
		}
	})
}

// TestGroupKeysReachSignalsHashed: breaker and bulkhead groups keyed by
// tenant put no tenant id in tierguard.breaker.name or
// tierguard.bulkhead.name, in the breaker log's "breaker" field, in the
// bulkhead wait log, or in an error.
func TestGroupKeysReachSignalsHashed(t *testing.T) {
	const tenant = "TENANT-SECRET-4242"
	h := newHarness(t)
	inst, err := otelx.New(h.options())
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Close() })

	bg, err := breaker.NewGroup(breaker.Config{Name: "pro", ConsecutiveFailures: 1}, 8)
	require.NoError(t, err)
	hg, err := bulkhead.NewGroup(bulkhead.Config{Name: "pro", Max: 1, MaxWait: time.Millisecond, Queue: 1}, 8)
	require.NoError(t, err)
	inst.WatchBreakerGroup(bg)
	inst.WatchBulkheadGroup(hg)

	b := bg.Get(tenant)
	tok, err := b.Allow()
	require.NoError(t, err)
	tok.Done(breaker.Failure)
	_, err = b.Allow()
	require.Error(t, err)
	assert.NotContains(t, err.Error(), tenant)
	bh := hg.Get(tenant)
	require.True(t, bh.TryAcquire())
	err = bh.Acquire(context.Background())
	require.Error(t, err)
	assert.NotContains(t, err.Error(), tenant)
	bh.Release()

	rm := h.collect(t)
	for _, name := range []string{otelx.MetricBreakerState, otelx.MetricBreakerTransitions, otelx.MetricBulkheadAccepted, otelx.MetricBulkheadQueueWait} {
		m := findMetric(t, rm, name)
		raw, err := json.Marshal(m.Data)
		require.NoError(t, err)
		assert.NotContains(t, string(raw), tenant, name)
		assert.Contains(t, string(raw), "pro/#", name)
	}
	assert.Contains(t, ints(t, findMetric(t, rm, otelx.MetricBreakerState)), kv(otelx.AttrBreaker.String(b.Name())))
	logs := h.logs.String()
	assert.NotContains(t, logs, tenant)
	assert.Contains(t, logs, `"breaker":"`+b.Name()+`"`)
}
