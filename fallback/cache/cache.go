package cache

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/internal/striped"
)

// entryOverhead is what an entry costs beyond its strings, answer and
// vector: the entry itself, its map slots and list links.
const entryOverhead = 256

// Cache answers a chain's requests from answers its tiers gave earlier:
// the same prompt (exact), a prompt of the same template (template), or a
// prompt of the same meaning (semantic). It implements fallback.Cache:
// put it in fallback.Config.Cache, and the chain writes back every answer
// that passed validation and asks the cache after every tier failed. It is safe
// for concurrent use; Close it when done.
type Cache[In, Out any] struct {
	cfg      Config[In, Out]
	norm     func(string) string
	fastNorm bool
	slots    []Slot
	ttl      time.Duration
	// epoch is the origin of the monotonic instants entries expire at:
	// reading it costs a monotonic clock read, not a wall clock's.
	epoch time.Time
	// clock spares most exact hits that read.
	clock *coarseClock
	// exact finds the exact layer's entries without the lock.
	exact     *exactIndex[Out]
	maxBytes  int64
	perTmpl   int
	maxTmpl   int
	threshold float32
	simple    float32
	emb       *embedder
	newIndex  func(int) Index
	codec     Codec[Out]

	mu     sync.RWMutex
	spaces map[Scope]*space[Out]
	byID   map[uint64]*entry[Out]
	// head is the oldest entry, tail the newest: expiry order, since every
	// entry lives TTL (a shared record may live less, and is swept when an
	// eviction meets it). hand is the CLOCK hand of eviction.
	head, tail, hand *entry[Out]
	bytes            int64

	queue   chan job[Out]
	stop    chan struct{}
	wg      sync.WaitGroup
	unwatch func()
	closed  atomic.Bool
	bufs    sync.Pool
	stats   counters
}

// space holds one scope's entries.
type space[Out any] struct {
	exact map[string]*entry[Out]
	tmpl  map[string][]*entry[Out]
	index Index
	dims  int
}

type entry[Out any] struct {
	id      uint64
	scope   Scope
	key     string
	tmpl    template
	hasTmpl bool
	// unread is set when the prompt's template values were not read (too
	// long, or the write-back's context ended): unless KeepVariables, the
	// entry is not embedded, since a semantic match could not compare its
	// values.
	unread  bool
	model   string
	out     Out
	vec     []float32
	size    int64
	expires int64 // nanoseconds since the cache's epoch, monotonic
	// remote is set for an entry learned from the Store, shared for one
	// this process saved to it.
	remote, shared bool
	// ref is the CLOCK reference bit, set by every hit.
	ref        atomic.Bool
	prev, next *entry[Out]
	gone       bool
}

type job[Out any] struct {
	ctx    context.Context
	e      *entry[Out]
	prompt string
}

type counters struct {
	// exact is added to by every exact hit, which parallel lookups make at
	// once: it is striped, and padded off the counters after it.
	exact striped.Counter
	_     [64]byte

	template, semantic, simplified, misses                  atomic.Uint64
	writes, rejected, evicted, expired, invalidated         atomic.Uint64
	embedded, embedFailures, embedSkipped, dropped, applied atomic.Uint64
	saved, storeErrors                                      atomic.Uint64
	tmplTooLong, tmplCut, writesCut                         atomic.Uint64
}

// Stats are a cache's counters since New, and its size now.
type Stats struct {
	// Entries and Bytes are what the cache holds now.
	Entries int
	Bytes   int64
	// Exact, Template, Semantic and Simplified count hits by kind; Misses
	// counts lookups that found nothing.
	Exact, Template, Semantic, Simplified, Misses uint64
	// Writes counts answers cached; Rejected those too large to cache.
	Writes, Rejected uint64
	// Evicted counts entries dropped for room, Expired those dropped past
	// their TTL, Invalidated those dropped by an invalidation.
	Evicted, Expired, Invalidated uint64
	// Embedded counts successful embedding calls, EmbedFailures failed
	// ones, EmbedSkipped lookups and writes that did not try (breaker
	// open, too little time left).
	Embedded, EmbedFailures, EmbedSkipped uint64
	// Dropped counts written answers that found the embedding queue full:
	// they are cached without an embedding, and not shared.
	Dropped uint64
	// Saved counts entries shared through the Store, StoreErrors failed
	// saves and invalidations, Applied entries learned from it.
	Saved, StoreErrors, Applied uint64
	// TemplateTooLong counts lookups and writes whose prompt was longer
	// than Template.MaxPrompt: the template layer was skipped, not
	// searched. TemplateCut counts those whose context ended before
	// template matching was done: the lookup gave up the template layer,
	// the write cached its answer without a template.
	TemplateTooLong, TemplateCut uint64
	// WritesCut counts answers not cached because the write's context
	// ended before their prompt was read (see Put): only prompts longer
	// than 16 KiB are read in strides that can be cut.
	WritesCut uint64
}

