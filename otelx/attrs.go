package otelx

import (
	"maps"
	"sync"
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
const numSkips = int(fallback.SkipTooLarge) + 1

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
	// zeroAt is, for each of the counters a zero count can be skipped on
	// (see Instrumentation.addCount), the collection a 0 was last added
	// in under this set, plus one (0: never).
	zeroAt [numZeroCounters]atomic.Uint64
	// series caches the tierguard.active_requests series of a labelled
	// request's set (a labelProfile's): found without a lookup.
	series atomic.Pointer[activeSeries]
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
	stream                    bool
}

// endpointKey identifies a stage of a watched chain, whatever the model
// its events name (a ModelSelector tier names several).
type endpointKey struct {
	op, tier string
	index    int
	stream   bool
}

// endpoint is what a chain's StageInfo tells of a stage and its events do
// not: the server its tier calls.
type endpoint struct {
	address string
	port    int
}

// opKey identifies a chain as RequestStarted describes it.
type opKey struct {
	op     string
	stream bool
}

// maxResponseModels bounds the attribute sets kept per stage for the
// models that answered (gen_ai.response.model): past it, measurements go
// without that attribute, so a tier reporting a new model version per
// response cannot grow a series per response.
const maxResponseModels = 16

// stageState holds everything precomputed for one stage.
type stageState struct {
	key stageKey
	// waits is set when the stage's bulkhead may queue, so that the time
	// before its first attempt is reported as queue wait.
	waits atomic.Bool

	spanName  string
	spanStart []trace.SpanStartOption

	// genai are the attributes of the gen_ai.* metrics, without error.type
	// and gen_ai.response.model.
	genai []attribute.KeyValue

	durOK     *attrs
	durErr    []*attrs              // by class
	usage     [numModalities]*attrs // the usage counters', by gen_ai.token.modality
	attempts  []*attrs              // by class
	retryWait []*attrs              // by class
	skips     []*attrs              // by fallback.Skip
	result    [2]*attrs             // answered by this tier, by degraded

	// byModel caches the sets with gen_ai.response.model, by responding
	// model, class and kind (respKey); copied on write under modelsMu.
	byModel  atomic.Pointer[map[respKey]*attrs]
	modelsMu sync.Mutex

	// prev holds the sets of the previous names (Options.PreviousNames).
	prev *prevAttrs

	// finish caches the gen_ai.response.finish_reasons attribute by
	// reason (a slice value costs two allocations to build); copied on
	// write under finishMu, at most maxFinishReasons.
	finish   atomic.Pointer[map[string]attribute.KeyValue]
	finishMu sync.Mutex

	// members caches the attempt sets named by a pool member or as a
	// hedge.
	members memberSets
}

// maxFinishReasons bounds stageState.finish: a provider has a handful of
// finish reasons, and one that made up a new one per response would not
// grow the cache past it.
const maxFinishReasons = 16

// finishReasons returns the gen_ai.response.finish_reasons attribute of a
// response that finished for reason, from the stage's cache once seen.
func (st *stageState) finishReasons(reason string) attribute.KeyValue {
	if m := st.finish.Load(); m != nil {
		if kv, ok := (*m)[reason]; ok {
			return kv
		}
	}
	kv := attrFinishReasons.StringSlice([]string{reason})
	st.finishMu.Lock()
	defer st.finishMu.Unlock()
	var cur map[string]attribute.KeyValue
	if m := st.finish.Load(); m != nil {
		cur = *m
	}
	if len(cur) < maxFinishReasons {
		next := maps.Clone(cur)
		if next == nil {
			next = map[string]attribute.KeyValue{}
		}
		next[reason] = kv
		st.finish.Store(&next)
	}
	return kv
}

// prevAttrs are a stage's attribute sets under the conventions before
// SemConvVersion: no server, no response model, gen_ai.token.type.
type prevAttrs struct {
	durOK  *attrs
	durErr []*attrs // by class
	tokIn  *attrs
	tokOut *attrs
}

