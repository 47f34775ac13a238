package otelx

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
)

// ctxKey keys the request labels otelx reads from a request's context.
type ctxKey uint8

const (
	requestIDKey ctxKey = iota
	tenantKey
	scenarioKey
	labelsKey
)

// WithRequestID returns a context carrying a request id. Spans and log
// events of the requests made with it carry the id; metrics do not, unless
// Options.MetricAttributes lists KeyRequestID (which is rarely wise: one
// time series per request).
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey, id)
}

// requestID returns the request id set by WithRequestID, or "".
func requestID(ctx context.Context) string {
	s, _ := ctx.Value(requestIDKey).(string)
	return s
}

// WithTenant returns a context carrying a tenant id, reported like a request
// id: on spans and log events, on metrics only if Options.MetricAttributes
// lists KeyTenant.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey, tenant)
}

// tenant returns the tenant set by WithTenant, or "".
func tenant(ctx context.Context) string {
	s, _ := ctx.Value(tenantKey).(string)
	return s
}

// WithScenario returns a context carrying a scenario name (a feature, a
// drill, a load-test phase), reported like a tenant.
func WithScenario(ctx context.Context, scenario string) context.Context {
	return context.WithValue(ctx, scenarioKey, scenario)
}

// scenario returns the scenario set by WithScenario, or "".
func scenario(ctx context.Context) string {
	s, _ := ctx.Value(scenarioKey).(string)
	return s
}

// WithAttributes returns a context carrying request labels of your own, in
// addition to those already set: they appear on the request's spans and log
// events, and on its metrics when Options.MetricAttributes lists their keys.
// Put only what may be exported there — never a prompt, an answer or a key.
func WithAttributes(ctx context.Context, kvs ...attribute.KeyValue) context.Context {
	if len(kvs) == 0 {
		return ctx
	}
	prev := attributes(ctx)
	next := make([]attribute.KeyValue, 0, len(prev)+len(kvs))
	next = append(append(next, prev...), kvs...)
	return context.WithValue(ctx, labelsKey, next)
}

// attributes returns the labels set by WithAttributes, oldest first. The
// slice is shared: do not modify it.
func attributes(ctx context.Context) []attribute.KeyValue {
	kvs, _ := ctx.Value(labelsKey).([]attribute.KeyValue)
	return kvs
}
