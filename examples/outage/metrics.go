package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/otelx"
)

// meters is the instrumentation of -metrics and -prometheus: otelx on the
// chains, feeding an in-process OpenTelemetry SDK MeterProvider — read once
// at the end through a ManualReader (-metrics), scraped by Prometheus
// through the OpenTelemetry Prometheus exporter (-prometheus), or both.
// The library depends on the OpenTelemetry API only; this demo, like a
// service, brings the SDK.
type meters struct {
	reader *sdkmetric.ManualReader // nil without -metrics
	mp     *sdkmetric.MeterProvider
	inst   *otelx.Instrumentation
	ledger *otelx.LedgerInstrumentation
}

// newMeters instruments chains and the spend ledger with otelx, reading
// the metrics with a ManualReader when manual is set and with extra when
// it is not nil. Tracing is off (a no-op tracer provider): the demo
// exports metrics only. The requests' metrics are by tenant, and the
// tenants in known start at 0.
func newMeters(manual bool, extra sdkmetric.Reader, ledger *spend.Ledger, known []string, chains ...otelx.Chain) (*meters, error) {
	m := &meters{}
	var opts []sdkmetric.Option
	if manual {
		m.reader = sdkmetric.NewManualReader()
		opts = append(opts, sdkmetric.WithReader(m.reader))
	}
	if extra != nil {
		opts = append(opts, sdkmetric.WithReader(extra))
	}
	m.mp = sdkmetric.NewMeterProvider(opts...)
	var declared []attribute.KeyValue
	for _, t := range known {
		declared = append(declared, otelx.KeyTenant.String(t))
	}
	// The demo's tenants are made-up company names, not personal data:
	// its metrics carry them, so that the dashboard's fallback rate by
	// tenant has something to show.
	inst, err := otelx.New(otelx.Options{MeterProvider: m.mp, TracerProvider: tracenoop.NewTracerProvider(),
		MetricAttributes: []attribute.Key{otelx.KeyTenant}, KnownLabels: declared})
	if err != nil {
		return nil, err
	}
	m.inst = inst
	for _, c := range chains {
		inst.Attach(c)
	}
	if m.ledger, err = otelx.InstrumentLedger(ledger, otelx.Options{MeterProvider: m.mp}); err != nil {
		return nil, err
	}
	return m, nil
}

// collect reads every metric once through the ManualReader.
func (m *meters) collect(ctx context.Context) (*metricsReport, error) {
	var rm metricdata.ResourceMetrics
	if err := m.reader.Collect(ctx, &rm); err != nil {
		return nil, fmt.Errorf("collecting metrics: %w", err)
	}
	return newMetricsReport(rm), nil
}

// stop ends the instrumentation and the provider.
func (m *meters) stop(ctx context.Context) {
	_ = m.inst.Close()
	_ = m.ledger.Close()
	_ = m.mp.Shutdown(ctx)
}

// metricRow is one data point, ready to print.
type metricRow struct {
	metric string // name and unit
	attrs  attribute.Set
	value  string
}

// The attributes that get a column of their own, and those printed once
// when they have one value (the provider) or one per tier (the model).
const (
	opKey       = attribute.Key("gen_ai.operation.name")
	tierKey     = attribute.Key("tierguard.tier.name")
	providerKey = attribute.Key("gen_ai.provider.name")
	modelKey    = attribute.Key("gen_ai.request.model")
)

// metricsReport is the collected metrics as a table.
type metricsReport struct {
	rows []metricRow
	// common is the provider when every data point has the same, and
	// byTier the model when each tier has one; both are left out of the
	// rows and printed once.
	common []attribute.KeyValue
	byTier map[attribute.Key]map[string]string
}

