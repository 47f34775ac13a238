package chaos_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	"github.com/tierguard/tierguard/internal/testbed/gemrest"
	"github.com/tierguard/tierguard/otelx"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// Recognisable secrets. The prompt carries one, the answers another, the
// API keys are secrets, the upstream error bodies echo all of them.
const (
	apiKey       = "AIzaSy-CHAOS-SECRET-KEY-0001"
	wrongKey     = "AIzaSy-CHAOS-SECRET-KEY-WRONG"
	promptSecret = "PROMPT-CHAOS-SECRET-diagnosis"
	outputSecret = "OUTPUT-CHAOS-SECRET-answer"
	bodySecret   = "BODY-CHAOS-SECRET-echo"
	cardNumber   = "4111111111111111"
)

var allSecrets = []string{apiKey, wrongKey, promptSecret, outputSecret, bodySecret, cardNumber, "CHAOS-SECRET"}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type amount struct {
	Amount int8   `json:"amount"`
	Note   string `json:"note"`
}

// TestNoSecretInAnyLibrarySignal pushes recognisable secrets through real
// gemrest tiers against the fake Gemini server, with otelx attached to
// every chain (SDK ManualReader, span recorder, slog JSON handler): in
// prompts, answers, API keys and error bodies, across every path (server
// errors echoing the request, a rejected answer holding a card number, a
// 429 retried, a 10 MiB body, a proxy's HTML page, a broken 200, an
// invalid key that fails closed, a waiter of a shared execution giving up).
// None may appear in an error the library made (the chain's *fallback.Error,
// verdicts, *validate.Error, gemrest's errors, breaker and bulkhead
// rejections), nor in any log, metric or span.
func TestNoSecretInAnyLibrarySignal(t *testing.T) {
	srv := fakegemini.New(fakegemini.WithAPIKeys(apiKey))
	defer srv.Close()
	echo := "echo of the request: " + promptSecret + " key=" + apiKey + " " + bodySecret
	srv.SetScript("gemini-2.5-pro", fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.Unavailable, P: fakegemini.Always, Params: fakegemini.Params{Message: echo}}}})
	srv.SetScript("gemini-2.5-flash", fakegemini.Script{Reply: func(r fakegemini.Request) string {
		return fmt.Sprintf(`{"amount": %s, "note": %q}`, cardNumber, outputSecret+" for "+r.Prompt)
	}})
	srv.SetScript("gemini-2.5-flash-lite", fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.RateLimited, P: fakegemini.Always,
		Params: fakegemini.Params{Message: echo, RetryDelay: 10 * time.Millisecond, RetryAfter: "0"}}}})
	srv.SetScript("gemini-2.0-flash", fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.HugeBody, P: fakegemini.Always,
		Params: fakegemini.Params{Message: echo, Status: 503}}}})
	srv.SetScript("gemini-2.0-flash-lite", fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.BadGatewayHTML, P: fakegemini.Always}}})
	srv.SetScript("gemini-1.5-flash", fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.MalformedJSON, P: fakegemini.Always,
		Params: fakegemini.Params{Text: `{"answer": "` + outputSecret + ` ` + cardNumber}}}})
	srv.SetScript("gemini-1.5-pro", fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.Stall, P: fakegemini.Always}}})

	client := func(model, key string) *gemrest.Client {
		c, err := gemrest.New(gemrest.Config{BaseURL: srv.URL(), APIKey: key, Model: model, HTTPClient: srv.Client()})
		require.NoError(t, err)
		return c
	}
	text := func(r gemrest.Response) string { return r.Text }
	br, err := breaker.New(breaker.Config{Name: "pro", ConsecutiveFailures: 1, Cooldown: time.Hour})
	require.NoError(t, err)
	bh, err := bulkhead.New(bulkhead.Config{Name: "pro", Max: 4})
	require.NoError(t, err)
	once := retry.Policy{MaxAttempts: 1}
	type chainT = fallback.Chain[gemrest.Request, gemrest.Response]
	newChain := func(cfg fallback.Config[gemrest.Request, gemrest.Response]) *chainT {
		c, err := fallback.New(cfg)
		require.NoError(t, err)
		return c
	}
	cached := gemrest.Response{Text: "cached " + outputSecret, FinishReason: "STOP"}
	everyPath := newChain(fallback.Config[gemrest.Request, gemrest.Response]{
		Stages: []fallback.Stage[gemrest.Request, gemrest.Response]{
			{Tier: client("gemini-2.5-pro", apiKey), Model: "gemini-2.5-pro", Provider: "gcp.gemini", Breaker: br, Bulkhead: bh, Retry: once},
			{Tier: client("gemini-2.5-flash", apiKey), Model: "gemini-2.5-flash", Retry: once,
				Validate: validate.Field(text, validate.Decode[amount](nil))},
			{Tier: client("gemini-2.5-flash-lite", apiKey), Model: "gemini-2.5-flash-lite", Retry: retry.Policy{MaxAttempts: 2, BaseDelay: time.Millisecond}},
			{Tier: client("gemini-2.0-flash", apiKey), Model: "gemini-2.0-flash", Retry: once},
			{Tier: client("gemini-2.0-flash-lite", apiKey), Model: "gemini-2.0-flash-lite", Retry: once},
			{Tier: client("gemini-1.5-flash", apiKey), Model: "gemini-1.5-flash", Retry: once, Validate: validate.Field(text, validate.JSON())},
			{Tier: client("gemini-1.5-pro", apiKey), Model: "gemini-1.5-pro", Retry: once, TryTimeout: 50 * time.Millisecond},
		},
		Total:      5 * time.Second,
		MinAttempt: 10 * time.Millisecond,
		Default:    func(context.Context, gemrest.Request) (gemrest.Response, bool) { return cached, true },
	})
	failing := newChain(fallback.Config[gemrest.Request, gemrest.Response]{
		Stages: []fallback.Stage[gemrest.Request, gemrest.Response]{
			{Tier: client("gemini-2.0-flash-lite", apiKey), Retry: once},
			{Tier: client("gemini-2.5-flash", apiKey), Retry: once, Validate: validate.Field(text, validate.Decode[amount](nil))},
		},
	})
	wrong := newChain(fallback.Config[gemrest.Request, gemrest.Response]{
		Operation: "chat",
		Stages:    []fallback.Stage[gemrest.Request, gemrest.Response]{{Tier: client("gemini-2.5-pro", wrongKey), Model: "gemini-2.5-pro"}},
	})
	shared := newChain(fallback.Config[gemrest.Request, gemrest.Response]{
		Stages: []fallback.Stage[gemrest.Request, gemrest.Response]{{Tier: client("gemini-1.5-pro", apiKey), Model: "gemini-1.5-pro"}},
		Key:    func(r gemrest.Request) string { return r.Prompt },
		Total:  200 * time.Millisecond,
	})

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	}()
	logs := &syncBuffer{}
	inst, err := otelx.New(otelx.Options{MeterProvider: mp, TracerProvider: tp,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	defer func() { require.NoError(t, inst.Close()) }()
	for _, c := range []*chainT{everyPath, failing, wrong, shared} {
		inst.Attach(c)
	}

	var made []string // what the library produced
	record := func(res fallback.Result[gemrest.Response], err error) {
		if err != nil {
			made = append(made, err.Error(), classify.Classify(err).String())
			var fe *fallback.Error
			if errors.As(err, &fe) {
				for _, tf := range fe.Tiers {
					made = append(made, tf.Verdict.String())
				}
			}
		}
		for _, a := range res.Attempts() {
			made = append(made, a.Verdict.String())
			if a.Err != nil {
				// Every tier here is the library's own gemrest client, and
				// the skips are the library's rejections.
				made = append(made, a.Err.Error())
			}
		}
	}
	ctx := fallback.WithRequest(context.Background(), fallback.Request{ID: "req-chaos"})
	prompt := gemrest.Request{Prompt: "summarise " + promptSecret, System: "system " + promptSecret}

	res, err := everyPath.Do(ctx, prompt)
	require.NoError(t, err)
	assert.Equal(t, fallback.SourceDefault, res.Source)
	assert.Contains(t, res.Value.Text, outputSecret, "the caller gets the answer; the signals do not")
	record(res, err)
	require.Len(t, res.Attempts(), 8, "every tier was tried, and the 429 retried once")
	var ve *validate.Error
	require.ErrorAs(t, res.Attempts()[1].Err, &ve, "the answer holding a card number was rejected")

	res, err = everyPath.Do(ctx, prompt) // the breaker is open now
	require.NoError(t, err)
	assert.ErrorIs(t, res.Attempts()[0].Err, breaker.ErrOpen)
	record(res, err)

	res, err = failing.Do(ctx, prompt)
	require.Error(t, err)
	record(res, err)

	res, err = wrong.Do(ctx, prompt)
	var fe *fallback.Error
	require.ErrorAs(t, err, &fe)
	assert.True(t, fe.FailedClosed)
	assert.Equal(t, classify.Auth, fe.Cause.Class)
	record(res, err)

	full := bulkhead.Stats{}
	for range 4 {
		require.NoError(t, bh.Acquire(context.Background()))
	}
	br.Reset()
	res, err = everyPath.Do(ctx, prompt)
	require.NoError(t, err)
	assert.ErrorIs(t, res.Attempts()[0].Err, bulkhead.ErrFull)
	record(res, err)
	for range 4 {
		bh.Release()
	}
	assert.Equal(t, full.InFlight, bh.Stats().InFlight)

	leaving, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	var wg sync.WaitGroup
	wg.Go(func() {
		res, err := shared.Do(ctx, prompt)
		assert.Error(t, err)
		record(res, err)
	})
	time.Sleep(5 * time.Millisecond)
	res, err = shared.Do(leaving, prompt)
	cancel()
	wg.Wait()
	require.Error(t, err)
	record(res, err)

	// Everything exported, rendered as text.
	var b strings.Builder
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	points := 0
	attrs := func(set attribute.Set) {
		for _, kv := range set.ToSlice() {
			fmt.Fprintf(&b, "%s=%s\n", kv.Key, kv.Value.AsString()+fmt.Sprint(kv.Value.AsInterface()))
		}
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			fmt.Fprintf(&b, "%s %s %s\n", m.Name, m.Description, m.Unit)
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					points++
					attrs(p.Attributes)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					points++
					attrs(p.Attributes)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					points++
					attrs(p.Attributes)
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					points++
					attrs(p.Attributes)
				}
			}
		}
	}
	ended := spans.Ended()
	for _, s := range ended {
		fmt.Fprintf(&b, "%s %v %q\n", s.Name(), s.Status().Code, s.Status().Description)
		attrs(attribute.NewSet(s.Attributes()...))
		for _, ev := range s.Events() {
			fmt.Fprintf(&b, "event %s\n", ev.Name)
			attrs(attribute.NewSet(ev.Attributes...))
		}
	}
	exported := b.String() + logs.String()
	library := strings.Join(made, "\n")

	// The signals are there, with the details a reader needs...
	assert.Greater(t, points, 10)
	assert.Greater(t, len(ended), 10)
	for _, want := range []string{`"class":"invalid_output"`, `"validation_rule":"decode"`, `"class":"rate_limited"`, `"class":"auth"`,
		`"http_status":503`, `"http_status":502`, `"request_id":"req-chaos"`} {
		assert.Contains(t, logs.String(), want)
	}
	assert.Contains(t, library, "got JSON number, want int8", "the rejection says what is wrong")
	assert.Contains(t, library, "circuit")
	assert.Contains(t, library, "bulkhead")
	// ...and no secret is.
	for _, s := range allSecrets {
		for what, text := range map[string]string{"an error the library made": library, "the exported signals": exported} {
			if i := strings.Index(text, s); i >= 0 {
				t.Errorf("%q in %s: ...%s...", s, what, text[max(i-300, 0):min(i+100, len(text))])
			}
		}
	}
}
