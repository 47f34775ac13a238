package bulkhead

import (
	"fmt"

	"github.com/tierguard/tierguard/internal/keyed"
)

// overflowKey names the bulkhead that keys beyond a Group's limit share.
const overflowKey = "_overflow"

// Group holds one bulkhead per key — per tenant or per feature — so one
// key's load cannot take another key's slots. Bulkheads are created on
// first use with the same size and options. The number of keys is bounded:
// keys beyond the limit share one overflow bulkhead, so a flood of new keys
// cannot grow memory without bound. Group is safe for concurrent use.
//
// A member is named Name+"/#"+ a short stable hash of its key (see
// Config.KeysInNames), because a key is often a tenant id, which must not
// reach errors, logs or metrics; the overflow bulkhead is
// Name+"/_overflow".
type Group struct {
	g *keyed.Group[*Bulkhead]
}

// NewGroup returns a group whose bulkheads are configured by cfg, cfg.Name
// being the prefix of their names; at most maxKeys keys get their own
// bulkhead. cfg is checked now, by building the overflow bulkhead.
func NewGroup(cfg Config, maxKeys int) (*Group, error) {
	if maxKeys <= 0 {
		return nil, fmt.Errorf("bulkhead group %q: maxKeys must be positive, got %d", cfg.Name, maxKeys)
	}
	oc := cfg
	oc.Name = cfg.Name + "/" + overflowKey
	overflow, err := New(oc)
	if err != nil {
		return nil, err
	}
	// The overflow bulkhead checked cfg: every member shares it, holding
	// only its own name.
	shared := &cfg
	mk := func(key string) (*Bulkhead, error) {
		return newShared(shared, keyed.Name(cfg.Name, key, cfg.KeysInNames)), nil
	}
	return &Group{g: keyed.New(mk, maxKeys, overflow, overflowKey)}, nil
}

// Get returns key's bulkhead, creating it on first use.
func (g *Group) Get(key string) *Bulkhead { return g.g.Get(key) }

// Observe calls fn for every member of the group — now, and for each one
// created later, as it is created (under the group's lock: fn must not call
// back into the group) — until the returned function is called.
// Instrumentation uses it to watch members as they appear.
func (g *Group) Observe(fn func(key string, b *Bulkhead)) (remove func()) { return g.g.OnMember(fn) }

// Each calls fn for every bulkhead of the group, the overflow one included.
func (g *Group) Each(fn func(key string, b *Bulkhead)) { g.g.Each(fn) }
