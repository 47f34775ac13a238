package otelx_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/pool"
	"github.com/tierguard/tierguard/fallback/ratelimit"
	"github.com/tierguard/tierguard/otelx"
	"github.com/tierguard/tierguard/retry"
)

var (
	opAttr     = otelx.AttrOperation.String("generate_content")
	gemini     = otelx.AttrProvider.String("gcp.gemini")
	proModel   = otelx.AttrModel.String("gemini-2.5-pro")
	flashModel = otelx.AttrModel.String("gemini-2.5-flash")
	proTier    = otelx.AttrTier.String("pro")
	flashTier  = otelx.AttrTier.String("flash")
)

var (
	wantDurationBuckets  = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	wantTokenBuckets     = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	wantQueueWaitBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
)

// twoTiers is the chain most tests use: pro, then flash.
func twoTiers(pro, flash fallback.Stage[string, string]) fallback.Config[string, string] {
	pro.Model, pro.Provider = "gemini-2.5-pro", "gcp.gemini"
	flash.Model, flash.Provider = "gemini-2.5-flash", "gcp.gemini"
	if pro.Retry.MaxAttempts == 0 {
		pro.Retry.MaxAttempts = 1
	}
	if flash.Retry.MaxAttempts == 0 {
		flash.Retry.MaxAttempts = 1
	}
	return fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{pro, flash}}
}