func newMetricsReport(rm metricdata.ResourceMetrics) *metricsReport {
	r := &metricsReport{byTier: map[attribute.Key]map[string]string{}}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			name := mt.Name
			if mt.Unit != "" {
				name += " (" + mt.Unit + ")"
			}
			add := func(attrs attribute.Set, value string) {
				r.rows = append(r.rows, metricRow{metric: name, attrs: attrs, value: value})
			}
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					add(p.Attributes, strconv.FormatInt(p.Value, 10))
				}
			case metricdata.Sum[float64]:
				for _, p := range d.DataPoints {
					add(p.Attributes, number(p.Value, mt.Unit))
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					add(p.Attributes, strconv.FormatInt(p.Value, 10))
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					add(p.Attributes, number(p.Value, mt.Unit))
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					mx, ok := p.Max.Value()
					add(p.Attributes, histogram(p.Count, float64(p.Sum), float64(mx), ok, mt.Unit))
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					mx, ok := p.Max.Value()
					add(p.Attributes, histogram(p.Count, p.Sum, mx, ok, mt.Unit))
				}
			}
		}
	}
	// By metric, then operation, then tier, then the other attributes.
	sortKey := func(r metricRow) string {
		op, _ := r.attrs.Value(opKey)
		tier, _ := r.attrs.Value(tierKey)
		return r.metric + "\x00" + op.String() + "\x00" + tier.String() + "\x00" + r.attrs.Encoded(attribute.DefaultEncoder())
	}
	slices.SortStableFunc(r.rows, func(a, b metricRow) int { return strings.Compare(sortKey(a), sortKey(b)) })

	// The provider is the same everywhere and the model follows from the
	// tier: saying them on every row only widens the table.
	values := map[attribute.Key]map[string]bool{}
	perTier := map[attribute.Key]map[string]map[string]bool{}
	for _, row := range r.rows {
		tier, hasTier := row.attrs.Value(tierKey)
		for _, kv := range row.attrs.ToSlice() {
			if values[kv.Key] == nil {
				values[kv.Key] = map[string]bool{}
				perTier[kv.Key] = map[string]map[string]bool{}
			}
			values[kv.Key][kv.Value.String()] = true
			if hasTier {
				if perTier[kv.Key][tier.String()] == nil {
					perTier[kv.Key][tier.String()] = map[string]bool{}
				}
				perTier[kv.Key][tier.String()][kv.Value.String()] = true
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(values)) {
		switch {
		case k == providerKey && len(values[k]) == 1:
			for v := range values[k] {
				r.common = append(r.common, k.String(v))
			}
		case k == modelKey && decidedByTier(perTier[k]):
			r.byTier[k] = map[string]string{}
			for tier, vs := range perTier[k] {
				for v := range vs {
					r.byTier[k][tier] = v
				}
			}
		}
	}
	return r
}

// decidedByTier reports whether every tier has one value.
func decidedByTier(m map[string]map[string]bool) bool {
	if len(m) == 0 {
		return false
	}
	for _, vs := range m {
		if len(vs) != 1 {
			return false
		}
	}
	return true
}

func number(v float64, unit string) string {
	switch {
	case unit == "s":
		return round(seconds(v)).String()
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func seconds(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }

func histogram(count uint64, sum, mx float64, hasMax bool, unit string) string {
	if count == 0 {
		return "count 0"
	}
	mean := sum / float64(count)
	s := fmt.Sprintf("count %d  sum %s  mean %s", count, number(sum, unit), number(mean, unit))
	if hasMax {
		s += "  max " + number(mx, unit)
	}
	return s
}

// print writes the table: metric, operation, tier, the other attributes,
// and the value — a counter's count, a gauge's value, or a histogram's
// count, sum, mean and max.
func (r *metricsReport) print(w io.Writer) {
	fmt.Fprintln(w, "\nmetrics (otelx → OpenTelemetry SDK, in-process ManualReader; durations rounded)")
	if len(r.rows) == 0 {
		fmt.Fprintln(w, "  none collected")
		return
	}
	fmt.Fprintln(w, "  operation = "+string(opKey)+", tier = "+string(tierKey))
	if len(r.common) > 0 {
		var parts []string
		for _, kv := range r.common {
			parts = append(parts, string(kv.Key)+"="+kv.Value.String())
		}
		fmt.Fprintln(w, "  on every series that has it:", strings.Join(parts, " "))
	}
	for _, k := range slices.Sorted(maps.Keys(r.byTier)) {
		var parts []string
		for _, tier := range slices.Sorted(maps.Keys(r.byTier[k])) {
			parts = append(parts, tier+"="+r.byTier[k][tier])
		}
		fmt.Fprintf(w, "  %s, by tier: %s\n", k, strings.Join(parts, " "))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  metric\toperation\ttier\tother attributes (tierguard. left out)\tvalue\t")
	prev := ""
	for _, row := range r.rows {
		name := row.metric
		if name == prev {
			name = ""
		}
		prev = row.metric
		op, _ := row.attrs.Value(opKey)
		tier, _ := row.attrs.Value(tierKey)
		var parts []string
		for _, kv := range row.attrs.ToSlice() {
			if kv.Key == opKey || kv.Key == tierKey || r.byTier[kv.Key] != nil || slices.ContainsFunc(r.common, func(c attribute.KeyValue) bool { return c.Key == kv.Key }) {
				continue
			}
			parts = append(parts, strings.TrimPrefix(string(kv.Key), "tierguard.")+"="+kv.Value.String())
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t\n", name, op.String(), tier.String(), strings.Join(parts, " "), row.value)
	}
	tw.Flush()
}
