package fallback_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
)

// fake is a scripted tier: it answers with the next scripted step, or with
// its default once the script is used up, and counts its calls.
type fake struct {
	name  string
	mu    sync.Mutex
	steps []step
	def   step
	calls atomic.Int64
}

type step struct {
	out string
	err error
	// block makes the call wait for its context to end.
	block bool
	fn    func(ctx context.Context) (string, error)
}

func newFake(name string, def step, steps ...step) *fake {
	return &fake{name: name, def: def, steps: steps}
}

func (f *fake) Name() string { return f.name }

func (f *fake) Call(ctx context.Context, in string) (string, error) {
	f.calls.Add(1)
	f.mu.Lock()
	s := f.def
	if len(f.steps) > 0 {
		s, f.steps = f.steps[0], f.steps[1:]
	}
	f.mu.Unlock()
	switch {
	case s.fn != nil:
		return s.fn(ctx)
	case s.block:
		<-ctx.Done()
		return "", ctx.Err()
	}
	return s.out, s.err
}

func ok(out string) step { return step{out: out} }

func fails(c classify.Class) step { return step{err: classErr(c)} }

func classErr(c classify.Class) error {
	return classify.Wrap(errors.New("upstream says "+c.String()), classify.Verdict{Class: c, Reason: "scripted"})
}

func newBreaker(t testing.TB, cfg breaker.Config) *breaker.Breaker {
	t.Helper()
	b, err := breaker.New(cfg)
	require.NoError(t, err)
	return b
}

func newBulkhead(t testing.TB, name string, max int) *bulkhead.Bulkhead {
	t.Helper()
	b, err := bulkhead.New(bulkhead.Config{Name: name, Max: max})
	require.NoError(t, err)
	return b
}

func newChain(t testing.TB, cfg fallback.Config[string, string]) *fallback.Chain[string, string] {
	t.Helper()
	c, err := fallback.New(cfg)
	require.NoError(t, err)
	return c
}

// stages builds stages over tiers with no guards.
func stages(tiers ...fallback.ModelTier[string, string]) []fallback.Stage[string, string] {
	out := make([]fallback.Stage[string, string], len(tiers))
	for i, t := range tiers {
		out[i] = fallback.Stage[string, string]{Tier: t}
	}
	return out
}

// mapCache is a Cache and CacheWriter over a map.
type mapCache struct {
	mu   sync.Mutex
	m    map[string]string
	puts int
}

func (c *mapCache) Get(_ context.Context, in string) (string, string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[in]
	return v, "", ok
}

func (c *mapCache) Put(_ context.Context, in, out string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]string{}
	}
	c.m[in] = out
	c.puts++
}

// assertCarriedPanic checks that f panics with a *fallback.PanicError that
// carries want and the stack of the goroutine the panic happened on.
func assertCarriedPanic(t *testing.T, want any, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		p := recover()
		pe, ok := p.(*fallback.PanicError)
		if !ok {
			t.Fatalf("panicked with %#v, want a *fallback.PanicError", p)
		}
		assert.Equal(t, want, pe.Value)
		assert.Contains(t, string(pe.Stack), "_test.go", "the stack where the tier panicked")
	}()
	f()
}
