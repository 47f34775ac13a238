package anthropic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/anthropic"
	"github.com/tierguard/tierguard/fallback/chaos"
	"github.com/tierguard/tierguard/fallback/pool"
	"github.com/tierguard/tierguard/fallback/ratelimit"
	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/otelx"
	"github.com/tierguard/tierguard/retry"
)

// The pairs: the Claude tier with each of tierguard's features, over the
// real SDK and an httptest server.

// provider plays Anthropic for the pairs: it answers body (the docs'
// example message with cache counts by default), keeps its own tally of
// the tokens it billed, counts calls per API key, and gives the keys in
// limited the corpus 429 (retry-after 16).
type provider struct {
	mu      sync.Mutex
	limited map[string]bool
	calls   map[string]int
	billed  fallback.Usage // Anthropic's counts, as the provider bills them
	body    string
	delay   time.Duration
}

func (p *provider) handler(t *testing.T) http.HandlerFunc {
	rl := corpusCase(t, "anthropic-rate-limit-429-retry-after-16s-headers")
	return func(w http.ResponseWriter, r *http.Request) {
		// anthropic-sdk-go v2.17.0 sends the key as a bearer token.
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		p.mu.Lock()
		if p.calls == nil {
			p.calls = map[string]int{}
		}
		p.calls[key]++
		limited := p.limited[key]
		p.mu.Unlock()
		if limited {
			for k, vs := range rl.Header {
				w.Header()[k] = vs
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`))
			return
		}
		if p.delay > 0 {
			select {
			case <-time.After(p.delay):
			case <-r.Context().Done():
				return
			}
		}
		body := p.body
		if body == "" {
			body = cachedMessage
		}
		var m struct {
			Usage struct {
				In, Write, Read, Out int64
			}
		}
		var raw struct {
			Usage struct {
				InputTokens              int64 `json:"input_tokens"`
				CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
				CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
				OutputTokens             int64 `json:"output_tokens"`
			} `json:"usage"`
		}
		_ = json.Unmarshal([]byte(body), &raw)
		m.Usage.In, m.Usage.Write, m.Usage.Read, m.Usage.Out = raw.Usage.InputTokens, raw.Usage.CacheCreationInputTokens, raw.Usage.CacheReadInputTokens, raw.Usage.OutputTokens
		p.mu.Lock()
		p.billed.InputTokens += m.Usage.In
		p.billed.CacheWriteInputTokens += m.Usage.Write
		p.billed.CacheReadInputTokens += m.Usage.Read
		p.billed.OutputTokens += m.Usage.Out
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}
}

func (p *provider) count(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[key]
}

// keyed is a tier whose client sends key.
func keyed(t *testing.T, srv *server, name, model, key string) *anthropic.Tier[string] {
	t.Helper()
	c := anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey(key), option.WithHTTPClient(srv.Client()))
	return newTier(t, name, model, &c)
}

// A pool of two keys: Anthropic's 429 on one key moves the call to the
// other at once, every request is answered, and the keys never appear in
// an error or a verdict.
func TestPairPoolOfKeys(t *testing.T) {
	p := &provider{limited: map[string]bool{"sk-ant-key-A": true}}
	srv := newServer(t, p.handler(t))
	pl, err := pool.New(pool.Config[string, anthropic.Answer]{Name: "claude", Members: []pool.Member[string, anthropic.Answer]{
		{Key: "sk-ant-key-A", Tier: keyed(t, srv, "claude", "claude-sonnet-5-5", "sk-ant-key-A")},
		{Key: "sk-ant-key-B", Tier: keyed(t, srv, "claude", "claude-sonnet-5-5", "sk-ant-key-B")},
	}})
	require.NoError(t, err)
	c, err := fallback.New(fallback.Config[string, anthropic.Answer]{
		Stages:     []fallback.Stage[string, anthropic.Answer]{{Tier: pl, Model: "claude-sonnet-5-5", Retry: retry.Policy{MaxAttempts: 1}}},
		Classifier: anthropic.Classifier, Total: 10 * time.Second,
	})
	require.NoError(t, err)
	for range 4 {
		res, err := c.Do(context.Background(), "hi")
		require.NoError(t, err)
		assert.Equal(t, "Hi! My name is Claude.", res.Value.Text)
		for _, a := range res.Attempts() {
			noSecret(t, a.Verdict.String(), "sk-ant-key")
			if a.Err != nil {
				noSecret(t, a.Err.Error(), "sk-ant-key")
			}
		}
	}
	// One 429 is not a storm (fallback.CoolDown): key A stays in rotation,
	// and each of its 429s moves the call to key B at once, within the
	// chain's one attempt.
	assert.Positive(t, p.count("sk-ant-key-A"))
	assert.Equal(t, 4, p.count("sk-ant-key-B"))
	assert.EqualValues(t, p.count("sk-ant-key-A")+p.count("sk-ant-key-B"), srv.n.Load())
}

// A rate limiter on the tier: Anthropic's 429 (retry-after 16) throttles it
// for the wait, so the next request skips the tier without an upstream
// call.
func TestPairRateLimit(t *testing.T) {
	p := &provider{limited: map[string]bool{secretKey: true}}
	srv := newServer(t, p.handler(t))
	lim, err := ratelimit.New(ratelimit.Config{Name: "claude", Requests: 100})
	require.NoError(t, err)
	limited := ratelimit.Tier(fallback.ModelTier[string, anthropic.Answer](newTier(t, "claude", "claude-opus-5", srv.client(false))), ratelimit.TierConfig[string]{Limiter: lim})
	next := fallback.Tier("next", func(context.Context, string) (anthropic.Answer, error) { return anthropic.Answer{Text: "next"}, nil })
	c, err := fallback.New(fallback.Config[string, anthropic.Answer]{
		Stages: []fallback.Stage[string, anthropic.Answer]{
			{Tier: limited, Model: "claude-opus-5", Retry: retry.Policy{MaxAttempts: 1}}, {Tier: next},
		},
		Classifier: anthropic.Classifier, Total: 10 * time.Second,
	})
	require.NoError(t, err)
	res, err := c.Do(context.Background(), "hi")
	require.NoError(t, err)
	assert.Equal(t, "next", res.Tier)
	assert.Equal(t, 16*time.Second, res.Attempts()[0].Verdict.RetryAfter)
	res, err = c.Do(context.Background(), "hi")
	require.NoError(t, err)
	assert.Equal(t, fallback.SkipRateLimited, res.Attempts()[0].Skip)
	assert.EqualValues(t, 1, srv.n.Load(), "the throttled tier is not called")
	assert.EqualValues(t, 1, lim.Stats().Throttles)
}

// Hedging: a slow Claude call is raced by the next tier after the hedge
// delay; the first answer wins and the slow call is cancelled (its
// connection closed), one request on each server.
func TestPairHedge(t *testing.T) {
	slow := &provider{delay: time.Minute}
	ssrv := newServer(t, slow.handler(t))
	fast := &provider{}
	fsrv := newServer(t, fast.handler(t))
	first := newTier(t, "slow", "claude-opus-5", ssrv.client(false)).Stage()
	first.Hedge = fallback.Hedge{Delay: 20 * time.Millisecond, MaxExtra: 1}
	first.Retry = retry.Policy{MaxAttempts: 1}
	c, err := fallback.New(fallback.Config[string, anthropic.Answer]{
		Stages:     []fallback.Stage[string, anthropic.Answer]{first, newTier(t, "fast", "claude-sonnet-5-5", fsrv.client(false)).Stage()},
		Classifier: anthropic.Classifier, Total: 30 * time.Second,
	})
	require.NoError(t, err)
	res, err := c.Do(context.Background(), "hi")
	require.NoError(t, err)
	assert.Equal(t, "fast", res.Tier)
	assert.EqualValues(t, 1, ssrv.n.Load())
	assert.EqualValues(t, 1, fsrv.n.Load())
}

// Chaos below the SDK: Anthropic's real responses injected by
// chaos.Transport reach the SDK as the real bytes, and the tier's verdict
// is the one the raw response gets without an SDK.
func TestPairChaosUnderTheSDK(t *testing.T) {
	srv := newServer(t, jsonReply(200, cachedMessage))
	var sw chaos.Switch
	client := anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey(secretKey),
		option.WithHTTPClient(&http.Client{Transport: chaos.Transport(srv.Client().Transport, &sw, "claude")}))
	tier := newTier(t, "claude", "claude-opus-5", &client)
	for _, name := range []string{"anthropic-overloaded-529-sdk-typescript", "anthropic-not-found-model-404-claude-code", "anthropic-rate-limit-429-reset-headers-no-retry-after", "anthropic-credit-balance-too-low-400"} {
		t.Run(name, func(t *testing.T) {
			c := corpusCase(t, name)
			r, err := chaos.NewResponse(strings.ReplaceAll(strings.TrimPrefix(name, "anthropic-"), "-", "_"), c.Status, c.Header, c.Body)
			require.NoError(t, err)
			require.NoError(t, sw.Start(chaos.Drill{For: time.Hour, Rules: []chaos.Rule{{Tier: "claude", Rate: 1, Fault: chaos.Fail(r)}}}))
			defer sw.Stop()
			_, err = tier.Call(context.Background(), "hi")
			var ae *sdk.Error
			require.True(t, errors.As(err, &ae), "the SDK's own error: %v", err)
			raw := classify.Classify(classify.ReadResponse(context.Background(),
				&http.Response{StatusCode: c.Status, Header: c.Header.Clone(), Body: io.NopCloser(bytes.NewReader(c.Body))}))
			got := anthropic.Classifier.Classify(err)
			assert.Equal(t, raw.Class, got.Class)
			assert.Equal(t, raw.Model, got.Model)
			assert.Equal(t, raw.RetryAfter, got.RetryAfter)
			assert.Equal(t, c.Class, got.Class.String())
		})
	}
	assert.Zero(t, srv.n.Load(), "every call was answered by the drill")
}

// mapCache is a fallback.Cache over a map.
type mapCache struct {
	mu sync.Mutex
	m  map[string]anthropic.Answer
}

func (c *mapCache) Get(_ context.Context, in string) (anthropic.Answer, string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.m[in]
	return a, "exact", ok
}

func (c *mapCache) Put(_ context.Context, in string, a anthropic.Answer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[in] = anthropic.Answer{Text: a.Text}
}

// The cache learns Claude's validated answer, and answers with it when
// Claude is overloaded.
func TestPairCache(t *testing.T) {
	var overloaded atomic.Bool
	ok := jsonReply(200, cachedMessage)
	down := jsonReply(529, string(corpusCase(t, "anthropic-overloaded-529-sdk-typescript").Body))
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if overloaded.Load() {
			down(w, r)
			return
		}
		ok(w, r)
	})
	st := newTier(t, "claude", "claude-opus-5", srv.client(false)).Stage()
	st.Retry = retry.Policy{MaxAttempts: 1}
	c, err := fallback.New(fallback.Config[string, anthropic.Answer]{Stages: []fallback.Stage[string, anthropic.Answer]{st},
		Classifier: anthropic.Classifier, Total: 10 * time.Second, Cache: &mapCache{m: map[string]anthropic.Answer{}}})
	require.NoError(t, err)
	res, err := c.Do(context.Background(), "hi")
	require.NoError(t, err)
	assert.Equal(t, fallback.SourceTier, res.Source)
	overloaded.Store(true)
	res, err = c.Do(context.Background(), "hi")
	require.NoError(t, err)
	assert.Equal(t, fallback.SourceCache, res.Source)
	assert.Equal(t, "Hi! My name is Claude.", res.Value.Text)
	assert.EqualValues(t, 2, srv.n.Load())
}

// The ledger bills what the provider billed, exactly: the fake provider's
// own tally of input, cache-write, cache-read and output tokens, priced by
// the example table's Claude rates, equals the ledger's cost — a refused
// answer (billed, not an answer) included.
func TestPairSpendLedger(t *testing.T) {
	data, err := os.ReadFile("../spend/testdata/example-prices.json")
	require.NoError(t, err)
	prices, err := spend.ParsePrices(data)
	require.NoError(t, err)
	l, err := spend.New(spend.Config{Prices: prices})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })

	refused := `{"id":"msg_r","type":"message","role":"assistant","model":"claude-sonnet-5-5","content":[{"type":"text","text":"Hello.."}],"stop_reason":"refusal","usage":{"input_tokens":40,"cache_creation_input_tokens":0,"cache_read_input_tokens":3000,"output_tokens":6}}`
	p := &provider{}
	srv := newServer(t, p.handler(t))
	st := keyed(t, srv, "claude", "claude-sonnet-5-5", secretKey).Stage()
	st.Retry = retry.Policy{MaxAttempts: 1}
	c, err := fallback.New(fallback.Config[string, anthropic.Answer]{Stages: []fallback.Stage[string, anthropic.Answer]{st},
		Classifier: anthropic.Classifier, Total: 10 * time.Second})
	require.NoError(t, err)
	_, err = l.Attach(c)
	require.NoError(t, err)
	for i := range 5 {
		p.mu.Lock()
		p.body = map[bool]string{true: refused, false: cachedMessage}[i == 2]
		p.mu.Unlock()
		tk := l.Begin(context.Background(), spend.Request{Tenant: "acme"})
		_, err := c.Do(tk, "hi")
		tk.End()
		if i == 2 {
			require.ErrorIs(t, err, anthropic.ErrRefusal)
		} else {
			require.NoError(t, err)
		}
	}
	p.mu.Lock()
	billed := p.billed
	p.mu.Unlock()
	own := fallback.Usage{
		InputTokens:           billed.InputTokens + billed.CacheWriteInputTokens + billed.CacheReadInputTokens,
		CacheWriteInputTokens: billed.CacheWriteInputTokens, CacheReadInputTokens: billed.CacheReadInputTokens,
		OutputTokens: billed.OutputTokens,
	}
	// Priced call by call (the table prices each call on its own).
	perCall := func(u fallback.Usage) spend.Amount {
		c, ok := prices.Cost("claude-sonnet-5-5", "", u)
		require.True(t, ok)
		return c
	}
	normal := fallback.Usage{InputTokens: 3053, CacheWriteInputTokens: 1043, CacheReadInputTokens: 2000, OutputTokens: 25, ReasoningOutputTokens: 7}
	refusal := fallback.Usage{InputTokens: 3040, CacheReadInputTokens: 3000, OutputTokens: 6}
	tot := l.Totals("acme")
	assert.Equal(t, 4*perCall(normal)+perCall(refusal), tot.Cost)
	assert.Equal(t, own.InputTokens, tot.Usage.InputTokens, "the provider's own count")
	assert.Equal(t, own.CacheWriteInputTokens, tot.Usage.CacheWriteInputTokens)
	assert.Equal(t, own.CacheReadInputTokens, tot.Usage.CacheReadInputTokens)
	assert.Equal(t, own.OutputTokens, tot.Usage.OutputTokens)
	assert.Equal(t, int64(5), tot.Calls)
	// 2 in, 2.50 write, 0.10 read, 10 out per million: 4 answers of
	// 10 fresh + 1043 written + 2000 read in and 25 out (0.0030775 each),
	// and a refusal of 40 fresh + 3000 read in and 6 out (0.00044).
	assert.Equal(t, amt(t, "0.01275"), tot.Cost)
}

// amt parses a decimal amount.
func amt(t *testing.T, s string) spend.Amount {
	t.Helper()
	a, err := spend.ParseAmount(s)
	require.NoError(t, err)
	return a
}

// AbandonAfter: the tier honours its context — a Claude call that hangs
// returns when the attempt's deadline passes, its connection closed, so
// the chain never has to abandon it.
func TestPairAbandonAfter(t *testing.T) {
	var closed atomic.Bool
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		closed.Store(true)
	})
	st := newTier(t, "claude", "claude-opus-5", srv.client(false)).Stage()
	st.Retry = retry.Policy{MaxAttempts: 1}
	c, err := fallback.New(fallback.Config[string, anthropic.Answer]{Stages: []fallback.Stage[string, anthropic.Answer]{st},
		Classifier: anthropic.Classifier, Total: 300 * time.Millisecond, AbandonAfter: 100 * time.Millisecond})
	require.NoError(t, err)
	_, err = c.Do(context.Background(), "hi")
	require.Error(t, err)
	assert.Equal(t, classify.DeadlineExhausted, classify.Classify(err).Class)
	assert.Zero(t, c.Stats().Abandoned, "the call returned on its own")
	require.Eventually(t, closed.Load, 5*time.Second, 5*time.Millisecond, "the server saw the request end")
}

// otelx: the chain's spans, metrics and logs name the provider and carry
// the usage kinds (cache writes and reads), and neither they nor the
// SDK's own spans — asked for content by the environment — hold the key,
// the prompt or the answer.
func TestPairOtelx(t *testing.T) {
	t.Setenv("ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE", "content")
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	var logs bytes.Buffer
	inst, err := otelx.New(otelx.Options{TracerProvider: tp, MeterProvider: mp, Logger: newLogger(&logs)})
	require.NoError(t, err)

	var answered atomic.Bool
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if answered.CompareAndSwap(false, true) {
			jsonReply(200, cachedMessage)(w, r)
			return
		}
		c := corpusCase(t, "anthropic-credit-balance-too-low-400")
		jsonReply(c.Status, string(c.Body))(w, r)
	})
	client := anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey(secretKey), option.WithHTTPClient(srv.Client()), option.WithTracerProvider(tp))
	st := newTier(t, "claude", "claude-opus-5", &client).Stage()
	st.Retry = retry.Policy{MaxAttempts: 1}
	c, err := fallback.New(fallback.Config[string, anthropic.Answer]{Stages: []fallback.Stage[string, anthropic.Answer]{st},
		Classifier: anthropic.Classifier, Total: 10 * time.Second})
	require.NoError(t, err)
	inst.Attach(c)
	_, err = c.Do(context.Background(), "PROMPT-SECRET one")
	require.NoError(t, err)
	_, err = c.Do(context.Background(), "PROMPT-SECRET two")
	require.Error(t, err)

	var all strings.Builder
	providers := map[string]bool{}
	sdkSpans := 0
	for _, s := range spans.Ended() {
		if strings.Contains(s.InstrumentationScope().Name, "anthropic") {
			sdkSpans++
		}
		all.WriteString(s.Name() + " " + s.Status().Description + "\n")
		for _, kv := range s.Attributes() {
			all.WriteString(string(kv.Key) + "=" + kv.Value.String() + "\n")
			if kv.Key == "gen_ai.provider.name" {
				providers[kv.Value.AsString()] = true
			}
		}
		for _, e := range s.Events() {
			all.WriteString(e.Name + "\n")
			for _, kv := range e.Attributes {
				all.WriteString(string(kv.Key) + "=" + kv.Value.String() + "\n")
			}
		}
	}
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	sums := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range s.DataPoints {
					sums[m.Name] += dp.Value
					all.WriteString(m.Name + " " + attrs(dp.Attributes) + "\n")
				}
			}
		}
	}
	all.WriteString(logs.String())
	noSecret(t, all.String(), "PROMPT", "Hi! My name is Claude", "credit balance", "Plans & Billing", "req_011")
	assert.True(t, providers["anthropic"], "gen_ai.provider.name: %v", providers)
	assert.Equal(t, 2, sdkSpans, "the SDK's own span of each call was recorded, and checked")
	assert.EqualValues(t, 1043, sums["gen_ai.client.inference.usage.cache_write.input_tokens"], "%v", sums)
	assert.Contains(t, all.String(), "quota_exhausted", "the failure's class is exported")
}

func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(&lockedWriter{w: w}, nil))
}

// lockedWriter serialises a logger's writes.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func attrs(s attribute.Set) string {
	var b strings.Builder
	for _, kv := range s.ToSlice() {
		b.WriteString(string(kv.Key) + "=" + kv.Value.String() + " ")
	}
	return b.String()
}