// The primary keeps failing with 503: two attempts (one retry), then the
// fallback tier answers. Every signal tells the story.
func TestPrimaryDownFallsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		pro := newTier("pro", step{err: http503(), take: 50 * time.Millisecond})
		flash := newTier("flash", step{take: 200 * time.Millisecond, fn: func(ctx context.Context) (string, error) {
			// The tier's own HTTP span nests under the attempt's.
			_, sp := h.tp.Tracer("http").Start(ctx, "POST")
			sp.End()
			return "answer", nil
		}})
		c := newChain(t, twoTiers(
			fallback.Stage[string, string]{Tier: pro, Retry: retry.Policy{MaxAttempts: 2, BaseDelay: 100 * time.Millisecond, Jitter: retry.NoJitter}},
			fallback.Stage[string, string]{Tier: flash},
		))
		instrument(t, c, h.options())

		ctx, cancel := context.WithTimeout(fallback.WithRequest(context.Background(), fallback.Request{ID: "req-1"}), 10*time.Second)
		defer cancel()
		res, err := c.Do(ctx, "question")
		require.NoError(t, err)
		require.Equal(t, "flash", res.Tier)
		require.True(t, res.Degraded)

		rm := h.collect(t)

		// gen_ai.client.inference.duration: one point per tier and outcome.
		m := findMetric(t, rm, otelx.MetricInferenceDuration)
		assert.Equal(t, "s", m.Unit)
		d := hist(t, m)
		proFailed := kv(opAttr, gemini, proModel, proTier, otelx.AttrErrorType.String("transient"))
		flashOK := kv(opAttr, gemini, flashModel, flashTier)
		require.Equal(t, []string{proFailed, flashOK}, keys(d))
		assert.Equal(t, uint64(2), d[proFailed].Count)
		assert.InDelta(t, 0.1, d[proFailed].Sum, 1e-9)
		assert.Equal(t, wantDurationBuckets, d[proFailed].Bounds)
		assert.Equal(t, uint64(1), d[flashOK].Count)
		assert.InDelta(t, 0.2, d[flashOK].Sum, 1e-9)

		// The usage counters, from what the tiers reported (fallback.Report):
		// the failed attempts got no response, so they report none; by
		// modality unknown.
		unknown := otelx.AttrTokenModality.String("unknown")
		assert.Equal(t, map[string]int64{
			kv(opAttr, gemini, flashModel, flashTier, unknown): 10,
		}, ints(t, findMetric(t, rm, otelx.MetricUsageInput)))
		assert.Equal(t, map[string]int64{
			kv(opAttr, gemini, flashModel, flashTier, unknown): int64(len("answer")),
		}, ints(t, findMetric(t, rm, otelx.MetricUsageOutput)))
		for _, name := range []string{otelx.MetricUsageCacheRead, otelx.MetricUsageCacheWrite, otelx.MetricUsageReasoning} {
			m := findMetric(t, rm, name)
			assert.Equal(t, "{token}", m.Unit)
			assert.Len(t, ints(t, m), 1, name)
		}
		// The per-operation histograms, with error.type on the failures.
		m = findMetric(t, rm, otelx.MetricOperationInput)
		assert.Equal(t, "{token}", m.Unit)
		tok, isInt := m.Data.(metricdata.Histogram[int64])
		require.True(t, isInt)
		got := map[string][2]int64{}
		for _, p := range tok.DataPoints {
			got[key(p.Attributes)] = [2]int64{int64(p.Count), p.Sum}
			assert.Equal(t, wantTokenBuckets, p.Bounds)
		}
		assert.Equal(t, map[string][2]int64{flashOK: {1, 10}}, got)
		_, found := lookupMetric(rm, otelx.MetricPrevDuration)
		assert.False(t, found, "the previous names only with Options.PreviousNames")
		_, found = lookupMetric(rm, otelx.MetricPrevTokenUsage)
		assert.False(t, found)

		// Attempts by tier and class.
		m = findMetric(t, rm, otelx.MetricAttempts)
		assert.Equal(t, "{attempt}", m.Unit)
		assert.Equal(t, map[string]int64{
			kv(opAttr, proTier, otelx.AttrClass.String("transient")): 2,
			kv(opAttr, flashTier, otelx.AttrClass.String("ok")):      1,
		}, ints(t, m))

		// The retry wait chosen (no jitter: exactly the base delay).
		w := hist(t, findMetric(t, rm, otelx.MetricRetryWait))
		rw := w[kv(opAttr, proTier, otelx.AttrClass.String("transient"))]
		assert.Equal(t, uint64(1), rw.Count)
		assert.InDelta(t, 0.1, rw.Sum, 1e-9)

		// The request: answered by flash, degraded.
		answered := kv(opAttr, otelx.AttrSource.String("tier"), flashTier, otelx.AttrDegraded.Bool(true))
		m = findMetric(t, rm, otelx.MetricRequests)
		assert.Equal(t, "{request}", m.Unit)
		assert.Equal(t, map[string]int64{answered: 1}, nonZero(ints(t, m)))
		zeros := []string{
			kv(opAttr, otelx.AttrSource.String("cache"), otelx.AttrDegraded.Bool(true)),
			kv(opAttr, otelx.AttrSource.String("default"), otelx.AttrDegraded.Bool(true)),
			kv(opAttr, otelx.AttrSource.String("tier"), proTier, otelx.AttrDegraded.Bool(false)),
			answered,
		}
		for _, c := range classify.Classes() {
			if c == classify.OK {
				continue // a failed request has a failure's class
			}
			zeros = append(zeros, kv(opAttr, otelx.AttrSource.String("error"), otelx.AttrDegraded.Bool(false), otelx.AttrErrorType.String(c.String())))
		}
		assert.ElementsMatch(t, zeros, keys(ints(t, m)), "every outcome a chain can have is counted from 0, and no other")
		assert.NotContains(t, keys(ints(t, m)), kv(opAttr, otelx.AttrSource.String("error"), otelx.AttrDegraded.Bool(false), otelx.AttrErrorType.String("ok")),
			"no impossible series: a request that failed is never of class ok")
		rd := hist(t, findMetric(t, rm, otelx.MetricRequestDuration))[answered]
		assert.InDelta(t, 0.4, rd.Sum, 1e-9) // 50 + 100 wait + 50 + 200 ms
		left := hist(t, findMetric(t, rm, otelx.MetricDeadlineRemaining))[answered]
		assert.InDelta(t, 9.6, left.Sum, 1e-9)
		assert.Equal(t, map[string]int64{kv(opAttr): 0}, ints(t, findMetric(t, rm, otelx.MetricActiveRequests)))

		// Spans: one internal request span, three client inference spans
		// under it, the HTTP span under the flash attempt.
		var root trace.SpanContext
		var attempts []string
		for _, s := range h.spans.Ended() {
			if !s.Parent().IsValid() {
				root = s.SpanContext()
			}
		}
		require.True(t, root.IsValid())
		for _, s := range h.spans.Ended() {
			switch {
			case !s.Parent().IsValid():
				assert.Equal(t, "tierguard generate_content", s.Name())
				assert.Equal(t, trace.SpanKindInternal, s.SpanKind())
				assert.Equal(t, codes.Unset, s.Status().Code, "the caller got an answer")
				a := spanAttrs(s)
				assert.Equal(t, "generate_content", a[otelx.AttrTGOperation].AsString())
				for _, k := range []attribute.Key{otelx.AttrModel, otelx.AttrOperation, otelx.AttrProvider} {
					assert.NotContains(t, a, k, "the request does not claim the first tier's model")
				}
				assert.Equal(t, "req-1", a[otelx.KeyRequestID].AsString())
				assert.True(t, a[otelx.AttrDegraded].AsBool())
				assert.Equal(t, "tier", a[otelx.AttrSource].AsString())
				assert.Equal(t, "flash", a[otelx.AttrTier].AsString())
				assert.Equal(t, int64(3), a[otelx.AttrUpstreamCalls].AsInt64())
				require.Len(t, s.Events(), 1)
				assert.Equal(t, "tierguard.fallback", s.Events()[0].Name)
			case s.Parent().SpanID() == root.SpanID():
				a := spanAttrs(s)
				assert.Equal(t, trace.SpanKindClient, s.SpanKind())
				attempts = append(attempts, s.Name()+" #"+a[otelx.AttrAttempt].String()+" "+a[otelx.AttrClass].AsString())
				assert.Equal(t, "generate_content", a[otelx.AttrOperation].AsString())
				assert.Equal(t, "gcp.gemini", a[otelx.AttrProvider].AsString())
				assert.NotContains(t, a, otelx.AttrRequestStream, "set on streams only")
				if a[otelx.AttrTier].AsString() == "pro" {
					assert.Equal(t, "transient", a[otelx.AttrErrorType].AsString())
					assert.Equal(t, int64(503), a[otelx.AttrHTTPStatus].AsInt64())
					assert.Equal(t, "UNAVAILABLE", a[otelx.AttrStatus].AsString())
					assert.Equal(t, []string{"error"}, a[otelx.AttrFinishReasons].AsStringSlice())
					assert.Equal(t, codes.Error, s.Status().Code, "the attempt failed, though the chain absorbed it")
					assert.Equal(t, "transient", s.Status().Description)
				} else {
					assert.Equal(t, int64(10), a[otelx.AttrInputTokens].AsInt64())
					assert.Equal(t, int64(6), a[otelx.AttrOutputTokens].AsInt64())
					assert.Equal(t, codes.Unset, s.Status().Code)
					assert.NotContains(t, a, otelx.AttrErrorType)
				}
			default:
				assert.Equal(t, "POST", s.Name())
			}
		}
		assert.ElementsMatch(t, []string{
			"generate_content gemini-2.5-pro #1 transient",
			"generate_content gemini-2.5-pro #2 transient",
			"generate_content gemini-2.5-flash #1 ok",
		}, attempts)
		for _, s := range h.spansNamed("POST") {
			var parent string
			for _, p := range h.spansNamed("generate_content gemini-2.5-flash") {
				if p.SpanContext().SpanID() == s.Parent().SpanID() {
					parent = p.Name()
				}
			}
			assert.Equal(t, "generate_content gemini-2.5-flash", parent, "the tier's span nests under its attempt")
		}

		// Logs: the retry at Info, the fallback and the degraded answer at
		// Warn, the success at Debug.
		retrying := h.logsWith(t, "attempt failed, retrying")
		require.Len(t, retrying, 1)
		l := retrying[0]
		assert.Equal(t, "INFO", l["level"])
		assert.Equal(t, "req-1", l["request_id"])
		assert.Equal(t, "pro", l["tier"])
		assert.Equal(t, 0.0, l["tier_index"])
		assert.Equal(t, 1.0, l["attempt"])
		assert.Equal(t, "transient", l["class"])
		assert.Equal(t, 503.0, l["http_status"])
		assert.Equal(t, "UNAVAILABLE", l["status"])
		assert.Equal(t, true, l["retryable"])
		assert.Equal(t, float64(100*time.Millisecond), l["retry_wait"])
		assert.Equal(t, float64(50*time.Millisecond), l["latency"])
		assert.Equal(t, float64(9950*time.Millisecond), l["deadline_remaining"])
		assert.Equal(t, root.TraceID().String(), l["trace_id"])
		assert.NotEqual(t, root.SpanID().String(), l["span_id"], "an attempt's event names the attempt's span")

		fellBack := h.logsWith(t, "tier failed, falling back")
		require.Len(t, fellBack, 1)
		assert.Equal(t, "WARN", fellBack[0]["level"])
		assert.Equal(t, 2.0, fellBack[0]["attempt"])
		assert.Equal(t, "attempts exhausted", fellBack[0]["stop"])
		assert.Equal(t, "next_tier", fellBack[0]["route"])

		succeeded := h.logsWith(t, "attempt succeeded")
		require.Len(t, succeeded, 1)
		assert.Equal(t, "DEBUG", succeeded[0]["level"])
		assert.Equal(t, "flash", succeeded[0]["tier"])
		assert.Equal(t, 6.0, succeeded[0]["output_tokens"])

		degraded := h.logsWith(t, "request answered degraded")
		require.Len(t, degraded, 1)
		l = degraded[0]
		assert.Equal(t, "WARN", l["level"])
		assert.Equal(t, "tier", l["source"])
		assert.Equal(t, "flash", l["tier"])
		assert.Equal(t, 1.0, l["tier_index"])
		assert.Equal(t, true, l["degraded"])
		assert.Equal(t, 3.0, l["upstream_calls"])
		assert.Equal(t, float64(400*time.Millisecond), l["latency"])
		assert.Equal(t, float64(9600*time.Millisecond), l["deadline_remaining"])
	})
}