var _ fallback.Cache[string, string] = (*Cache[string, string])(nil)

// How a Cache matched, as its Get says and the chain reports in
// fallback.Summary.CacheHit.
const (
	// HitExact: a stored answer to the same prompt, after whitespace and
	// case normalisation.
	HitExact = "exact"
	// HitTemplate: a stored answer to a prompt of the same template (the
	// prompt with its variable parts — numbers, dates, ids — replaced by
	// placeholders) that could be reused for this prompt's values.
	HitTemplate = "template"
	// HitSemantic: a stored answer to a prompt whose meaning reaches
	// SemanticConfig.Threshold.
	HitSemantic = "semantic"
	// HitSimplified: a stored answer to a similar, not the same, question
	// (SemanticConfig.SimplifiedThreshold). Label it in the UI as an
	// approximate answer.
	HitSimplified = "simplified"
)

// New returns a cache, or an error naming every invalid field of cfg.
func New[In, Out any](cfg Config[In, Out]) (*Cache[In, Out], error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	c := &Cache[In, Out]{
		cfg: cfg, norm: cfg.Normalize, ttl: orDuration(cfg.TTL, defaultTTL), epoch: time.Now(), exact: newExactIndex[Out](),
		maxBytes: orInt(cfg.MaxBytes, defaultMaxBytes), perTmpl: orInt(cfg.Template.MaxPerTemplate, defaultPerTemplate),
		maxTmpl: orInt(cfg.Template.MaxPrompt, defaultMaxPrompt),
		codec:   cfg.Codec,
		spaces:  map[Scope]*space[Out]{}, byID: map[uint64]*entry[Out]{},
	}
	c.clock = newCoarseClock(c.epoch)
	if c.norm == nil {
		c.norm, c.fastNorm = NormalizeText, true
	}
	if c.codec == nil {
		c.codec = JSON[Out]{}
	}
	if !cfg.Template.Disabled {
		c.slots = append(append(c.slots, cfg.Template.Slots...), builtinsUnless(cfg.Template.NoBuiltins)...)
	}
	if s := cfg.Semantic; s.Embedder != nil {
		br := s.Breaker
		if br == nil {
			var err error
			if br, err = breaker.New(breaker.Config{Name: "cache.embedder"}); err != nil {
				return nil, err
			}
		}
		c.emb = &embedder{e: s.Embedder, br: br, timeout: orDuration(s.Timeout, defaultEmbedTimeout),
			minBudget: orDuration(s.MinBudget, defaultMinEmbedBudget), usage: s.Usage}
		c.threshold, c.simple = float32(s.threshold()), float32(s.SimplifiedThreshold)
		c.newIndex = s.NewIndex
		if c.newIndex == nil {
			c.newIndex = func(dims int) Index { return NewExact(dims) }
		}
	}
	if c.emb != nil || cfg.Store != nil {
		c.queue, c.stop = make(chan job[Out], orInt(cfg.Semantic.Queue, defaultQueue)), make(chan struct{})
		c.wg.Add(1)
		go c.work()
	}
	if cfg.Store != nil {
		c.unwatch = cfg.Store.Observe(c.apply)
	}
	return c, nil
}

func builtinsUnless(none bool) []Slot {
	if none {
		return nil
	}
	return builtins
}

// Close stops the cache's goroutine and its Store subscription; answers
// still waiting for their embedding are dropped. Lookups keep working on
// what the cache holds; writes are no longer embedded or shared. Close is
// idempotent.
func (c *Cache[In, Out]) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	c.clock.stop()
	if c.unwatch != nil {
		c.unwatch()
	}
	if c.stop != nil {
		close(c.stop)
		c.wg.Wait()
	}
	return nil
}

