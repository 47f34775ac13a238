package redisstore_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/cache"
	"github.com/tierguard/tierguard/fallback/cache/redisstore"
	"github.com/tierguard/tierguard/internal/testbed/redisserver"
)

var bg = context.Background()

// vectors is the deterministic embedder every process of the tests uses.
var vectors = map[string][]float32{
	"How do I reset my password?":     {1, 0, 0, 0},
	"I forgot my password, what now?": {0.99, 0.14, 0, 0},
	"What are your opening hours?":    {0, 1, 0, 0},
}

var embedder = cache.EmbedderFunc(func(_ context.Context, text string) (cache.Embedding, error) {
	v, ok := vectors[text]
	if !ok {
		return cache.Embedding{}, errors.New("no vector for this text")
	}
	return cache.Embedding{Vector: v, Model: "fixed"}, nil
})

type answer struct {
	Model string
	Text  string
}

func newStore(t testing.TB, addr, pfx string, resync time.Duration) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(redisstore.Config{Client: newClient(t, addr), Prefix: pfx, Resync: resync, Timeout: 300 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// newCache is one process's cache over store; caches are closed before
// their stores (cleanups run last-in first-out).
func newCache(t testing.TB, store cache.Store) *cache.Cache[string, answer] {
	t.Helper()
	c, err := cache.New(cache.Config[string, answer]{
		Prompt:   func(q string) string { return q },
		Model:    func(a answer) string { return a.Model },
		Semantic: cache.SemanticConfig{Embedder: embedder},
		Store:    store,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

// TestAnswerCachedByOneProcessIsServedByAnother runs a second OS process
// (this test binary again) that writes an answer; this process serves it,
// to the same question and to a paraphrase, from the embedding the child
// made — and so does a cache started after the child is gone.
func TestAnswerCachedByOneProcessIsServedByAnother(t *testing.T) {
	if addr := os.Getenv(childEnv); addr != "" {
		child(t, addr, os.Getenv("TIERGUARD_CACHESTORE_PREFIX"))
		return
	}
	addr := sharedAddr(t)
	pfx := prefix(t)
	here := newCache(t, newStore(t, addr, pfx, time.Minute))
	waitSubscribed(t, addr, pfx+"ch", 1)

	exe, err := os.Executable()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-test.run=^TestAnswerCachedByOneProcessIsServedByAnother$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+addr, "TIERGUARD_CACHESTORE_PREFIX="+pfx)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	said := false
	for sc := bufio.NewScanner(out); sc.Scan(); {
		if sc.Text() == "child: saved" {
			said = true
		}
	}
	require.NoError(t, cmd.Wait())
	require.True(t, said, "the child saved its answer")

	acme := fallback.WithRequest(bg, fallback.Request{Tenant: "acme"})
	want := answer{Model: "gemini-2.5-pro", Text: "Use the reset link."}
	require.Eventually(t, func() bool { _, _, ok := here.Get(acme, "How do I reset my password?"); return ok }, 10*time.Second, 5*time.Millisecond)
	for _, tc := range []struct {
		q    string
		want string
	}{{"how do i reset my password?", cache.HitExact}, {"I forgot my password, what now?", cache.HitSemantic}} {
		got, hit, ok := here.Get(acme, tc.q)
		require.True(t, ok, tc.q)
		assert.Equal(t, want, got)
		assert.Equal(t, tc.want, hit)
	}
	_, _, ok := here.Get(fallback.WithRequest(bg, fallback.Request{Tenant: "globex"}), "How do I reset my password?")
	assert.False(t, ok, "the tenant travels with the entry")

	later := newCache(t, newStore(t, addr, pfx, time.Minute))
	require.Eventually(t, func() bool {
		_, hit, _ := later.Get(acme, "I forgot my password, what now?")
		return hit == cache.HitSemantic
	}, 10*time.Second, 5*time.Millisecond, "a process started later loads the entry, its embedding included")
}

func child(t *testing.T, addr, pfx string) {
	c := newCache(t, newStore(t, addr, pfx, time.Minute))
	c.Put(fallback.WithRequest(bg, fallback.Request{Tenant: "acme"}), "How do I reset my password?", answer{Model: "gemini-2.5-pro", Text: "Use the reset link."})
	require.Eventually(t, func() bool { return c.Stats().Saved == 1 }, 10*time.Second, 5*time.Millisecond)
	fmt.Println("child: saved")
}

func TestInvalidationsReachEveryProcess(t *testing.T) {
	addr := sharedAddr(t)
	pfx := prefix(t)
	a := newCache(t, newStore(t, addr, pfx, time.Minute))
	b := newCache(t, newStore(t, addr, pfx, time.Minute))
	waitSubscribed(t, addr, pfx+"ch", 2)
	acme := fallback.WithRequest(bg, fallback.Request{Tenant: "acme"})
	globex := fallback.WithRequest(bg, fallback.Request{Tenant: "globex"})
	a.Put(acme, "q1", answer{"pro", "1"})
	a.Put(acme, "q2", answer{"flash", "2"})
	a.Put(globex, "q3", answer{"pro", "3"})
	a.Put(globex, "q4", answer{"flash", "4"})
	require.Eventually(t, func() bool { return b.Stats().Entries == 4 }, 10*time.Second, 5*time.Millisecond)

	_, err := a.Invalidate(acme, "q1")
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, _, ok := b.Get(acme, "q1"); return !ok }, 10*time.Second, 5*time.Millisecond)
	n, err := b.InvalidateModel(bg, "flash")
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	require.Eventually(t, func() bool { return a.Stats().Entries == 1 }, 10*time.Second, 5*time.Millisecond)
	_, err = a.InvalidateTenant(bg, "globex")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return b.Stats().Entries == 0 }, 10*time.Second, 5*time.Millisecond)

	later := newCache(t, newStore(t, addr, pfx, time.Minute))
	time.Sleep(100 * time.Millisecond)
	_, _, ok := later.Get(acme, "q2")
	assert.False(t, ok, "an invalidated record is gone from Redis too")
}