// The primary's breaker opens after two failures, lets a probe through
// after the cooldown, and closes when it succeeds: the gauge follows, the
// transitions are counted and logged.
func TestBreakerOpensHalfOpensCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		br := newBreaker(t, breaker.Config{Name: "pro", ConsecutiveFailures: 2, Cooldown: 30 * time.Second})
		pro := newTier("pro", ok("pro answer"), step{err: http503()}, step{err: http503()})
		flash := newTier("flash", ok("flash answer"))
		c := newChain(t, twoTiers(
			fallback.Stage[string, string]{Tier: pro, Breaker: br},
			fallback.Stage[string, string]{Tier: flash},
		))
		instrument(t, c, h.options())
		state := func() int64 {
			t.Helper()
			m := findMetric(t, h.collect(t), otelx.MetricBreakerState)
			assert.Equal(t, "{state}", m.Unit)
			return ints(t, m)[kv(otelx.AttrBreaker.String("pro"))]
		}
		do := func() string {
			t.Helper()
			res, err := c.Do(context.Background(), "q")
			require.NoError(t, err)
			return res.Tier
		}

		require.Equal(t, int64(0), state())
		require.Equal(t, "flash", do())
		require.Equal(t, "flash", do())
		require.Equal(t, int64(2), state(), "open")

		require.Equal(t, "flash", do(), "skipped while open")
		rm := h.collect(t)
		assert.Equal(t, map[string]int64{kv(opAttr, proTier, otelx.AttrSkipReason.String("open")): 1},
			ints(t, findMetric(t, rm, otelx.MetricSkips)))

		time.Sleep(30 * time.Second)
		synctest.Wait()
		require.Equal(t, int64(1), state(), "half-open")

		require.Equal(t, "pro", do(), "the probe succeeds")
		require.Equal(t, int64(0), state(), "closed")

		rm = h.collect(t)
		m := findMetric(t, rm, otelx.MetricBreakerTransitions)
		assert.Equal(t, "{transition}", m.Unit)
		tr := func(from, to string) string {
			return kv(otelx.AttrBreaker.String("pro"), otelx.AttrBreakerFrom.String(from), otelx.AttrBreakerTo.String(to))
		}
		assert.Equal(t, map[string]int64{
			tr("closed", "open"):      1,
			tr("open", "half_open"):   1,
			tr("half_open", "closed"): 1,
		}, nonZero(ints(t, m)))
		assert.Len(t, ints(t, m), 6, "every pair of states, from 0")
		assert.Contains(t, ints(t, m), tr("half_open", "open"))
		assert.Equal(t, map[string]int64{
			kv(opAttr, otelx.AttrSource.String("tier"), proTier, otelx.AttrDegraded.Bool(false)):  1,
			kv(opAttr, otelx.AttrSource.String("tier"), flashTier, otelx.AttrDegraded.Bool(true)): 3,
		}, nonZero(ints(t, findMetric(t, rm, otelx.MetricRequests))))

		opened := h.logsWith(t, "circuit open")
		require.Len(t, opened, 1)
		assert.Equal(t, "WARN", opened[0]["level"])
		assert.Equal(t, "pro", opened[0]["breaker"])
		assert.Equal(t, "consecutive failures", opened[0]["reason"])
		assert.Equal(t, float64(30000*time.Millisecond), opened[0]["cooldown"])
		require.Len(t, h.logsWith(t, "circuit half_open"), 1)
		require.Len(t, h.logsWith(t, "circuit closed"), 1)

		skipped := h.logsWith(t, "tier skipped")
		require.Len(t, skipped, 1)
		assert.Equal(t, "INFO", skipped[0]["level"])
		assert.Equal(t, "open", skipped[0]["skip"])
		assert.Equal(t, "open", skipped[0]["circuit"])
		assert.Equal(t, "rejected", skipped[0]["class"])

		// The probe's attempt span says the breaker was half-open.
		var probe map[attribute.Key]attribute.Value
		for _, s := range h.spansNamed("generate_content gemini-2.5-pro") {
			if a := spanAttrs(s); a[otelx.AttrClass].AsString() == "ok" && s.Parent().IsValid() {
				probe = a
			}
		}
		require.NotNil(t, probe)
		assert.Equal(t, "half_open", probe[otelx.AttrBreakerState].AsString())
	})
}