// now is the instant entries' expiries are compared with.
func (c *Cache[In, Out]) now() int64 { return int64(time.Since(c.epoch)) }

func (c *Cache[In, Out]) scopeOf(ctx context.Context, in In) Scope {
	var s Scope
	if c.cfg.Scope != nil {
		s = c.cfg.Scope(ctx, in)
	} else if r, ok := ctx.Value(fallback.RequestKey{}).(*fallback.Request); ok && r != nil {
		// fallback.RequestFrom, without copying the request.
		s = Scope{Tenant: r.Tenant, Scenario: r.Scenario}
	}
	if c.cfg.ShareAcrossTenants {
		s.Tenant = ""
	}
	if c.cfg.ShareAcrossScenarios {
		s.Scenario = ""
	}
	return s
}

// Get implements fallback.Cache: an exact match first, then a
// template match, then — with an embedder, and time left in ctx — a
// semantic one. An embedder that fails, is slow or is tripped never holds
// the answer: the semantic layer is skipped. Template matching runs while
// ctx lasts, on prompts of at most Template.MaxPrompt bytes; after ctx
// ends only an exact match answers.
func (c *Cache[In, Out]) Get(ctx context.Context, in In) (Out, string, bool) {
	prompt, sc := c.cfg.Prompt(in), c.scopeOf(ctx, in)
	if e := c.exactHit(sc, prompt); e != nil {
		c.stats.exact.Add(1)
		return e.out, HitExact, true
	}
	return c.lookup(ctx, sc, prompt)
}

// lookup is Get past the exact layer's hit path, kept apart so that a hit
// does not set up the frame of the layers after it.
func (c *Cache[In, Out]) lookup(ctx context.Context, sc Scope, prompt string) (Out, string, bool) {
	now := c.now()
	out, ok, tmpls, vecs := c.lookupExact(sc, prompt, now)
	if ok {
		c.stats.exact.Add(1)
		return out, HitExact, true
	}
	var t template
	hasT := false
	// The semantic layer compares template values: extract them when
	// either layer can use them.
	if len(c.slots) > 0 && (tmpls || (vecs && !c.cfg.Semantic.KeepVariables)) {
		var how extraction
		t, how = c.extract(ctx, prompt)
		hasT = how == extracted
		if how == tooLong || how == cut {
			// The values are unknown: no semantic match can be checked
			// against them.
			vecs = vecs && c.cfg.Semantic.KeepVariables && how != cut
		}
		if hasT && tmpls {
			if out, ok := c.lookupTemplate(ctx, sc, &t, now); ok {
				c.stats.template.Add(1)
				return out, HitTemplate, true
			}
		}
	}
	if vecs {
		if out, hit, ok := c.lookupSemantic(ctx, sc, prompt, &t, hasT); ok {
			if hit == HitSemantic {
				c.stats.semantic.Add(1)
			} else {
				c.stats.simplified.Add(1)
			}
			return out, hit, true
		}
	}
	c.stats.misses.Add(1)
	var zero Out
	return zero, "", false
}

// exactHit is the exact layer's hit path: no lock, no allocation and,
// unless the entry is about to expire, no clock read. It looks the prompt
// up as it is, which finds it only if the prompt is in normal form: an
// entry's key is a normalised prompt, and NormalizeText leaves such a
// prompt unchanged. A prompt it does not find, or a custom normaliser's,
// goes the way of every lookup (lookupExact).
func (c *Cache[In, Out]) exactHit(sc Scope, prompt string) *entry[Out] {
	if !c.fastNorm {
		return nil
	}
	e := c.exact.find(sc, prompt)
	if e == nil || !c.clock.fresh(e.expires) {
		return nil
	}
	if !e.ref.Load() {
		e.ref.Store(true)
	}
	return e
}

