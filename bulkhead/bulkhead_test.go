package bulkhead_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
)

// option edits a test bulkhead's config, or observes it.
type option func(*bulkhead.Config, *[]func(bulkhead.Event))

func maxWait(d time.Duration, queue int) option {
	return func(c *bulkhead.Config, _ *[]func(bulkhead.Event)) { c.MaxWait, c.Queue = d, queue }
}

func observed(o any) option {
	return func(_ *bulkhead.Config, obs *[]func(bulkhead.Event)) { *obs = append(*obs, eventsTo(o)) }
}

// eventsTo hands a test recorder the events it records: a waits the ends
// of queued waits, a calls every event too.
func eventsTo(o any) func(bulkhead.Event) {
	return func(e bulkhead.Event) {
		if w, ok := o.(interface {
			Waited(string, time.Duration, bool)
		}); ok && e.Queued {
			w.Waited(e.Bulkhead, e.Wait, e.Kind == bulkhead.Permitted)
		}
		if c, ok := o.(*calls); ok {
			c.add(e.Bulkhead + " " + e.Kind.String())
		}
	}
}

// do runs fn, which returns only an error, under b.
func do(ctx context.Context, b *bulkhead.Bulkhead, fn func(context.Context) error) error {
	_, err := bulkhead.Do(ctx, b, func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) })
	return err
}

func newBulkhead(t *testing.T, max int, opts ...option) *bulkhead.Bulkhead {
	t.Helper()
	cfg := bulkhead.Config{Name: "pro", Max: max}
	var obs []func(bulkhead.Event)
	for _, o := range opts {
		o(&cfg, &obs)
	}
	b, err := bulkhead.New(cfg)
	require.NoError(t, err)
	for _, fn := range obs {
		b.Observe(fn)
	}
	return b
}

func TestFailFast(t *testing.T) {
	b := newBulkhead(t, 2)
	ctx := context.Background()
	require.NoError(t, b.Acquire(ctx))
	require.NoError(t, b.Acquire(ctx))

	err := b.Acquire(ctx)
	require.ErrorIs(t, err, bulkhead.ErrFull)
	var fe *bulkhead.FullError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "pro", fe.Name)
	assert.Equal(t, 2, fe.Max)
	assert.Equal(t, classify.Rejected, classify.Classify(err).Class)
	assert.False(t, b.TryAcquire())

	b.Release()
	assert.True(t, b.TryAcquire())
	b.Release()
	b.Release()

	assert.Equal(t, bulkhead.Stats{Accepted: 3, Rejected: 2, InFlight: 0, Max: 2}, b.Stats())
}

func TestReleaseWithoutAcquirePanics(t *testing.T) {
	b := newBulkhead(t, 1)
	assert.Panics(t, b.Release)
	assert.Equal(t, 0, b.Stats().InFlight, "a bad Release must not raise the limit")
	require.NoError(t, b.Acquire(context.Background()))
	assert.False(t, b.TryAcquire())
}

func TestInvalidConfig(t *testing.T) {
	_, err := bulkhead.New(bulkhead.Config{Name: "x", Max: 0})
	assert.ErrorContains(t, err, "Max must be positive")
	_, err = bulkhead.New(bulkhead.Config{Name: "x", Max: 1, MaxWait: 0, Queue: 1})
	assert.ErrorContains(t, err, "Queue 1 without a MaxWait")
	_, err = bulkhead.New(bulkhead.Config{Name: "x", Max: 1, MaxWait: time.Second, Queue: -1})
	assert.ErrorContains(t, err, "Queue must be positive")
	_, err = bulkhead.New(bulkhead.Config{Name: "x", Max: 1, MaxWait: -time.Second})
	assert.ErrorContains(t, err, "MaxWait must not be negative")
	_, err = bulkhead.NewGroup(bulkhead.Config{Name: "g", Max: 1}, 0)
	assert.ErrorContains(t, err, "maxKeys must be positive")
}

type waits struct {
	mu  sync.Mutex
	got []string
}

func (w *waits) Waited(name string, wait time.Duration, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, name+" "+wait.String()+" "+map[bool]string{true: "acquired", false: "rejected"}[ok])
}

func TestBoundedWaitGrantsInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &waits{}
		b := newBulkhead(t, 1, maxWait(time.Second, 2), observed(obs))
		ctx := context.Background()
		require.NoError(t, b.Acquire(ctx))

		var order []int
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Go(func() {
				require.NoError(t, b.Acquire(ctx))
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				time.Sleep(100 * time.Millisecond)
				b.Release()
			})
			synctest.Wait() // queue them in a known order
		}
		assert.Equal(t, 2, b.Stats().Waiting)
		require.ErrorIs(t, b.Acquire(ctx), bulkhead.ErrFull, "the queue holds two")

		time.Sleep(300 * time.Millisecond)
		b.Release()
		wg.Wait()
		assert.Equal(t, []int{0, 1}, order)
		assert.Equal(t, []string{"pro 300ms acquired", "pro 400ms acquired"}, obs.got)
		assert.Equal(t, bulkhead.Stats{Accepted: 3, Rejected: 1, Max: 1}, b.Stats())
	})
}

func TestBoundedWaitTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBulkhead(t, 1, maxWait(250*time.Millisecond, 4))
		require.NoError(t, b.Acquire(context.Background()))
		start := time.Now()
		err := b.Acquire(context.Background())
		require.ErrorIs(t, err, bulkhead.ErrFull)
		assert.Equal(t, 250*time.Millisecond, time.Since(start))
		assert.Equal(t, 0, b.Stats().Waiting)
		b.Release()
		assert.True(t, b.TryAcquire(), "the timed-out waiter must not hold a slot")
	})
}

func TestWaitNeverOutlastsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBulkhead(t, 1, maxWait(time.Minute, 4))
		require.NoError(t, b.Acquire(context.Background()))
		ctx, cancel := context.WithTimeout(context.Background(), 80*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := b.Acquire(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 80*time.Millisecond, time.Since(start))

		canceled, cancel2 := context.WithCancel(context.Background())
		cancel2()
		assert.ErrorIs(t, b.Acquire(canceled), context.Canceled)
	})
}

func TestDoReleasesOnPanic(t *testing.T) {
	b := newBulkhead(t, 1)
	assert.Panics(t, func() {
		_ = do(context.Background(), b, func(context.Context) error { panic("tier exploded") })
	})
	assert.Equal(t, 0, b.Stats().InFlight)

	assert.Panics(t, func() {
		_, _ = bulkhead.Do(context.Background(), b, func(context.Context) (string, error) { panic("again") })
	})
	assert.Equal(t, 0, b.Stats().InFlight)

	out, err := bulkhead.Do(context.Background(), b, func(context.Context) (string, error) { return "ok", nil })
	require.NoError(t, err)
	assert.Equal(t, "ok", out)

	require.NoError(t, b.Acquire(context.Background()))
	err = do(context.Background(), b, func(context.Context) error { return errors.New("not run") })
	assert.ErrorIs(t, err, bulkhead.ErrFull)
	_, err = bulkhead.Do(context.Background(), b, func(context.Context) (int, error) { return 1, nil })
	assert.ErrorIs(t, err, bulkhead.ErrFull)
}

// TestInFlightNeverExceedsMax hammers a bulkhead, with and without a queue,
// and checks the bound from inside the guarded section.
func TestInFlightNeverExceedsMax(t *testing.T) {
	for _, name := range []string{"fail-fast", "queued"} {
		t.Run(name, func(t *testing.T) {
			const max = 4
			var opts []option
			if name == "queued" {
				opts = append(opts, maxWait(time.Millisecond, 8))
			}
			b := newBulkhead(t, max, opts...)
			var inside, peak atomic.Int64
			var wg sync.WaitGroup
			for range 64 {
				wg.Go(func() {
					for range 300 {
						_ = do(context.Background(), b, func(context.Context) error {
							n := inside.Add(1)
							for {
								p := peak.Load()
								if n <= p || peak.CompareAndSwap(p, n) {
									break
								}
							}
							inside.Add(-1)
							return nil
						})
					}
				})
			}
			wg.Wait()
			assert.LessOrEqual(t, peak.Load(), int64(max))
			s := b.Stats()
			assert.Equal(t, 0, s.InFlight)
			assert.Equal(t, 0, s.Waiting)
			assert.Equal(t, uint64(64*300), s.Accepted+s.Rejected)
		})
	}
}

