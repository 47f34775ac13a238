package otelx

import (
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
)

// numClasses is the number of classify classes, OK included.
var numClasses = len(classify.Classes())

// numSkips is the number of fallback.Skip values, NotSkipped included.
const numSkips = int(fallback.SkipRateLimited) + 1

// maxCached bounds the registry: past it, attribute sets for new stages
// and operations are built per event instead of cached. A chain's stages are
// fixed, so only a misuse (tier names made per request) gets there.
const maxCached = 1024

// classIndex maps a class to an index into per-class tables.
func classIndex(c classify.Class) int {
	if int(c) >= numClasses {
		return int(classify.Unknown)
	}
	return int(c)
}

// attrs is an attribute set precomputed with the option slices the metric
// API takes, so that recording a measurement allocates nothing.
type attrs struct {
	set attribute.Set
	add []metric.AddOption
	rec []metric.RecordOption
	obs []metric.ObserveOption
}

func newAttrs(kvs ...attribute.KeyValue) *attrs {
	s := attribute.NewSet(kvs...)
	o := metric.WithAttributeSet(s)
	return &attrs{set: s, add: []metric.AddOption{o}, rec: []metric.RecordOption{o}, obs: []metric.ObserveOption{o}}
}

// stageKey identifies a stage as events describe it.
type stageKey struct {
	op, tier, model, provider string
	index                     int
}

// opKey identifies a chain as RequestStarted describes it: its operation and
// its first stage's model and provider.
type opKey struct {
	op, model, provider string
}

// stageState holds everything precomputed for one stage.
type stageState struct {
	key stageKey
	// waits is set when the stage's bulkhead may queue, so that the time
	// before its first attempt is reported as queue wait.
	waits atomic.Bool

	spanName  string
	spanStart []trace.SpanStartOption

	durOK     *attrs
	durErr    []*attrs // by class
	attempts  []*attrs // by class
	retryWait []*attrs // by class
	skips     []*attrs // by fallback.Skip
	tokIn     *attrs
	tokOut    *attrs
	result    [2]*attrs // answered by this tier, by degraded
}

func newStage(k stageKey) *stageState {
	st := &stageState{key: k, spanName: spanName(k.op, k.model)}
	op := attrOperation.String(k.op)
	tier := attrTier.String(k.tier)

	genai := []attribute.KeyValue{op}
	if k.provider != "" {
		genai = append(genai, attrProvider.String(k.provider))
	}
	if k.model != "" {
		genai = append(genai, attrModel.String(k.model))
	}
	genai = append(genai, tier)
	st.spanStart = []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(append(genai[:len(genai):len(genai)], attrTierIndex.Int(k.index))...),
	}
	with := func(kvs ...attribute.KeyValue) *attrs {
		return newAttrs(append(genai[:len(genai):len(genai)], kvs...)...)
	}
	st.durOK = with()
	st.tokIn = with(attrTokenType.String("input"))
	st.tokOut = with(attrTokenType.String("output"))

	st.durErr = make([]*attrs, numClasses)
	st.attempts = make([]*attrs, numClasses)
	st.retryWait = make([]*attrs, numClasses)
	for c := range numClasses {
		name := classify.Class(c).String()
		st.durErr[c] = with(attrErrorType.String(name))
		st.attempts[c] = newAttrs(op, tier, attrClass.String(name))
		st.retryWait[c] = newAttrs(op, tier, attrClass.String(name))
	}
	st.skips = make([]*attrs, numSkips)
	for s := range numSkips {
		st.skips[s] = newAttrs(op, tier, attrSkipReason.String(fallback.Skip(s).String()))
	}
	for d := range 2 {
		st.result[d] = newAttrs(op, attrSource.String(fallback.SourceTier.String()), tier, attrDegraded.Bool(d == 1))
	}
	return st
}

// opState holds everything precomputed for one chain's requests.
type opState struct {
	key   opKey
	waits atomic.Bool

	spanName  string
	spanStart []trace.SpanStartOption

	active *attrs
	cache  [2]*attrs // by degraded
	def    [2]*attrs // by degraded
	failed []*attrs  // by class
}

func newOp(k opKey) *opState {
	o := &opState{key: k, spanName: spanName(k.op, k.model)}
	op := attrOperation.String(k.op)
	start := []attribute.KeyValue{op}
	if k.provider != "" {
		start = append(start, attrProvider.String(k.provider))
	}
	if k.model != "" {
		start = append(start, attrModel.String(k.model))
	}
	o.spanStart = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(start...)}
	o.active = newAttrs(op)
	for d := range 2 {
		o.cache[d] = newAttrs(op, attrSource.String(fallback.SourceCache.String()), attrDegraded.Bool(d == 1))
		o.def[d] = newAttrs(op, attrSource.String(fallback.SourceDefault.String()), attrDegraded.Bool(d == 1))
	}
	o.failed = make([]*attrs, numClasses)
	for c := range numClasses {
		o.failed[c] = newAttrs(op, attrSource.String("error"), attrDegraded.Bool(false), attrErrorType.String(classify.Class(c).String()))
	}
	return o
}

// spanName is "{operation} {model}", or the operation alone without a
// model, as the GenAI semantic conventions name inference spans.
func spanName(op, model string) string {
	if model == "" {
		return op
	}
	return op + " " + model
}

// registry maps stages and operations to their precomputed state. It is
// immutable once published; writers copy it under Instrumentation.mu.
type registry struct {
	stages map[stageKey]*stageState
	ops    map[opKey]*opState
}

func (r *registry) clone() *registry {
	c := &registry{stages: make(map[stageKey]*stageState, len(r.stages)+1), ops: make(map[opKey]*opState, len(r.ops)+1)}
	for k, v := range r.stages {
		c.stages[k] = v
	}
	for k, v := range r.ops {
		c.ops[k] = v
	}
	return c
}

// stageLocked returns k's stage, adding it to an unpublished registry.
func (r *registry) stageLocked(k stageKey) *stageState {
	if st, ok := r.stages[k]; ok {
		return st
	}
	st := newStage(k)
	if len(r.stages) < maxCached {
		r.stages[k] = st
	}
	return st
}

// opLocked returns k's operation, adding it to an unpublished registry.
func (r *registry) opLocked(k opKey) *opState {
	if o, ok := r.ops[k]; ok {
		return o
	}
	o := newOp(k)
	if len(r.ops) < maxCached {
		r.ops[k] = o
	}
	return o
}

// stage returns k's precomputed state, building it on first use.
func (i *Instrumentation) stage(k stageKey) *stageState {
	if st, ok := i.reg.Load().stages[k]; ok {
		return st
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	reg := i.reg.Load()
	if st, ok := reg.stages[k]; ok {
		return st
	}
	if len(reg.stages) >= maxCached {
		return newStage(k)
	}
	reg = reg.clone()
	st := reg.stageLocked(k)
	i.reg.Store(reg)
	return st
}

// op returns k's precomputed state, building it on first use.
func (i *Instrumentation) op(k opKey) *opState {
	if o, ok := i.reg.Load().ops[k]; ok {
		return o
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	reg := i.reg.Load()
	if o, ok := reg.ops[k]; ok {
		return o
	}
	if len(reg.ops) >= maxCached {
		return newOp(k)
	}
	reg = reg.clone()
	o := reg.opLocked(k)
	i.reg.Store(reg)
	return o
}