// lookupExact finds prompt's entry, without allocating when the default
// normaliser is in use, and says whether the scope has template entries
// and vectors to look at next.
func (c *Cache[In, Out]) lookupExact(sc Scope, prompt string, now int64) (out Out, ok, tmpls, vecs bool) {
	var e *entry[Out]
	if c.fastNorm && !isNormal(prompt) {
		bp, _ := c.bufs.Get().(*[]byte)
		if bp == nil {
			bp = new([]byte)
		}
		*bp = appendNormal((*bp)[:0], prompt)
		c.mu.RLock()
		if sp := c.spaces[sc]; sp != nil {
			e = sp.exact[string(*bp)]
			tmpls, vecs = len(sp.tmpl) > 0, c.emb != nil && sp.index != nil && sp.index.Len() > 0
		}
		c.mu.RUnlock()
		c.bufs.Put(bp)
	} else {
		key := prompt
		if !c.fastNorm {
			key = c.norm(prompt)
		}
		c.mu.RLock()
		if sp := c.spaces[sc]; sp != nil {
			e = sp.exact[key]
			tmpls, vecs = len(sp.tmpl) > 0, c.emb != nil && sp.index != nil && sp.index.Len() > 0
		}
		c.mu.RUnlock()
	}
	if e == nil || e.expires <= now {
		return out, false, tmpls, vecs
	}
	if !e.ref.Load() {
		// Written once per eviction sweep, not by every hit: hits on a
		// hot entry share its line without writing it.
		e.ref.Store(true)
	}
	return e.out, true, tmpls, vecs
}

// normalize is c.norm(s). The default normaliser goes a stride at a time
// and stops when ctx ends (ok false), so that a long prompt holds a
// request past its deadline for one stride of work; a normaliser of the
// caller's runs whole.
func (c *Cache[In, Out]) normalize(ctx context.Context, s string) (string, bool) {
	if !c.fastNorm {
		return c.norm(s), true
	}
	if len(s) <= stride {
		return NormalizeText(s), true
	}
	return normalizeWithin(ctx, s)
}

// extract reads prompt's template, and counts a prompt it skipped.
func (c *Cache[In, Out]) extract(ctx context.Context, prompt string) (template, extraction) {
	t, how := extract(ctx, prompt, c.slots, c.normalize, c.maxTmpl)
	switch how {
	case tooLong:
		c.stats.tmplTooLong.Add(1)
	case cut:
		c.stats.tmplCut.Add(1)
	}
	return t, how
}

func (c *Cache[In, Out]) lookupTemplate(ctx context.Context, sc Scope, t *template, now int64) (Out, bool) {
	var zero Out
	c.mu.RLock()
	var cands []*entry[Out]
	if sp := c.spaces[sc]; sp != nil {
		cands = sp.tmpl[t.key]
	}
	// The list is replaced, never modified, under the write lock: it may
	// be read after the read lock is released.
	c.mu.RUnlock()
	for i := len(cands) - 1; i >= 0; i-- {
		e := cands[i]
		if e.expires <= now {
			continue
		}
		if sameValues(e.tmpl.vars, t.vars, e.tmpl.free, t.free) {
			e.ref.Store(true)
			return e.out, true
		}
	}
	if r := c.cfg.Template.Refill; r != nil {
		for i := len(cands) - 1; i >= 0; i-- {
			e := cands[i]
			if e.expires <= now {
				continue
			}
			if ctx.Err() != nil {
				c.stats.tmplCut.Add(1)
				break
			}
			if out, ok := r(ctx, e.out, e.tmpl.vars, t.vars); ok {
				e.ref.Store(true)
				return out, true
			}
		}
	}
	return zero, false
}

