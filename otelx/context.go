package otelx

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
)

// ctxKey keys the request labels otelx reads from a request's context.
type ctxKey uint8

const labelsKey ctxKey = 0

// The request's id, tenant and scenario come from its fallback.Request
// (fallback.WithRequest, or a spend.Ticket): spans and log events carry
// the id and the scenario, and the tenant only with Options.TenantLabels;
// metrics carry none of them unless Options.MetricAttributes lists them.

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
