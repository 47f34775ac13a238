package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierguard/tierguard/fallback/cache"
)

// Defaults applied to zero fields of Config.
const (
	DefaultPrefix    = "tierguard:cache:"
	DefaultTimeout   = 500 * time.Millisecond
	DefaultResync    = 30 * time.Second
	DefaultBatchSize = 500
	// overlap is how far back an incremental resync looks before the last
	// save it saw: the clocks of the processes drift a little.
	overlap = 5 * time.Second
)

// Config configures a Store.
type Config struct {
	// Client talks to Redis: a single node, a Sentinel failover client or
	// a Cluster client (put a hash tag in Prefix, "{tg-cache}:", so that
	// every key of the store lives in one slot). Required.
	Client redis.UniversalClient
	// Prefix starts every key and the channel's name; DefaultPrefix when
	// empty. Processes that share a prefix share their caches: use one per
	// environment and cache.
	Prefix string
	// Timeout bounds each Redis operation. DefaultTimeout (500ms) when
	// zero. No lookup ever waits on one: saves run on the cache's own
	// goroutine, resyncs on the store's.
	Timeout time.Duration
	// Resync is how often the store reads what other processes saved since
	// the last resync — the safety net for publications missed while
	// Redis or the subscription was away — and checks whether it missed an
	// invalidation (then it compares every entry). DefaultResync (30s)
	// when zero.
	Resync time.Duration
	// BatchSize bounds the records read per Redis command in a resync.
	// DefaultBatchSize (500) when zero.
	BatchSize int
}

// Store shares a cache's entries and their embeddings among processes
// through Redis. It implements cache.Store: give it to cache.Config.Store
// in every process, one Store per cache (a store does not hand a cache
// the publications of its own process). A Store is safe for concurrent
// use; Close it on shutdown, after the cache that uses it.
//
// Each entry is one Redis string (a JSON record, which expires with the
// entry), listed in two sorted sets (by save time, for resyncs; by expiry,
// for cleanup) and in a set per tenant and per model (for
// invalidations). A save is published on a channel, so other processes
// hold the entry within a round trip; a resync every Resync reads what the
// channel missed. Invalidations are published too, and counted: a process
// that finds the count moved past what it heard compares its entries with
// the store's and drops the missing ones.
//
// Redis down, slow or frozen costs nothing but sharing: lookups are local,
// saves fail after Timeout on the cache's goroutine (the cache counts
// them), and every process keeps serving what it holds.
type Store struct {
	client  redis.UniversalClient
	cfg     Config
	channel string
	origin  string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// deliverMu orders what the subscription and a resync hand the
	// caches: a resync's snapshot is read before it is delivered, and the
	// publications delivered meanwhile (tracked in since) are newer than
	// the snapshot.
	deliverMu sync.Mutex
	since     *sinceSnapshot
	// inflight are this process's invalidations being written: a snapshot
	// read meanwhile may still hold what they drop (their caches already
	// dropped it).
	inflight []*cache.Selector
	// kick asks the resync loop for a resync now: the subscription came
	// back, and publications may have been missed while it was away.
	kick chan struct{}
	// subscribed counts the subscription's confirmations handled; kicks
	// counts the resyncs asked for, and kicksDone the asks a finished
	// resync had seen when it started: tests wait for a store to be quiet
	// (see export_test.go).
	subscribed, kicks, kicksDone atomic.Int64
	// afterSnapshot, when set, runs between a resync's reads and its
	// delivery (tests hold a resync there).
	afterSnapshot func()

	mu        sync.Mutex
	observers []*observer
	started   bool
	// lastSave is the newest save time (ms) a resync has read; gen the
	// invalidation count heard of; seen the ids delivered so far.
	lastSave int64
	gen      int64
	healthy  atomic.Bool
	closed   atomic.Bool
	stats    counters
}

type observer struct{ fn func(cache.Change) }

// sinceSnapshot is what the subscription delivered while a resync read
// its snapshot: the resync must not drop those saves (its list of live
// ids predates them) nor bring back what those invalidations dropped (its
// records predate them).
type sinceSnapshot struct {
	saved map[uint64]struct{}
	inval []cache.Selector
}

// matches reports whether an invalidation the subscription delivered
// since the snapshot began drops rec.
func (ss *sinceSnapshot) matches(rec *cache.Record) bool {
	for _, sel := range ss.inval {
		switch {
		case sel.ID != 0:
			if rec.ID == sel.ID {
				return true
			}
		case sel.Tenant != "":
			if rec.Tenant == sel.Tenant {
				return true
			}
		case sel.Model != "":
			if rec.Model == sel.Model {
				return true
			}
		}
	}
	return false
}

type counters struct {
	saves, invalidations, received, resyncs, reconciles, errors atomic.Uint64
}