func (c *Cache[In, Out]) lookupSemantic(ctx context.Context, sc Scope, prompt string, t *template, hasT bool) (Out, string, bool) {
	var zero Out
	q, err := c.emb.embed(ctx, prompt, true)
	if err != nil {
		c.countEmbedError(err)
		if ended, ok := err.(*endedError); ok {
			ended.raise()
		}
		return zero, "", false
	}
	c.stats.embedded.Add(1)
	var mine []string
	if hasT && !c.cfg.Semantic.KeepVariables {
		mine = valueSet(t.vars, t.free)
	}
	var buf [defaultCandidates]Neighbor
	now := c.now()
	c.mu.RLock()
	sp := c.spaces[sc]
	if sp == nil || sp.index == nil || sp.dims != len(q) {
		c.mu.RUnlock()
		return zero, "", false
	}
	found := sp.index.Search(q, defaultCandidates, buf[:0])
	var best *entry[Out]
	var sim float32
	for _, n := range found {
		e := c.byID[n.ID]
		if e == nil || e.scope != sc || e.expires <= now {
			continue
		}
		if n.Similarity < c.threshold && (c.simple == 0 || n.Similarity < c.simple) {
			break
		}
		if !c.cfg.Semantic.KeepVariables && !equalStrings(mine, valueSet(e.tmpl.vars, e.tmpl.free)) {
			continue
		}
		best, sim = e, n.Similarity
		break
	}
	c.mu.RUnlock()
	if best == nil {
		return zero, "", false
	}
	best.ref.Store(true)
	if sim >= c.threshold {
		return best.out, HitSemantic, true
	}
	return best.out, HitSimplified, true
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (c *Cache[In, Out]) countEmbedError(err error) {
	if errors.Is(err, errEmbedBudget) || errors.Is(err, breaker.ErrOpen) {
		c.stats.embedSkipped.Add(1)
		return
	}
	c.stats.embedFailures.Add(1)
}

// Put implements fallback.Cache: it caches out as the answer to in,
// replacing the answer in's prompt had. The chain calls it only for
// answers that came from a tier and passed validation; call it yourself
// only with answers you would serve. The prompt's embedding is made, and
// the entry shared, on the cache's own goroutine: Put never waits for the
// embedder or the Store.
//
// Put works within ctx: it reads a long prompt (normalising, matching
// templates, hashing) a stride of 16 KiB at a time, and stops when ctx
// has ended, so that it outlasts ctx by one stride of work whatever the
// prompt's length. Cut while matching templates, the answer is cached for
// its prompt alone (Stats.TemplateCut); cut before its prompt's key is
// made, it is not cached (Stats.WritesCut); that never happens to a
// prompt of at most 16 KiB.
func (c *Cache[In, Out]) Put(ctx context.Context, in In, out Out) {
	prompt := c.cfg.Prompt(in)
	sc := c.scopeOf(ctx, in)
	key, ok := c.normalize(ctx, prompt)
	if !ok {
		c.stats.writesCut.Add(1)
		return
	}
	e := &entry[Out]{scope: sc, key: key, out: out}
	// The id before the template: a write cut while matching templates
	// is still cached for its prompt, with no more of its work to do.
	if e.id, ok = entryIDWithin(ctx, e.scope, e.key); !ok {
		c.stats.writesCut.Add(1)
		return
	}
	if len(c.slots) > 0 {
		var how extraction
		e.tmpl, how = c.extract(ctx, prompt)
		e.hasTmpl = how == extracted
		e.unread = (how == tooLong || how == cut) && !c.cfg.Semantic.KeepVariables
	}
	if c.cfg.Model != nil {
		e.model = c.cfg.Model(out)
	}
	e.size = c.entrySize(e)
	if e.size > c.maxBytes/16 {
		c.stats.rejected.Add(1)
		return
	}
	now := c.now()
	e.expires = now + int64(c.ttl)
	c.mu.Lock()
	c.insertLocked(e, now)
	hasVec := e.vec != nil
	c.mu.Unlock()
	c.stats.writes.Add(1)
	if c.queue != nil && !c.closed.Load() && (c.cfg.Store != nil || (!hasVec && !e.unread)) {
		select {
		case c.queue <- job[Out]{ctx: context.WithoutCancel(ctx), e: e, prompt: prompt}:
		default:
			c.stats.dropped.Add(1)
		}
	}
}

func (c *Cache[In, Out]) entrySize(e *entry[Out]) int64 {
	n := entryOverhead + len(e.key) + len(e.tmpl.key) + len(e.model) + 4*len(e.vec)
	for _, v := range e.tmpl.vars {
		n += len(v.Slot) + len(v.Value) + int(unsafe.Sizeof(v)) + 1
	}
	switch {
	case c.cfg.Size != nil:
		n += c.cfg.Size(e.out)
	default:
		switch v := any(e.out).(type) {
		case string:
			n += len(v)
		case []byte:
			n += len(v)
		default:
			b, err := c.codec.Marshal(e.out)
			if err == nil {
				n += len(b)
			}
		}
	}
	return int64(n)
}

// entryID hashes an entry's scope and key (FNV-1a): the same in every
// process, so that a Store holds one record per prompt and scope. Each
// part is preceded by its length in 8 bytes, so that no two scopes and
// keys hash the same bytes (with a separator between the parts, a NUL in
// a tenant or scenario moved the boundary: two scopes shared an id).
func entryID(s Scope, key string) uint64 {
	id, _ := entryIDWithin(context.Background(), s, key)
	return id
}

// entryIDWithin is entryID, checking ctx every stride of the key: ok is
// false when ctx ended first.
func entryIDWithin(ctx context.Context, s Scope, key string) (id uint64, ok bool) {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	for _, part := range [...]string{s.Tenant, s.Scenario, key} {
		for n, i := uint64(len(part)), 0; i < 8; i++ {
			h ^= n & 0xff
			h *= prime
			n >>= 8
		}
		for off := 0; off < len(part); off += stride {
			if off > 0 && ctx.Err() != nil {
				return 0, false
			}
			for i := off; i < min(off+stride, len(part)); i++ {
				h ^= uint64(part[i])
				h *= prime
			}
		}
	}
	return h, true
}

// insertLocked adds e, replacing the entry of the same key, then makes
// room.
func (c *Cache[In, Out]) insertLocked(e *entry[Out], now int64) {
	c.sweepLocked(now)
	sp := c.spaces[e.scope]
	if sp == nil {
		sp = &space[Out]{exact: map[string]*entry[Out]{}, tmpl: map[string][]*entry[Out]{}}
		c.spaces[e.scope] = sp
	}
	reused := false
	if old := sp.exact[e.key]; old != nil {
		if e.vec == nil && old.vec != nil && old.id == e.id && !e.unread {
			// The same prompt answered again: its embedding stands, in the
			// index as it is (no new embedding call, no re-linking).
			e.vec, e.size, reused = old.vec, e.size+int64(4*len(old.vec)), true
			old.vec = nil
		}
		c.removeLocked(old)
		if c.spaces[e.scope] == nil {
			c.spaces[e.scope] = sp
		}
	}
	sp.exact[e.key] = e
	c.exact.add(e)
	if e.hasTmpl {
		list := sp.tmpl[e.tmpl.key]
		if len(list) >= c.perTmpl {
			list = list[len(list)-c.perTmpl+1:]
		}
		sp.tmpl[e.tmpl.key] = append(append(make([]*entry[Out], 0, len(list)+1), list...), e)
	}
	if e.vec != nil && !reused {
		c.indexLocked(sp, e)
	}
	c.byID[e.id] = e
	e.prev = c.tail
	if c.tail != nil {
		c.tail.next = e
	} else {
		c.head = e
	}
	c.tail = e
	c.bytes += e.size
	c.evictLocked(now, e)
}

func (c *Cache[In, Out]) indexLocked(sp *space[Out], e *entry[Out]) {
	if c.newIndex == nil {
		return
	}
	if sp.index == nil {
		sp.index, sp.dims = c.newIndex(len(e.vec)), len(e.vec)
	}
	if len(e.vec) != sp.dims {
		// A new embedding model: the old vectors cannot be compared.
		return
	}
	sp.index.Add(e.id, e.vec)
}

// sweepLocked drops expired entries from the old end.
func (c *Cache[In, Out]) sweepLocked(now int64) {
	for c.head != nil && c.head.expires <= now {
		c.removeLocked(c.head)
		c.stats.expired.Add(1)
	}
}

// evictLocked drops entries until the cache fits MaxBytes: CLOCK, from
// the oldest, sparing once each entry hit since the hand last passed, and
// keep (the entry being written).
func (c *Cache[In, Out]) evictLocked(now int64, keep *entry[Out]) {
	for c.bytes > c.maxBytes && c.head != nil && (c.head != keep || keep.next != nil) {
		if c.hand == nil {
			c.hand = c.head
		}
		e := c.hand
		c.hand = e.next
		if e.expires <= now {
			c.removeLocked(e)
			c.stats.expired.Add(1)
			continue
		}
		if e == keep || e.ref.Swap(false) {
			continue
		}
		c.removeLocked(e)
		c.stats.evicted.Add(1)
	}
}

func (c *Cache[In, Out]) removeLocked(e *entry[Out]) {
	if e.gone {
		return
	}
	e.gone = true
	if c.hand == e {
		c.hand = e.next
	}
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		c.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		c.tail = e.prev
	}
	e.prev, e.next = nil, nil
	c.bytes -= e.size
	if c.byID[e.id] == e {
		delete(c.byID, e.id)
	}
	sp := c.spaces[e.scope]
	if sp == nil {
		return
	}
	if sp.exact[e.key] == e {
		delete(sp.exact, e.key)
		c.exact.remove(e)
	}
	if e.hasTmpl {
		list := sp.tmpl[e.tmpl.key]
		for i, x := range list {
			if x == e {
				next := append(append(make([]*entry[Out], 0, len(list)-1), list[:i]...), list[i+1:]...)
				if len(next) == 0 {
					delete(sp.tmpl, e.tmpl.key)
				} else {
					sp.tmpl[e.tmpl.key] = next
				}
				break
			}
		}
	}
	if e.vec != nil && sp.index != nil {
		sp.index.Remove(e.id)
	}
	if len(sp.exact) == 0 {
		delete(c.spaces, e.scope)
	}
}

