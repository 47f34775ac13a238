package otelx

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/internal/modelid"
)

// The spend ledger's metrics. Their attributes are low-cardinality unless
// Options.MetricAttributes lists KeyTenant (the tenant) or KeyScenario
// (the scenario).
const (
	// metricCost is tierguard.cost: what upstream attempts cost, in the
	// price table's currency, by model, cost group, outcome class ("ok"
	// for an answer) and whether the tier was a fallback. The extra cost
	// of failures is the sum over class ≠ ok, the cost of fallback answers
	// the sum over class = ok and fallback = true.
	metricCost = "tierguard.cost"
	// metricBudgetUtilization is tierguard.budget.utilization: the share
	// of a limit used in its period, by meter; without the tenant
	// attribute, the highest over tenants.
	metricBudgetUtilization = "tierguard.budget.utilization"
	// metricBudgetThresholds counts meters reaching a threshold (0.7, 0.9,
	// 1 for the limit), by meter and threshold: use reaching it (see
	// spend.ThresholdReached). The first request refused at a limit is in
	// tierguard.budget.refusals, and its event is spend.FirstRefusal.
	metricBudgetThresholds = "tierguard.budget.thresholds"
	// metricBudgetRefusals counts requests the ledger refused, by meter
	// and refusal (shed, limit_reached, unpriced_model, unavailable,
	// unknown_tenant; the last two without a meter).
	metricBudgetRefusals = "tierguard.budget.refusals"
)

// Attributes of the ledger's metrics.
const (
	// attrCostGroup is the cost group an attempt was billed in.
	attrCostGroup = attribute.Key("tierguard.cost_group")
	// attrFallback is true for an attempt on a tier after the first.
	attrFallback = attribute.Key("tierguard.fallback")
	// attrCurrency is the price table's currency.
	attrCurrency = attribute.Key("tierguard.currency")
	// attrMeter is a budget meter: daily_tokens, daily_cost,
	// monthly_tokens, monthly_cost.
	attrMeter = attribute.Key("tierguard.budget.meter")
	// attrThreshold is the share of a limit reached.
	attrThreshold = attribute.Key("tierguard.budget.threshold")
	// attrRefusal says why a request was refused.
	attrRefusal = attribute.Key("tierguard.budget.refusal")
)

// maxCostSets bounds the cached attribute sets of tierguard.cost; past
// it (tenant labels on a large fleet), sets are built per measurement.
const maxCostSets = 4096

// LedgerInstrumentation exports a spend.Ledger's figures: tierguard.cost
// per attempt, tierguard.budget.utilization per meter, and counters of
// thresholds reached and requests refused. Close it when done.
type LedgerInstrumentation struct {
	cost        metric.Float64Counter
	utilization metric.Float64ObservableGauge
	thresholds  metric.Int64Counter
	refusals    metric.Int64Counter
	reg         metric.Registration

	ledger   *spend.Ledger
	currency attribute.KeyValue
	tenants  bool
	scenario bool
	sets     sync.Map // costKey -> *attrs
	nsets    atomic.Int64
	remove   []func()
	closed   atomic.Bool
	once     sync.Once
}

type costKey struct {
	model, group     string
	class            classify.Class
	fallback         bool
	tenant, scenario string
}