// TestSlowResyncUndoesNoPublication holds a store's resync between reading
// its snapshot and delivering it, while the channel delivers newer
// changes: a save (the snapshot's list of live ids predates it), another
// process's invalidation and this process's own (the snapshot's records
// predate them). None is undone when the resync lands. On a loaded machine
// the first resync of a new store can be this slow; it used to drop every
// entry the channel had brought meanwhile (TestInvalidationsReachEveryProcess
// then waited in vain for its entries), or bring back invalidated ones.
func TestSlowResyncUndoesNoPublication(t *testing.T) {
	addr := sharedAddr(t)
	pfx := prefix(t)
	a := newCache(t, newStore(t, addr, pfx, time.Minute))
	a.Put(bg, "old", answer{"pro", "o"})
	a.Put(bg, "mine", answer{"lite", "m"})
	require.Eventually(t, func() bool { return a.Stats().Saved == 2 }, 10*time.Second, 5*time.Millisecond)

	bs := newStore(t, addr, pfx, time.Minute)
	read, release := make(chan struct{}, 4), make(chan struct{})
	var held atomic.Bool
	held.Store(true)
	redisstore.HoldResyncs(bs, func() {
		if held.Load() {
			read <- struct{}{}
			<-release
		}
	})
	b := newCache(t, bs)
	waitSubscribed(t, addr, pfx+"ch", 2)
	// The first resync, full, has read "old" and "mine" and the list of
	// live ids; it waits. The channel delivers newer changes meanwhile.
	// (A resync the subscription asked for may be held too: both are.)
	<-read
	a.Put(bg, "new", answer{"pro", "n"})
	require.Eventually(t, func() bool { _, _, ok := b.Get(bg, "new"); return ok }, 10*time.Second, 5*time.Millisecond, "the channel brought the save")
	_, err := a.Invalidate(bg, "old")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return bs.Stats().Received == 2 }, 10*time.Second, 5*time.Millisecond, "the channel brought the invalidation")
	_, err = b.Invalidate(bg, "mine")
	require.NoError(t, err)

	resyncs := bs.Stats().Resyncs
	held.Store(false)
	close(release)
	require.Eventually(t, func() bool { return bs.Stats().Resyncs > resyncs }, 10*time.Second, 5*time.Millisecond)
	_, _, ok := b.Get(bg, "new")
	assert.True(t, ok, "a save the snapshot predates stays")
	_, _, ok = b.Get(bg, "old")
	assert.False(t, ok, "another process's invalidation stays done")
	_, _, ok = b.Get(bg, "mine")
	assert.False(t, ok, "this process's invalidation stays done")
	assert.Equal(t, 1, b.Stats().Entries, "%+v", b.Stats())
}

