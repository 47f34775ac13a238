package otelx

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/deadline"
	"github.com/tierguard/tierguard/fallback"
)

// logEnabled reports whether a log event at level would be written; the
// attributes are built only then.
func (i *Instrumentation) logEnabled(ctx context.Context, level slog.Level) bool {
	return i.logger != nil && i.logger.Enabled(ctx, level)
}

// logBuf collects a log event's attributes without growing a slice.
type logBuf struct {
	a [32]slog.Attr
	n int
}

func (b *logBuf) add(a slog.Attr) {
	if b.n < len(b.a) {
		b.a[b.n] = a
		b.n++
	}
}

func (b *logBuf) attrs() []slog.Attr { return b.a[:b.n] }

// kvBufSize is how many attributes a kvBuf holds before it sets them:
// all that an attempt span's end sets in the usual cases (a success that
// reported its usage, a failure with its retry decision).
const kvBufSize = 16

// kvBuf collects a span's attributes without growing a slice, and sets
// them on sp in batches. The buffer escapes (SetAttributes takes a slice
// through an interface): the request's own (reqState.opened) serves its
// spans, so that setting them allocates nothing but what the SDK span
// itself grows.
type kvBuf struct {
	// a holds as many attributes as a span's end sets, so that it sets
	// them in one call.
	a  [kvBufSize]attribute.KeyValue
	n  int
	sp trace.Span
}

func (b *kvBuf) put(kv attribute.KeyValue) {
	if b.n == len(b.a) {
		b.flush()
	}
	b.a[b.n] = kv
	b.n++
}

// reset empties the buffer for sp's attributes; the old ones are left in
// place, to be overwritten, rather than cleared.
func (b *kvBuf) reset(sp trace.Span) {
	b.n = 0
	b.sp = sp
}

// flush sets the collected attributes on the span.
func (b *kvBuf) flush() {
	if b.n > 0 {
		b.sp.SetAttributes(b.a[:b.n]...)
		b.n = 0
	}
}

// common adds what every request event carries: the operation, the
// request's labels, and the trace and span ids to find its spans by.
func (r *reqState) common(b *logBuf, op string, sc trace.SpanContext) {
	b.add(slog.String(logComponent, logComponentValue))
	b.add(slog.String("operation", op))
	if r.id != "" {
		b.add(slog.String("request_id", r.id))
	}
	if r.tenant != "" {
		b.add(slog.String("tenant", r.tenant))
	}
	if r.scenario != "" {
		b.add(slog.String("scenario", r.scenario))
	}
	for _, kv := range r.labels {
		b.add(slog.Any(string(kv.Key), kv.Value.AsInterface()))
	}
	if sc.IsValid() {
		b.add(slog.String("trace_id", sc.TraceID().String()))
		b.add(slog.String("span_id", sc.SpanID().String()))
	}
}

// stageLog names the event's tier: stage s, calling model.
func stageLog(b *logBuf, s *fallback.StageInfo, model string) {
	b.add(slog.String("tier", s.Tier))
	b.add(slog.Int("tier_index", s.TierIndex))
	if model != "" {
		b.add(slog.String("model", model))
	}
	if s.Provider != "" {
		b.add(slog.String("provider", s.Provider))
	}
}

// verdictLog adds a verdict's fields; each is safe to export by
// classify's contract (class, status code, canonical status name, fixed
// reason phrase).
func verdictLog(b *logBuf, v classify.Verdict, className string) {
	b.add(slog.String("class", className))
	if v.HTTPStatus != 0 {
		b.add(slog.Int("http_status", v.HTTPStatus))
	}
	if v.Status != "" {
		b.add(slog.String("status", v.Status))
	}
	if v.Reason != "" {
		b.add(slog.String("reason", v.Reason))
	}
}

func remainingLog(b *logBuf, remaining time.Duration) {
	if remaining != deadline.Unlimited {
		b.add(slog.Duration("deadline_remaining", max(remaining, 0)))
	}
}

// spanCtx returns ctx carrying sc as its span, so that a handler bridged to
// OpenTelemetry (otelslog) correlates the event with the span it is about
// (an attempt's, which ctx does not carry). It allocates only when sc is
// not already ctx's span.
func spanCtx(ctx context.Context, sc trace.SpanContext) context.Context {
	if !sc.IsValid() || trace.SpanContextFromContext(ctx).Equal(sc) {
		return ctx
	}
	return trace.ContextWithSpanContext(ctx, sc)
}