// respKey keys stageState.byModel: the responding model, the class
// (classify.OK for a success) and which set — durations, or usage, whose
// sets are by modality.
type respKey struct {
	model string
	class int
	usage bool
	mod   int
}

func newStage(k stageKey, ep endpoint, prev bool) *stageState {
	st := &stageState{key: k, spanName: spanName(k.op, k.model)}
	op := attrOperation.String(k.op)
	tier := attrTier.String(k.tier)

	// The conventions require the provider and define no value for an
	// unknown one (_OTHER is error.type's, not the provider's): a stage
	// that names none, over a tier that reports none, goes without it
	// rather than under a name otelx would invent.
	genai := []attribute.KeyValue{op}
	if k.provider != "" {
		genai = append(genai, attrProvider.String(k.provider))
	}
	if k.model != "" {
		genai = append(genai, attrModel.String(k.model))
	}
	if ep.address != "" {
		genai = append(genai, attrServerAddress.String(ep.address))
		if ep.port > 0 {
			genai = append(genai, attrServerPort.Int(ep.port))
		}
	}
	genai = append(genai, tier)
	st.genai = genai[:len(genai):len(genai)]
	span := append(st.genai, attrTierIndex.Int(k.index))
	if k.stream {
		span = append(span, attrRequestStream.Bool(true))
	}
	st.spanStart = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(span...)}
	with := func(kvs ...attribute.KeyValue) *attrs {
		return newAttrs(append(st.genai, kvs...)...)
	}
	st.durOK = with()
	for m := range numModalities {
		st.usage[m] = with(attrTokenModality.String(modalityNames[m]))
	}

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
	if prev {
		st.prev = newPrevAttrs(k)
	}
	return st
}

func newPrevAttrs(k stageKey) *prevAttrs {
	base := []attribute.KeyValue{attrOperation.String(k.op)}
	if k.provider != "" {
		base = append(base, attrProvider.String(k.provider))
	}
	if k.model != "" {
		base = append(base, attrModel.String(k.model))
	}
	base = append(base, attrTier.String(k.tier))
	base = base[:len(base):len(base)]
	p := &prevAttrs{
		durOK:  newAttrs(base...),
		tokIn:  newAttrs(append(base, attrPrevTokenType.String("input"))...),
		tokOut: newAttrs(append(base, attrPrevTokenType.String("output"))...),
		durErr: make([]*attrs, numClasses),
	}
	for c := range numClasses {
		p.durErr[c] = newAttrs(append(base, attrErrorType.String(classify.Class(c).String()))...)
	}
	return p
}

// dur returns the attribute set of a duration (and per-operation token)
// measurement: cls is classify.OK for a success; model is the responding
// model, "" when unknown.
func (st *stageState) dur(cls int, model string) *attrs {
	if model != "" {
		if a := st.withModel(respKey{model: model, class: cls}); a != nil {
			return a
		}
	}
	if cls == int(classify.OK) {
		return st.durOK
	}
	return st.durErr[cls]
}

// usageAttrs returns the attribute set of the usage counters for tokens of
// modality mod (a mod* constant).
func (st *stageState) usageAttrs(model string, mod int) *attrs {
	if model != "" {
		if a := st.withModel(respKey{model: model, usage: true, mod: mod}); a != nil {
			return a
		}
	}
	return st.usage[mod]
}

// withModel returns the set for k, built on first use, or nil once the
// stage has seen maxResponseModels models. The map is copied on write, so
// that the lookup of a known set allocates nothing.
func (st *stageState) withModel(k respKey) *attrs {
	if m := st.byModel.Load(); m != nil {
		if a, ok := (*m)[k]; ok {
			return a
		}
	}
	st.modelsMu.Lock()
	defer st.modelsMu.Unlock()
	var cur map[respKey]*attrs
	if m := st.byModel.Load(); m != nil {
		cur = *m
		if a, ok := cur[k]; ok {
			return a
		}
	}
	known := false
	models := map[string]bool{}
	for key := range cur {
		models[key.model] = true
		known = known || key.model == k.model
	}
	if !known && len(models) >= maxResponseModels {
		return nil
	}
	kvs := append(st.genai, attrResponseModel.String(k.model))
	switch {
	case k.usage:
		kvs = append(kvs, attrTokenModality.String(modalityNames[k.mod]))
	case k.class != int(classify.OK):
		kvs = append(kvs, attrErrorType.String(classify.Class(k.class).String()))
	}
	a := newAttrs(kvs...)
	next := maps.Clone(cur)
	if next == nil {
		next = map[respKey]*attrs{}
	}
	next[k] = a
	st.byModel.Store(&next)
	return a
}