// TestResyncCatchesWhatTheChannelMissed writes a record and drops one
// behind the subscribers' backs — as a publication lost while a
// subscription was away would be — and waits for the resync.
func TestResyncCatchesWhatTheChannelMissed(t *testing.T) {
	addr := sharedAddr(t)
	pfx := prefix(t)
	bs := newStore(t, addr, pfx, 50*time.Millisecond)
	b := newCache(t, bs)
	as := newStore(t, addr, pfx, time.Minute)
	a := newCache(t, as)
	waitSubscribed(t, addr, pfx+"ch", 2)
	// a's resync on subscribing is done before anything is changed behind
	// its back: its next one is a minute away.
	require.Eventually(t, func() bool { return redisstore.Quiet(as) }, 10*time.Second, time.Millisecond)
	a.Put(bg, "kept", answer{"pro", "k"})
	a.Put(bg, "dropped", answer{"pro", "d"})
	require.Eventually(t, func() bool { return b.Stats().Entries == 2 }, 10*time.Second, 5*time.Millisecond)

	raw := newClient(t, addr)
	rec := cache.Record{ID: 42, Key: "written quietly", Answer: []byte(`{"Model":"pro","Text":"q"}`), Expires: time.Now().Add(time.Hour)}
	body, _ := json.Marshal(rec)
	require.NoError(t, raw.Set(bg, pfx+"r:42", body, time.Hour).Err())
	require.NoError(t, raw.ZAdd(bg, pfx+"z", redis.Z{Score: float64(time.Now().UnixMilli()), Member: "42"}).Err())
	require.Eventually(t, func() bool { _, _, ok := b.Get(bg, "written quietly"); return ok }, 10*time.Second, 5*time.Millisecond, "%+v %+v", b.Stats(), bs.Stats())

	// An invalidation nobody heard: the record goes, the count moves.
	id := ""
	ids, err := raw.ZRange(bg, pfx+"z", 0, -1).Result()
	require.NoError(t, err)
	for _, x := range ids {
		v, err := raw.Get(bg, pfx+"r:"+x).Result()
		require.NoError(t, err)
		if strings.Contains(v, `"key":"dropped"`) {
			id = x
		}
	}
	require.NotEmpty(t, id)
	require.NoError(t, raw.Del(bg, pfx+"r:"+id).Err())
	require.NoError(t, raw.ZRem(bg, pfx+"z", id).Err())
	require.NoError(t, raw.Incr(bg, pfx+"gen").Err())
	require.Eventually(t, func() bool { _, _, ok := b.Get(bg, "dropped"); return !ok }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, uint64(1), bs.Stats().Reconciles)
	_, _, ok := b.Get(bg, "kept")
	assert.True(t, ok)
	_, _, ok = a.Get(bg, "dropped")
	assert.True(t, ok, "a's resync is a minute away")
}