// Stats are a Store's counters since New.
type Stats struct {
	// Saves and Invalidations count what this process wrote.
	Saves, Invalidations uint64
	// Received counts the publications of other processes applied.
	Received uint64
	// Resyncs counts resyncs; Reconciles the full comparisons a missed
	// invalidation caused.
	Resyncs, Reconciles uint64
	// Errors counts failed Redis operations.
	Errors uint64
	// Healthy reports whether the last Redis operation succeeded.
	Healthy bool
}

// message is what the channel carries.
type message struct {
	Origin string          `json:"o"`
	Saved  *cache.Record   `json:"s,omitempty"`
	Inval  *cache.Selector `json:"i,omitempty"`
	Gen    int64           `json:"g,omitempty"`
}

// New returns a Store, or an error naming every invalid field. It starts
// listening once the first cache observes it.
func New(cfg Config) (*Store, error) {
	var errs []error
	if cfg.Client == nil {
		errs = append(errs, errors.New("missing Client"))
	}
	if strings.ContainsAny(cfg.Prefix, " \n\r\t") {
		errs = append(errs, fmt.Errorf("invalid Prefix %q (white space)", cfg.Prefix))
	}
	if cfg.Timeout < 0 {
		errs = append(errs, fmt.Errorf("negative Timeout %v", cfg.Timeout))
	}
	if cfg.Resync < 0 {
		errs = append(errs, fmt.Errorf("negative Resync %v", cfg.Resync))
	}
	if cfg.BatchSize < 0 {
		errs = append(errs, fmt.Errorf("negative BatchSize %d", cfg.BatchSize))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("redisstore: invalid config: %w", err)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Resync == 0 {
		cfg.Resync = DefaultResync
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	var tok [8]byte
	_, _ = rand.Read(tok[:])
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{client: cfg.Client, cfg: cfg, channel: cfg.Prefix + "ch", origin: hex.EncodeToString(tok[:]), ctx: ctx, cancel: cancel, kick: make(chan struct{}, 1)}
	s.healthy.Store(true)
	return s, nil
}

var _ cache.Store = (*Store)(nil)

func (s *Store) key(parts ...string) string { return s.cfg.Prefix + strings.Join(parts, "") }

// hashed names a tenant or model in a key without writing it there.
func hashed(v string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(v))
	return strconv.FormatUint(h.Sum64(), 36)
}

func (s *Store) result(err error) error {
	if err != nil && !errors.Is(err, redis.Nil) {
		s.stats.errors.Add(1)
		s.healthy.Store(false)
		return err
	}
	s.healthy.Store(true)
	return nil
}

// Save implements cache.Store: the record, its listings and a
// publication, in one transaction.
func (s *Store) Save(ctx context.Context, rec *cache.Record) error {
	if s.closed.Load() {
		return errClosed
	}
	ttl := time.Until(rec.Expires)
	if ttl <= 0 {
		return nil
	}
	body, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	msg, err := json.Marshal(message{Origin: s.origin, Saved: rec})
	if err != nil {
		return err
	}
	id := strconv.FormatUint(rec.ID, 10)
	meta := hashed(rec.Tenant) + "," + hashed(rec.Model)
	octx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	_, err = s.client.TxPipelined(octx, func(p redis.Pipeliner) error {
		p.Set(octx, s.key("r:", id), body, ttl)
		p.ZAdd(octx, s.key("z"), redis.Z{Score: float64(time.Now().UnixMilli()), Member: id})
		p.ZAdd(octx, s.key("x"), redis.Z{Score: float64(rec.Expires.UnixMilli()), Member: id})
		p.HSet(octx, s.key("meta"), id, meta)
		p.SAdd(octx, s.key("t:", hashed(rec.Tenant)), id)
		if rec.Model != "" {
			p.SAdd(octx, s.key("m:", hashed(rec.Model)), id)
		}
		p.Publish(octx, s.channel, msg)
		return nil
	})
	if err = s.result(err); err == nil {
		s.stats.saves.Add(1)
	}
	return err
}

var errClosed = errors.New("redisstore: store closed")

// invalidate drops the ids of one set (or one id), counts the
// invalidation and publishes it, atomically; it returns the new count.
var invalidateScript = redis.NewScript(`
local p = ARGV[1]
local ids
if ARGV[2] == "id" then
  ids = {ARGV[3]}
else
  ids = redis.call('SMEMBERS', p .. ARGV[2] .. ':' .. ARGV[3])
  redis.call('DEL', p .. ARGV[2] .. ':' .. ARGV[3])
end
for _, id in ipairs(ids) do
  redis.call('DEL', p .. 'r:' .. id)
  redis.call('ZREM', p .. 'z', id)
  redis.call('ZREM', p .. 'x', id)
  redis.call('HDEL', p .. 'meta', id)
end
local gen = redis.call('INCR', p .. 'gen')
redis.call('PUBLISH', p .. 'ch', (string.gsub(ARGV[4], '"g":0', '"g":' .. gen, 1)))
return gen
`)

// Invalidate implements cache.Store.
func (s *Store) Invalidate(ctx context.Context, sel cache.Selector) error {
	if s.closed.Load() {
		return errClosed
	}
	kind, arg := "", ""
	switch {
	case sel.ID != 0:
		kind, arg = "id", strconv.FormatUint(sel.ID, 10)
	case sel.Tenant != "":
		kind, arg = "t", hashed(sel.Tenant)
	case sel.Model != "":
		kind, arg = "m", hashed(sel.Model)
	default:
		return errors.New("redisstore: an invalidation needs an ID, a Tenant or a Model")
	}
	// "g":0 is a placeholder the script fills in with the new count.
	msg := `{"o":"` + s.origin + `","i":` + mustJSON(sel) + `,"g":0}`
	octx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	// The cache dropped its entries before calling: a resync whose
	// snapshot was read before the script ran must not bring them back.
	s.deliverMu.Lock()
	s.inflight = append(s.inflight, &sel)
	if s.since != nil {
		s.since.inval = append(s.since.inval, sel)
	}
	s.deliverMu.Unlock()
	defer func() {
		s.deliverMu.Lock()
		s.inflight = slices.DeleteFunc(s.inflight, func(x *cache.Selector) bool { return x == &sel })
		s.deliverMu.Unlock()
	}()
	gen, err := invalidateScript.Run(octx, s.client, []string{s.key("gen")}, s.cfg.Prefix, kind, arg, msg).Int64()
	if err = s.result(err); err != nil {
		return err
	}
	s.stats.invalidations.Add(1)
	s.heard(gen)
	return nil
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// heard notes an invalidation count this process knows of.
func (s *Store) heard(gen int64) {
	s.mu.Lock()
	s.gen = max(s.gen, gen)
	s.mu.Unlock()
}

// Observe implements cache.Store. The first observer starts the store's
// goroutines: the subscription, and the resync loop, whose first round
// delivers every record the store holds.
func (s *Store) Observe(fn func(cache.Change)) (remove func()) {
	o := &observer{fn: fn}
	s.mu.Lock()
	s.observers = append(s.observers, o)
	start := !s.started && !s.closed.Load()
	s.started = s.started || start
	s.mu.Unlock()
	if start {
		ps := s.client.Subscribe(s.ctx, s.channel)
		s.wg.Add(2)
		go s.listen(ps)
		go s.loop()
	}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, x := range s.observers {
			if x == o {
				s.observers = append(s.observers[:i:i], s.observers[i+1:]...)
				return
			}
		}
	}
}

func (s *Store) deliver(ch cache.Change) {
	s.mu.Lock()
	obs := append([]*observer(nil), s.observers...)
	s.mu.Unlock()
	for _, o := range obs {
		o.fn(ch)
	}
}

func (s *Store) listen(ps *redis.PubSub) {
	defer s.wg.Done()
	defer ps.Close()
	msgs := ps.ChannelWithSubscriptions(redis.WithChannelHealthCheckInterval(s.cfg.Resync))
	for {
		select {
		case <-s.ctx.Done():
			return
		case m, ok := <-msgs:
			if !ok {
				return
			}
			switch m := m.(type) {
			case *redis.Subscription:
				// (Re)subscribed: what was published while the
				// subscription was away is read now, not at the next
				// resync.
				if m.Kind == "subscribe" {
					s.resyncNow()
					s.subscribed.Add(1)
				}
			case *redis.Message:
				s.receive(m.Payload)
			}
		}
	}
}

// receive delivers one publication of another process.
func (s *Store) receive(payload string) {
	var msg message
	if json.Unmarshal([]byte(payload), &msg) != nil || msg.Origin == s.origin {
		return
	}
	s.stats.received.Add(1)
	s.deliverMu.Lock()
	defer s.deliverMu.Unlock()
	switch {
	case msg.Saved != nil:
		if s.since != nil {
			s.since.saved[msg.Saved.ID] = struct{}{}
		}
		s.deliver(cache.Change{Saved: []*cache.Record{msg.Saved}})
	case msg.Inval != nil:
		if s.since != nil {
			s.since.inval = append(s.since.inval, *msg.Inval)
		}
		s.heard(msg.Gen)
		s.deliver(cache.Change{Invalidated: msg.Inval})
	}
}

func (s *Store) resyncNow() {
	s.kicks.Add(1)
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *Store) loop() {
	defer s.wg.Done()
	full := true
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		case <-s.kick:
			t.Stop()
		}
		asked := s.kicks.Load()
		if err := s.resync(full); err == nil {
			full = false
		}
		s.kicksDone.Store(asked)
		t.Reset(s.cfg.Resync)
	}
}