// A full bulkhead skips its tier: the skip, the rejection and the figures
// behind the rejection rate are exported.
func TestBulkheadFull(t *testing.T) {
	h := newHarness(t)
	bh := newBulkhead(t, bulkhead.Config{Name: "pro", Max: 1})
	require.True(t, bh.TryAcquire())
	defer bh.Release()
	c := newChain(t, twoTiers(
		fallback.Stage[string, string]{Tier: newTier("pro", ok("pro")), Bulkhead: bh},
		fallback.Stage[string, string]{Tier: newTier("flash", ok("flash"))},
	))
	instrument(t, c, h.options())
	res, err := c.Do(context.Background(), "q")
	require.NoError(t, err)
	require.Equal(t, "flash", res.Tier)

	rm := h.collect(t)
	assert.Equal(t, map[string]int64{kv(opAttr, proTier, otelx.AttrSkipReason.String("full")): 1},
		ints(t, findMetric(t, rm, otelx.MetricSkips)))
	name := kv(otelx.AttrBulkhead.String("pro"))
	for metric, want := range map[string]int64{
		otelx.MetricBulkheadAccepted: 1, // the slot held by the test
		otelx.MetricBulkheadRejected: 1,
		otelx.MetricBulkheadInFlight: 1,
		otelx.MetricBulkheadQueued:   0,
		otelx.MetricBulkheadLimit:    1,
	} {
		m := findMetric(t, rm, metric)
		assert.Equal(t, "{call}", m.Unit, metric)
		assert.Equal(t, map[string]int64{name: want}, ints(t, m), metric)
	}
	accepted := findMetric(t, rm, otelx.MetricBulkheadAccepted).Data.(metricdata.Sum[int64])
	assert.True(t, accepted.IsMonotonic)

	assert.Empty(t, h.spansNamed("generate_content gemini-2.5-pro"), "pro was never called")
	root := h.spansNamed("tierguard generate_content")
	require.Len(t, root, 1)
	require.Len(t, root[0].Events(), 1)
	ev := root[0].Events()[0]
	assert.Equal(t, "tierguard.skip", ev.Name)
	assert.Contains(t, ev.Attributes, otelx.AttrSkipReason.String("full"))

	skipped := h.logsWith(t, "tier skipped")
	require.Len(t, skipped, 1)
	assert.Equal(t, "full", skipped[0]["skip"])
	assert.NotContains(t, skipped[0], "queue_wait", "a fail-fast bulkhead does not queue")
}

// A bulkhead with a bounded wait: the queue wait is recorded exactly by the
// bulkhead, and the request's attempt and log carry it too.
func TestBulkheadQueueWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		bh := newBulkhead(t, bulkhead.Config{Name: "pro", Max: 1, MaxWait: 100 * time.Millisecond, Queue: 4})
		c := newChain(t, twoTiers(
			fallback.Stage[string, string]{Tier: newTier("pro", ok("pro")), Bulkhead: bh},
			fallback.Stage[string, string]{Tier: newTier("flash", ok("flash"))},
		))
		instrument(t, c, h.options())

		// A slot frees after 40ms: the request waits for it.
		require.True(t, bh.TryAcquire())
		done := make(chan fallback.Result[string])
		go func() {
			res, err := c.Do(context.Background(), "q")
			assert.NoError(t, err)
			done <- res
		}()
		time.Sleep(40 * time.Millisecond)
		bh.Release()
		require.Equal(t, "pro", (<-done).Tier)

		// No slot frees: the wait ends after 100ms and flash answers.
		require.True(t, bh.TryAcquire())
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		require.Equal(t, "flash", res.Tier)
		bh.Release()

		m := findMetric(t, h.collect(t), otelx.MetricBulkheadQueueWait)
		assert.Equal(t, "s", m.Unit)
		waits := hist(t, m)
		got := waits[kv(otelx.AttrBulkhead.String("pro"), otelx.AttrAcquired.Bool(true))]
		assert.Equal(t, uint64(1), got.Count)
		assert.InDelta(t, 0.04, got.Sum, 1e-9)
		assert.Equal(t, wantQueueWaitBuckets, got.Bounds)
		gaveUp := waits[kv(otelx.AttrBulkhead.String("pro"), otelx.AttrAcquired.Bool(false))]
		assert.Equal(t, uint64(1), gaveUp.Count)
		assert.InDelta(t, 0.1, gaveUp.Sum, 1e-9)

		succeeded := h.logsWith(t, "attempt succeeded")
		require.Len(t, succeeded, 2)
		assert.Equal(t, "pro", succeeded[0]["tier"])
		assert.Equal(t, float64(40*time.Millisecond), succeeded[0]["queue_wait"])
		assert.NotContains(t, succeeded[1], "queue_wait", "flash's bulkhead does not queue")
		skipped := h.logsWith(t, "tier skipped")
		require.Len(t, skipped, 1)
		assert.Equal(t, "full", skipped[0]["skip"])
		assert.Equal(t, float64(100*time.Millisecond), skipped[0]["queue_wait"])

		var waited []float64
		for _, s := range h.spansNamed("generate_content gemini-2.5-pro") {
			if v, ok := spanAttrs(s)[otelx.AttrQueueWait]; ok {
				waited = append(waited, v.AsFloat64())
			}
		}
		assert.Equal(t, []float64{0.04}, waited)
	})
}