func TestExpiredRecordsAreCleanedUp(t *testing.T) {
	addr := sharedAddr(t)
	pfx := prefix(t)
	s := newStore(t, addr, pfx, 50*time.Millisecond)
	s.Observe(func(cache.Change) {})
	require.NoError(t, s.Save(bg, &cache.Record{ID: 7, Tenant: "acme", Model: "pro", Key: "k", Answer: []byte(`{}`), Expires: time.Now().Add(150 * time.Millisecond)}))
	raw := newClient(t, addr)
	require.EqualValues(t, 1, raw.ZCard(bg, pfx+"z").Val())
	require.Eventually(t, func() bool {
		return raw.ZCard(bg, pfx+"z").Val() == 0 && raw.ZCard(bg, pfx+"x").Val() == 0 && raw.HLen(bg, pfx+"meta").Val() == 0 && raw.Exists(bg, pfx+"r:7").Val() == 0
	}, 10*time.Second, 10*time.Millisecond)
	keys, err := raw.Keys(bg, pfx+"*").Result()
	require.NoError(t, err)
	assert.Empty(t, keys, "nothing is left")
	assert.NotContains(t, strings.Join(keys, " "), "acme", "tenants never appear in key names")
}

// TestRedisDownLocalOnly: a store whose Redis is unreachable, and one
// whose Redis is frozen, cost their caches nothing but sharing.
func TestRedisDownLocalOnly(t *testing.T) {
	unreachable := redisserver.UnusedAddr(t)
	frozen := redisserver.Start(t)
	pfx := prefix(t)
	stores := map[string]*redisstore.Store{
		"unreachable": newStore(t, unreachable, pfx, 50*time.Millisecond),
		"frozen":      newStore(t, frozen.Addr, pfx, 50*time.Millisecond),
	}
	caches := map[string]*cache.Cache[string, answer]{}
	for name, s := range stores {
		caches[name] = newCache(t, s)
	}
	waitSubscribed(t, frozen.Addr, pfx+"ch", 1)
	require.NoError(t, frozen.Freeze())
	// Thawed before the stores and caches close (cleanups run last
	// first), so that closing them waits on no frozen server.
	t.Cleanup(func() { _ = frozen.Thaw() })
	for name, c := range caches {
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := range 1000 {
				c.Put(bg, "question "+strconv.Itoa(i), answer{"pro", "a"})
				if _, _, ok := c.Get(bg, "question "+strconv.Itoa(i)); !ok {
					t.Errorf("%s: a local answer was not served", name)
					return
				}
			}
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: writes and lookups waited on Redis", name)
		}
		_, hit, ok := c.Get(bg, "What are your opening hours?")
		assert.False(t, ok)
		assert.Equal(t, "", hit)
	}
	for name, c := range caches {
		require.Eventually(t, func() bool { return c.Stats().StoreErrors > 0 }, 10*time.Second, 5*time.Millisecond, name)
		assert.Positive(t, c.Stats().Dropped, "%s: with saves stuck, the queue overflowed instead of blocking", name)
		assert.False(t, stores[name].Stats().Healthy, name)
		_, err := c.InvalidateTenant(bg, "acme")
		assert.Error(t, err, "%s: the store's error is reported; the local invalidation is done", name)
	}
}

func TestConfigErrorsNameEveryField(t *testing.T) {
	_, err := redisstore.New(redisstore.Config{Prefix: "a b", Timeout: -1, Resync: -1, BatchSize: -1})
	require.Error(t, err)
	for _, f := range []string{"Client", "Prefix", "Timeout", "Resync", "BatchSize"} {
		assert.Contains(t, err.Error(), f)
	}
	s, err := redisstore.New(redisstore.Config{Client: newClient(t, "127.0.0.1:1")})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	assert.Error(t, s.Save(bg, &cache.Record{Expires: time.Now().Add(time.Hour)}), "closed")
	assert.Error(t, s.Invalidate(bg, cache.Selector{ID: 1}), "closed")
}