func TestGroupIsolatesKeys(t *testing.T) {
	g, err := bulkhead.NewGroup(bulkhead.Config{Name: "tenant", Max: 1}, 2)
	require.NoError(t, err)
	a, b := g.Get("a"), g.Get("b")
	assert.Same(t, a, g.Get("a"))
	assert.Equal(t, "tenant/#ca978112ca1b", a.Name(), "the key, hashed")
	require.True(t, a.TryAcquire())
	assert.False(t, a.TryAcquire())
	assert.True(t, b.TryAcquire(), "tenant a's load must not take b's slot")

	c, d := g.Get("c"), g.Get("d")
	assert.Same(t, c, d, "keys beyond the limit share the overflow bulkhead")
	assert.Equal(t, "tenant/"+"_overflow", c.Name())

	seen := map[string]bool{}
	g.Each(func(key string, _ *bulkhead.Bulkhead) { seen[key] = true })
	assert.Equal(t, map[string]bool{"a": true, "b": true, "_overflow": true}, seen)
}

func TestAcquireAllocatesNothing(t *testing.T) {
	b := newBulkhead(t, 1)
	allocs := testing.AllocsPerRun(1000, func() {
		if err := b.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		if b.Acquire(context.Background()) == nil {
			t.Fatal("expected full")
		}
		b.Release()
	})
	assert.Zero(t, allocs)
}

func BenchmarkAcquireRelease(b *testing.B) {
	bh, _ := bulkhead.New(bulkhead.Config{Name: "bench", Max: 1 << 20})
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if bh.Acquire(ctx) == nil {
				bh.Release()
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if bh.Acquire(ctx) == nil {
					bh.Release()
				}
			}
		})
	})
	full, _ := bulkhead.New(bulkhead.Config{Name: "full", Max: 1})
	_ = full.Acquire(ctx)
	b.Run("reject", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = full.Acquire(ctx)
		}
	})
}

func TestObserverRemovalAndGroupMembers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &waits{}
		b := newBulkhead(t, 1, maxWait(time.Millisecond, 1))
		remove := b.Observe(eventsTo(obs))
		require.True(t, b.TryAcquire())
		_ = b.Acquire(context.Background())
		remove()
		_ = b.Acquire(context.Background())
		assert.Len(t, obs.got, 1, "a removed observer sees nothing more")

		g, err := bulkhead.NewGroup(bulkhead.Config{Name: "tenant", Max: 1}, 4)
		require.NoError(t, err)
		g.Get("a")
		var members []string
		g.Observe(func(key string, _ *bulkhead.Bulkhead) { members = append(members, key) })
		g.Get("b")
		g.Get("b")
		assert.ElementsMatch(t, []string{"a", "_overflow", "b"}, members)
	})
}

// TestRefusedTryAcquireIsRejected: TryAcquire is counted both ways — a
// granted one in Accepted, a refused one in Rejected.
func TestRefusedTryAcquireIsRejected(t *testing.T) {
	b := newBulkhead(t, 1)
	require.True(t, b.TryAcquire())
	assert.False(t, b.TryAcquire())
	assert.False(t, b.TryAcquire())
	assert.Equal(t, bulkhead.Stats{Accepted: 1, Rejected: 2, InFlight: 1, Max: 1}, b.Stats())
	b.Release()
}

// calls records a CallObserver's events.
type calls struct {
	waits
	events []string
}

func (c *calls) add(e string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, e)
}

func (c *calls) Waited(name string, wait time.Duration, ok bool) {
	c.waits.Waited(name, wait, ok)
	c.add(name + " waited " + wait.String())
}

