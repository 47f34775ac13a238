package ratelimit

import (
	"fmt"

	"github.com/tierguard/tierguard/internal/keyed"
)

// overflowKey names the limiter that keys beyond a Group's limit share.
const overflowKey = "_overflow"

// Group holds one limiter per key — per tenant, per API key — so that one
// key's calls cannot spend another key's quota. Limiters are created on
// first use with the same configuration. Keys beyond the limit share one
// overflow limiter, so a flood of new keys cannot grow memory without
// bound. Safe for concurrent use.
type Group struct {
	g *keyed.Group[*Limiter]
}

// NewGroup returns a group of limiters configured by cfg, cfg.Name being
// the prefix of their names; at most maxKeys keys get their own. cfg is
// checked now, by building the overflow limiter.
func NewGroup(cfg Config, maxKeys int) (*Group, error) {
	if maxKeys <= 0 {
		return nil, fmt.Errorf("rate limiter group %q: maxKeys must be positive, got %d", cfg.Name, maxKeys)
	}
	member := func(name string) Config { c := cfg; c.Name = name; return c }
	overflow, err := New(member(cfg.Name + "/" + overflowKey))
	if err != nil {
		return nil, err
	}
	// The members share the config the overflow limiter checked.
	sh, err := newShape(cfg)
	if err != nil {
		return nil, err
	}
	mk := func(key string) (*Limiter, error) {
		// The store knows the member by its full name, the display name
		// may hide the key.
		return newLimiter(sh, key, true)
	}
	return &Group{g: keyed.New(mk, maxKeys, overflow, overflowKey)}, nil
}

// Get returns key's limiter, creating it on first use.
func (g *Group) Get(key string) *Limiter { return g.g.Get(key) }

// Observe calls fn for every member of the group — now, and for each one
// created later — until the returned function is called. fn runs under the
// group's lock: it must not call back into the group.
func (g *Group) Observe(fn func(key string, l *Limiter)) (remove func()) { return g.g.OnMember(fn) }

// Each calls fn for every limiter of the group, the overflow one included.
func (g *Group) Each(fn func(key string, l *Limiter)) { g.g.Each(fn) }