// work embeds written prompts and shares entries, one at a time.
func (c *Cache[In, Out]) work() {
	defer c.wg.Done()
	for {
		select {
		case <-c.stop:
			return
		case j := <-c.queue:
			c.process(j)
		}
	}
}

func (c *Cache[In, Out]) process(j job[Out]) {
	e := j.e
	c.mu.RLock()
	embedded := e.vec != nil
	c.mu.RUnlock()
	if c.emb != nil && !embedded && !e.unread {
		vec, err := c.emb.embed(j.ctx, j.prompt, false)
		if err != nil {
			c.countEmbedError(err)
		} else {
			c.stats.embedded.Add(1)
			c.mu.Lock()
			if !e.gone {
				e.vec = vec
				extra := int64(4 * len(vec))
				e.size += extra
				c.bytes += extra
				if sp := c.spaces[e.scope]; sp != nil {
					c.indexLocked(sp, e)
				}
				c.evictLocked(c.now(), e)
			}
			c.mu.Unlock()
		}
	}
	if c.cfg.Store == nil {
		return
	}
	c.mu.RLock()
	gone, vec := e.gone, e.vec
	c.mu.RUnlock()
	if gone {
		return
	}
	ans, err := c.codec.Marshal(e.out)
	if err != nil {
		c.stats.storeErrors.Add(1)
		return
	}
	rec := &Record{
		ID: e.id, Tenant: e.scope.Tenant, Scenario: e.scope.Scenario, Key: e.key,
		Model: e.model, Answer: ans, Vector: vec, Expires: c.epoch.Add(time.Duration(e.expires)),
	}
	if e.hasTmpl {
		rec.Template, rec.Vars, rec.Free = e.tmpl.key, e.tmpl.vars, e.tmpl.free
	}
	if err := c.cfg.Store.Save(j.ctx, rec); err != nil {
		c.stats.storeErrors.Add(1)
		return
	}
	c.mu.Lock()
	e.shared = true
	c.mu.Unlock()
	c.stats.saved.Add(1)
}