// TestCallObserverSeesEveryCall: a CallObserver is told of every permitted,
// rejected and finished call, fail-fast or queued, TryAcquire included; a
// plain Observer still sees only queue waits.
func TestCallObserverSeesEveryCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs, plain := &calls{}, &waits{}
		b := newBulkhead(t, 1, maxWait(time.Second, 1), observed(obs), observed(plain))
		ctx := context.Background()
		require.NoError(t, b.Acquire(ctx))
		assert.False(t, b.TryAcquire())
		go func() {
			time.Sleep(100 * time.Millisecond)
			b.Release()
		}()
		require.NoError(t, b.Acquire(ctx)) // queued, then granted
		require.ErrorIs(t, b.Acquire(ctx), bulkhead.ErrFull, "queued for the whole wait")
		canceled, cancel := context.WithCancel(ctx)
		cancel()
		require.ErrorIs(t, b.Acquire(canceled), context.Canceled)
		b.Release()
		require.NoError(t, do(ctx, b, func(context.Context) error { return nil }))
		require.Len(t, obs.events, 11)
		assert.Equal(t, []string{"pro permitted", "pro rejected"}, obs.events[:2])
		// The release that hands the slot over and the waiter it wakes run
		// on two goroutines.
		assert.ElementsMatch(t, []string{"pro finished", "pro waited 100ms", "pro permitted"}, obs.events[2:5])
		assert.Less(t, indexOf(obs.events, "pro waited 100ms"), indexOf(obs.events[2:5], "pro permitted")+2, "Waited comes first")
		assert.Equal(t, []string{
			"pro waited 1s", "pro rejected",
			"pro rejected",
			"pro finished",
			"pro permitted", "pro finished",
		}, obs.events[5:])
		assert.Equal(t, []string{"pro 100ms acquired", "pro 1s rejected"}, plain.got, "a plain Observer sees queue waits only")
		s := b.Stats()
		assert.Equal(t, uint64(3), s.Accepted)
		assert.Equal(t, uint64(3), s.Rejected)
	})
}

// TestCallObserverRemoval: a removed CallObserver sees nothing more, and the
// bulkhead is back on its allocation-free path.
func TestCallObserverRemoval(t *testing.T) {
	obs := &calls{}
	b := newBulkhead(t, 1)
	remove := b.Observe(eventsTo(obs))
	require.True(t, b.TryAcquire())
	b.Release()
	remove()
	require.True(t, b.TryAcquire())
	b.Release()
	assert.Equal(t, []string{"pro permitted", "pro finished"}, obs.events)
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		if b.TryAcquire() {
			b.Release()
		}
	}))
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// TestGroupKeysStayOutOfSignals: a Group keyed by tenant names its members
// after the group and a short stable hash of the key, so the key reaches no
// error, observer or Stats consumer; WithKeysInNames shows the keys.
func TestGroupKeysStayOutOfSignals(t *testing.T) {
	const tenant = "TENANT-4242"
	obs := &calls{}
	g, err := bulkhead.NewGroup(bulkhead.Config{Name: "tenant", Max: 1}, 8)
	require.NoError(t, err)
	g.Observe(func(_ string, m *bulkhead.Bulkhead) { m.Observe(eventsTo(obs)) })
	b := g.Get(tenant)
	require.True(t, b.TryAcquire())
	err = b.Acquire(context.Background())
	require.ErrorIs(t, err, bulkhead.ErrFull)
	var fe *bulkhead.FullError
	require.ErrorAs(t, err, &fe)
	sum := sha256.Sum256([]byte(tenant))
	want := "tenant/#" + hex.EncodeToString(sum[:6])
	assert.Equal(t, want, b.Name())
	assert.Equal(t, want, fe.Name)
	assert.NotContains(t, err.Error(), tenant)
	for _, e := range obs.events {
		assert.NotContains(t, e, tenant)
	}
	b.Release()

	shown, err := bulkhead.NewGroup(bulkhead.Config{Name: "feature", Max: 1, KeysInNames: true}, 8)
	require.NoError(t, err)
	assert.Equal(t, "feature/summarise", shown.Get("summarise").Name())
	alone, err := bulkhead.New(bulkhead.Config{Name: "solo", Max: 1, KeysInNames: true})
	require.NoError(t, err)
	assert.Equal(t, "solo", alone.Name(), "outside a group the option changes nothing")
}