// A request that fails for its caller is the only kind with an Error span
// and an Error log.
func TestFailedRequest(t *testing.T) {
	h := newHarness(t)
	c := newChain(t, twoTiers(
		fallback.Stage[string, string]{Tier: newTier("pro", step{err: http503()})},
		fallback.Stage[string, string]{Tier: newTier("flash", step{err: http503()})},
	))
	auth := newChain(t, fallback.Config[string, string]{Operation: "chat", Stages: []fallback.Stage[string, string]{
		{Tier: newTier("pro", step{err: &classify.HTTPError{Facts: classify.Facts{HTTPStatus: 401}}}), Model: "gemini-2.5-pro"},
		{Tier: newTier("flash", ok("never")), Model: "gemini-2.5-flash"},
	}})
	inst := instrument(t, c, h.options())
	inst.Attach(auth)

	_, err := c.Do(context.Background(), "q")
	require.Error(t, err)
	_, err = auth.Do(context.Background(), "q")
	require.Error(t, err)

	rm := h.collect(t)
	assert.Equal(t, map[string]int64{
		kv(opAttr, otelx.AttrSource.String("error"), otelx.AttrDegraded.Bool(false), otelx.AttrErrorType.String("transient")):                        1,
		kv(otelx.AttrOperation.String("chat"), otelx.AttrSource.String("error"), otelx.AttrDegraded.Bool(false), otelx.AttrErrorType.String("auth")): 1,
	}, nonZero(ints(t, findMetric(t, rm, otelx.MetricRequests))))

	for name, class := range map[string]string{"tierguard generate_content": "transient", "tierguard chat": "auth"} {
		var root []string
		for _, s := range h.spansNamed(name) {
			if !s.Parent().IsValid() {
				root = append(root, s.Status().Code.String()+" "+s.Status().Description+" "+spanAttrs(s)[otelx.AttrErrorType].AsString())
			}
		}
		assert.Equal(t, []string{"Error " + class + " " + class}, root, name)
	}

	failed := h.logsWith(t, "request failed")
	require.Len(t, failed, 2)
	assert.Equal(t, "ERROR", failed[0]["level"])
	assert.Equal(t, "error", failed[0]["source"])
	assert.Equal(t, "transient", failed[0]["class"])
	assert.Equal(t, "auth", failed[1]["class"])
	assert.Equal(t, 401.0, failed[1]["http_status"])
	closed := h.logsWith(t, "tier failed closed")
	require.Len(t, closed, 1)
	assert.Equal(t, "fail_closed", closed[0]["route"])
	assert.Equal(t, false, closed[0]["retryable"])
}

// Answers from the cache and the default count as degraded successes.
func TestLocalAnswers(t *testing.T) {
	h := newHarness(t)
	down := func() fallback.Config[string, string] {
		return twoTiers(
			fallback.Stage[string, string]{Tier: newTier("pro", step{err: http503()})},
			fallback.Stage[string, string]{Tier: newTier("flash", step{err: http503()})},
		)
	}
	cached := down()
	cached.Cache = cacheFunc(func(context.Context, string) (string, bool) { return "cached", true })
	withDefault := down()
	withDefault.Default = func(context.Context, string) (string, bool) { return "default", true }
	inst, err := otelx.New(h.options())
	require.NoError(t, err)
	defer func() { require.NoError(t, inst.Close()) }()
	for _, cfg := range []fallback.Config[string, string]{cached, withDefault} {
		c := newChain(t, cfg)
		inst.Attach(c)
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		require.True(t, res.Degraded)
	}
	assert.Equal(t, map[string]int64{
		kv(opAttr, otelx.AttrSource.String("cache"), otelx.AttrDegraded.Bool(true)):   1,
		kv(opAttr, otelx.AttrSource.String("default"), otelx.AttrDegraded.Bool(true)): 1,
	}, nonZero(ints(t, findMetric(t, h.collect(t), otelx.MetricRequests))))
	local := h.logsWith(t, "answered locally")
	require.Len(t, local, 2)
	assert.Equal(t, "cache", local[0]["source"])
	assert.Equal(t, "default", local[1]["source"])
	require.Len(t, h.spansNamed("tierguard generate_content"), 2)
	for _, s := range h.spansNamed("tierguard generate_content") {
		if !s.Parent().IsValid() {
			assert.Equal(t, codes.Unset, s.Status().Code)
			assert.True(t, spanAttrs(s)[otelx.AttrDegraded].AsBool())
		}
	}
}

type cacheFunc func(context.Context, string) (string, bool)

func (f cacheFunc) Get(ctx context.Context, in string) (string, string, bool) {
	out, ok := f(ctx, in)
	return out, "", ok
}

func (cacheFunc) Put(context.Context, string, string) {}

