package breaker

import (
	"fmt"

	"github.com/tierguard/tierguard/internal/keyed"
)

// OverflowKey names the breaker that keys beyond a Group's limit share.
const OverflowKey = "_overflow"

// Group holds one breaker per key — typically model × endpoint — created on
// first use from the same Config, each named cfg.Name+"/"+key. The number of
// keys is bounded: keys beyond the limit share one overflow breaker, so a
// flood of distinct keys cannot grow memory without bound. Group is safe for
// concurrent use.
type Group struct {
	g *keyed.Group[*Breaker]
}

// NewGroup returns a group of breakers configured by cfg; at most maxKeys
// keys get their own breaker. The config is validated now.
func NewGroup(cfg Config, maxKeys int) (*Group, error) {
	if maxKeys <= 0 {
		return nil, fmt.Errorf("breaker group %q: maxKeys must be positive, got %d", cfg.Name, maxKeys)
	}
	overflow, err := New(named(cfg, OverflowKey))
	if err != nil {
		return nil, err
	}
	// The config was validated by the overflow breaker; only a Store's Join
	// can fail later, and a store must fail open: such a key gets the
	// overflow breaker rather than a refused call.
	mk := func(key string) (*Breaker, error) { return New(named(cfg, key)) }
	return &Group{g: keyed.New(mk, maxKeys, overflow, OverflowKey)}, nil
}

func named(cfg Config, key string) Config {
	cfg.Name = cfg.Name + "/" + key
	return cfg
}

// Get returns key's breaker, creating it on first use.
func (g *Group) Get(key string) *Breaker { return g.g.Get(key) }

// OnMember calls fn for every member of the group — now, and for each one
// created later, as it is created (under the group's lock: fn must not call
// back into the group). Instrumentation uses it to watch members as they
// appear.
func (g *Group) OnMember(fn func(key string, b *Breaker)) { g.g.OnMember(fn) }

// Each calls fn for every breaker of the group, the overflow one included.
func (g *Group) Each(fn func(key string, b *Breaker)) { g.g.Each(fn) }