// apply takes in what the Store reports.
func (c *Cache[In, Out]) apply(ch Change) {
	now, mono := time.Now(), c.now()
	var fresh []*entry[Out]
	for _, r := range ch.Saved {
		if r == nil || !r.Expires.After(now) {
			continue
		}
		out, err := c.codec.Unmarshal(r.Answer)
		if err != nil {
			c.stats.storeErrors.Add(1)
			continue
		}
		// At most the TTL from now: a record's expiry far in the future
		// saturates Sub.
		expires := mono + int64(min(r.Expires.Sub(now), c.ttl))
		e := &entry[Out]{
			id: r.ID, scope: Scope{Tenant: r.Tenant, Scenario: r.Scenario}, key: r.Key, model: r.Model,
			out: out, remote: true, expires: expires,
		}
		if len(r.Vector) > 0 {
			if v, err := unit(r.Vector); err == nil {
				e.vec = v
			}
		}
		if r.Template != "" && len(r.Vars) == len(r.Free) {
			e.tmpl, e.hasTmpl = template{key: r.Template, vars: r.Vars, free: r.Free}, true
		}
		e.size = c.entrySize(e)
		if e.size > c.maxBytes/16 {
			continue
		}
		fresh = append(fresh, e)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range fresh {
		if old := c.byID[e.id]; old != nil && old.key == e.key && old.expires >= e.expires {
			continue // what we hold is as new
		}
		c.insertLocked(e, mono)
		c.stats.applied.Add(1)
	}
	if ch.Invalidated != nil {
		c.stats.invalidated.Add(uint64(c.invalidateLocked(func(e *entry[Out]) bool { return ch.Invalidated.matches(e.id, e.scope.Tenant, e.model) })))
	}
	if ch.Live != nil {
		c.stats.invalidated.Add(uint64(c.invalidateLocked(func(e *entry[Out]) bool {
			_, live := ch.Live[e.id]
			return (e.remote || e.shared) && !live
		})))
	}
}

func (s *Selector) matches(id uint64, tenant, model string) bool {
	switch {
	case s.ID != 0:
		return id == s.ID
	case s.Tenant != "":
		return tenant == s.Tenant
	case s.Model != "":
		return model == s.Model
	}
	return false
}

func (c *Cache[In, Out]) invalidateLocked(drop func(*entry[Out]) bool) int {
	n := 0
	for e := c.head; e != nil; {
		next := e.next
		if drop(e) {
			c.removeLocked(e)
			n++
		}
		e = next
	}
	return n
}

// Invalidate drops the answer cached for in's prompt in in's scope (the
// exact entry: other prompts of its template or meaning keep theirs), here
// and, with a Store, in every process. It reports whether this process
// held one; the error is the Store's.
func (c *Cache[In, Out]) Invalidate(ctx context.Context, in In) (bool, error) {
	id := entryID(c.scopeOf(ctx, in), c.norm(c.cfg.Prompt(in)))
	n := c.invalidate(func(e *entry[Out]) bool { return e.id == id })
	return n > 0, c.share(ctx, Selector{ID: id})
}

// InvalidateTenant drops every answer cached for tenant, here and, with a
// Store, in every process, and returns how many this process held.
func (c *Cache[In, Out]) InvalidateTenant(ctx context.Context, tenant string) (int, error) {
	if tenant == "" {
		return 0, errors.New("cache: InvalidateTenant needs a tenant")
	}
	n := c.invalidate(func(e *entry[Out]) bool { return e.scope.Tenant == tenant })
	return n, c.share(ctx, Selector{Tenant: tenant})
}

// InvalidateModel drops every answer a model produced (as Config.Model
// reports it) — after a model was found to give wrong answers — here and,
// with a Store, in every process, and returns how many this process held.
func (c *Cache[In, Out]) InvalidateModel(ctx context.Context, model string) (int, error) {
	if model == "" {
		return 0, errors.New("cache: InvalidateModel needs a model")
	}
	n := c.invalidate(func(e *entry[Out]) bool { return e.model == model })
	return n, c.share(ctx, Selector{Model: model})
}

func (c *Cache[In, Out]) invalidate(drop func(*entry[Out]) bool) int {
	c.mu.Lock()
	n := c.invalidateLocked(drop)
	c.mu.Unlock()
	c.stats.invalidated.Add(uint64(n))
	return n
}

func (c *Cache[In, Out]) share(ctx context.Context, sel Selector) error {
	if c.cfg.Store == nil {
		return nil
	}
	if err := c.cfg.Store.Invalidate(ctx, sel); err != nil {
		c.stats.storeErrors.Add(1)
		return err
	}
	return nil
}

// Stats returns the cache's counters and size.
func (c *Cache[In, Out]) Stats() Stats {
	c.mu.RLock()
	n, b := len(c.byID), c.bytes
	c.mu.RUnlock()
	s := &c.stats
	return Stats{
		Entries: n, Bytes: b,
		Exact: s.exact.Load(), Template: s.template.Load(), Semantic: s.semantic.Load(), Simplified: s.simplified.Load(), Misses: s.misses.Load(),
		Writes: s.writes.Load(), Rejected: s.rejected.Load(),
		Evicted: s.evicted.Load(), Expired: s.expired.Load(), Invalidated: s.invalidated.Load(),
		Embedded: s.embedded.Load(), EmbedFailures: s.embedFailures.Load(), EmbedSkipped: s.embedSkipped.Load(), Dropped: s.dropped.Load(),
		Saved: s.saved.Load(), StoreErrors: s.storeErrors.Load(), Applied: s.applied.Load(),
		TemplateTooLong: s.tmplTooLong.Load(), TemplateCut: s.tmplCut.Load(), WritesCut: s.writesCut.Load(),
	}
}