// Request ids and tenants stay off metrics unless listed; listed labels
// are copied onto the request-scoped metrics. The request's id and
// scenario label its spans and logs, its tenant only with TenantLabels.
func TestMetricAttributesAreOptIn(t *testing.T) {
	ctx := fallback.WithRequest(context.Background(), fallback.Request{ID: "req-9", Tenant: "acme", Scenario: "drill"})
	ctx = otelx.WithAttributes(ctx, attribute.String("feature", "summary"))
	assert.Equal(t, []attribute.KeyValue{attribute.String("feature", "summary")}, otelx.Attributes(ctx))

	tenantLabels := true
	run := func(keys ...attribute.Key) (*harness, map[string]int64) {
		h := newHarness(t)
		c := newChain(t, twoTiers(
			fallback.Stage[string, string]{Tier: newTier("pro", ok("pro"))},
			fallback.Stage[string, string]{Tier: newTier("flash", ok("flash"))},
		))
		opts := h.options()
		opts.MetricAttributes, opts.TenantLabels = keys, tenantLabels
		instrument(t, c, opts)
		_, err := c.Do(ctx, "q")
		require.NoError(t, err)
		return h, ints(t, findMetric(t, h.collect(t), otelx.MetricAttempts))
	}

	h, attempts := run()
	assert.Equal(t, map[string]int64{kv(opAttr, proTier, otelx.AttrClass.String("ok")): 1}, attempts)
	// Spans and logs carry the labels all the same.
	require.NotEmpty(t, h.spansNamed("tierguard generate_content"))
	for _, s := range h.spansNamed("tierguard generate_content") {
		if !s.Parent().IsValid() {
			a := spanAttrs(s)
			assert.Equal(t, "req-9", a[otelx.KeyRequestID].AsString())
			assert.Equal(t, "acme", a[otelx.KeyTenant].AsString())
			assert.Equal(t, "drill", a[otelx.KeyScenario].AsString())
			assert.Equal(t, "summary", a["feature"].AsString())
		}
	}
	l := h.logsWith(t, "attempt succeeded")[0]
	assert.Equal(t, "req-9", l["request_id"])
	assert.Equal(t, "acme", l["tenant"])
	assert.Equal(t, "drill", l["scenario"])
	assert.Equal(t, "summary", l["feature"])

	tenantLabels = false
	h, attempts = run(otelx.KeyTenant, "feature", "absent")
	assert.Equal(t, map[string]int64{
		kv(opAttr, proTier, otelx.AttrClass.String("ok"), otelx.KeyTenant.String("acme"), attribute.String("feature", "summary")): 1,
	}, attempts, "listing KeyTenant puts it on metrics")
	for _, s := range h.spansNamed("tierguard generate_content") {
		a := spanAttrs(s)
		assert.NotContains(t, a, otelx.KeyTenant, "no tenant on spans without TenantLabels")
		if !s.Parent().IsValid() {
			assert.Equal(t, "req-9", a[otelx.KeyRequestID].AsString())
		}
	}
	assert.NotContains(t, h.logsWith(t, "attempt succeeded")[0], "tenant")
}

// An Instrumentation put in Config.Observer, with Watch for the guards,
// observes each request once.
func TestConfigObserverAndWatch(t *testing.T) {
	h := newHarness(t)
	inst, err := otelx.New(h.options())
	require.NoError(t, err)
	defer func() { require.NoError(t, inst.Close()) }()
	br := newBreaker(t, breaker.Config{Name: "pro"})
	cfg := twoTiers(
		fallback.Stage[string, string]{Tier: newTier("pro", ok("pro")), Breaker: br},
		fallback.Stage[string, string]{Tier: newTier("flash", ok("flash"))},
	)
	cfg.Observer = inst
	c := newChain(t, cfg)
	inst.Watch(c)
	inst.Watch(c) // twice is once
	_, err = c.Do(context.Background(), "q")
	require.NoError(t, err)
	rm := h.collect(t)
	assert.Equal(t, map[string]int64{kv(opAttr, otelx.AttrSource.String("tier"), proTier, otelx.AttrDegraded.Bool(false)): 1},
		nonZero(ints(t, findMetric(t, rm, otelx.MetricRequests))))
	assert.Equal(t, map[string]int64{kv(otelx.AttrBreaker.String("pro")): 0}, ints(t, findMetric(t, rm, otelx.MetricBreakerState)))
	br.ForceOpen()
	assert.Equal(t, map[string]int64{
		kv(otelx.AttrBreaker.String("pro"), otelx.AttrBreakerFrom.String("closed"), otelx.AttrBreakerTo.String("open")): 1,
	}, nonZero(ints(t, findMetric(t, h.collect(t), otelx.MetricBreakerTransitions))), "one subscription")
}