// cleanupScript drops the listings of up to ARGV[3] records that expired.
var cleanupScript = redis.NewScript(`
local p = ARGV[1]
local ids = redis.call('ZRANGEBYSCORE', p .. 'x', '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(ids) do
  local meta = redis.call('HGET', p .. 'meta', id)
  if meta then
    local comma = string.find(meta, ',', 1, true)
    redis.call('SREM', p .. 't:' .. string.sub(meta, 1, comma - 1), id)
    redis.call('SREM', p .. 'm:' .. string.sub(meta, comma + 1), id)
    redis.call('HDEL', p .. 'meta', id)
  end
  redis.call('ZREM', p .. 'z', id)
  redis.call('ZREM', p .. 'x', id)
  redis.call('DEL', p .. 'r:' .. id)
end
return #ids
`)

// resync reads the records saved since the last resync (all of them when
// full, or when an invalidation was missed, and then the list of live ids
// too) and delivers them.
func (s *Store) resync(full bool) error {
	ctx, cancel := context.WithTimeout(s.ctx, 4*s.cfg.Timeout)
	defer cancel()
	// From here on, the subscription notes what it delivers: the snapshot
	// read below may predate it.
	s.deliverMu.Lock()
	s.since = &sinceSnapshot{saved: map[uint64]struct{}{}}
	for _, sel := range s.inflight {
		s.since.inval = append(s.since.inval, *sel)
	}
	s.deliverMu.Unlock()
	defer func() {
		s.deliverMu.Lock()
		s.since = nil
		s.deliverMu.Unlock()
	}()
	gen, err := s.client.Get(ctx, s.key("gen")).Int64()
	if err = s.result(err); err != nil {
		return err
	}
	s.mu.Lock()
	missed := gen > s.gen
	since := s.lastSave - overlap.Milliseconds()
	s.mu.Unlock()
	if missed {
		full = true
		s.stats.reconciles.Add(1)
	}
	if err := s.result(cleanupScript.Run(ctx, s.client, []string{s.key("x")}, s.cfg.Prefix, time.Now().UnixMilli(), s.cfg.BatchSize).Err()); err != nil {
		return err
	}
	from := "-inf"
	if !full {
		from = strconv.FormatInt(since, 10)
	}
	zs, err := s.client.ZRangeByScoreWithScores(ctx, s.key("z"), &redis.ZRangeBy{Min: from, Max: "+inf"}).Result()
	if err = s.result(err); err != nil {
		return err
	}
	var live map[uint64]struct{}
	if full {
		live = make(map[uint64]struct{}, len(zs))
	}
	newest := since
	var recs []*cache.Record
	for i := 0; i < len(zs); i += s.cfg.BatchSize {
		batch := zs[i:min(i+s.cfg.BatchSize, len(zs))]
		keys := make([]string, len(batch))
		for j, z := range batch {
			keys[j] = s.key("r:", z.Member.(string))
			newest = max(newest, int64(z.Score))
		}
		vals, err := s.client.MGet(ctx, keys...).Result()
		if err = s.result(err); err != nil {
			return err
		}
		for _, v := range vals {
			str, ok := v.(string)
			if !ok {
				continue // expired since it was listed
			}
			var rec cache.Record
			if json.Unmarshal([]byte(str), &rec) != nil {
				continue
			}
			if live != nil {
				live[rec.ID] = struct{}{}
			}
			recs = append(recs, &rec)
		}
	}
	if s.afterSnapshot != nil {
		s.afterSnapshot()
	}
	s.mu.Lock()
	s.lastSave = max(s.lastSave, newest)
	s.gen = max(s.gen, gen)
	s.mu.Unlock()
	// The publications delivered since the snapshot began are newer than
	// it: a save among them stays live, and nothing they invalidated
	// comes back.
	s.deliverMu.Lock()
	defer s.deliverMu.Unlock()
	recs = slices.DeleteFunc(recs, s.since.matches)
	for id := range s.since.saved {
		if live != nil {
			live[id] = struct{}{}
		}
	}
	s.stats.resyncs.Add(1)
	s.deliver(cache.Change{Saved: recs, Live: live})
	return nil
}

// Close stops the store's goroutines. Later saves and invalidations fail;
// it does not close the client. Close is idempotent.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.cancel()
	s.wg.Wait()
	return nil
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	return Stats{
		Saves: s.stats.saves.Load(), Invalidations: s.stats.invalidations.Load(), Received: s.stats.received.Load(),
		Resyncs: s.stats.resyncs.Load(), Reconciles: s.stats.reconciles.Load(), Errors: s.stats.errors.Load(),
		Healthy: s.healthy.Load(),
	}
}