// opState holds everything precomputed for one chain's requests.
type opState struct {
	key   opKey
	waits atomic.Bool

	spanName  string
	spanStart []trace.SpanStartOption

	active *attrs
	// series is active's series of tierguard.active_requests, once made.
	series atomic.Pointer[activeSeries]
	cache  [2]*attrs // by degraded
	def    [2]*attrs // by degraded
	failed []*attrs  // by class
}

func newOp(k opKey) *opState {
	o := &opState{key: k, spanName: requestSpanPrefix + k.op}
	op := attrOperation.String(k.op)
	// The request is not an inference: an internal span, with none of the
	// gen_ai.* attributes (the first tier's model may not be the one that
	// answers).
	start := []attribute.KeyValue{attrTGOperation.String(k.op)}
	if k.stream {
		start = append(start, attrStream.Bool(true))
	}
	o.spanStart = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(start...)}
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
	// infos finds the state of a chain's stage calling the stage's own
	// model by the chain's StageInfo, without hashing the key's names.
	infos map[*fallback.StageInfo]*stageState
	ops   map[opKey]*opState
	// chains finds an operation's state by the chain's ChainInfo.
	chains    map[*fallback.ChainInfo]*opState
	endpoints map[endpointKey]endpoint
	prev      bool
}

func (r *registry) clone() *registry {
	c := &registry{stages: maps.Clone(r.stages), infos: maps.Clone(r.infos), ops: maps.Clone(r.ops), chains: maps.Clone(r.chains), endpoints: maps.Clone(r.endpoints), prev: r.prev}
	return c
}

// newStage builds k's state with what Watch learnt of its stage.
func (r *registry) newStage(k stageKey) *stageState {
	return newStage(k, r.endpoints[endpointKey{op: k.op, tier: k.tier, index: k.index, stream: k.stream}], r.prev)
}

// stageLocked returns k's stage, adding it to an unpublished registry.
func (r *registry) stageLocked(k stageKey) *stageState {
	if st, ok := r.stages[k]; ok {
		return st
	}
	st := r.newStage(k)
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
		return reg.newStage(k)
	}
	reg = reg.clone()
	st := reg.stageLocked(k)
	i.reg.Store(reg)
	return st
}

// stageByInfo returns the precomputed state of stage s calling its own
// model, keyed by s, building it on first use.
func (i *Instrumentation) stageByInfo(s *fallback.StageInfo) *stageState {
	if st, ok := i.reg.Load().infos[s]; ok {
		return st
	}
	st := i.stage(keyOf(s, s.Model))
	i.mu.Lock()
	defer i.mu.Unlock()
	reg := i.reg.Load()
	if _, ok := reg.infos[s]; ok || len(reg.infos) >= maxCached {
		return st
	}
	reg = reg.clone()
	reg.infos[s] = st
	i.reg.Store(reg)
	return st
}

// opByChain returns the precomputed state of chain c's operation, keyed
// by c, building it on first use.
func (i *Instrumentation) opByChain(c *fallback.ChainInfo) *opState {
	if o, ok := i.reg.Load().chains[c]; ok {
		return o
	}
	o := i.op(opKey{op: c.Operation, stream: c.Stream})
	i.mu.Lock()
	defer i.mu.Unlock()
	reg := i.reg.Load()
	if _, ok := reg.chains[c]; ok || len(reg.chains) >= maxCached {
		return o
	}
	reg = reg.clone()
	reg.chains[c] = o
	i.reg.Store(reg)
	return o
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