// Standalone guards and group members can be watched too, and unwatched.
func TestStandaloneGuards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		inst, err := otelx.New(h.options())
		require.NoError(t, err)
		defer func() { require.NoError(t, inst.Close()) }()

		br := newBreaker(t, breaker.Config{Name: "solo"})
		unwatch := inst.WatchBreaker(br)
		br.ForceOpen()
		rm := h.collect(t)
		assert.Equal(t, map[string]int64{kv(otelx.AttrBreaker.String("solo")): 2}, ints(t, findMetric(t, rm, otelx.MetricBreakerState)))
		unwatch()
		br.ForceClosed()
		rm = h.collect(t)
		if m, ok := lookupMetric(rm, otelx.MetricBreakerState); ok {
			assert.Empty(t, ints(t, m))
		}
		assert.Len(t, nonZero(ints(t, findMetric(t, rm, otelx.MetricBreakerTransitions))), 1, "the transition after unwatch is not counted")

		bh := newBulkhead(t, bulkhead.Config{Name: "solo", Max: 1, MaxWait: time.Second, Queue: 1})
		inst.WatchBulkhead(bh)
		require.True(t, bh.TryAcquire())
		go func() {
			time.Sleep(250 * time.Millisecond)
			bh.Release()
		}()
		_, err = bulkhead.Do(context.Background(), bh, func(context.Context) (struct{}, error) { return struct{}{}, nil })
		require.NoError(t, err)
		waits := hist(t, findMetric(t, h.collect(t), otelx.MetricBulkheadQueueWait))
		assert.InDelta(t, 0.25, waits[kv(otelx.AttrBulkhead.String("solo"), otelx.AttrAcquired.Bool(true))].Sum, 1e-9)

		// Group members, those created before the watch and after it.
		group, err := breaker.NewGroup(breaker.Config{Name: "grp", KeysInNames: true}, 8)
		require.NoError(t, err)
		group.Get("b")
		unwatchGroup := inst.WatchBreakerGroup(group)
		group.Get("a").ForceOpen()
		bhs, err := bulkhead.NewGroup(bulkhead.Config{Name: "tenants", Max: 1, MaxWait: time.Second, Queue: 1, KeysInNames: true}, 8)
		require.NoError(t, err)
		inst.WatchBulkheadGroup(bhs)
		member := bhs.Get("acme")
		require.True(t, member.TryAcquire())
		go func() {
			time.Sleep(500 * time.Millisecond)
			member.Release()
		}()
		_, err = bulkhead.Do(context.Background(), member, func(context.Context) (struct{}, error) { return struct{}{}, nil })
		require.NoError(t, err)

		rm = h.collect(t)
		assert.Equal(t, int64(2), ints(t, findMetric(t, rm, otelx.MetricBreakerState))[kv(otelx.AttrBreaker.String("grp/a"))])
		assert.Equal(t, int64(1), ints(t, findMetric(t, rm, otelx.MetricBreakerTransitions))[kv(
			otelx.AttrBreaker.String("grp/a"), otelx.AttrBreakerFrom.String("closed"), otelx.AttrBreakerTo.String("open"))])
		waits = hist(t, findMetric(t, rm, otelx.MetricBulkheadQueueWait))
		assert.InDelta(t, 0.5, waits[kv(otelx.AttrBulkhead.String("tenants/acme"), otelx.AttrAcquired.Bool(true))].Sum, 1e-9)
		assert.Contains(t, ints(t, findMetric(t, rm, otelx.MetricBreakerState)), kv(otelx.AttrBreaker.String("grp/b")), "a member from before the watch")

		unwatchGroup()
		group.Get("c").ForceOpen()
		if m, ok := lookupMetric(h.collect(t), otelx.MetricBreakerState); ok {
			assert.Empty(t, ints(t, m), "members are unwatched with their group, and later ones are not watched")
		}
	})
}

// Close unregisters the gauge callback and the breaker subscriptions, and
// later requests are not observed.
func TestClose(t *testing.T) {
	h := newHarness(t)
	br := newBreaker(t, breaker.Config{Name: "pro"})
	bh := newBulkhead(t, bulkhead.Config{Name: "pro", Max: 4})
	c := newChain(t, twoTiers(
		fallback.Stage[string, string]{Tier: newTier("pro", ok("pro")), Breaker: br, Bulkhead: bh},
		fallback.Stage[string, string]{Tier: newTier("flash", ok("flash"))},
	))
	inst, err := otelx.Instrument(c, h.options())
	require.NoError(t, err)
	_, err = c.Do(context.Background(), "q")
	require.NoError(t, err)
	rm := h.collect(t)
	require.Len(t, ints(t, findMetric(t, rm, otelx.MetricBreakerState)), 1)
	require.Len(t, ints(t, findMetric(t, rm, otelx.MetricBulkheadAccepted)), 1)

	require.NoError(t, inst.Close())
	require.NoError(t, inst.Close(), "idempotent")
	logged := len(h.logLines(t))
	br.ForceOpen()
	_, err = c.Do(context.Background(), "q")
	require.NoError(t, err)

	rm = h.collect(t)
	for _, name := range []string{otelx.MetricBreakerState, otelx.MetricBulkheadAccepted} {
		if m, ok := lookupMetric(rm, name); ok {
			assert.Empty(t, ints(t, m), name)
		}
	}
	assert.Empty(t, nonZero(ints(t, findMetric(t, rm, otelx.MetricBreakerTransitions))), "the transition after Close is not counted")
	assert.Equal(t, map[string]int64{kv(opAttr, otelx.AttrSource.String("tier"), proTier, otelx.AttrDegraded.Bool(false)): 1},
		nonZero(ints(t, findMetric(t, rm, otelx.MetricRequests))), "the request after Close is not counted")
	assert.Len(t, h.logLines(t), logged)
	inst.WatchBreaker(br)() // a no-op after Close
	if m, ok := lookupMetric(h.collect(t), otelx.MetricBreakerState); ok {
		assert.Empty(t, ints(t, m))
	}
}

// Options.PreviousNames also emits the GenAI metrics under the names
// before the GenAI conventions v0.1.0, with the attributes they had, next
// to the current ones.
func TestPreviousNames(t *testing.T) {
	h := newHarness(t)
	c := newChain(t, twoTiers(
		fallback.Stage[string, string]{Tier: newTier("pro", step{err: http503()})},
		fallback.Stage[string, string]{Tier: newTier("flash", ok("flash"))},
	))
	opts := h.options()
	opts.PreviousNames = true
	instrument(t, c, opts)
	_, err := c.Do(context.Background(), "q")
	require.NoError(t, err)
	rm := h.collect(t)

	m := findMetric(t, rm, otelx.MetricPrevDuration)
	assert.Equal(t, "s", m.Unit)
	d := hist(t, m)
	assert.Equal(t, []string{
		kv(opAttr, gemini, proModel, proTier, otelx.AttrErrorType.String("transient")),
		kv(opAttr, gemini, flashModel, flashTier),
	}, keys(d))
	assert.Equal(t, wantDurationBuckets, d[kv(opAttr, gemini, flashModel, flashTier)].Bounds)

	m = findMetric(t, rm, otelx.MetricPrevTokenUsage)
	tok, isInt := m.Data.(metricdata.Histogram[int64])
	require.True(t, isInt)
	got := map[string]int64{}
	for _, p := range tok.DataPoints {
		got[key(p.Attributes)] = p.Sum
	}
	assert.Equal(t, map[string]int64{
		kv(opAttr, gemini, flashModel, flashTier, otelx.AttrPrevTokenType.String("input")):  10,
		kv(opAttr, gemini, flashModel, flashTier, otelx.AttrPrevTokenType.String("output")): int64(len("flash")),
	}, got, "successes only, as before")

	// The current names are there too.
	assert.Len(t, hist(t, findMetric(t, rm, otelx.MetricInferenceDuration)), 2)
}