// InstrumentLedger exports l's figures through opts.MeterProvider (the
// global one when nil). Only the MeterProvider and MetricAttributes of
// opts are used: KeyTenant adds the tenant to every metric, KeyScenario
// the scenario to tierguard.cost.
func InstrumentLedger(l *spend.Ledger, opts Options) (*LedgerInstrumentation, error) {
	if l == nil {
		return nil, errors.New("otelx: InstrumentLedger needs a ledger")
	}
	mp := opts.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(ScopeName, metric.WithSchemaURL(SchemaURL))
	li := &LedgerInstrumentation{ledger: l}
	for _, k := range opts.MetricAttributes {
		li.tenants = li.tenants || k == KeyTenant
		li.scenario = li.scenario || k == KeyScenario
	}
	currency := "{currency}"
	if p := l.Prices(); p != nil {
		currency = "{" + p.Currency() + "}"
		li.currency = attrCurrency.String(p.Currency())
	} else {
		li.currency = attrCurrency.String("")
	}
	var errs [4]error
	li.cost, errs[0] = meter.Float64Counter(metricCost, metric.WithUnit(currency),
		metric.WithDescription("Cost of upstream attempts, by model, cost group, outcome class and fallback."))
	li.utilization, errs[1] = meter.Float64ObservableGauge(metricBudgetUtilization, metric.WithUnit("1"),
		metric.WithDescription("Share of a budget limit used in its period, by meter (the highest over tenants unless tenants are labelled)."))
	li.thresholds, errs[2] = meter.Int64Counter(metricBudgetThresholds, metric.WithUnit("{event}"),
		metric.WithDescription("Budget meters reaching a threshold of their limit."))
	li.refusals, errs[3] = meter.Int64Counter(metricBudgetRefusals, metric.WithUnit("{request}"),
		metric.WithDescription("Requests the budget refused, by meter and refusal."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("otelx: creating the ledger's instruments: %w", err)
	}
	reg, err := meter.RegisterCallback(li.observe, li.utilization)
	if err != nil {
		return nil, fmt.Errorf("otelx: registering the budget callback: %w", err)
	}
	li.reg = reg
	li.remove = append(li.remove, l.ObserveRecords(li.record), l.Observe(li.event))
	return li, nil
}

// Close stops exporting: the gauge callback is unregistered and the
// ledger's subscriptions removed. It is idempotent.
func (li *LedgerInstrumentation) Close() error {
	var err error
	li.once.Do(func() {
		li.closed.Store(true)
		for _, r := range li.remove {
			r()
		}
		if uerr := li.reg.Unregister(); uerr != nil {
			err = fmt.Errorf("otelx: unregistering the budget callback: %w", uerr)
		}
	})
	return err
}

func (li *LedgerInstrumentation) record(r *spend.Record) {
	if li.closed.Load() {
		return
	}
	ctx := context.Background()
	for _, a := range r.Attempts() {
		if !a.Billed {
			continue
		}
		// One spelling of a model is one series: the normal form prices use.
		k := costKey{model: modelid.Normalize(a.Model), group: a.CostGroup, class: a.Class, fallback: a.TierIndex > 0}
		if li.tenants {
			k.tenant = r.Request.Tenant
		}
		if li.scenario {
			k.scenario = r.Request.Scenario
		}
		li.cost.Add(ctx, a.Cost.Float(), li.costSet(k).add...)
	}
}

func (li *LedgerInstrumentation) costSet(k costKey) *attrs {
	if v, ok := li.sets.Load(k); ok {
		return v.(*attrs)
	}
	kvs := []attribute.KeyValue{attrModel.String(k.model), attrCostGroup.String(k.group),
		attrClass.String(k.class.String()), attrFallback.Bool(k.fallback), li.currency}
	if li.tenants {
		kvs = append(kvs, KeyTenant.String(k.tenant))
	}
	if li.scenario {
		kvs = append(kvs, KeyScenario.String(k.scenario))
	}
	a := newAttrs(kvs...)
	if li.nsets.Load() < maxCostSets {
		if _, loaded := li.sets.LoadOrStore(k, a); !loaded {
			li.nsets.Add(1)
		}
	}
	return a
}

func (li *LedgerInstrumentation) event(e spend.Event) {
	if li.closed.Load() {
		return
	}
	ctx := context.Background()
	kvs := []attribute.KeyValue{attrMeter.String(e.Meter.String())}
	if li.tenants {
		kvs = append(kvs, KeyTenant.String(e.Tenant))
	}
	switch e.Kind {
	case spend.ThresholdReached:
		li.thresholds.Add(ctx, 1, metric.WithAttributes(append(kvs, attrThreshold.Float64(e.Threshold))...))
	case spend.Refused:
		if e.Refusal != spend.LimitReached && e.Refusal != spend.Shed && e.Refusal != spend.UnpricedModel {
			kvs[0] = attrMeter.String("")
		}
		li.refusals.Add(ctx, 1, metric.WithAttributes(append(kvs, attrRefusal.String(e.Refusal.String()))...))
	}
}

// observe reports every limited meter's utilization: per tenant when
// tenants are labelled, else the highest.
func (li *LedgerInstrumentation) observe(_ context.Context, o metric.Observer) error {
	var highest [4]float64
	var seen [4]bool
	li.ledger.EachUse(func(tenant string, use [4]spend.Usage) {
		for m, u := range use {
			if u.Limit <= 0 {
				continue
			}
			if li.tenants {
				o.ObserveFloat64(li.utilization, u.Utilization(), metric.WithAttributes(attrMeter.String(u.Meter.String()), KeyTenant.String(tenant)))
				continue
			}
			highest[m], seen[m] = max(highest[m], u.Utilization()), true
		}
	})
	if !li.tenants {
		for m := range highest {
			if seen[m] {
				o.ObserveFloat64(li.utilization, highest[m], metric.WithAttributes(attrMeter.String(spend.Meters()[m].String())))
			}
		}
	}
	return nil
}