// With a no-op TracerProvider no span is started; log events carry the
// caller's trace.
func TestTracingOff(t *testing.T) {
	h := newHarness(t)
	c := newChain(t, twoTiers(
		fallback.Stage[string, string]{Tier: newTier("pro", ok("pro"))},
		fallback.Stage[string, string]{Tier: newTier("flash", ok("flash"))},
	))
	opts := h.options()
	opts.TracerProvider = tracenoop.NewTracerProvider()
	instrument(t, c, opts)
	ctx, caller := h.tp.Tracer("server").Start(context.Background(), "GET /answer")
	_, err := c.Do(ctx, "q")
	require.NoError(t, err)
	caller.End()
	require.Len(t, h.spans.Ended(), 1, "only the caller's span")
	l := h.logsWith(t, "attempt succeeded")
	require.Len(t, l, 1)
	assert.Equal(t, caller.SpanContext().TraceID().String(), l[0]["trace_id"])
	assert.Equal(t, map[string]int64{kv(opAttr, proTier, otelx.AttrClass.String("ok")): 1},
		ints(t, findMetric(t, h.collect(t), otelx.MetricAttempts)))
}

// Events of a request whose start the Instrumentation did not see are
// still counted, without spans.
func TestEventsWithoutStart(t *testing.T) {
	h := newHarness(t)
	inst, err := otelx.New(h.options())
	require.NoError(t, err)
	defer func() { require.NoError(t, inst.Close()) }()
	ctx := context.Background()
	chain := &fallback.ChainInfo{Operation: "generate_content", Stages: []fallback.StageInfo{{Operation: "generate_content", Tier: "pro"}}}
	inst.AttemptEnded(ctx, fallback.AttemptEnd{Stage: &chain.Stages[0], Attempt: 1, Latency: 20 * time.Millisecond, Err: http503(),
		Verdict: classify.Verdict{Class: classify.Transient, HTTPStatus: 503}})
	// Made by hand, the events hold no Reply: read as nothing reported.
	inst.LateReplyReceived(ctx, fallback.LateReply{Stage: &chain.Stages[0], Attempt: 1})
	inst.RequestEnded(ctx, fallback.RequestEnd{Chain: chain, Verdict: classify.Verdict{Class: classify.Transient}, Err: http503()})
	rm := h.collect(t)
	assert.Equal(t, map[string]int64{kv(opAttr, proTier, otelx.AttrClass.String("transient")): 1}, ints(t, findMetric(t, rm, otelx.MetricAttempts)))
	assert.Equal(t, map[string]int64{
		kv(opAttr, otelx.AttrSource.String("error"), otelx.AttrDegraded.Bool(false), otelx.AttrErrorType.String("transient")): 1,
	}, nonZero(ints(t, findMetric(t, rm, otelx.MetricRequests))))
	assert.Empty(t, h.spans.Ended())
	if m, ok := lookupMetric(rm, otelx.MetricActiveRequests); ok {
		for _, v := range ints(t, m) {
			assert.Zero(t, v)
		}
	}
}

// The calls of a hedge settled after its race (fallback.LateReply.Calls)
// are attempts too: each upstream call is counted once, lost hedges
// marked as such.
func TestLateSettledHedgeCallsAreAttempts(t *testing.T) {
	h := newHarness(t)
	inst, err := otelx.New(h.options())
	require.NoError(t, err)
	defer func() { require.NoError(t, inst.Close()) }()
	chain := &fallback.ChainInfo{Operation: "generate_content", Stages: []fallback.StageInfo{{Operation: "generate_content", Tier: "pro"}}}
	inst.LateReplyReceived(context.Background(), fallback.LateReply{Stage: &chain.Stages[0], Attempt: 1, Hedge: true, Calls: 2, Reply: &fallback.Reply{}})
	assert.Equal(t, map[string]int64{kv(opAttr, proTier, otelx.AttrClass.String("canceled"), otelx.AttrHedge.Bool(true)): 2},
		ints(t, findMetric(t, h.collect(t), otelx.MetricAttempts)))
}

// An attempt that finds nothing to call — a pool whose every member is
// over its rate limit — is a skip, and its span ends with it: no span is
// left open.
func TestSkippedAttemptEndsItsSpan(t *testing.T) {
	h := newHarness(t)
	lim, err := ratelimit.New(ratelimit.Config{Name: "key", Requests: 1})
	require.NoError(t, err)
	thePool, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
		{Key: "key-a", Tier: newTier("a", ok("pro")), Limiter: lim},
	}})
	require.NoError(t, err)
	c := newChain(t, twoTiers(
		fallback.Stage[string, string]{Tier: thePool},
		fallback.Stage[string, string]{Tier: newTier("flash", ok("flash"))},
	))
	instrument(t, c, h.options())
	for _, want := range []string{"pro", "flash"} {
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, want, res.Tier, "the key's one call a minute, then flash")
	}
	started, ended := 0, 0
	for _, s := range h.spans.Started() {
		if s.Parent().IsValid() {
			started++
		}
	}
	for _, s := range h.spans.Ended() {
		if s.Parent().IsValid() {
			ended++
			if a := spanAttrs(s); a[attribute.Key("tierguard.skip.reason")].AsString() == "rate_limited" {
				assert.Equal(t, "pro", a[attribute.Key("tierguard.tier.name")].AsString())
			}
		}
	}
	assert.Equal(t, started, ended, "every attempt span ended")
	assert.Equal(t, 3, ended, "pro's answer, pro's skipped attempt, flash's answer")
}
